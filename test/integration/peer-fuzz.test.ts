/**
 * Fuzzes a real node's peer port while its cluster runs: random bytes, HTTP garbage, oversized
 * and truncated frame headers, floods, slow sends, idle connections, valid-looking handshakes
 * with forged proofs, Raft frames before any handshake, and a replay of a handshake a real
 * member made (recorded by a proxy on its link). Every probe must be cut off by the node
 * within the handshake deadline; afterwards every node is up, the cluster agrees on a leader,
 * the data reads back exactly as before, no forged term reached Raft, and writes still work.
 * Bounded: PROBES probes, WORKERS at a time, each at most PROBE_TIMEOUT_MS_MAX.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeMessage } from '../../host/core/raft/message-codec.js';
import { HANDSHAKE_DEADLINE_MS } from '../../host/transport/peer-limits.js';
import { agreedLeader, logLines, memberPorts, sleep } from '../helpers/cluster.js';
import {
  call, freePort, kv, removeDir, startNode, tempDir, UNLIMITED_RATES, type NodeProcess,
} from '../helpers/node-process.js';
import { seededRandom, testSeed } from '../helpers/seed.js';
import {
  handshakePart, PROBE_KINDS, probeScript, runScript, type ProbeContext, type ProbeKind,
  type ProbeOutcome,
} from '../jepsen/peer-probe.js';
import { LinkProxy } from '../jepsen/proxy.js';

const SECRET = 'fuzz-test-secret-0123456789abcdef';
const CLUSTER_ID = 'fuzz-cluster';
const PROBES = 120;
const WORKERS = 32;
const IDLE_FLOOD_CONNECTIONS = 80;
const FORGED_TERM = 1_000_000;
const KEYS = 40;

let nodes: NodeProcess[] = [];
let dirs: string[] = [];
let proxy: LinkProxy;
let targetPort = 0;

beforeAll(async () => {
  const members = await memberPorts(3);
  const [m1, m2, m3] = members;
  if (!m1 || !m2 || !m3) throw new Error('three members');
  // n2 reaches n1 through a recording proxy, so the test holds a real handshake to replay.
  proxy = new LinkProxy({ host: '127.0.0.1', port: m1.peerPort }, Math.random, true);
  const proxyPort = await proxy.start(await freePort());
  const real = (m: { id: string; peerPort: number }) => `${m.id}=127.0.0.1:${m.peerPort}`;
  const views = [
    [real(m1), real(m2), real(m3)],
    [`n1=127.0.0.1:${proxyPort}`, real(m2), real(m3)],
    [real(m1), real(m2), real(m3)],
  ];
  dirs = members.map((m) => tempDir(`fuzz-${m.id}`));
  nodes = await Promise.all(members.map((m, i) => startNode({
    dataDir: dirs[i] ?? '',
    env: { ...UNLIMITED_RATES, HIVEKV_CLUSTER_SECRET: SECRET, HIVEKV_CLUSTER_ID: CLUSTER_ID },
    args: ['--id', m.id, '--peers', (views[i] ?? []).join(',')],
  })));
  targetPort = m1.peerPort;
  await agreedLeader(nodes);
}, 60_000);

afterAll(async () => {
  for (const node of nodes) await node.kill();
  await proxy?.close();
  for (const dir of dirs) removeDir(dir);
});

/** Every key the test wrote, with its value and version, as one node reads them. */
async function readAll(node: NodeProcess): Promise<string> {
  const keys = Array.from({ length: KEYS }, (_, i) => `k${i}`);
  const answer = await kv(node.url, [{ op: 'getMany', ns: 'fuzz', keys }]);
  expect(answer.status).toBe(200);
  return JSON.stringify(answer.body.results[0].rows.map((r: Record<string, unknown>) =>
    [r['key'], r['value'], r['version']]));
}

/** A handshake n2 made with n1 through the proxy (some attempts ended before n1 listened). */
function recordedHandshake(): Buffer | null {
  return proxy.recorded.find((bytes) => handshakePart(bytes) !== null) ?? null;
}

function context(): ProbeContext {
  return {
    clusterId: CLUSTER_ID,
    targetId: 'n1',
    memberId: 'n2',
    raftFrame: encodeMessage({ type: 'append', from: 'n2', to: 'n1', term: FORGED_TERM,
      prevLogIndex: 0, prevLogTerm: 0, commitIndex: 0, entries: [] }),
    recorded: recordedHandshake,
  };
}

async function runProbes(seed: number): Promise<Array<[ProbeKind, ProbeOutcome]>> {
  const random = seededRandom(seed);
  const target = { host: '127.0.0.1', port: targetPort };
  const kinds: ProbeKind[] = [...PROBE_KINDS, ...Array.from({ length: PROBES - PROBE_KINDS.length },
    () => PROBE_KINDS[Math.floor(random() * PROBE_KINDS.length)] ?? 'random-bytes')];
  const scripts = kinds.map((kind) => probeScript(kind, random, target, context()));
  const outcomes: Array<[ProbeKind, ProbeOutcome]> = [];
  let next = 0;
  await Promise.all(Array.from({ length: WORKERS }, async () => {
    while (next < kinds.length) {
      const at = next++;
      const outcome = await runScript(target, scripts[at] ?? [], HANDSHAKE_DEADLINE_MS + 1500);
      outcomes.push([kinds[at] ?? 'random-bytes', outcome]);
    }
  }));
  return outcomes;
}

/** Connections opened at once and left idle: more than the port lets authenticate. */
async function idleFlood(): Promise<ProbeOutcome[]> {
  const target = { host: '127.0.0.1', port: targetPort };
  return Promise.all(Array.from({ length: IDLE_FLOOD_CONNECTIONS }, () => runScript(target,
    [{ bytes: Buffer.alloc(0), pauseMs: HANDSHAKE_DEADLINE_MS + 1500 }], 0)));
}

describe('fuzzing the peer port of a running cluster', () => {
  it('cuts off every stranger in time, and leaves the cluster healthy with its data', async () => {
    const seed = testSeed();
    for (let i = 0; i < KEYS; i++) {
      const put = await kv(nodes[i % 3]!.url, [{ op: 'put', ns: 'fuzz', key: `k${i}`,
        value: { i }, forever: true }]);
      expect(put.body.results[0].applied).toBe(true);
    }
    const before = await readAll(nodes[0]!);
    expect(recordedHandshake()).not.toBeNull();

    const outcomes = await runProbes(seed);
    // Then more idle strangers than the port lets authenticate at once: the links the
    // cluster already has keep working meanwhile.
    const [flood, during] = await Promise.all([idleFlood(), sleep(1000).then(() =>
      kv(nodes[1]!.url, [{ op: 'put', ns: 'fuzz', key: 'during', value: 1, forever: true }]))]);
    expect(during.body.results[0].applied).toBe(true);

    for (const [kind, outcome] of outcomes) {
      expect({ kind, closedByNode: outcome.closedByNode }).toEqual({ kind, closedByNode: true });
      expect(outcome.lifetimeMs, kind).toBeLessThan(HANDSHAKE_DEADLINE_MS + 1500);
    }
    for (const outcome of flood) expect(outcome.closedByNode).toBe(true);
    // The forged proof and the replayed handshake were answered with the secret refusal.
    for (const kind of ['forged-proof', 'replay'] as const) {
      const answers = outcomes.filter(([k]) => k === kind).map(([, o]) => o.received.toString());
      expect(answers.length).toBeGreaterThan(0);
      for (const text of answers) {
        expect(text, kind).toContain('{"t":"refused","v":1,"reason":"secret"}');
      }
    }
    await sleep(500);
    for (const node of nodes) {
      const health = await call(node.url, 'GET', '/health');
      expect(health.status).toBe(200);
      expect(health.body.term).toBeLessThan(FORGED_TERM);
    }
    await agreedLeader(nodes);
    for (const node of nodes) expect(await readAll(node)).toBe(before);
    const after = await kv(nodes[0]!.url, [{ op: 'put', ns: 'fuzz', key: 'after', value: 1,
      forever: true }]);
    expect(after.body.results[0].applied).toBe(true);
    // The refusals are in the log, one line per kind per window, with what was held back.
    const refused = logLines(nodes[0]!, { msg: 'peer connection refused' });
    const reasons = new Set(refused.map((r) => String(r['reason'] ?? r['detail'])));
    expect(reasons.has('secret')).toBe(true);
    expect(reasons.has('protocol')).toBe(true);
    expect(refused.length).toBeLessThan(PROBES / 2);
    // ...and all of them are counted in /metrics, by kind.
    const metrics = (await call(nodes[0]!.url, 'GET', '/metrics')).text;
    const series = /^hivekv_peer_connections_refused_total\{kind="handshake-secret"\} (\d+)/m;
    const secretRefusals = series.exec(metrics)?.[1];
    expect(Number(secretRefusals ?? 0)).toBeGreaterThan(0);
  }, 120_000);
});
