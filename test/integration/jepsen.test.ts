/**
 * Short fault runs inside the test suite (`npm run jepsen` runs long ones): three real nodes
 * behind link proxies, every nemesis but membership with an outsider probing the peer ports;
 * then nodes replaced one after another (removed, wiped, rejoined under a new id, promoted)
 * while the clients run; every checker over each history. Each prints its seed and replays
 * with SEED=... (the fault schedule and the clients' choices replay; the interleavings are
 * the machine's).
 */
import { describe, expect, it } from 'vitest';
import { testSeed } from '../helpers/seed.js';
import { formatReport } from '../jepsen/cli.js';
import { DEFAULT_NEMESES } from '../jepsen/nemesis.js';
import { runJepsen } from '../jepsen/run.js';

const RUN_SECONDS = 30;
const MEMBERSHIP_RUN_SECONDS = 20;

describe('the fault run', () => {
  it(`keeps every history valid through ${RUN_SECONDS} s of faults on three nodes`, async () => {
    const seed = testSeed();
    const lines: string[] = [];
    const report = await runJepsen({ nodes: 3, timeS: RUN_SECONDS, seed,
      nemeses: DEFAULT_NEMESES, clientsPerNode: 2, probes: true, keep: false,
      log: (line) => lines.push(line) });
    const text = `${lines.join('\n')}\n${formatReport(report)}`;
    console.log(text);
    expect(report.valid, text).toBe(true);
    expect(report.calls['ok'] ?? 0).toBeGreaterThan(100);
    expect(Object.values(report.faults).reduce((a, b) => a + b, 0)).toBeGreaterThan(0);
  }, 180_000);

  it(`keeps every history valid while nodes are replaced for ${MEMBERSHIP_RUN_SECONDS} s`,
    async () => {
      const seed = testSeed();
      const lines: string[] = [];
      const report = await runJepsen({ nodes: 3, timeS: MEMBERSHIP_RUN_SECONDS, seed,
        nemeses: ['membership'], clientsPerNode: 2, probes: false, keep: false,
        log: (line) => lines.push(line) });
      const text = `${lines.join('\n')}\n${formatReport(report)}`;
      console.log(text);
      expect(report.valid, text).toBe(true);
      expect(report.faults['membership'] ?? 0, text).toBeGreaterThan(0);
      expect(lines.some((line) => / was not (added|promoted) /.test(line)), text).toBe(false);
    }, 180_000);
});
