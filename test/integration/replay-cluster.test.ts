/**
 * The replay harness on a three-node cluster: after a workload, every replica reports the
 * same digest at the same applied index, and replaying each one's data directory reaches the
 * digest that node reported; `diff` of two replicas is "identical through" that index; a
 * follower's log with one record edited (and re-checksummed with the storage code's own
 * framing, so nothing but the content tells) is found by `diff` at exactly that index.
 */
import { cpSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { plantDivergence } from '../helpers/plant-divergence.js';
import { agreedLeader, memberPorts, peersFlag, waitFor } from '../helpers/cluster.js';
import {
  call, kv, removeDir, startNode, tempDir, UNLIMITED_RATES, type NodeProcess,
} from '../helpers/node-process.js';
import { hivekv } from '../helpers/hivekv-cli.js';

const WRITES = 60;
const MARKER = 'planted-marker-value';
/**
 * The write that carries MARKER: after the last snapshot (one every 25 entries), so the log
 * still holds it however the snapshots compacted it or a slow follower caught up.
 */
const MARKER_WRITE = WRITES - 4;

interface Reported { readonly appliedIndex: number; readonly digest: string }

describe('replay of a three-node cluster', () => {
  const dirs: string[] = [];
  const reported: Reported[] = [];

  beforeAll(async () => {
    const members = await memberPorts(3);
    const nodes: NodeProcess[] = [];
    try {
      for (const m of members) {
        const dir = tempDir(`replay-${m.id}`);
        dirs.push(dir);
        nodes.push(await startNode({ dataDir: dir, env: { ...UNLIMITED_RATES,
          HIVEKV_SNAPSHOT_EVERY_ENTRIES: '25' },
          args: ['--id', m.id, '--peers', peersFlag(members)] }));
      }
      await agreedLeader(nodes);
      for (let i = 0; i < WRITES; i++) {
        const node = nodes[i % nodes.length]!;
        const value = i === MARKER_WRITE ? MARKER : { i };
        const r = await kv(node.url, [
          { op: 'put', ns: 'c', key: `k${i % 9}`, value, forever: true },
          { op: 'incr', ns: 'c', key: 'n', delta: 1, forever: true },
        ]);
        expect(r.status).toBe(200);
      }
      const healths = await waitFor('every replica at the same applied index', 20_000,
        async () => {
          const hs = await Promise.all(nodes.map((n) => call(n.url, 'GET', '/health')));
          const indexes = new Set(hs.map((h) => h.body.appliedIndex));
          return indexes.size === 1 ? hs.map((h) => h.body) : undefined;
        });
      for (const h of healths) reported.push({ appliedIndex: h.appliedIndex, digest: h.digest });
    } finally {
      for (const n of nodes) await n.stop();
    }
  }, 120_000);

  afterAll(() => {
    for (const dir of dirs) removeDir(dir);
  });

  it('every replica reports one digest, and each directory replays to it', async () => {
    expect(new Set(reported.map((r) => r.digest)).size).toBe(1);
    for (const [i, dir] of dirs.entries()) {
      const run = await hivekv(['replay', '--data', dir, '--to',
        String(reported[i]!.appliedIndex), '--json']);
      expect(run.stderr).toBe('');
      expect(run.lines.at(-1)).toMatchObject({ index: reported[i]!.appliedIndex,
        digest: reported[i]!.digest });
    }
  });

  it('diff finds two replicas identical, and a planted divergence at its index', async () => {
    const same = await hivekv(['diff', dirs[0]!, dirs[1]!]);
    expect(same.stderr).toBe('');
    expect(same.code).toBe(0);
    expect(same.stdout).toMatch(/^identical through index \d+ \(digest [0-9a-f]{16}\)/);
    const through = Number(/through index (\d+)/.exec(same.stdout)![1]);
    expect(through).toBeGreaterThanOrEqual(reported[0]!.appliedIndex);
    const planted = tempDir('replay-planted');
    try {
      cpSync(dirs[2]!, planted, { recursive: true });
      const index = plantDivergence(planted, MARKER);
      // The edited log still verifies: only its content differs.
      const inspect = await hivekv(['inspect', '--data', planted]);
      expect(inspect.code).toBe(0);
      const parted = await hivekv(['diff', dirs[0]!, planted, '--json']);
      expect(parted.code).toBe(1);
      const result = parted.lines[0];
      expect(result).toMatchObject({ kind: 'log', index });
      expect(JSON.stringify(result.a.entry)).toContain(MARKER);
      expect(JSON.stringify(result.b.entry)).toContain('Planted-marker-value');
      // The states part at that index (later puts overwrite the key, so they meet again).
      const digestAt = async (dir: string) => (await hivekv(['replay', '--data', dir,
        '--json', '--to', String(index)])).lines.at(-1).digest as string;
      expect(await digestAt(planted)).not.toBe(await digestAt(dirs[2]!));
      expect(await digestAt(dirs[0]!)).toBe(await digestAt(dirs[2]!));
    } finally {
      removeDir(planted);
    }
  });
});
