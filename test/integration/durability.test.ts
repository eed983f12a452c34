/**
 * No acknowledged write is ever lost: a real node under concurrent load is killed with
 * SIGKILL at seeded random moments and restarted on the same directory; every acknowledged
 * call must be there, no call half applied, every counted increment counted once, versions
 * still increasing, and the directory the crashes left replays to the digest the node
 * reported. Damage in the middle of the log refuses start-up; a torn tail recovers.
 */
import { cpSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  call, kv, removeDir, startNode, tempDir, UNLIMITED_RATES, type NodeProcess,
} from '../helpers/node-process.js';
import { hivekv } from '../helpers/hivekv-cli.js';
import { seededRandom, testSeed } from '../helpers/seed.js';

const CRASH_CYCLES = 20;
const WORKERS = 8;
const GET_MANY_KEYS_MAX = 1000;

interface CallRecord {
  readonly id: number;
  readonly state: 'acked' | 'unknown';
}

/** One call: two puts and an increment, all or nothing. */
function loadCall(base: string, id: number) {
  return kv(base, [
    { op: 'put', ns: 'crash', key: `a-${id}`, value: id, forever: true },
    { op: 'put', ns: 'crash', key: `b-${id}`, value: { id }, forever: true },
    { op: 'incr', ns: 'crash', key: 'total', delta: 1, forever: true },
  ]);
}

async function runLoad(base: string, nextId: () => number, stopAt: number,
  records: CallRecord[]): Promise<number> {
  let maxVersion = 0;
  const worker = async () => {
    while (Date.now() < stopAt) {
      const id = nextId();
      try {
        const r = await loadCall(base, id);
        if (r.status !== 200) throw new Error(`status ${r.status}: ${r.text}`);
        for (const result of r.body.results) maxVersion = Math.max(maxVersion, result.version);
        records.push({ id, state: 'acked' });
      } catch {
        records.push({ id, state: 'unknown' });
        return;
      }
    }
  };
  await Promise.all(Array.from({ length: WORKERS }, worker));
  return maxVersion;
}

async function presentKeys(base: string, keys: string[]): Promise<Set<string>> {
  const present = new Set<string>();
  for (let i = 0; i < keys.length; i += GET_MANY_KEYS_MAX) {
    const chunk = keys.slice(i, i + GET_MANY_KEYS_MAX);
    const r = await kv(base, [{ op: 'getMany', ns: 'crash', keys: chunk }]);
    expect(r.status).toBe(200);
    expect(r.body.results[0].truncated).toBe(false);
    for (const row of r.body.results[0].rows) present.add(row.key);
  }
  return present;
}

async function verify(base: string, records: CallRecord[], maxVersionSeen: number) {
  const keys = records.flatMap((r) => [`a-${r.id}`, `b-${r.id}`]);
  const present = await presentKeys(base, keys);
  for (const record of records) {
    const a = present.has(`a-${record.id}`);
    const b = present.has(`b-${record.id}`);
    const id = record.id;
    if (record.state === 'acked') expect({ id, a, b }).toEqual({ id, a: true, b: true });
    else expect({ id, half: a !== b }).toEqual({ id, half: false });
  }
  const total = (await kv(base, [{ op: 'get', ns: 'crash', key: 'total' }])).body.results[0];
  const acked = records.filter((r) => r.state === 'acked').length;
  const unknown = records.length - acked;
  const counted = total.found ? total.value : 0;
  expect(counted).toBeGreaterThanOrEqual(acked);
  expect(counted).toBeLessThanOrEqual(acked + unknown);
  const probe = (await kv(base, [{ op: 'put', ns: 'crash', key: 'probe', value: 0,
    forever: true }])).body.results[0];
  expect(probe.version).toBeGreaterThan(maxVersionSeen);
  return probe.version as number;
}

describe('crash safety', () => {
  it(`keeps every acknowledged write across ${CRASH_CYCLES} SIGKILLs under load`, async () => {
    const seed = testSeed();
    const random = seededRandom(seed);
    const dir = tempDir('crash');
    const env = { ...UNLIMITED_RATES, HIVEKV_SNAPSHOT_EVERY_ENTRIES: '300' };
    const records: CallRecord[] = [];
    let nextId = 0;
    let maxVersionSeen = 0;
    let node: NodeProcess | null = null;
    try {
      for (let cycle = 0; cycle < CRASH_CYCLES; cycle++) {
        node = await startNode({ dataDir: dir, env });
        maxVersionSeen = await verify(node.url, records, maxVersionSeen);
        const loadMs = 50 + Math.floor(random() * 350);
        const load = runLoad(node.url, () => ++nextId, Date.now() + 5000, records);
        await new Promise((resolve) => setTimeout(resolve, loadMs));
        await node.kill();
        maxVersionSeen = Math.max(maxVersionSeen, await load);
        node = null;
      }
      node = await startNode({ dataDir: dir, env });
      await verify(node.url, records, maxVersionSeen);
      expect(records.filter((r) => r.state === 'acked').length).toBeGreaterThan(CRASH_CYCLES);
      const health = (await call(node.url, 'GET', '/health')).body;
      expect(await node.stop()).toBe(0);
      node = null;
      // The directory left by every crash replays to the digest the node reported.
      const replayed = await hivekv(['replay', '--data', dir, '--to',
        String(health.appliedIndex), '--json']);
      expect(replayed.code, replayed.stderr).toBe(0);
      expect(replayed.lines.at(-1)).toMatchObject({ index: health.appliedIndex,
        digest: health.digest });
    } catch (error) {
      throw new Error(`seed ${seed}: ${(error as Error).message}\n${node?.output() ?? ''}`);
    } finally {
      await node?.kill();
      removeDir(dir);
    }
  }, 240_000);
});

/**
 * Where a segment's records end: segments are zero-filled ahead of use, so the file is
 * longer than its records and the bytes after the last record are zeros.
 */
function recordsEnd(bytes: Uint8Array): number {
  let end = bytes.length;
  while (end > 0 && bytes[end - 1] === 0) end--;
  return end;
}

function walFiles(dir: string): string[] {
  const wal = join(dir, 'wal');
  return readdirSync(wal).filter((name) => name.endsWith('.wal')).map((name) => join(wal, name))
    .sort();
}

async function fillAndStop(dir: string, calls: number): Promise<void> {
  const node = await startNode({ dataDir: dir, env: UNLIMITED_RATES });
  for (let i = 0; i < calls; i++) {
    const r = await kv(node.url, [{ op: 'put', ns: 'c', key: `k${i}`, value: 'v'.repeat(200),
      forever: true }]);
    expect(r.status).toBe(200);
  }
  expect(await node.stop()).toBe(0);
}

describe('damaged logs', () => {
  it('refuses to start on a byte flipped in the middle of the log, naming file and offset',
    async () => {
      const pristine = tempDir('flip');
      await fillAndStop(pristine, 200);
      try {
        for (const fraction of [0.3, 0.5, 0.7]) {
          const dir = tempDir('flip-copy');
          cpSync(pristine, dir, { recursive: true });
          const file = walFiles(dir).at(-1) ?? '';
          const bytes = readFileSync(file);
          const offset = Math.floor(recordsEnd(bytes) * fraction);
          bytes[offset] = (bytes[offset] ?? 0) ^ 0x5a;
          writeFileSync(file, bytes);
          const started = startNode({ dataDir: dir, env: UNLIMITED_RATES });
          await expect(started).rejects.toThrow(/exited with [1-9]/);
          const message = await started.catch((e: Error) => e.message);
          expect(message).toContain(file.split('/').at(-1));
          expect(message).toMatch(/offset/);
          removeDir(dir);
        }
      } finally {
        removeDir(pristine);
      }
    }, 120_000);

  it('cuts a torn record at the very end and serves everything before it', async () => {
    const dir = tempDir('torn');
    try {
      await fillAndStop(dir, 50);
      const file = walFiles(dir).at(-1) ?? '';
      // A crash mid-write: the last 7 bytes of the last record never reached the disk.
      const bytes = readFileSync(file);
      const end = recordsEnd(bytes);
      bytes.fill(0, end - 7, end);
      writeFileSync(file, bytes);
      const node = await startNode({ dataDir: dir, env: UNLIMITED_RATES });
      const keys = Array.from({ length: 50 }, (_, i) => `k${i}`);
      const r = await kv(node.url, [{ op: 'getMany', ns: 'c', keys }]);
      expect(r.body.results[0].rows.length).toBeGreaterThanOrEqual(49);
      const put = await kv(node.url, [{ op: 'put', ns: 'c', key: 'after', value: 1,
        forever: true }]);
      expect(put.body.results[0].applied).toBe(true);
      expect(await node.stop()).toBe(0);
    } finally {
      removeDir(dir);
    }
  }, 60_000);

  it('keeps data across a clean SIGTERM restart and refuses a second process on one dir',
    async () => {
      const dir = tempDir('restart');
      try {
        const first = await startNode({ dataDir: dir, env: UNLIMITED_RATES });
        await kv(first.url, [{ op: 'put', ns: 'r', key: 'k', value: 'kept', forever: true }]);
        await expect(startNode({ dataDir: dir, env: UNLIMITED_RATES })).rejects
          .toThrow(/in use by process/);
        expect(await first.stop()).toBe(0);
        const second = await startNode({ dataDir: dir, env: UNLIMITED_RATES });
        const r = await kv(second.url, [{ op: 'get', ns: 'r', key: 'k' }]);
        expect(r.body.results[0]).toMatchObject({ found: true, value: 'kept' });
        expect(await second.stop()).toBe(0);
      } finally {
        removeDir(dir);
      }
    }, 60_000);
});
