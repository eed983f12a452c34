/**
 * The replay harness against a real node: a workload of puts with lifetimes (so sweeps run),
 * increments, deletes, a lost compare-and-swap and a quota row goes to a node that takes
 * snapshots often; the node's own /health digest at two moments, and its answers, are then
 * what `hivekv replay`, `--at --get` and `--history` must give from the directory it left.
 * `inspect` and `replay` must refuse a damaged log, naming the file and the byte offset.
 */
import { cpSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  call, kv, removeDir, startNode, tempDir, UNLIMITED_RATES,
} from '../helpers/node-process.js';
import { DataDir } from '../../host/replay/data-dir.js';
import { replay } from '../../host/replay/replay.js';
import { hivekv } from '../helpers/hivekv-cli.js';

interface Moment { readonly appliedIndex: number; readonly digest: string }

async function health(url: string): Promise<Moment> {
  const h = await call(url, 'GET', '/health');
  expect(h.status).toBe(200);
  expect(h.body.digest).toMatch(/^[0-9a-f]{16}$/);
  return { appliedIndex: h.body.appliedIndex, digest: h.body.digest };
}

const WRITES = 160;

describe('replay of a real node\'s data directory', () => {
  let dir = '';
  let middle: Moment = { appliedIndex: 0, digest: '' };
  let end: Moment = { appliedIndex: 0, digest: '' };
  /** What the node answered for key `watched` after the write at `middle`. */
  let watchedAtMiddle: unknown = null;
  /** Every version the node answered for an applied write of `watched`, in order. */
  const watchedVersions: number[] = [];

  beforeAll(async () => {
    dir = tempDir('replay');
    const node = await startNode({ dataDir: dir, env: { ...UNLIMITED_RATES,
      HIVEKV_SNAPSHOT_EVERY_ENTRIES: '40', QUEEN_KV_EXPIRE_EVERY_MS: '50' } });
    try {
      const quota = await call(node.url, 'PUT',
        '/api/v1/system/kv-quota/00000000-0000-0000-0000-000000000001',
        { enabled: true, maxRows: 100_000 });
      expect(quota.status).toBeLessThan(300);
      for (let i = 0; i < WRITES; i++) {
        const ops: unknown[] = [
          { op: 'put', ns: 'w', key: `k${i % 11}`, value: { i },
            ttlSeconds: i % 4 === 0 ? 1 : 600 },
          { op: 'incr', ns: 'w', key: 'count', delta: 1, forever: true },
        ];
        if (i % 5 === 0) ops.push({ op: 'put', ns: 'w', key: 'watched', value: i, forever: true });
        if (i % 17 === 0) ops.push({ op: 'delete', ns: 'w', key: `k${(i + 3) % 11}` });
        if (i % 23 === 0) {
          ops.push({ op: 'put', ns: 'w', key: 'cas', value: i, expect: 99_999, forever: true });
        }
        const r = await kv(node.url, ops);
        expect(r.status).toBe(200);
        for (const result of r.body.results) {
          if (result.key === 'watched' && result.applied) watchedVersions.push(result.version);
        }
        if (i === WRITES / 2) {
          middle = await health(node.url);
          const got = await kv(node.url, [{ op: 'get', ns: 'w', key: 'watched' }]);
          watchedAtMiddle = got.body.results[0].value;
        }
      }
      // Let the 1 s lifetimes run out and the sweeps remove them.
      await new Promise((resolve) => setTimeout(resolve, 1500));
      end = await health(node.url);
    } finally {
      expect(await node.stop()).toBe(0);
    }
  }, 120_000);

  afterAll(() => removeDir(dir));

  it('inspect shows the snapshots, the log and its entries', async () => {
    const run = await hivekv(['inspect', '--data', dir]);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const summary = run.lines[0];
    expect(summary.snapshots.length).toBeGreaterThan(0);
    expect(summary.lastIndex).toBeGreaterThanOrEqual(end.appliedIndex);
    expect(summary.entries.normal.count).toBeGreaterThan(0);
    expect(summary.hardState.term).toBeGreaterThan(0);
    const last = summary.lastIndex as number;
    const entries = await hivekv(['inspect', '--data', dir, '--entries', `${last - 2}..${last}`]);
    expect(entries.code).toBe(0);
    expect(entries.lines.map((e) => e.index)).toEqual([last - 2, last - 1, last]);
    const call0 = entries.lines.find((e) => e.command?.kind === 'call');
    if (call0 !== undefined) {
      expect(call0.origin.nodeId).toBeTruthy();
      expect(call0.command.call.tenant).toBe('00000000-0000-0000-0000-000000000001');
    }
  });

  it('inspect refuses entries the log does not hold, saying what it holds', async () => {
    // A log compacted by a live export's snapshot, then three more entries after it. The
    // snapshot drops whole segments only, and never the one being written: the first 64 MiB
    // segment is filled first (18 calls of 64 values of 60 kB), so the log rolls past it.
    const compactedDir = tempDir('inspect-range');
    const node = await startNode({ dataDir: compactedDir, env: UNLIMITED_RATES });
    const put = (key: string) => kv(node.url, [{ op: 'put', ns: 'n', key, value: 1,
      forever: true }]);
    const large = 'x'.repeat(60_000);
    for (let call = 0; call < 18; call++) {
      const ops = Array.from({ length: 64 }, (_, i) => ({ op: 'put', ns: 'big', key: `k${i}`,
        value: large, forever: true }));
      expect((await kv(node.url, ops)).status).toBe(200);
    }
    for (const key of ['a', 'b', 'c']) expect((await put(key)).status).toBe(200);
    const exported = await hivekv(['export', '--url', node.url, '--out',
      join(compactedDir, 'dump.ndjson')]);
    expect(exported.code, exported.stderr).toBe(0);
    for (const key of ['d', 'e', 'f']) expect((await put(key)).status).toBe(200);
    expect(await node.stop()).toBe(0);
    try {
      const summary = (await hivekv(['inspect', '--data', compactedDir])).lines[0];
      const first = summary.firstIndex as number;
      const last = summary.lastIndex as number;
      expect(first, 'the export compacted the start of the log').toBeGreaterThan(1);
      const compacted = await hivekv(['inspect', '--data', compactedDir, '--entries', '1..2']);
      expect(compacted.code).toBe(2);
      expect(compacted.stdout).toBe('');
      expect(compacted.stderr).toBe(`hivekv inspect: the log holds ${first}..${last}: it ` +
        `does not cover 1..2 (entries before ${first} were compacted into a snapshot)\n`);
      for (const range of [`${last}..${last + 1}`, `${last + 1}..`, String(last + 5)]) {
        const past = await hivekv(['inspect', '--data', compactedDir, '--entries', range]);
        expect(past.code, range).toBe(2);
        expect(past.stderr, range).toContain(`the log holds ${first}..${last}: it does not`);
      }
      const held = await hivekv(['inspect', '--data', compactedDir, '--entries', `${first}..`]);
      expect(held.code).toBe(0);
      expect(held.lines.map((e) => e.index)[0]).toBe(first);
      expect(held.lines).toHaveLength(last - first + 1);
    } finally {
      removeDir(compactedDir);
    }
  });

  it('replays to the digest the live node reported, from a snapshot and from index 1', async () => {
    const run = await hivekv(['replay', '--data', dir, '--to', String(end.appliedIndex),
      '--json', '--every', '10']);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const last = run.lines.at(-1);
    expect(last).toMatchObject({ index: end.appliedIndex, digest: end.digest, end: true });
    expect(last.startIndex).toBeGreaterThan(0);
    // Replay from index 1 passes the middle moment on the way: the node's digest there too.
    const full = await hivekv(['replay', '--data', dir, '--from-start', '--json', '--every', '1',
      '--to', String(end.appliedIndex)]);
    expect(full.code).toBe(0);
    const atMiddle = full.lines.find((l) => l.index === middle.appliedIndex);
    expect(atMiddle.digest).toBe(middle.digest);
    expect(full.lines.at(-1).digest).toBe(end.digest);
  });

  it('answers a get as the node did at that index', async () => {
    const run = await hivekv(['replay', '--data', dir, '--at', String(middle.appliedIndex),
      '--get', 'w', 'watched']);
    expect(run.code).toBe(0);
    expect(run.lines[0].result).toMatchObject({ found: true, value: watchedAtMiddle });
    const missing = await hivekv(['replay', '--data', dir, '--at', String(end.appliedIndex),
      '--get', 'w', 'never-written']);
    expect(missing.code).toBe(1);
    expect(missing.lines[0].result.found).toBe(false);
  });

  it('lists every write of a key with the versions the node answered', async () => {
    const run = await hivekv(['replay', '--data', dir, '--history', 'w', 'watched']);
    expect(run.code).toBe(0);
    const applied = run.lines.filter((l) => l.applied && l.op === 'put');
    expect(applied.map((l) => l.version)).toEqual(watchedVersions);
    const cas = await hivekv(['replay', '--data', dir, '--history', 'w', 'cas']);
    expect(cas.lines.length).toBeGreaterThan(0);
    for (const l of cas.lines) expect(l).toMatchObject({ applied: false, reason: 'absent' });
  });

  it('the library yields every entry with its outcome and the digest after it', async () => {
    const data = await DataDir.open(dir);
    let lastDigest = '';
    let calls = 0;
    let sweeps = 0;
    for await (const step of replay(data, { fromStart: true, to: end.appliedIndex })) {
      lastDigest = step.digest;
      if (step.outcome.kind === 'call') calls++;
      if (step.outcome.kind === 'sweep' && step.outcome.removedKeys > 0) sweeps++;
    }
    expect(lastDigest).toBe(end.digest);
    expect(calls).toBe(WRITES);
    expect(sweeps).toBeGreaterThan(0);
  });

  it('refuses a damaged log with the file and the byte offset', async () => {
    const copy = tempDir('replay-damaged');
    try {
      cpSync(dir, copy, { recursive: true });
      const walDir = join(copy, 'wal');
      const first = readdirSync(walDir).filter((n) => n.endsWith('.wal')).sort()[0]!;
      const path = join(walDir, first);
      const bytes = readFileSync(path);
      // The segment header is 24 bytes, then the leader's empty entry (a 36-byte record),
      // then the first call: a byte flipped in its header is damage, not a torn tail, since
      // valid records follow it.
      const recordAt = 24 + 36;
      const offset = recordAt + 2;
      bytes[offset] = bytes[offset]! ^ 0xff;
      writeFileSync(path, bytes);
      const commands = [['inspect', '--data', copy], ['replay', '--data', copy, '--from-start']];
      for (const args of commands) {
        const run = await hivekv(args);
        expect(run.code).toBe(2);
        expect(run.stderr).toContain(path);
        expect(run.stderr).toContain(`at byte offset ${recordAt}: record checksum mismatch`);
      }
    } finally {
      removeDir(copy);
    }
  });
});
