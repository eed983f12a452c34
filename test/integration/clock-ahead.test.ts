/**
 * A member whose wall clock runs a year ahead (a host with a wrong clock) must not carry its
 * clock into the log's stamps, or every key with a lifetime would expire on every node at
 * once, and new lifetimes would last a year. As a follower, the writes it forwards take the
 * leader's stamp (host/node/replica.ts, `ownClockAtMost`); as the leader, it stamps by what a
 * majority of the voters' clocks allow (host/node/cluster-clock.ts). Three real processes over
 * loopback in each case; the member's clock is moved by a module loaded with `--import`
 * (test/fixtures/clock-ahead.mjs).
 */
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  kv, removeDir, startNode, tempDir, UNLIMITED_RATES, type NodeProcess,
} from '../helpers/node-process.js';
import { agreedLeader, logLines, memberPorts, peersFlag, waitFor } from '../helpers/cluster.js';

const YEAR_MS = 365 * 24 * 3600 * 1000;
const CLOCK_AHEAD = fileURLToPath(new URL('../fixtures/clock-ahead.mjs', import.meta.url));
const SETTINGS = { ...UNLIMITED_RATES, HIVEKV_CLUSTER_SECRET: 'clock-ahead-secret-0123456789' };
const AHEAD = { NODE_OPTIONS: `--import=${CLOCK_AHEAD}`,
  HIVEKV_TEST_CLOCK_AHEAD_MS: String(YEAR_MS) };
const WAIT_MS = 20_000;
const HOUR = { ttlSeconds: 3600 };

const dirs: string[] = [];
const started: NodeProcess[] = [];

afterAll(async () => {
  for (const node of started) await node.kill();
  for (const dir of dirs) removeDir(dir);
});

/** A three-voter cluster's members, started one call at a time, kept in `nodes`. */
async function clusterOf(nodes: Map<string, NodeProcess>):
  Promise<(id: string, env?: Record<string, string>) => Promise<NodeProcess>> {
  const peers = peersFlag(await memberPorts(3));
  return async (id, env = {}) => {
    const dir = tempDir(`clock-ahead-${id}`);
    dirs.push(dir);
    const node = await startNode({ dataDir: dir, env: { ...SETTINGS, ...env },
      args: ['--id', id, '--peers', peers] });
    started.push(node);
    nodes.set(id, node);
    return node;
  };
}

/** A key written with a one-hour lifetime expires an hour from now by the machine's clock. */
function expectHourFromNow(expiresAt: unknown): void {
  const expiresMs = Date.parse(expiresAt as string);
  expect(expiresMs).toBeGreaterThan(Date.now() + 3000 * 1000);
  expect(expiresMs).toBeLessThan(Date.now() + 3700 * 1000);
}

describe('a follower whose clock runs a year ahead', () => {
  const nodes = new Map<string, NodeProcess>();

  beforeAll(async () => {
    // n1 and n2 elect a leader with right clocks; n3 joins them with its clock a year ahead.
    const start = await clusterOf(nodes);
    await Promise.all([start('n1'), start('n2')]);
    await agreedLeader([nodes.get('n1')!, nodes.get('n2')!], WAIT_MS);
    await start('n3', AHEAD);
  }, 60_000);

  it('forwards writes that stamp the log with its leader\'s clock', async () => {
    const all = [...nodes.values()];
    const leaderId = await agreedLeader(all, WAIT_MS);
    expect(leaderId).not.toBe('n3');
    const leader = nodes.get(leaderId)!;
    const follower = nodes.get('n3')!;
    const hour = { ttlSeconds: 3600 };
    const before = await kv(leader.url, [{ op: 'put', ns: 'clock', key: 'before', value: 1,
      ...hour }]);
    expect(before.body.results[0]).toMatchObject({ applied: true });
    const forwarded = await waitFor('a write through the follower', WAIT_MS, async () => {
      const answer = await kv(follower.url, [{ op: 'put', ns: 'clock', key: 'forwarded',
        value: 2, ...hour }]);
      return answer.status === 200 ? answer : undefined;
    });
    expect(forwarded.body.results[0]).toMatchObject({ applied: true });
    const read = await kv(leader.url, [{ op: 'get', ns: 'clock', key: 'before' },
      { op: 'get', ns: 'clock', key: 'forwarded' }]);
    // The key written first is still there: the log's time did not jump a year.
    expect(read.body.results[0]).toMatchObject({ found: true, value: 1 });
    expect(read.body.results[1]).toMatchObject({ found: true, value: 2 });
    expectHourFromNow(read.body.results[1].expiresAt);
  }, 60_000);
});

describe('a leader whose clock runs a year ahead', () => {
  it('stamps the log by what a majority of the voters\' clocks allow', async () => {
    // n1's ticks are ten times shorter, so it stands for election first and leads.
    const nodes = new Map<string, NodeProcess>();
    const start = await clusterOf(nodes);
    const leader = await start('n1', { ...AHEAD, HIVEKV_TICK_MS: '5' });
    await start('n2');
    expect(await agreedLeader([...nodes.values()], WAIT_MS)).toBe('n1');
    await start('n3');
    await waitFor('the leader to bound its clock', WAIT_MS, async () =>
      logLines(leader, { level: 40 }).some((line) =>
        String(line.msg).includes('runs ahead of what a majority')) ? true : undefined);
    const written = await kv(leader.url, [{ op: 'put', ns: 'clock', key: 'led', value: 3,
      ...HOUR }]);
    expect(written.text).toContain('"applied":true');
    const read = await kv(nodes.get('n3')!.url, [{ op: 'get', ns: 'clock', key: 'led' }]);
    expect(read.body.results[0]).toMatchObject({ found: true, value: 3 });
    expectHourFromNow(read.body.results[0].expiresAt);
  }, 60_000);

  it('holds its first writes until it knows a majority of the voters\' clocks', async () => {
    // Written the moment n1 leads with n2, before any status round could have come: stamped
    // by n1's own clock, the write would carry its lifetime a year long, and the log's time
    // (which never goes back) would stay a year ahead.
    const nodes = new Map<string, NodeProcess>();
    const start = await clusterOf(nodes);
    const leader = await start('n1', { ...AHEAD, HIVEKV_TICK_MS: '5' });
    await start('n2');
    const written = await waitFor('a write through n1 as leader', WAIT_MS, async () => {
      const answer = await kv(leader.url, [{ op: 'put', ns: 'clock', key: 'first', value: 4,
        ...HOUR }]);
      return answer.status === 200 ? answer : undefined;
    });
    expect(written.body.results[0]).toMatchObject({ applied: true });
    await start('n3');
    const read = await waitFor('n3 to hold the write', WAIT_MS, async () => {
      const answer = await kv(nodes.get('n3')!.url, [{ op: 'get', ns: 'clock', key: 'first' }]);
      return answer.body.results?.[0]?.found === true ? answer : undefined;
    });
    expectHourFromNow(read.body.results[0].expiresAt);
  }, 60_000);
});
