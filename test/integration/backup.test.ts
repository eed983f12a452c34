/**
 * Backups against real processes: a node takes a varied workload (three tenants, quota rows,
 * lifetimes that run out unswept, counters, deletes, values whose exact spelling matters,
 * unicode keys) and snapshots often. `hivekv export --url` runs while a writer keeps
 * writing: its header's index and digest must be what `hivekv replay --to INDEX` of the
 * node's directory gives. `hivekv export --data` then `hivekv import` must give a directory
 * whose state has the same digest, and a node serving it must answer the same reads.
 * Malformed dumps and a non-empty target are refused, and nothing is written. On a
 * three-node cluster a follower's export equals the leader's, and a new cluster seeded from
 * it (import into its first member, then `members add` and `promote` a second) serves it.
 */
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agreedLeader, memberPorts, peersFlag, waitFor } from '../helpers/cluster.js';
import { hivekv } from '../helpers/hivekv-cli.js';
import {
  call, freePort, kv, removeDir, startNode, tempDir, UNLIMITED_RATES, type NodeProcess,
} from '../helpers/node-process.js';

const TENANTS = ['00000000-0000-0000-0000-000000000001', 'aaaaaaaa-0000-4000-8000-000000000001',
  'bbbbbbbb-0000-4000-8000-000000000002'];
const QUOTA_ONLY = 'cccccccc-0000-4000-8000-000000000003';
/**
 * Snapshots are rare here, so the one the live export takes (with the log after it) stays
 * for `replay --to` to check it against: a node keeps its two newest snapshots only.
 */
const ENV = { ...UNLIMITED_RATES, HIVEKV_SNAPSHOT_EVERY_ENTRIES: '1000',
  // No sweep runs: rows whose lifetime ran out stay in the state (and in the digest).
  QUEEN_KV_EXPIRE_EVERY_MS: '3600000',
  QUEEN_TENANCY_HEADER: 'true', QUEEN_KV_TRUSTED_PROXY: 'true', QUEEN_KV_REQUIRE_GRANT: 'false' };
const WRITES = 90;
/** A body sent as text: number spellings, escapes and duplicate members must round-trip. */
const SPELLED_BODY = '{"operations":[{"op":"put","ns":"raw","key":"spelled-ü😀/x",' +
  '"value":{"n":1.50,"e":1E2,"s":"\\u0000\\ud83d\\ude00é","dup":1,"dup":2},"forever":true}]}';

interface Moment { readonly appliedIndex: number; readonly digest: string }

async function health(url: string): Promise<Moment> {
  const h = await call(url, 'GET', '/health');
  expect(h.status).toBe(200);
  return { appliedIndex: h.body.appliedIndex, digest: h.body.digest };
}

const tenantHeader = (i: number) => ({ 'x-queen-tenant': TENANTS[i % TENANTS.length]! });

/** A write call with an Idempotency-Key: its answer is recorded, and travels in a dump. */
const KEYED_OPS = [{ op: 'put', ns: 'w', key: 'paid-77', value: { paid: true }, forever: true }];
const KEYED_HEADERS = { ...{ 'x-queen-tenant': TENANTS[2]! }, 'idempotency-key': 'order-77' };

async function workload(url: string): Promise<string> {
  // A quota row for a tenant that never writes: in the tenant table, and in the digest.
  const quotas: Array<[string, unknown]> = [[TENANTS[1]!, { enabled: true, maxRows: 10_000 }],
    [TENANTS[2]!, { enabled: true, maxBytes: 1_000_000, maxWritesPerSec: 500 }],
    [QUOTA_ONLY, { enabled: false, maxRows: 3 }]];
  for (const [tenant, quota] of quotas) {
    const r = await call(url, 'PUT', `/api/v1/system/kv-quota/${tenant}`, quota);
    expect(r.status).toBeLessThan(300);
  }
  const spelled = await call(url, 'POST', '/api/v1/kv', SPELLED_BODY, tenantHeader(1));
  expect(spelled.status, spelled.text).toBe(200);
  for (let i = 0; i < WRITES; i++) {
    const ops: unknown[] = [
      { op: 'put', ns: 'w', key: `k${i % 13}-ä`, value: { i, s: `v\u00e9${i}` },
        ...(i % 5 === 0 ? { ttlSeconds: 1 } : i % 2 === 0 ? { ttlSeconds: 3600 }
          : { forever: true }) },
      { op: 'incr', ns: 'rl', key: 'count', delta: 1, max: 1_000_000, forever: true },
    ];
    if (i % 7 === 0) ops.push({ op: 'delete', ns: 'w', key: `k${(i + 3) % 13}-ä` });
    const r = await kv(url, ops, tenantHeader(i));
    expect(r.status, r.text).toBe(200);
  }
  const keyed = await kv(url, KEYED_OPS, KEYED_HEADERS);
  expect(keyed.status).toBe(200);
  return keyed.text;
}

/** Reads whose answers a node serving the imported directory must give byte for byte. */
async function reads(url: string): Promise<string[]> {
  const out: string[] = [];
  for (const [t] of TENANTS.entries()) {
    const keys = Array.from({ length: 13 }, (_, i) => `k${i}-ä`);
    const r = await kv(url, [{ op: 'getMany', ns: 'w', keys },
      { op: 'get', ns: 'rl', key: 'count' }, { op: 'get', ns: 'raw', key: 'spelled-ü😀/x' },
      { op: 'getPrefix', ns: 'w', prefix: 'k' }], tenantHeader(t));
    expect(r.status).toBe(200);
    out.push(r.text);
    const q = await call(url, 'GET', `/api/v1/system/kv-quota/${TENANTS[t]}`);
    out.push(`${q.status} ${q.text}`);
  }
  const q = await call(url, 'GET', `/api/v1/system/kv-quota/${QUOTA_ONLY}`);
  out.push(`${q.status} ${q.text}`);
  return out;
}

async function replayDigest(dir: string, to?: number): Promise<Moment> {
  const run = await hivekv(['replay', '--data', dir, '--json',
    ...(to === undefined ? [] : ['--to', String(to)])]);
  expect(run.code, run.stderr).toBe(0);
  const end = run.lines.at(-1);
  return { appliedIndex: end.index, digest: end.digest };
}

function header(dumpPath: string): { index: number; digest: string; rowCount: number } {
  return JSON.parse(readFileSync(dumpPath, 'utf8').split('\n')[0]!);
}

describe('export and import', () => {
  let work = '';
  let src = '';
  let live = { before: 0, after: 0 };
  let end: Moment = { appliedIndex: 0, digest: '' };
  let sourceReads: string[] = [];
  let keyedAnswer = '';

  beforeAll(async () => {
    work = tempDir('backup');
    src = join(work, 'src');
    const node = await startNode({ dataDir: src, env: ENV });
    try {
      keyedAnswer = await workload(node.url);
      // Let the 1 s lifetimes run out: those rows stay, unswept.
      await new Promise((resolve) => setTimeout(resolve, 1100));
      // An export while a writer keeps writing, bounded in count.
      let writing = true;
      const writer = (async () => {
        for (let i = 0; writing && i < 400; i++) {
          const r = await kv(node.url, [{ op: 'put', ns: 'live', key: `x${i % 17}`, value: i,
            forever: true }, { op: 'incr', ns: 'rl', key: 'live', delta: 1, forever: true }],
          tenantHeader(i));
          expect(r.status).toBe(200);
        }
      })();
      await new Promise((resolve) => setTimeout(resolve, 150));
      const before = (await health(node.url)).appliedIndex;
      const run = await hivekv(['export', '--url', node.url]);
      const after = (await health(node.url)).appliedIndex;
      writing = false;
      await writer;
      expect(run.code, run.stderr).toBe(0);
      writeFileSync(join(work, 'live.ndjson'), run.stdout);
      live = { before, after };
      sourceReads = await reads(node.url);
      end = await health(node.url);
    } finally {
      expect(await node.stop()).toBe(0);
    }
  }, 120_000);

  afterAll(() => removeDir(work));

  it('exports a live node at one applied index, while it is written', async () => {
    const dumpPath = join(work, 'live.ndjson');
    const h = header(dumpPath);
    expect(h.index).toBeGreaterThanOrEqual(live.before);
    expect(h.index).toBeLessThanOrEqual(live.after);
    expect(h.index).toBeLessThan(end.appliedIndex);
    expect(await replayDigest(src, h.index)).toEqual({ appliedIndex: h.index, digest: h.digest });
    const imported = join(work, 'from-live');
    const run = await hivekv(['import', '--data', imported], { stdinFile: dumpPath });
    expect(run.code, run.stderr).toBe(0);
    expect(run.lines[0]).toMatchObject({ index: h.index, digest: h.digest });
    expect(await replayDigest(imported)).toEqual({ appliedIndex: h.index, digest: h.digest });
  });

  it('exports a data directory and imports it into a node that answers the same', async () => {
    const exported = await hivekv(['export', '--data', src]);
    expect(exported.code, exported.stderr).toBe(0);
    const dumpPath = join(work, 'data.ndjson');
    writeFileSync(dumpPath, exported.stdout);
    const h = header(dumpPath);
    // --out writes the same dump durably and says what it holds.
    const outPath = join(work, 'out.ndjson');
    const toFile = await hivekv(['export', '--data', src, '--out', outPath]);
    expect(toFile.code, toFile.stderr).toBe(0);
    expect(toFile.lines[0]).toMatchObject({ out: outPath, index: h.index, digest: h.digest,
      rows: h.rowCount });
    const withoutTime = (text: string) => text.replace(/"exportedAt":"[^"]*"/, '');
    expect(withoutTime(readFileSync(outPath, 'utf8'))).toBe(withoutTime(exported.stdout));
    expect(existsSync(`${outPath}.partial`)).toBe(false);
    // The node was idle at the end: the log's last index is the one it reported.
    expect({ appliedIndex: h.index, digest: h.digest }).toEqual(end);
    const rows = exported.lines.filter((l) => l.kind === 'row');
    expect(rows.length).toBe(h.rowCount);
    expect(exported.lines.filter((l) => l.kind === 'idempotency')).toHaveLength(1);
    expect(new Set(rows.map((r) => r.tenant))).toEqual(new Set(TENANTS));
    const spelled = rows.find((r) => r.ns === 'raw');
    expect(spelled.value).toBe('{"n":1.50,"e":1E2,"s":"\\u0000\\ud83d\\ude00é","dup":1,"dup":2}');
    // Rows whose lifetime ran out but that no sweep removed are in the state: exported.
    const lastTimeMs = exported.lines[0].lastTimeMs as number;
    expect(rows.some((r) => r.expiresAt !== null && r.expiresAt <= lastTimeMs)).toBe(true);
    const imported = join(work, 'imported');
    const run = await hivekv(['import', '--data', imported], { stdinFile: dumpPath });
    expect(run.code, run.stderr).toBe(0);
    expect(existsSync(join(imported, 'snap'))).toBe(true);
    const node = await startNode({ dataDir: imported, env: ENV });
    let served: Moment;
    try {
      // It starts at the dump's index, then commits its first entry as leader (a no-op).
      served = await health(node.url);
      expect(served.appliedIndex).toBeGreaterThanOrEqual(h.index);
      for (let i = 0; i < 100 && served.appliedIndex === h.index; i++) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        served = await health(node.url);
      }
      expect(served.appliedIndex).toBeGreaterThan(h.index);
      expect(await reads(node.url)).toEqual(sourceReads);
      // A client retrying its keyed call after the restore gets the recorded answer.
      const retry = await kv(node.url, KEYED_OPS, KEYED_HEADERS);
      expect(retry.status).toBe(200);
      expect(retry.headers.get('idempotent-replayed')).toBe('true');
      expect(retry.text).toBe(keyedAnswer);
      const reused = await kv(node.url, [{ op: 'delete', ns: 'w', key: 'paid-77' }],
        KEYED_HEADERS);
      expect(reused.status).toBe(422);
      served = await health(node.url);
    } finally {
      expect(await node.stop()).toBe(0);
    }
    expect(await replayDigest(imported, h.index)).toEqual({ appliedIndex: h.index,
      digest: h.digest });
    expect(await replayDigest(imported, served.appliedIndex)).toEqual(served);
  });

  it('exports the state at --at INDEX', async () => {
    // Past the snapshot the live export took, where the log holds every entry.
    const liveIndex = header(join(work, 'live.ndjson')).index;
    const at = Math.floor((liveIndex + end.appliedIndex) / 2);
    expect(at).toBeGreaterThan(liveIndex);
    const run = await hivekv(['export', '--data', src, '--at', String(at)]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.lines[0]).toMatchObject({ kind: 'header', index: at });
    expect(run.lines[0].digest).toBe((await replayDigest(src, at)).digest);
    const past = await hivekv(['export', '--data', src, '--at', String(end.appliedIndex + 5)]);
    expect(past.code).toBe(2);
    expect(past.stderr).toMatch(/does not cover/);
  });

  it('refuses malformed and truncated dumps, and a directory that is not empty', async () => {
    const good = readFileSync(join(work, 'data.ndjson'), 'utf8');
    const lines = good.trimEnd().split('\n');
    const cases: Array<[string, string, RegExp]> = [
      ['truncated', lines.slice(0, -3).join('\n') + '\n', /without its end line.*truncated/],
      ['cut mid-line', good.slice(0, good.length - 40), /^hivekv import: line \d+: not JSON/m],
      ['garbage line', [...lines.slice(0, 5), 'not json', ...lines.slice(6)].join('\n') + '\n',
        /line 6: not JSON/],
      ['edited value', good.replace('\\"dup\\":2', '\\"dup\\":3'),
        /the dump was changed or damaged/],
    ];
    for (const [name, text, message] of cases) {
      const path = join(work, `${name}.ndjson`);
      writeFileSync(path, text);
      const target = join(work, `refused-${name}`);
      const run = await hivekv(['import', '--data', target], { stdinFile: path });
      expect(run.code, name).toBe(2);
      expect(run.stderr, name).toMatch(message);
      expect(existsSync(target), name).toBe(false);
    }
    const busy = join(work, 'busy');
    mkdirSync(busy);
    writeFileSync(join(busy, 'keep.txt'), 'x');
    const run = await hivekv(['import', '--data', busy], { stdinFile: join(work, 'data.ndjson') });
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/is not empty/);
    expect(readdirSync(busy)).toEqual(['keep.txt']);
  });

  it('refuses to export a damaged log, naming the file and the byte offset', async () => {
    const copy = join(work, 'damaged');
    cpSync(src, copy, { recursive: true });
    const walDir = join(copy, 'wal');
    const last = readdirSync(walDir).filter((n) => n.endsWith('.wal')).sort().at(-1)!;
    const path = join(walDir, last);
    const bytes = readFileSync(path);
    // The segment header is 24 bytes; the first record's header is damaged, valid ones follow.
    bytes[24 + 2] = bytes[24 + 2]! ^ 0xff;
    writeFileSync(path, bytes);
    const outPath = join(work, 'damaged.ndjson');
    for (const out of [[], ['--out', outPath]]) {
      const run = await hivekv(['export', '--data', copy, ...out]);
      expect(run.code).toBe(2);
      expect(run.stderr).toContain(path);
      expect(run.stderr).toContain('at byte offset 24:');
      expect(run.stdout).toBe('');
    }
    expect(existsSync(outPath)).toBe(false);
    expect(existsSync(`${outPath}.partial`)).toBe(false);
  });
});

describe('export from a cluster, and a cluster seeded from a dump', () => {
  const CLUSTER_ENV = { ...UNLIMITED_RATES, QUEEN_KV_EXPIRE_EVERY_MS: '3600000',
    HIVEKV_CLUSTER_SECRET: 'backup-test-cluster-secret' };
  const nodes: NodeProcess[] = [];
  let work = '';

  afterAll(async () => {
    for (const node of nodes) await node.kill();
    removeDir(work);
  });

  it('a follower and the leader export the same state; a seeded cluster serves it', async () => {
    work = tempDir('backup-cluster');
    const members = await memberPorts(3);
    for (const m of members) {
      nodes.push(await startNode({ dataDir: join(work, m.id), env: CLUSTER_ENV,
        args: ['--id', m.id, '--peers', peersFlag(members)] }));
    }
    const leader = await agreedLeader(nodes);
    for (let i = 0; i < 30; i++) {
      const r = await kv(nodes[i % 3]!.url, [{ op: 'put', ns: 'c', key: `k${i % 7}`,
        value: { i }, ...(i % 4 === 0 ? { ttlSeconds: 3600 } : { forever: true }) },
      { op: 'incr', ns: 'c', key: 'n', delta: 1, forever: true }]);
      expect(r.status).toBe(200);
    }
    await waitFor('every replica at one applied index', 20_000, async () => {
      const hs = await Promise.all(nodes.map((n) => call(n.url, 'GET', '/health')));
      return new Set(hs.map((h) => h.body.appliedIndex)).size === 1 ? true : undefined;
    });
    const leaderNode = nodes[members.findIndex((m) => m.id === leader)]!;
    const follower = nodes.find((n) => n !== leaderNode)!;
    const fromFollower = await hivekv(['export', '--url', follower.url]);
    const fromLeader = await hivekv(['export', '--url', leaderNode.url]);
    expect(fromFollower.code, fromFollower.stderr).toBe(0);
    expect(fromLeader.code, fromLeader.stderr).toBe(0);
    const [fh, ...fRest] = fromFollower.lines;
    const [lh, ...lRest] = fromLeader.lines;
    expect({ index: fh.index, digest: fh.digest }).toEqual({ index: lh.index,
      digest: lh.digest });
    expect(fRest).toEqual(lRest);
    expect((await call(leaderNode.url, 'GET', '/health')).body.digest).toBe(lh.digest);

    // Seed a new cluster: import into its first member, start it alone with a peer link,
    // then add a second member that catches up from the imported snapshot.
    const dumpPath = join(work, 'cluster.ndjson');
    writeFileSync(dumpPath, fromFollower.stdout);
    const imported = await hivekv(['import', '--data', join(work, 's1'), '--id', 's1'],
      { stdinFile: dumpPath });
    expect(imported.code, imported.stderr).toBe(0);
    const [p1, p2] = [await freePort(), await freePort()];
    const seededEnv = { ...CLUSTER_ENV, HIVEKV_CLUSTER_ID: 'backup-seeded' };
    const s1 = await startNode({ dataDir: join(work, 's1'), env: seededEnv,
      args: ['--id', 's1', '--peers', `s1=127.0.0.1:${p1}`] });
    nodes.push(s1);
    const s2 = await startNode({ dataDir: join(work, 's2'), env: seededEnv,
      args: ['--id', 's2', '--peer-listen', `127.0.0.1:${p2}`, '--join'] });
    nodes.push(s2);
    const added = await hivekv(['members', 'add', 's2', `127.0.0.1:${p2}`, '--url', s1.url]);
    expect(added.code, added.stderr).toBe(0);
    const promoted = await hivekv(['members', 'promote', 's2', '--wait', '20', '--url',
      s1.url]);
    expect(promoted.code, promoted.stderr).toBe(0);
    const seeded = await waitFor('s2 caught up with s1', 20_000, async () => {
      const [a, b] = await Promise.all([s1, s2].map((n) => call(n.url, 'GET', '/health')));
      return a!.body.appliedIndex === b!.body.appliedIndex ? [a!.body, b!.body] : undefined;
    });
    expect(seeded[0].digest).toBe(seeded[1].digest);
    const read = [{ op: 'getMany', ns: 'c', keys: ['k0', 'k3', 'k6', 'n'] }];
    const original = await kv(leaderNode.url, read);
    expect((await kv(s2.url, read)).text).toBe(original.text);
  }, 90_000);
});
