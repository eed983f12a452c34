/**
 * A follower whose wall clock runs a year ahead (a host with a wrong clock) forwards writes
 * to its leader: the entries it proposes must not carry its clock into the log's stamps, or
 * every key with a lifetime would expire on every node at once, and new lifetimes would last
 * a year (host/node/replica.ts, `ownClockAtMost`). Three real processes over loopback; the
 * follower's clock is moved by a module loaded with `--import` (test/fixtures/clock-ahead.mjs).
 */
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  kv, removeDir, startNode, tempDir, UNLIMITED_RATES, type NodeProcess,
} from '../helpers/node-process.js';
import { agreedLeader, memberPorts, peersFlag, waitFor } from '../helpers/cluster.js';

const YEAR_MS = 365 * 24 * 3600 * 1000;
const CLOCK_AHEAD = fileURLToPath(new URL('../fixtures/clock-ahead.mjs', import.meta.url));
const SETTINGS = { ...UNLIMITED_RATES, HIVEKV_CLUSTER_SECRET: 'clock-ahead-secret-0123456789' };
const WAIT_MS = 20_000;

const nodes = new Map<string, NodeProcess>();
const dirs: string[] = [];

beforeAll(async () => {
  const members = await memberPorts(3);
  const peers = peersFlag(members);
  const start = async (id: string, env: Record<string, string> = {}) => {
    const dir = tempDir(`clock-ahead-${id}`);
    dirs.push(dir);
    nodes.set(id, await startNode({ dataDir: dir, env: { ...SETTINGS, ...env },
      args: ['--id', id, '--peers', peers] }));
  };
  // n1 and n2 elect a leader with right clocks; n3 joins them with its clock a year ahead.
  await Promise.all([start('n1'), start('n2')]);
  await agreedLeader([nodes.get('n1')!, nodes.get('n2')!], WAIT_MS);
  await start('n3', { NODE_OPTIONS: `--import=${CLOCK_AHEAD}`,
    HIVEKV_TEST_CLOCK_AHEAD_MS: String(YEAR_MS) });
}, 60_000);

afterAll(async () => {
  for (const node of nodes.values()) await node.kill();
  for (const dir of dirs) removeDir(dir);
});

describe('a follower whose clock runs a year ahead', () => {
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
    const expiresMs = Date.parse(read.body.results[1].expiresAt as string);
    expect(expiresMs).toBeGreaterThan(Date.now() + 3000 * 1000);
    expect(expiresMs).toBeLessThan(Date.now() + 3700 * 1000);
  }, 60_000);
});
