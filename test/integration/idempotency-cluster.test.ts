/**
 * Idempotent retries across a three-node cluster of real processes: the first attempt of a
 * call reaches a node and applies, its answer is lost because that node is killed by PID,
 * and the client (`hivekv/client`) retries on another node with the same Idempotency-Key:
 * the counter moves exactly once, and the retry gets the first attempt's answer. Once with a
 * follower killed, once with the leader killed (the retry lands after a leader change).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient } from '../../host/client/index.js';
import {
  kv, removeDir, startNode, tempDir, UNLIMITED_RATES, type NodeProcess,
} from '../helpers/node-process.js';
import { agreedLeader, memberPorts, peersFlag, type MemberPorts } from '../helpers/cluster.js';

const SETTINGS = { ...UNLIMITED_RATES, HIVEKV_SNAPSHOT_EVERY_ENTRIES: '20',
  HIVEKV_CLUSTER_SECRET: 'idempotency-cluster-secret-0123456789' };

interface Member {
  readonly id: string;
  readonly dir: string;
  process: NodeProcess | null;
}

let members: Member[] = [];
let peers = '';

async function start(member: Member): Promise<void> {
  member.process = await startNode({ dataDir: member.dir, env: SETTINGS,
    args: ['--id', member.id, '--peers', peers] });
}

function live(): NodeProcess[] {
  return members.flatMap((m) => (m.process === null ? [] : [m.process]));
}

function byId(id: string): Member {
  const found = members.find((m) => m.id === id);
  if (found === undefined) throw new Error(`no member ${id}`);
  return found;
}

interface Attempt {
  readonly url: string;
  readonly key: string | null;
  replayed: string | null;
}

/**
 * A fetch for the client: the first attempt goes to the doomed node and applies there; the
 * answer is then thrown away, the node killed by PID, and the client sees a connection
 * error, as when a node dies after committing and before answering. Later attempts go
 * through untouched. Every attempt's URL, key and Idempotent-Replayed header are recorded.
 */
function losingFirstAnswer(doomed: Member, attempts: Attempt[]): typeof fetch {
  return async (input, init) => {
    const url = String(input);
    const headers = new Headers(init?.headers);
    const attempt: Attempt = { url, key: headers.get('idempotency-key'), replayed: null };
    attempts.push(attempt);
    const response = await fetch(input, init);
    attempt.replayed = response.headers.get('idempotent-replayed');
    if (attempts.length === 1) {
      await response.arrayBuffer();
      expect(response.status).toBe(200);
      await doomed.process?.kill();
      doomed.process = null;
      throw new TypeError('fetch failed: the node died before answering');
    }
    return response;
  };
}

async function counterOn(node: NodeProcess, key: string): Promise<unknown> {
  const r = await kv(node.url, [{ op: 'get', ns: 'idem', key }]);
  return r.body.results[0].found ? r.body.results[0].value : 0;
}

beforeAll(async () => {
  const ports: MemberPorts[] = await memberPorts(3);
  peers = peersFlag(ports);
  members = ports.map((p) => ({ id: p.id, dir: tempDir(`idem-${p.id}`), process: null }));
  await Promise.all(members.map(start));
  await agreedLeader(live());
}, 60_000);

afterAll(async () => {
  for (const m of members) await m.process?.kill();
  for (const m of members) removeDir(m.dir);
});

async function retryAcross(doomedId: string, counter: string): Promise<void> {
  const doomed = byId(doomedId);
  const others = members.filter((m) => m !== doomed && m.process !== null);
  const attempts: Attempt[] = [];
  const urls = [doomed.process!.url, ...others.map((m) => m.process!.url)];
  const client = createClient({ urls, retries: 40, retryBaseMs: 100, retryCapMs: 500,
    timeoutMs: 5000, fetch: losingFirstAnswer(doomed, attempts) });
  const before = await counterOn(others[0]!.process!, counter);
  const result = await client.kv.incr('idem', counter, 1, { forever: true });
  // The answer is the first attempt's: the counter it reported is the one it made.
  expect(result).toMatchObject({ applied: true, value: (before as number) + 1,
    replayed: true });
  expect(attempts.length).toBeGreaterThanOrEqual(2);
  expect(attempts[0]!.url.startsWith(urls[0]!)).toBe(true);
  const key = attempts[0]!.key;
  expect(key).toMatch(/^[0-9a-f-]{36}$/);
  expect(attempts.every((a) => a.key === key)).toBe(true);
  expect(attempts.at(-1)!.url.startsWith(urls[0]!)).toBe(false);
  expect(attempts.at(-1)!.replayed).toBe('true');
  for (const m of others) expect(await counterOn(m.process!, counter)).toBe(before as number + 1);
  // The doomed node comes back, catches up and agrees.
  await start(doomed);
  await agreedLeader(live());
  const deadline = Date.now() + 10_000;
  while (await counterOn(doomed.process!, counter) !== (before as number) + 1 &&
    Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  expect(await counterOn(doomed.process!, counter)).toBe(before as number + 1);
}

describe('idempotent retries on three nodes', () => {
  it('a follower dies after applying: the retry on another node counts once', async () => {
    const leader = await agreedLeader(live());
    const follower = members.find((m) => m.id !== leader)!;
    await retryAcross(follower.id, 'via-follower');
  }, 60_000);

  it('the leader dies after applying: the retry after the leader change counts once',
    async () => {
      const leader = await agreedLeader(live());
      await retryAcross(leader, 'via-leader');
    }, 60_000);
});
