/**
 * Peer authentication between real processes: members that share the secret and the cluster
 * id form a cluster; a node with another secret, or of another cluster, gets no link to it
 * (and the refusal is logged where an operator looks); a cluster in the middle of a secret
 * rotation keeps working.
 */
import { afterEach, describe, expect, it } from 'vitest';
import {
  agreedLeader, logLines, memberPorts, peersFlag, sleep, waitFor, type MemberPorts,
} from '../helpers/cluster.js';
import {
  call, kv, removeDir, startNode, tempDir, UNLIMITED_RATES, type NodeProcess,
} from '../helpers/node-process.js';

const OLD = 'auth-test-old-secret-0123456789';
const NEW = 'auth-test-new-secret-0123456789';
const WRONG = 'auth-test-wrong-secret-0123456789';

const started: NodeProcess[] = [];
const dirs: string[] = [];

afterEach(async () => {
  for (const node of started.splice(0)) await node.kill();
  for (const dir of dirs.splice(0)) removeDir(dir);
});

async function start(member: MemberPorts, peers: string, env: Record<string, string>):
  Promise<NodeProcess> {
  const dir = tempDir(`auth-${member.id}`);
  dirs.push(dir);
  const node = await startNode({ dataDir: dir, env: { ...UNLIMITED_RATES, ...env },
    args: ['--id', member.id, '--peers', peers] });
  started.push(node);
  return node;
}

async function writesReplicate(writer: NodeProcess, reader: NodeProcess): Promise<void> {
  const put = await kv(writer.url, [{ op: 'put', ns: 'auth', key: 'k', value: 1,
    forever: true }]);
  expect(put.body.results[0].applied).toBe(true);
  await waitFor('the write on the other node', 10_000, async () => {
    const got = await kv(reader.url, [{ op: 'get', ns: 'auth', key: 'k' }]);
    return got.body.results?.[0]?.found === true ? true : undefined;
  });
}

describe('peer authentication', () => {
  it('keeps a node with another secret out, and logs why on both sides', async () => {
    const members = await memberPorts(3);
    const peers = peersFlag(members);
    const [m1, m2, m3] = members as [MemberPorts, MemberPorts, MemberPorts];
    const [n1, n2, n3] = await Promise.all([
      start(m1, peers, { HIVEKV_CLUSTER_SECRET: OLD }),
      start(m2, peers, { HIVEKV_CLUSTER_SECRET: OLD }),
      start(m3, peers, { HIVEKV_CLUSTER_SECRET: WRONG }),
    ]);
    const leader = await agreedLeader([n1, n2]);
    expect(['n1', 'n2']).toContain(leader);
    await writesReplicate(n1, n2);
    // n3 hears no leader: every link to or from it fails its handshake.
    await sleep(1500);
    const health3 = await call(n3.url, 'GET', '/health');
    expect(health3.body.leader).toBeNull();
    expect(health3.body.commitIndex).toBe(0);
    for (const node of [n1, n2, n3]) {
      expect(logLines(node, { msg: 'peer connection refused', reason: 'secret' }).length)
        .toBeGreaterThan(0);
    }
    // Every node of the cluster reports the same cluster id, the one it logged at start.
    const ids = await Promise.all([n1, n2, n3].map(async (n) =>
      (await call(n.url, 'GET', '/health')).body.clusterId));
    expect(new Set(ids).size).toBe(1);
    expect(logLines(n1, { msg: 'serving' })[0]?.['clusterId']).toBe(ids[0]);
  }, 60_000);

  it('refuses a node of another cluster by its cluster id, even with the secret', async () => {
    const members = await memberPorts(3);
    const peers = peersFlag(members);
    const [m1, m2, m3] = members as [MemberPorts, MemberPorts, MemberPorts];
    const [n1, n2, n3] = await Promise.all([
      start(m1, peers, { HIVEKV_CLUSTER_SECRET: OLD }),
      start(m2, peers, { HIVEKV_CLUSTER_SECRET: OLD }),
      start(m3, peers, { HIVEKV_CLUSTER_SECRET: OLD, HIVEKV_CLUSTER_ID: 'another-cluster' }),
    ]);
    await agreedLeader([n1, n2]);
    await sleep(1500);
    expect((await call(n3.url, 'GET', '/health')).body.leader).toBeNull();
    const refusals = [n1, n2].flatMap((n) => logLines(n, { msg: 'peer connection refused',
      reason: 'cluster', byPeer: false }));
    expect(refusals.length).toBeGreaterThan(0);
    expect(String(refusals[0]?.['detail'])).toContain('another-cluster');
  }, 60_000);

  it('works in the middle of a rotation: new secret offered by some, both accepted by all',
    async () => {
      const members = await memberPorts(3);
      const peers = peersFlag(members);
      const [m1, m2, m3] = members as [MemberPorts, MemberPorts, MemberPorts];
      const nodes = await Promise.all([
        start(m1, peers, { HIVEKV_CLUSTER_SECRET: `${NEW},${OLD}` }),
        start(m2, peers, { HIVEKV_CLUSTER_SECRET: `${OLD},${NEW}` }),
        start(m3, peers, { HIVEKV_CLUSTER_SECRET: `${NEW},${OLD}` }),
      ]);
      await agreedLeader(nodes);
      await writesReplicate(nodes[1]!, nodes[2]!);
      // n2 still proves the old secret: its peers say so, which tells the operator the
      // rotation is not finished.
      const second = [nodes[0]!, nodes[2]!].flatMap((n) => logLines(n,
        { msg: 'peer link authenticated', peer: 'n2', peerSecret: 2 }));
      expect(second.length).toBeGreaterThan(0);
    }, 60_000);

  it('refuses to start a member without a secret, saying why', async () => {
    const members = await memberPorts(2);
    const dir = tempDir('auth-nosecret');
    dirs.push(dir);
    await expect(startNode({ dataDir: dir, env: { HIVEKV_CLUSTER_SECRET: '' },
      args: ['--id', 'n1', '--peers', peersFlag(members)] }))
      .rejects.toThrow(/exited with 2[\s\S]*HIVEKV_CLUSTER_SECRET is required/);
  });
});
