/**
 * The operator routes over three real processes: every node's `GET /api/v1/system/cluster`
 * lists all three members up, with the URL each advertises (its --host and bound port, or
 * HIVEKV_ADVERTISE_URL), the same leader as /health and no lag once writes settle; a stopped
 * member turns down; the tenants list and the pause switch's state read the replicated state.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  call, freePort, kv, removeDir, startNode, tempDir, UNLIMITED_RATES, type NodeProcess,
} from '../helpers/node-process.js';

const IDS = ['n1', 'n2', 'n3'] as const;
const WAIT_MS = 20_000;
const ADVERTISED = 'http://kv-3.internal.example:6632';

interface MemberRow {
  id: string;
  state: string;
  lagEntries: number | null;
  status: { role: string; url: string; appliedIndex: number } | null;
}

let nodes: NodeProcess[] = [];
let dirs: string[] = [];

async function clusterOf(node: NodeProcess): Promise<{ leader: string | null;
  members: MemberRow[] }> {
  const answer = await call(node.url, 'GET', '/api/v1/system/cluster');
  expect(answer.status).toBe(200);
  return answer.body;
}

async function waitFor<T>(read: () => Promise<T>, done: (value: T) => boolean): Promise<T> {
  const deadline = Date.now() + WAIT_MS;
  let value = await read();
  while (!done(value)) {
    if (Date.now() > deadline) throw new Error(`timed out; last: ${JSON.stringify(value)}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
    value = await read();
  }
  return value;
}

describe('operator routes on a three-node cluster', () => {
  beforeAll(async () => {
    const ports = await Promise.all(IDS.map(() => freePort()));
    const peers = IDS.map((id, i) => `${id}=127.0.0.1:${ports[i]}`).join(',');
    dirs = IDS.map((id) => tempDir(`operator-${id}`));
    nodes = await Promise.all(IDS.map((id, i) => startNode({ dataDir: dirs[i]!,
      env: id === 'n3' ? { ...UNLIMITED_RATES, HIVEKV_ADVERTISE_URL: ADVERTISED }
        : UNLIMITED_RATES,
      args: ['--id', id, '--peers', peers] })));
  });

  afterAll(async () => {
    await Promise.all(nodes.map((n) => n.stop()));
    for (const dir of dirs) removeDir(dir);
  });

  it('every node lists every member up, with its URL and the leader /health names', async () => {
    for (const node of nodes) {
      const view = await waitFor(() => clusterOf(node), (v) => v.leader !== null &&
        v.members.every((m) => m.state === 'up'));
      expect(view.members.map((m) => m.id)).toEqual([...IDS]);
      expect(view.members.map((m) => m.status?.url)).toEqual([nodes[0]!.url, nodes[1]!.url,
        ADVERTISED]);
      const health = (await call(node.url, 'GET', '/health')).body;
      expect(view.leader).toBe(health.leader);
      expect(view.members.find((m) => m.id === view.leader)?.status?.role).toBe('leader');
    }
  });

  it('shows the lag settle to zero after writes, and lists the tenant they made', async () => {
    const ops = Array.from({ length: 50 }, (_, i) => ({ op: 'put', ns: 'orders',
      key: `k${i}`, value: i, ttlSeconds: 600 }));
    expect((await kv(nodes[1]!.url, ops)).status).toBe(200);
    // Members report their status every few ticks: a view taken before the next reports
    // shows every member level at the index before the write, which is not yet the point.
    const view = await waitFor(() => clusterOf(nodes[0]!), (v) =>
      v.members.every((m) => m.lagEntries === 0 && m.status !== null &&
        m.status.appliedIndex > 1 &&
        m.status.appliedIndex === v.members[0]!.status!.appliedIndex));
    expect(view.members[0]!.status!.appliedIndex).toBeGreaterThan(1);
    const tenants = await call(nodes[2]!.url, 'GET', '/api/v1/system/tenants');
    expect(tenants.status).toBe(200);
    expect(tenants.body.tenants).toEqual([{ tenant: '00000000-0000-0000-0000-000000000001',
      rows: 50, bytes: expect.any(Number), quota: null }]);
    expect(tenants.body.truncated).toBe(false);
  });

  it('reads the pause switch the cluster agreed on from any node', async () => {
    expect((await call(nodes[0]!.url, 'POST', '/api/v1/system/kv-timers', { kv: false }))
      .status).toBe(200);
    for (const node of nodes) {
      expect((await call(node.url, 'GET', '/api/v1/system/kv-timers')).body).toEqual(
        { kv: false });
    }
    await call(nodes[0]!.url, 'POST', '/api/v1/system/kv-timers', { kv: true });
    expect((await call(nodes[2]!.url, 'GET', '/api/v1/system/kv-timers')).body).toEqual(
      { kv: true });
  });

  it('turns a stopped member down on the others', async () => {
    await nodes[2]!.stop();
    const view = await waitFor(() => clusterOf(nodes[0]!),
      (v) => v.members[2]!.state === 'down');
    expect(view.members.slice(0, 2).map((m) => m.state)).toEqual(['up', 'up']);
  });
});
