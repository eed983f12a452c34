/**
 * A three-node cluster of real processes over loopback WebSocket: any node answers, a read on
 * one node sees a write another acknowledged, the loss of the leader costs no acknowledged
 * write, a restarted member catches up, from the log or from a snapshot sent in chunks.
 */
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  call, freePort, kv, removeDir, startNode, tempDir, UNLIMITED_RATES, type NodeProcess,
} from '../helpers/node-process.js';

const IDS = ['n1', 'n2', 'n3'] as const;
const LEADER_WAIT_MS = 20_000;
/** Snapshots come often, so a member that was down catches up from one. */
const SETTINGS = { ...UNLIMITED_RATES, HIVEKV_SNAPSHOT_EVERY_ENTRIES: '10' };
/** A 60 KB JSON string value. */
const BIG_VALUE = 'x'.repeat(60_000);

interface Member {
  readonly id: string;
  readonly dir: string;
  readonly peerPort: number;
  process: NodeProcess | null;
}

let members: Member[] = [];
let peersFlag = '';

async function startMember(member: Member): Promise<NodeProcess> {
  const node = await startNode({
    dataDir: member.dir,
    env: { ...SETTINGS, HIVEKV_CLUSTER_SECRET: 'cluster-test-secret-0123456789' },
    args: ['--id', member.id, '--peers', peersFlag],
  });
  member.process = node;
  return node;
}

function live(): NodeProcess[] {
  return members.flatMap((m) => (m.process === null ? [] : [m.process]));
}

/** Waits until every live node names the same live leader, and returns its id. */
async function agreedLeader(): Promise<string> {
  const deadline = Date.now() + LEADER_WAIT_MS;
  while (Date.now() < deadline) {
    const healths = await Promise.all(live().map((n) => call(n.url, 'GET', '/health')
      .then((r) => r.body, () => null)));
    const leaders = new Set(healths.map((h) => h?.leader ?? null));
    const [leader] = [...leaders];
    const leaderIsLive = members.some((m) => m.id === leader && m.process !== null);
    if (leaders.size === 1 && typeof leader === 'string' && leaderIsLive) return leader;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error('the cluster did not agree on a leader');
}

function member(id: string): Member {
  const found = members.find((m) => m.id === id);
  if (found === undefined) throw new Error(`no member ${id}`);
  return found;
}

beforeAll(async () => {
  const ports = await Promise.all(IDS.map(() => freePort()));
  members = IDS.map((id, i) => ({ id, dir: tempDir(`cluster-${id}`), peerPort: ports[i] ?? 0,
    process: null }));
  peersFlag = members.map((m) => `${m.id}=127.0.0.1:${m.peerPort}`).join(',');
  await Promise.all(members.map(startMember));
  await agreedLeader();
}, 60_000);

afterAll(async () => {
  for (const m of members) await m.process?.kill();
  for (const m of members) removeDir(m.dir);
});

describe('a three-node cluster', () => {
  it('answers on every node, and a read anywhere sees a write acknowledged anywhere', async () => {
    const leader = await agreedLeader();
    const follower = members.find((m) => m.id !== leader)?.process;
    const other = members.find((m) => m.id !== leader && m.process !== follower)?.process;
    if (!follower || !other) throw new Error('missing followers');
    for (let i = 0; i < 20; i++) {
      const put = await kv(follower.url, [{ op: 'put', ns: 'c', key: `k${i}`, value: i,
        forever: true }]);
      expect(put.body.results[0].applied).toBe(true);
      const got = await kv(other.url, [{ op: 'get', ns: 'c', key: `k${i}` }]);
      expect(got.body.results[0]).toMatchObject({ found: true, value: i,
        version: put.body.results[0].version });
    }
  });

  it('gives putIfAbsent one winner across nodes', async () => {
    const answers = await Promise.all(live().flatMap((n) => [0, 1].map((j) =>
      kv(n.url, [{ op: 'putIfAbsent', ns: 'c', key: 'race', value: `${n.port}-${j}`,
        ttlSeconds: 60 }]))));
    const applied = answers.filter((a) => a.body.results?.[0]?.applied === true);
    expect(applied).toHaveLength(1);
  });

  it('loses no acknowledged write when the leader is killed, and the old leader catches up',
    async () => {
      const leaderId = await agreedLeader();
      const doomed = member(leaderId);
      const survivor = members.find((m) => m.id !== leaderId)?.process;
      if (!survivor) throw new Error('no survivor');
      const acked: number[] = [];
      for (let i = 0; i < 30; i++) {
        const r = await kv(survivor.url, [{ op: 'incr', ns: 'c', key: 'count', delta: 1,
          forever: true }, { op: 'put', ns: 'c', key: `a${i}`, value: i, forever: true }]);
        if (r.status === 200) acked.push(i);
      }
      await doomed.process?.kill();
      doomed.process = null;
      const newLeader = await agreedLeader();
      expect(newLeader).not.toBe(leaderId);
      const keys = acked.map((i) => `a${i}`);
      const r = await kv(survivor.url, [{ op: 'getMany', ns: 'c', keys }, { op: 'get', ns: 'c',
        key: 'count' }]);
      expect(r.body.results[0].missing).toEqual([]);
      expect(r.body.results[1].value).toBe(acked.length);
      const after = await kv(survivor.url, [{ op: 'put', ns: 'c', key: 'after', value: 1,
        forever: true }]);
      expect(after.body.results[0].applied).toBe(true);
      const back = await startMember(doomed);
      await agreedLeader();
      const deadline = Date.now() + LEADER_WAIT_MS;
      let seen = false;
      while (!seen && Date.now() < deadline) {
        const got = await kv(back.url, [{ op: 'get', ns: 'c', key: 'after' }]);
        seen = got.body?.results?.[0]?.found === true;
        if (!seen) await new Promise((resolve) => setTimeout(resolve, 100));
      }
      expect(seen).toBe(true);
    }, 90_000);

  it('a member that was down while the log was compacted catches up from a snapshot ' +
    'sent in chunks', async () => {
    const leaderId = await agreedLeader();
    const lagging = members.find((m) => m.id !== leaderId)!;
    await lagging.process?.kill();
    lagging.process = null;
    const leader = member(leaderId).process!;
    // About 4.7 MB of values: the snapshot takes several 1 MiB chunks.
    for (let call = 0; call < 5; call++) {
      const ops = Array.from({ length: 16 }, (_, i) => ({ op: 'put', ns: 'big',
        key: `b${call}-${i}`, value: BIG_VALUE, forever: true }));
      expect((await kv(leader.url, ops)).status).toBe(200);
    }
    for (let i = 0; i < 25; i++) {
      expect((await kv(leader.url, [{ op: 'put', ns: 'big', key: `s${i}`, value: i,
        forever: true }])).status).toBe(200);
    }
    const back = await startMember(lagging);
    const deadline = Date.now() + LEADER_WAIT_MS;
    while (!back.output().includes('snapshot installed') && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(back.output()).toContain('snapshot installed');
    const got = await kv(back.url, [{ op: 'getMany', ns: 'big',
      keys: ['b0-0', 'b4-15', 's24'] }]);
    expect(got.body.results[0].missing).toEqual([]);
    expect(got.body.results[0].rows.map((r: { value: unknown }) => r.value))
      .toEqual([BIG_VALUE, BIG_VALUE, 24]);
    const snaps = readdirSync(join(lagging.dir, 'snap')).filter((n) => n.endsWith('.snap'));
    expect(Math.max(...snaps.map((n) => statSync(join(lagging.dir, 'snap', n)).size)))
      .toBeGreaterThan(4 * 1024 * 1024);
  }, 90_000);

  it('hands leadership over on SIGTERM and keeps serving', async () => {
    const leaderId = await agreedLeader();
    const leaving = member(leaderId);
    expect(await leaving.process?.stop()).toBe(0);
    leaving.process = null;
    const next = await agreedLeader();
    expect(next).not.toBe(leaderId);
    const node = live()[0];
    if (!node) throw new Error('no live node');
    const r = await kv(node.url, [{ op: 'put', ns: 'c', key: 'handover', value: 1,
      forever: true }]);
    expect(r.body.results[0].applied).toBe(true);
    await startMember(leaving);
  }, 60_000);
});
