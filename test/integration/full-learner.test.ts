/**
 * A learner too small for the cluster must not stop the cluster's writes: nothing waits on
 * a learner, and an operator growing a cluster must not halt it with a node on too small a
 * disk or with too small a memory budget. A learner on a volume low on space
 * (HIVEKV_MIN_FREE_BYTES set to 1 TiB, so any volume is), or one whose memory budget
 * (HIVEKV_MAX_STATE_BYTES) the state outgrows, holds back from catching up instead: it says
 * so in its status and logs, its leader sends it heartbeats only, promotion is refused, and
 * once it has the room it catches up and serves every write. Three real voters and a
 * learner over loopback, each process stopped by the PID this test started.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { memberPorts, peersFlag, waitFor } from '../helpers/cluster.js';
import {
  call, kv, removeDir, startNode, tempDir, UNLIMITED_RATES, type NodeProcess,
} from '../helpers/node-process.js';

const WAIT_MS = 20_000;
const ENV = { ...UNLIMITED_RATES, HIVEKV_CLUSTER_ID: 'full-learner-test' };
/** A value of about 60 KB: 80 of them outgrow a 2 MiB budget twice over. */
const LARGE = 'x'.repeat(60_000);

const started: NodeProcess[] = [];
const dirs: string[] = [];

afterAll(async () => {
  for (const node of started) await node.kill();
  for (const dir of dirs) removeDir(dir);
});

async function start(dir: string, args: string[], env: Record<string, string> = {}) {
  const node = await startNode({ dataDir: dir, env: { ...ENV, ...env }, args });
  started.push(node);
  return node;
}

async function putKeys(url: string, from: number, count: number, large = false) {
  for (let i = from; i < from + count; i++) {
    const answer = await kv(url, [{ op: 'put', ns: 'learner', key: `k${i}`,
      value: large ? `${i}${LARGE}` : i, forever: true }]);
    expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  }
}

/** The status of `member` as `url`'s cluster view shows it, once heard. */
async function statusOf(url: string, member: string) {
  const view = (await call(url, 'GET', '/api/v1/system/cluster')).body;
  return view.members.find((m: { id: string; state: string }) => m.id === member &&
    m.state === 'up')?.status;
}

interface LearnerCase {
  readonly want: 'space' | 'memory';
  /** What makes the learner too small. */
  readonly env: Record<string, string>;
  /** Whether the writes after it joined are large (they outgrow its budget). */
  readonly large: boolean;
  readonly log: string;
}

const CASES: readonly LearnerCase[] = [
  { want: 'space', env: { HIVEKV_MIN_FREE_BYTES: String(1024 ** 4) }, large: false,
    log: 'the leader\'s entries held for want of space' },
  { want: 'memory', env: { HIVEKV_MAX_STATE_BYTES: String(2 * 1024 * 1024) }, large: true,
    log: 'the leader\'s entries held for want of memory' },
];

describe('a learner too small for the cluster', () => {
  it.each(CASES)('holds back for want of $want while the cluster writes on, and catches up ' +
    'once it has the room', async ({ want, env, large, log }) => {
    const members = await memberPorts(4);
    const voters = members.slice(0, 3);
    const nodes = new Map<string, NodeProcess>();
    const dirOf = new Map(members.map((m) => [m.id, tempDir(`full-learner-${m.id}`)]));
    dirs.push(...dirOf.values());
    await Promise.all(voters.map(async (m) => {
      nodes.set(m.id, await start(dirOf.get(m.id)!, ['--id', m.id, '--peer-listen',
        `127.0.0.1:${m.peerPort}`, '--peers', peersFlag(voters)]));
    }));
    const leader = await waitFor('a leader', WAIT_MS, async () => {
      const id = (await call(nodes.get('n1')!.url, 'GET', '/health')).body.leader;
      return typeof id === 'string' && nodes.has(id) ? id : undefined;
    });
    const leaderUrl = nodes.get(leader)!.url;
    await putKeys(leaderUrl, 0, 20);

    const n4 = members[3]!;
    const n4Args = ['--id', 'n4', '--peer-listen', `127.0.0.1:${n4.peerPort}`, '--join'];
    let learner = await start(dirOf.get('n4')!, n4Args, env);
    const added = await call(leaderUrl, 'POST', '/api/v1/system/members',
      { id: 'n4', peer: `127.0.0.1:${n4.peerPort}`, role: 'learner' });
    expect(added.status, JSON.stringify(added.body)).toBe(200);
    // The leader hears the learner (its volume, its budget) before the writes that follow.
    await waitFor('the learner\'s first status', WAIT_MS, () => statusOf(leaderUrl, 'n4'));

    // Writes go on, through the leader and through a follower.
    await putKeys(leaderUrl, 20, 40, large);
    await putKeys(nodes.get(voters.find((m) => m.id !== leader)!.id)!.url, 60, 40, large);
    const held = await waitFor('the learner holding back', WAIT_MS, async () => {
      const status = await statusOf(leaderUrl, 'n4');
      return status?.catchUpHeld === true ? status : undefined;
    });
    expect(held).toMatchObject({ catchUpHeldFor: want, storageFull: want === 'space' });
    const learnerHealth = await call(learner.url, 'GET', '/health');
    expect(learnerHealth.status).toBe(200);
    const leaderHealth = (await call(leaderUrl, 'GET', '/health')).body;
    expect(learnerHealth.body.appliedIndex).toBeLessThan(leaderHealth.commitIndex);
    await waitFor('the leader saying it sends n4 heartbeats only', WAIT_MS, async () =>
      nodes.get(leader)!.output().includes(`n4 holds back from catching up for want of ${want}`)
        ? true : undefined);
    const promoted = await call(leaderUrl, 'POST', '/api/v1/system/members',
      { id: 'n4', role: 'voter' });
    expect(promoted.status).toBe(409);
    expect(promoted.body).toMatchObject({ reason: 'members_not_caught_up' });
    expect(promoted.body.detail).toContain('holds back from catching up');
    expect(learner.output()).toContain(log);

    // With the room, it catches up: a read on it waits for it to apply the last write.
    expect(await learner.stop()).toBe(0);
    learner = await start(dirOf.get('n4')!, n4Args);
    await waitFor('the learner caught up', WAIT_MS, async () => {
      const read = await kv(learner.url, [{ op: 'get', ns: 'learner', key: 'k99' }]);
      return read.status === 200 && read.body.results?.[0]?.value === (large ? `99${LARGE}` : 99)
        ? true : undefined;
    });
    const status = await waitFor('the learner\'s status', WAIT_MS, async () => {
      const now = await statusOf(leaderUrl, 'n4');
      return now?.catchUpHeld === false ? now : undefined;
    });
    expect(status).toMatchObject({ storageFull: false, catchUpHeldFor: null });
    const promotedNow = await waitFor('promotion', WAIT_MS, async () => {
      const answer = await call(leaderUrl, 'POST', '/api/v1/system/members',
        { id: 'n4', role: 'voter' });
      return answer.status === 200 ? answer : undefined;
    });
    expect(promotedNow.body.members).toContainEqual(expect.objectContaining({ id: 'n4',
      role: 'voter' }));
    for (const node of [...nodes.values(), learner]) await node.kill();
  }, 120_000);
});
