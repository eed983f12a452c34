/**
 * A short fault run inside the test suite (`npm run jepsen` runs long ones): three real nodes
 * behind link proxies, every nemesis but membership, an outsider probing the peer ports, and
 * every checker over the history. Prints its seed; replays with SEED=... (the fault schedule
 * and the clients' choices replay; the interleavings are the machine's).
 */
import { describe, expect, it } from 'vitest';
import { testSeed } from '../helpers/seed.js';
import { formatReport } from '../jepsen/cli.js';
import { DEFAULT_NEMESES } from '../jepsen/nemesis.js';
import { runJepsen } from '../jepsen/run.js';

const RUN_SECONDS = 30;

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
});
