/**
 * Membership changes on real processes over loopback WebSocket, under writes: a node started
 * with --join waits, is added as a learner through the CLI, refused promotion until caught
 * up, promoted to the fourth voter; then the leader is removed (it hands leadership over
 * first), and every acknowledged write is still there on the remaining three. Bounded: a
 * few hundred writes, each node killed by the PID this test started.
 */
import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  call, freePort, kv, removeDir, startNode, tempDir, UNLIMITED_RATES, type NodeProcess,
} from '../helpers/node-process.js';

const ROOT = new URL('../../', import.meta.url).pathname;
const WAIT_MS = 20_000;
/** Writes the background writer makes at most, and how long it may run. */
const WRITES_MAX = 2_000;
const WRITER_MS_MAX = 60_000;
/** Keys one read asks for (QUEEN_KV_MAX_KEYS_PER_CALL is 1024). */
const KEYS_PER_READ = 500;
/** The same on every node: a joining node must name the cluster it joins. */
const CLUSTER_ENV = { ...UNLIMITED_RATES, HIVEKV_CLUSTER_ID: 'membership-test',
  HIVEKV_CLUSTER_SECRET: 'membership-test-secret' };

interface Member {
  readonly id: string;
  readonly dir: string;
  readonly peerPort: number;
  process: NodeProcess | null;
}

const members: Member[] = [];

function member(id: string): Member {
  const found = members.find((m) => m.id === id);
  if (found === undefined) throw new Error(`no member ${id}`);
  return found;
}

function url(id: string): string {
  const process = member(id).process;
  if (process === null) throw new Error(`${id} is not running`);
  return process.url;
}

/** `hivekv members ...` as an operator runs it; resolves with its exit code and output. */
function cli(...args: string[]): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['bin/hivekv.js', 'members', ...args], { cwd: ROOT });
    let out = '';
    let err = '';
    child.stdout.on('data', (chunk: Buffer) => { out += chunk.toString(); });
    child.stderr.on('data', (chunk: Buffer) => { err += chunk.toString(); });
    child.on('exit', (code) => resolve({ code, out, err }));
  });
}

/** Waits until `check` holds (polling), or throws after WAIT_MS. */
async function until<T>(what: string, check: () => Promise<T | null>): Promise<T> {
  const deadline = Date.now() + WAIT_MS;
  while (Date.now() < deadline) {
    const value = await check().catch(() => null);
    if (value !== null) return value;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
}

async function leaderOf(id: string): Promise<string> {
  return until('a leader', async () => {
    const health = await call(url(id), 'GET', '/health');
    const leader = health.body?.leader;
    return typeof leader === 'string' && member(leader).process !== null ? leader : null;
  });
}

/** Writes unique keys through every running member until stopped; records what was acked. */
function startWriter(): { stop: () => Promise<string[]> } {
  const acked: string[] = [];
  let stopped = false;
  const startedMs = Date.now();
  const loop = (async () => {
    for (let i = 0; i < WRITES_MAX && !stopped && Date.now() - startedMs < WRITER_MS_MAX; i++) {
      const running = members.filter((m) => m.process !== null);
      const target = running[i % running.length]?.process;
      if (target === undefined || target === null) continue;
      const key = `w${i}`;
      const answer = await kv(target.url, [{ op: 'put', ns: 'm', key, value: i, forever: true }])
        .catch(() => null);
      if (answer?.status === 200 && answer.body.results?.[0]?.applied === true) acked.push(key);
      else await new Promise((resolve) => setTimeout(resolve, 20));
    }
  })();
  return {
    stop: async () => {
      stopped = true;
      await loop;
      return acked;
    },
  };
}

beforeAll(async () => {
  for (const id of ['n1', 'n2', 'n3', 'n4']) {
    members.push({ id, dir: tempDir(`members-${id}`), peerPort: await freePort(), process: null });
  }
  const peers = members.slice(0, 3).map((m) => `${m.id}=127.0.0.1:${m.peerPort}`).join(',');
  await Promise.all(members.slice(0, 3).map(async (m) => {
    m.process = await startNode({ dataDir: m.dir, env: CLUSTER_ENV,
      args: ['--id', m.id, '--peers', peers] });
  }));
  await leaderOf('n1');
}, 60_000);

afterAll(async () => {
  for (const m of members) await m.process?.kill();
  for (const m of members) removeDir(m.dir);
});

describe('membership changes on a running cluster', () => {
  it('grows three voters to four under writes, removes the old leader, loses nothing',
    async () => {
      const writer = startWriter();
      const n4 = member('n4');
      n4.process = await startNode({ dataDir: n4.dir, env: CLUSTER_ENV,
        args: ['--id', 'n4', '--peer-listen', `127.0.0.1:${n4.peerPort}`, '--join'] });
      expect((await call(n4.process.url, 'GET', '/health')).body.role).toBe('joining');
      expect((await kv(n4.process.url, [{ op: 'get', ns: 'm', key: 'w0' }])).body)
        .toMatchObject({ error: 'kv_unavailable', reason: 'not_a_member' });

      const added = await cli('add', 'n4', `127.0.0.1:${n4.peerPort}`, '--url', url('n2'));
      expect(added.code, added.err).toBe(0);
      expect(JSON.parse(added.out).members).toContainEqual(expect.objectContaining({ id: 'n4',
        role: 'learner' }));
      const promoted = await cli('promote', 'n4', '--wait', '30', '--url', url('n3'));
      expect(promoted.code, promoted.err).toBe(0);
      const leader = await leaderOf('n1');
      const view = (await call(url(leader), 'GET', '/api/v1/system/members')).body;
      expect(view.source).toBe('leader');
      expect(view.members.filter((m: { role: string }) => m.role === 'voter')).toHaveLength(4);
      expect(view.members.every((m: { match: number }) => m.match > 0)).toBe(true);

      // The leader is asked to remove itself: it hands leadership over first.
      const removed = await cli('remove', leader, '--url', url(leader));
      expect(removed.code, removed.err).toBe(0);
      const after = JSON.parse(removed.out);
      expect(after.members.map((m: { id: string }) => m.id)).not.toContain(leader);
      expect(after.members.filter((m: { role: string }) => m.role === 'voter')).toHaveLength(3);
      expect((await call(url(leader), 'GET', '/health')).body.role).toBe('removed');
      await member(leader).process?.kill();
      member(leader).process = null;

      await new Promise((resolve) => setTimeout(resolve, 500));
      const acked = await writer.stop();
      console.log(`${acked.length} writes acknowledged across the changes; all read back on ` +
        'the remaining voters');
      expect(acked.length).toBeGreaterThan(20);
      const remaining = members.filter((m) => m.process !== null);
      expect(remaining.map((m) => m.id)).toContain('n4');
      const newLeader = await leaderOf(remaining[0]!.id);
      expect(newLeader).not.toBe(leader);
      for (const m of remaining) {
        for (let from = 0; from < acked.length; from += KEYS_PER_READ) {
          const keys = acked.slice(from, from + KEYS_PER_READ);
          const got = await kv(url(m.id), [{ op: 'getMany', ns: 'm', keys }]);
          expect(got.status).toBe(200);
          expect(got.body.results[0].missing, `${m.id} lost acknowledged writes`).toEqual([]);
        }
      }
    }, 120_000);
});
