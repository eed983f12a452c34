/**
 * Entries of 8 KiB and more replicate byte for byte: three real nodes take batches whose
 * log entries are tens of kilobytes (the size a preload writes), and every member reaches
 * the same digest at the same applied index and reads back the same values. A follower
 * keeps such an entry in a buffer of its own, copied out of the leader's frame; a copy that
 * was a view of the frame's memory (as `slice` of a Buffer is) once made followers apply
 * other bytes than the leader, and stop at the next checkpoint.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agreedLeader, memberPorts, peersFlag, waitFor } from '../helpers/cluster.js';
import {
  call, kv, removeDir, startNode, tempDir, UNLIMITED_RATES, type NodeProcess,
} from '../helpers/node-process.js';

const SETTINGS = { ...UNLIMITED_RATES, HIVEKV_CLUSTER_SECRET: 'large-entries-secret-0123456789',
  // A checkpoint every 20 entries: a member whose state differs stops within the test.
  HIVEKV_DIGEST_EVERY: '20' };
const BATCHES = 40;
const PUTS_PER_BATCH = 128;
const VALUE = 'v'.repeat(180);

let nodes: NodeProcess[] = [];
const dirs: string[] = [];

beforeAll(async () => {
  const ports = await memberPorts(3);
  const peers = peersFlag(ports);
  for (let i = 0; i < 3; i++) dirs.push(tempDir(`large-entries-n${i + 1}`));
  nodes = await Promise.all(ports.map((m, i) => startNode({ dataDir: dirs[i]!, env: SETTINGS,
    args: ['--id', m.id, '--peers', peers] })));
}, 60_000);

afterAll(async () => {
  for (const node of nodes) await node.kill();
  for (const dir of dirs) removeDir(dir);
});

describe('large entries on three nodes', () => {
  it('reach every member as the leader wrote them', async () => {
    const leaderId = await agreedLeader(nodes);
    const leader = nodes[Number(leaderId.slice(1)) - 1]!;
    // Eight batches in flight: the leader sends several large entries in one frame.
    let next = 0;
    const writer = async (): Promise<void> => {
      while (next < BATCHES) {
        const batch = next++;
        const operations = Array.from({ length: PUTS_PER_BATCH }, (_, i) => ({ op: 'put',
          ns: 'big', key: `b${batch}-${i}`, value: `${VALUE}${batch}-${i}`, forever: true }));
        const r = await kv(leader.url, operations);
        expect(r.status, r.text).toBe(200);
      }
    };
    await Promise.all(Array.from({ length: 8 }, writer));
    const moments = await waitFor('every member at one applied index', 20_000, async () => {
      const healths = await Promise.all(nodes.map((n) => call(n.url, 'GET', '/health')));
      const applied = new Set(healths.map((h) => h.body.appliedIndex));
      return applied.size === 1 ? healths.map((h) => h.body) : undefined;
    });
    expect(new Set(moments.map((m) => m.digest)).size).toBe(1);
    for (const node of nodes) {
      const r = await kv(node.url, [{ op: 'getMany', ns: 'big',
        keys: ['b0-0', `b${BATCHES - 1}-${PUTS_PER_BATCH - 1}`, 'b17-64'] }]);
      expect(r.status).toBe(200);
      const rows = r.body.results[0].rows as Array<{ key: string; value: string }>;
      expect(Object.fromEntries(rows.map((row) => [row.key, row.value]))).toEqual({
        'b0-0': `${VALUE}0-0`,
        [`b${BATCHES - 1}-${PUTS_PER_BATCH - 1}`]: `${VALUE}${BATCHES - 1}-${PUTS_PER_BATCH - 1}`,
        'b17-64': `${VALUE}17-64` });
    }
    for (const node of nodes) expect(node.output()).not.toMatch(/"level":60/);
  }, 90_000);
});
