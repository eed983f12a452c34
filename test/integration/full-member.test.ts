/**
 * A member whose data directory is low on free space: every member holds every entry, so a
 * follower out of space would stop on ENOSPC while its leader, with room, went on taking
 * writes. Its status says so, and every member refuses writes (503 `storage_full`, naming it)
 * while it is, as etcd raises its NOSPACE alarm cluster-wide; reads go on, and writes come
 * back once it has room or is gone. Three real processes over loopback; n3 is made "low" by
 * a HIVEKV_MIN_FREE_BYTES larger than the volume's free space. Likewise a member with a
 * smaller memory budget (HIVEKV_MAX_STATE_BYTES): every member holds the same state, so all
 * refuse writes that grow it past the smallest budget among them (503 `memory_full`).
 */
import { statfsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { afterAll, describe, expect, it } from 'vitest';
import {
  call, kv, removeDir, startNode, tempDir, UNLIMITED_RATES, type NodeProcess,
} from '../helpers/node-process.js';
import { agreedLeader, memberPorts, peersFlag, waitFor } from '../helpers/cluster.js';

const WAIT_MS = 20_000;
const TIB = 1024 ** 4;
const MIB = 1024 * 1024;
const free = statfsSync(tmpdir());
const roomy = free.bavail * free.bsize < TIB;

const started: NodeProcess[] = [];
const dirs: string[] = [];

afterAll(async () => {
  for (const node of started) await node.kill();
  for (const dir of dirs) removeDir(dir);
});

/** A three-voter cluster of real processes, n3 started with `n3Env` besides the others'. */
async function threeWithN3(n3Env: Record<string, string>): Promise<Map<string, NodeProcess>> {
  const peers = peersFlag(await memberPorts(3));
  const nodes = new Map<string, NodeProcess>();
  for (const id of ['n1', 'n2', 'n3']) {
    const dir = tempDir(`full-member-${id}`);
    dirs.push(dir);
    const env = id === 'n3' ? { ...UNLIMITED_RATES, ...n3Env } : UNLIMITED_RATES;
    const node = await startNode({ dataDir: dir, env, args: ['--id', id, '--peers', peers] });
    started.push(node);
    nodes.set(id, node);
  }
  return nodes;
}

const put = (node: NodeProcess, key: string) =>
  kv(node.url, [{ op: 'put', ns: 'space', key, value: 1, forever: true }]);

describe.skipIf(!roomy)('a member low on free space', () => {
  it('stops writes on every member, naming it; reads go on; writes come back once it is gone',
    async () => {
      const nodes = await threeWithN3({ HIVEKV_MIN_FREE_BYTES: String(TIB) });
      const leaderId = await agreedLeader([...nodes.values()], WAIT_MS);
      const leader = nodes.get(leaderId)!;
      // n1 and n2 refuse, as followers or leader, naming n3 (which refuses by its own disk).
      for (const node of [nodes.get('n1')!, nodes.get('n2')!]) {
        const refused = await waitFor(`${node.url} to refuse writes`, WAIT_MS, async () => {
          const answer = await put(node, 'k');
          return answer.status === 503 ? answer : undefined;
        });
        expect(refused.body).toMatchObject({ error: 'kv_unavailable', reason: 'storage_full' });
        expect(refused.body.detail).toContain('member n3');
      }
      const read = await kv(leader.url, [{ op: 'get', ns: 'space', key: 'k' }]);
      expect(read.status).toBe(200);
      const view = await call(nodes.get('n1')!.url, 'GET', '/api/v1/system/cluster');
      const n3 = view.body.members.find((m: { id: string }) => m.id === 'n3');
      expect(n3.status.storageFull).toBe(true);
      // n3 goes away: once its last status is stale, the other two take writes again.
      await nodes.get('n3')!.kill();
      const taken = await waitFor('writes to be taken again', WAIT_MS, async () => {
        const answer = await put(nodes.get('n1')!, 'k');
        return answer.status === 200 ? answer : undefined;
      });
      expect(taken.body.results[0]).toMatchObject({ applied: true });
    }, 90_000);
});

describe('a member with a smaller memory budget', () => {
  it('bounds the state on every member, naming it; deletes go on; lifted once it is gone',
    async () => {
      const nodes = await threeWithN3({ HIVEKV_MAX_STATE_BYTES: String(MIB) });
      await agreedLeader([...nodes.values()], WAIT_MS);
      const n1 = nodes.get('n1')!;
      await waitFor('n1 to hear n3\'s budget', WAIT_MS, async () => {
        const view = await call(n1.url, 'GET', '/api/v1/system/cluster');
        const n3 = view.body.members.find((m: { id: string }) => m.id === 'n3');
        return n3?.status?.stateBytesMax === MIB ? true : undefined;
      });
      const value = 'v'.repeat(60_000);
      let written = 0;
      // 60 kB a put: n3's 1 MiB is reached after about 17 of them.
      const refused = await waitFor('growing writes to be refused', WAIT_MS, async () => {
        const answer = await kv(n1.url, [{ op: 'put', ns: 'mem', key: `k${written}`, value,
          forever: true }]);
        if (answer.status === 200) written += 1;
        return answer.status === 503 ? answer : undefined;
      });
      expect(refused.body).toMatchObject({ error: 'kv_unavailable', reason: 'memory_full' });
      expect(refused.body.detail).toContain('member n3');
      expect(written).toBeGreaterThan(5);
      expect(written).toBeLessThan(40);
      const removed = await kv(n1.url, [{ op: 'delete', ns: 'mem', key: 'k0' }]);
      expect(removed.status).toBe(200);
      expect((await kv(n1.url, [{ op: 'get', ns: 'mem', key: 'k1' }])).status).toBe(200);
      await nodes.get('n3')!.kill();
      const taken = await waitFor('growing writes to be taken again', WAIT_MS, async () => {
        const answer = await kv(n1.url, [{ op: 'put', ns: 'mem', key: 'more', value,
          forever: true }]);
        return answer.status === 200 ? answer : undefined;
      });
      expect(taken.body.results[0]).toMatchObject({ applied: true });
    }, 90_000);
});
