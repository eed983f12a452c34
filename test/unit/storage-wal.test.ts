// FileStorage's log on real files: append/sync/recover, segment rolls, suffix overwrite
// (Raft §5.3) within and across segments, the hole assertion, group commit and close.
import fs from 'node:fs';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { syncBuiltinESMExports } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterEach, expect, it } from 'vitest';

import type { Entry } from '../../host/core/raft/types.js';
import { FileStorage, LOOP_SYNC_SLOW_MS } from '../../host/storage/file-storage.js';

const SMALL_SEGMENT_BYTES = 4096;
const dirs: string[] = [];

afterEach(async () => {
  for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
});

async function freshDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'hivekv-wal-'));
  dirs.push(dir);
  return dir;
}

/** Payload derived from index and term, so a record from another term never matches. */
function payload(index: number, term: number, bytes: number): Uint8Array {
  return Uint8Array.from({ length: bytes }, (_, i) => (index * 31 + term * 7 + i) & 0xff);
}

/** `entries({ from: 3, terms: [1, 1, 2] })` builds indexes 3, 4, 5 with those terms. */
function entries(spec: { from: number; terms: readonly number[]; bytes?: number }): Entry[] {
  return spec.terms.map((term, i) => ({
    term,
    index: spec.from + i,
    timeMs: 1_000 + spec.from + i,
    type: (spec.from + i) % 5 === 0 ? 'empty' : 'normal',
    data: payload(spec.from + i, term, spec.bytes ?? 100),
  }));
}

function repeat(term: number, count: number): number[] {
  return Array.from({ length: count }, () => term);
}

async function reopen(dir: string, segmentBytesMax?: number): Promise<FileStorage> {
  return new FileStorage(dir, segmentBytesMax === undefined ? {} : { segmentBytesMax });
}

async function recoverFresh(dir: string, segmentBytesMax?: number) {
  const storage = await reopen(dir, segmentBytesMax);
  const state = await storage.recover();
  await storage.close();
  return state;
}

it('an empty directory recovers to an empty store', async () => {
  const dir = join(await freshDir(), 'data');
  const state = await recoverFresh(dir);
  expect(state).toEqual({ hardState: { term: 0, votedFor: null, commitIndex: 0 },
    snapshot: null, entries: [] });
});

it('synced entries survive a reopen byte for byte', async () => {
  const dir = await freshDir();
  const storage = new FileStorage(dir, {});
  await storage.recover();
  const written = entries({ from: 1, terms: [1, 1, 2, 2, 3] });
  storage.append(written.slice(0, 2));
  storage.append(written.slice(2));
  await storage.sync();
  await storage.close();
  expect((await recoverFresh(dir)).entries).toEqual(written);
});

it('unsynced entries are not written by close()', async () => {
  const dir = await freshDir();
  const storage = new FileStorage(dir, {});
  await storage.recover();
  storage.append(entries({ from: 1, terms: [1, 1] }));
  await storage.sync();
  storage.append(entries({ from: 3, terms: [1] }));
  await storage.close();
  expect((await recoverFresh(dir)).entries.map((e) => e.index)).toEqual([1, 2]);
});

it('many entries roll over many segments and recover in order', async () => {
  const dir = await freshDir();
  const storage = new FileStorage(dir, { segmentBytesMax: SMALL_SEGMENT_BYTES });
  await storage.recover();
  const written = entries({ from: 1, terms: repeat(1, 600), bytes: 150 });
  for (let i = 0; i < written.length; i += 37) {
    storage.append(written.slice(i, i + 37));
    if (i % 74 === 0) await storage.sync();
  }
  await storage.sync();
  await storage.close();
  const segments = (await readdir(join(dir, 'wal'))).filter((n) => n.endsWith('.wal'));
  expect(segments.length).toBeGreaterThan(20);
  expect(segments[0]).toBe('00000000000000000001.wal');
  expect((await recoverFresh(dir, SMALL_SEGMENT_BYTES)).entries).toEqual(written);
});

it('appending after recovery continues the newest segment', async () => {
  const dir = await freshDir();
  let storage = new FileStorage(dir, { segmentBytesMax: SMALL_SEGMENT_BYTES });
  await storage.recover();
  storage.append(entries({ from: 1, terms: repeat(1, 50) }));
  await storage.sync();
  await storage.close();
  storage = new FileStorage(dir, { segmentBytesMax: SMALL_SEGMENT_BYTES });
  await storage.recover();
  storage.append(entries({ from: 51, terms: repeat(2, 50) }));
  await storage.sync();
  await storage.close();
  const state = await recoverFresh(dir, SMALL_SEGMENT_BYTES);
  expect(state.entries).toEqual(entries({ from: 1, terms: [...repeat(1, 50), ...repeat(2, 50)] }));
});

it('a suffix overwrite within one segment replaces the conflicting entries (§5.3)', async () => {
  const dir = await freshDir();
  const storage = new FileStorage(dir, {});
  await storage.recover();
  storage.append(entries({ from: 1, terms: [1, 1, 1, 1, 1, 1] }));
  await storage.sync();
  storage.append(entries({ from: 4, terms: [2, 2] }));
  await storage.sync();
  await storage.close();
  expect((await recoverFresh(dir)).entries).toEqual(entries({ from: 1, terms: [1, 1, 1, 2, 2] }));
});

it('a suffix overwrite across segments unlinks later segments, then recovers', async () => {
  const dir = await freshDir();
  const storage = new FileStorage(dir, { segmentBytesMax: SMALL_SEGMENT_BYTES });
  await storage.recover();
  storage.append(entries({ from: 1, terms: repeat(1, 200), bytes: 200 }));
  await storage.sync();
  const before = (await readdir(join(dir, 'wal'))).length;
  storage.append(entries({ from: 30, terms: repeat(2, 3), bytes: 200 }));
  await storage.sync();
  storage.append(entries({ from: 33, terms: repeat(2, 20), bytes: 200 }));
  await storage.sync();
  await storage.close();
  expect((await readdir(join(dir, 'wal'))).length).toBeLessThan(before);
  const expected = entries({ from: 1, terms: [...repeat(1, 29), ...repeat(2, 23)], bytes: 200 });
  expect((await recoverFresh(dir, SMALL_SEGMENT_BYTES)).entries).toEqual(expected);
});

it('an overwrite of buffered, unsynced entries never reaches the disk', async () => {
  const dir = await freshDir();
  const storage = new FileStorage(dir, { segmentBytesMax: SMALL_SEGMENT_BYTES });
  await storage.recover();
  storage.append(entries({ from: 1, terms: repeat(1, 10), bytes: 300 }));
  await storage.sync();
  storage.append(entries({ from: 11, terms: repeat(1, 40), bytes: 300 }));
  storage.append(entries({ from: 8, terms: repeat(3, 5), bytes: 300 }));
  await storage.sync();
  await storage.close();
  const expected = entries({ from: 1, terms: [...repeat(1, 7), ...repeat(3, 5)], bytes: 300 });
  expect((await recoverFresh(dir, SMALL_SEGMENT_BYTES)).entries).toEqual(expected);
});

it('an overwrite at the first index of a segment keeps a valid log', async () => {
  const dir = await freshDir();
  const storage = new FileStorage(dir, { segmentBytesMax: SMALL_SEGMENT_BYTES });
  await storage.recover();
  storage.append(entries({ from: 1, terms: repeat(1, 60), bytes: 200 }));
  await storage.sync();
  const names = (await readdir(join(dir, 'wal'))).sort();
  const secondFirst = Number(names[1]?.slice(0, 20));
  storage.append(entries({ from: secondFirst, terms: [4], bytes: 200 }));
  await storage.sync();
  await storage.close();
  const state = await recoverFresh(dir, SMALL_SEGMENT_BYTES);
  expect(state.entries.length).toBe(secondFirst);
  expect(state.entries.at(-1)?.term).toBe(4);
});

it('appending with a hole is an assertion failure', async () => {
  const storage = new FileStorage(await freshDir(), {});
  await storage.recover();
  storage.append(entries({ from: 1, terms: [1, 1] }));
  expect(() => storage.append(entries({ from: 4, terms: [1] }))).toThrow(/hole/);
  expect(() => storage.append([...entries({ from: 3, terms: [1] }),
    ...entries({ from: 5, terms: [1] })])).toThrow(/contiguous/);
  await storage.close();
});

it('calls made before recover() or after close() are refused', async () => {
  const storage = new FileStorage(await freshDir(), {});
  expect(() => storage.append(entries({ from: 1, terms: [1] }))).toThrow(/refused/);
  await storage.recover();
  await storage.close();
  await expect(storage.sync()).rejects.toThrow(/refused/);
});

interface FdatasyncCalls {
  /** Handed to the thread pool (`fs.fdatasync`). */
  pooled: number;
  /** Made on the calling thread (`fs.fdatasyncSync`). */
  onLoop: number;
}

/**
 * Runs `body` with every fdatasync counted, each still made (one on the calling thread by
 * `onLoop` instead, one on the thread pool by `inPool`, when given); both are restored after.
 */
async function withFdatasyncsCounted(body: (calls: FdatasyncCalls) => Promise<void>,
  onLoop: (fd: number) => void = fs.fdatasyncSync,
  inPool: typeof fs.fdatasync = fs.fdatasync): Promise<void> {
  // Start with no sync's lock held.
  await new Promise((resolve) => setImmediate(resolve));
  const pooled = fs.fdatasync;
  const real = fs.fdatasyncSync;
  const calls: FdatasyncCalls = { pooled: 0, onLoop: 0 };
  fs.fdatasync = ((fd: number, callback: fs.NoParamCallback) => {
    calls.pooled++;
    inPool(fd, callback);
  }) as typeof fs.fdatasync;
  fs.fdatasyncSync = (fd: number) => {
    calls.onLoop++;
    onLoop(fd);
  };
  syncBuiltinESMExports();
  try {
    await body(calls);
  } finally {
    fs.fdatasync = pooled;
    fs.fdatasyncSync = real;
    syncBuiltinESMExports();
  }
}

/** A recovered storage in a fresh directory holding entry 1, durable. */
async function storageWithOneEntry(): Promise<{ dir: string; storage: FileStorage }> {
  const dir = await freshDir();
  const storage = new FileStorage(dir);
  await storage.recover();
  storage.append(entries({ from: 1, terms: [1] }));
  await storage.sync();
  return { dir, storage };
}

it('with nothing else running, a sync hands its fdatasync to the OS within the call', async () => {
  const { dir, storage } = await storageWithOneEntry();
  await withFdatasyncsCounted(async (calls) => {
    storage.append(entries({ from: 2, terms: [1] }));
    storage.startWrite();
    const synced = storage.sync();
    expect(calls.pooled).toBe(1);
    await synced;
  });
  await storage.close();
  expect((await recoverFresh(dir)).entries.map((e) => e.index)).toEqual([1, 2]);
});

it('a sync started as the last one resolves writes and hands its fdatasync over in that call',
  async () => {
    // The replica starts the next fsync from the reaction to the last one, then applies and
    // answers what that one released: a flush queued behind the lock, or behind an await of
    // an open handle, waited for all of that while the disk idled.
    const { dir, storage } = await storageWithOneEntry();
    await withFdatasyncsCounted(async (calls) => {
      storage.append(entries({ from: 2, terms: [1] }));
      let handedOverInCall = -1;
      const next = await storage.sync().then(() => {
        // Not written through: the flush must write the record itself before its fdatasync.
        storage.append(entries({ from: 3, terms: [1] }));
        const before = calls.pooled;
        const synced = storage.sync();
        handedOverInCall = calls.pooled - before;
        return { synced };
      });
      expect(handedOverInCall).toBe(1);
      await next.synced;
    });
    await storage.close();
    expect((await recoverFresh(dir)).entries.map((e) => e.index)).toEqual([1, 2, 3]);
  });

it('a small group\'s sync may fdatasync on the loop, only when nothing else must go first',
  async () => {
    const dir = await freshDir();
    const fsyncs: number[] = [];
    const storage = new FileStorage(dir, { onFsyncSeconds: (s) => fsyncs.push(s) });
    await storage.recover();
    storage.setHardState({ term: 1, votedFor: 'n1', commitIndex: 0 });
    storage.append(entries({ from: 1, terms: [1] }));
    await storage.sync();
    await withFdatasyncsCounted(async (calls) => {
      // Written through, no new term or vote: durable before sync returns, on this thread.
      storage.append(entries({ from: 2, terms: [1] }));
      storage.startWrite();
      fsyncs.length = 0;
      const synced = storage.sync({ onLoop: true });
      expect(calls).toEqual({ pooled: 0, onLoop: 1 });
      expect(fsyncs).toHaveLength(1);
      await synced;
      // Not written through (no startWrite): the records go first, so the pool does it all.
      storage.append(entries({ from: 3, terms: [1] }));
      await storage.sync({ onLoop: true });
      expect(calls.onLoop).toBe(1);
      expect(calls.pooled).toBeGreaterThanOrEqual(1);
      // A new term must be written (and its file fsynced) first: the pool again.
      storage.setHardState({ term: 2, votedFor: null, commitIndex: 2 });
      storage.append(entries({ from: 4, terms: [2] }));
      storage.startWrite();
      await storage.sync({ onLoop: true });
      expect(calls.onLoop).toBe(1);
      expect(calls.pooled).toBeGreaterThanOrEqual(2);
      // Without the option, never on the loop.
      storage.append(entries({ from: 5, terms: [2] }));
      storage.startWrite();
      await storage.sync();
      expect(calls.onLoop).toBe(1);
      // A vote alone (no record): nothing waits in the log, but the vote must reach the disk.
      await new Promise((resolve) => setImmediate(resolve));
      storage.setHardState({ term: 3, votedFor: 'n2', commitIndex: 2 });
      await storage.sync({ onLoop: true });
      expect(calls.onLoop).toBe(1);
    });
    await storage.close();
    const recovered = await recoverFresh(dir);
    expect(recovered.entries.map((e) => e.index)).toEqual([1, 2, 3, 4, 5]);
    expect(recovered.hardState).toMatchObject({ term: 3, votedFor: 'n2' });
  });

it('two slow fdatasyncs on the loop in a row send the fsyncs after them to the pool a while',
  async () => {
    const dir = await freshDir();
    const storage = new FileStorage(dir, { loopSyncPauseMs: 300 });
    await storage.recover();
    storage.setHardState({ term: 1, votedFor: 'n1', commitIndex: 0 });
    storage.append(entries({ from: 1, terms: [1] }));
    await storage.sync();
    const realOnLoop = fs.fdatasyncSync;
    // A disk that stalls: each fdatasync on the loop takes 5 ms past LOOP_SYNC_SLOW_MS.
    const stalling = (fd: number) => {
      const until = performance.now() + LOOP_SYNC_SLOW_MS + 5;
      while (performance.now() < until) { /* the stall */ }
      realOnLoop(fd);
    };
    const syncOnLoop = async (index: number) => {
      storage.append(entries({ from: index, terms: [1] }));
      storage.startWrite();
      await storage.sync({ onLoop: true });
    };
    let stalls = true;
    await withFdatasyncsCounted(async (calls) => {
      // One slow alone is a blip: the next stays on the loop.
      await syncOnLoop(2);
      stalls = false;
      await syncOnLoop(3);
      stalls = true;
      await syncOnLoop(4);
      expect(calls).toEqual({ pooled: 0, onLoop: 3 });
      expect(storage.slowLoopSyncs).toBe(2);
      // The second slow in a row sends the next to the pool.
      await syncOnLoop(5);
      expect(storage.slowLoopSyncs).toBe(3);
      await syncOnLoop(6);
      expect(calls).toEqual({ pooled: 1, onLoop: 4 });
      // Once the pause is over, the loop is tried again.
      await new Promise((resolve) => setTimeout(resolve, 350));
      await syncOnLoop(7);
      expect(calls).toEqual({ pooled: 1, onLoop: 5 });
    }, (fd) => (stalls ? stalling(fd) : realOnLoop(fd)));
    await storage.close();
    expect((await recoverFresh(dir)).entries.map((e) => e.index))
      .toEqual([1, 2, 3, 4, 5, 6, 7]);
  });

function eio(): Error {
  return Object.assign(new Error('EIO: i/o error, fdatasync'),
    { code: 'EIO', errno: -5, syscall: 'fdatasync' });
}

it.each([
  { where: 'on the loop', onLoop: true },
  { where: 'on the thread pool', onLoop: false },
])('a failed fdatasync $where rejects the sync, and the storage refuses from then on',
  async ({ onLoop }) => {
    const dir = await freshDir();
    const storage = new FileStorage(dir);
    await storage.recover();
    storage.append(entries({ from: 1, terms: [1] }));
    await storage.sync();
    const failOnLoop = (): void => {
      throw eio();
    };
    const failInPool = ((_fd: number, callback: fs.NoParamCallback): void => {
      setImmediate(() => callback(eio()));
    }) as typeof fs.fdatasync;
    await withFdatasyncsCounted(async (calls) => {
      storage.append(entries({ from: 2, terms: [1] }));
      // Written through, with nothing to write first, a sync allowed on the loop takes it;
      // otherwise the flush writes the records and hands its fdatasync to the pool.
      if (onLoop) storage.startWrite();
      await expect(storage.sync({ onLoop })).rejects.toThrow(/EIO/);
      expect(calls).toEqual(onLoop ? { pooled: 0, onLoop: 1 } : { pooled: 1, onLoop: 0 });
    }, failOnLoop, failInPool);
    expect(() => storage.append(entries({ from: 3, terms: [1] }))).toThrow(/refused/);
    await expect(storage.sync()).rejects.toThrow(/refused/);
    await storage.close();
  });

it('a sync starts at once; syncs called while it runs share the next one', async () => {
  const fsyncs: number[] = [];
  const dir = await freshDir();
  const storage = new FileStorage(dir, { onFsyncSeconds: (s) => fsyncs.push(s) });
  await storage.recover();
  fsyncs.length = 0;
  storage.append(entries({ from: 1, terms: [1] }));
  const first = storage.sync();
  const queued = storage.sync();
  expect(queued).not.toBe(first);
  await Promise.resolve();
  await Promise.resolve();
  storage.append(entries({ from: 2, terms: [1] }));
  const second = storage.sync();
  storage.append(entries({ from: 3, terms: [1] }));
  const third = storage.sync();
  expect(second).toBe(queued);
  expect(third).toBe(second);
  await Promise.all([first, second, third]);
  // The first sync creates the segment: one fdatasync and one directory fsync.
  expect(fsyncs.length).toBe(3);
  await storage.sync();
  expect(fsyncs.length).toBe(3);
  await storage.close();
  expect((await recoverFresh(dir)).entries.map((e) => e.index)).toEqual([1, 2, 3]);
});
