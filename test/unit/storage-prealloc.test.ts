// The WAL's zero-filled segments (host/storage/wal-prealloc.ts) and the recovery rules that
// come with them: zeros after the last record are the segment's unused room; in the newest
// segment, a sector of zeros between damage and a later valid record is a write a crash cut
// before its fsync; damage with no such hole is corruption. Also: records written through to
// the page cache before their fsync, and never ahead of a new term; and the files of segments
// a snapshot covers, zeroed into spares instead of being unlinked.
import {
  mkdtemp, open as openFile, readdir, readFile, rm, stat, writeFile, type FileHandle,
} from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterEach, expect, it } from 'vitest';

import type { Entry } from '../../host/core/raft/types.js';
import { FileStorage } from '../../host/storage/file-storage.js';
import {
  RECORD_HEADER_BYTES, SECTOR_BYTES, SEGMENT_HEADER_BYTES,
} from '../../host/storage/record.js';
import { saveSnapshotBytes, StorageCorruptionError } from '../../host/storage/storage.js';
import { waitFor } from '../helpers/cluster.js';

const SEGMENT_BYTES = 16 * 1024;
const DATA_BYTES = 100;
const FRAME_BYTES = RECORD_HEADER_BYTES + DATA_BYTES;
const dirs: string[] = [];

afterEach(async () => {
  for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
});

function entries(from: number, count: number, term = 1): Entry[] {
  return Array.from({ length: count }, (_, i) => ({
    term, index: from + i, timeMs: 5_000 + i, type: 'normal' as const,
    data: Uint8Array.from({ length: DATA_BYTES }, (_, j) => (from + i + j + 1) & 0xff),
  }));
}

async function freshDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'hivekv-prealloc-'));
  dirs.push(dir);
  return dir;
}

async function open(dir: string): Promise<FileStorage> {
  const storage = new FileStorage(dir, { segmentBytesMax: SEGMENT_BYTES });
  await storage.recover();
  return storage;
}

async function recoverIndexes(dir: string): Promise<number[]> {
  const storage = new FileStorage(dir, { segmentBytesMax: SEGMENT_BYTES });
  const state = await storage.recover();
  await storage.close();
  return state.entries.map((entry) => entry.index);
}

async function segments(dir: string): Promise<string[]> {
  return (await readdir(join(dir, 'wal'))).filter((name) => name.endsWith('.wal')).sort()
    .map((name) => join(dir, 'wal', name));
}

async function logWith(count: number): Promise<{ dir: string; path: string }> {
  const dir = await freshDir();
  const storage = await open(dir);
  storage.append(entries(1, count));
  await storage.sync();
  await storage.close();
  const [path] = await segments(dir);
  if (path === undefined) throw new Error('no segment');
  return { dir, path };
}

/** Appends entries `from` to `to` in syncs of 50, as many groups of calls would. */
async function appendSynced(storage: FileStorage, from: number, to: number): Promise<void> {
  for (let first = from; first <= to; first += 50) {
    storage.append(entries(first, Math.min(50, to - first + 1)));
    await storage.sync();
  }
}

/**
 * The log's first `count` segment files, held open so their inodes cannot be reused while
 * the test runs: an inode number seen again is the same file.
 */
async function holdFirstSegments(dir: string, count: number):
  Promise<{ handles: FileHandle[]; inodes: Set<number> }> {
  const handles = await Promise.all((await segments(dir)).slice(0, count)
    .map((path) => openFile(path, 'r')));
  const inodes = new Set(await Promise.all(handles.map(async (h) => (await h.stat()).ino)));
  return { handles, inodes };
}

/** Installs a snapshot covering the first `count` full segments; returns its index. */
async function snapshotCovering(storage: FileStorage, count: number): Promise<number> {
  const index = count * Math.floor((SEGMENT_BYTES - SEGMENT_HEADER_BYTES) / FRAME_BYTES);
  await saveSnapshotBytes(storage, { index, term: 1, timeMs: 9_000, voters: ['n1'],
    learners: [], peers: [{ id: 'n1', address: '' }], removed: [] }, new Uint8Array(64));
  return index;
}

/** The inode of each segment file the log has now. */
/** The ready spares in the log's directory (wal-prealloc.ts). */
async function readySpares(dir: string): Promise<string[]> {
  return (await readdir(join(dir, 'wal'))).filter((name) => name.endsWith('.prealloc'));
}

async function segmentInodes(dir: string): Promise<number[]> {
  return Promise.all((await segments(dir)).map(async (path) => (await stat(path)).ino));
}

function recordOffset(n: number): number {
  return SEGMENT_HEADER_BYTES + n * FRAME_BYTES;
}

it('a new log writes into a zero-filled segment of the full size', async () => {
  const { dir, path } = await logWith(5);
  expect((await stat(path)).size).toBe(SEGMENT_BYTES);
  const bytes = await readFile(path);
  expect(bytes.subarray(recordOffset(5)).every((byte) => byte === 0)).toBe(true);
  expect(await recoverIndexes(dir)).toEqual([1, 2, 3, 4, 5]);
  // While open, a spare for the next segment waits beside it, zero-filled to the full size.
  // A log that has segments prepares it in the background (open does not wait).
  const storage = await open(dir);
  await waitFor('a spare segment', 10_000, async () =>
    (await readySpares(dir)).length === 1 || undefined);
  await storage.close();
  // Closing keeps it: the next start takes it over (same file) and zeroes no other.
  const [spare] = await readySpares(dir);
  const inode = (await stat(join(dir, 'wal', spare!))).ino;
  expect((await stat(join(dir, 'wal', spare!))).size).toBe(SEGMENT_BYTES);
  const again = await open(dir);
  again.append(entries(6, 1_000));
  await again.sync();
  await again.close();
  expect(await segmentInodes(dir)).toContain(inode);
  expect(await recoverIndexes(dir)).toEqual(Array.from({ length: 1_005 }, (_, i) => i + 1));
});

it('a start removes spares a crash left half prepared, and keeps one ready spare', async () => {
  const { dir } = await logWith(5);
  const wal = join(dir, 'wal');
  await writeFile(join(wal, 'spare-7.zeroing'), Buffer.alloc(4096));
  await writeFile(join(wal, 'spare-8.recycled'), Buffer.alloc(SEGMENT_BYTES, 1));
  await writeFile(join(wal, 'spare-9.prealloc'), Buffer.alloc(SEGMENT_BYTES));
  await writeFile(join(wal, 'spare-10.prealloc'), Buffer.alloc(SEGMENT_BYTES));
  await writeFile(join(wal, 'spare-11.prealloc'), Buffer.alloc(100));
  const storage = await open(dir);
  const names = (await readdir(wal)).filter((name) => name.startsWith('spare-'));
  expect(names).toHaveLength(1);
  expect(names[0]).toMatch(/^spare-\d+\.prealloc$/);
  expect((await stat(join(wal, names[0]!))).size).toBe(SEGMENT_BYTES);
  await storage.close();
});

it('appends after a restart continue inside the same preallocated segment', async () => {
  const { dir, path } = await logWith(5);
  const storage = await open(dir);
  storage.append(entries(6, 5));
  await storage.sync();
  await storage.close();
  expect((await stat(path)).size).toBe(SEGMENT_BYTES);
  expect(await recoverIndexes(dir)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
});

it('rolls into spares across many segments and recovers in order', async () => {
  const dir = await freshDir();
  const storage = await open(dir);
  await appendSynced(storage, 1, 600);
  await storage.close();
  const paths = await segments(dir);
  expect(paths.length).toBeGreaterThan(3);
  expect(await recoverIndexes(dir)).toEqual(Array.from({ length: 600 }, (_, i) => i + 1));
});

it('garbage after the last record of the newest segment is erased with zeros', async () => {
  const { dir, path } = await logWith(5);
  const bytes = await readFile(path);
  bytes.fill(0x5a, recordOffset(5), recordOffset(5) + 77);
  await writeFile(path, bytes);
  expect(await recoverIndexes(dir)).toEqual([1, 2, 3, 4, 5]);
  const after = await readFile(path);
  expect(after.length).toBe(SEGMENT_BYTES);
  expect(after.subarray(recordOffset(5)).every((byte) => byte === 0)).toBe(true);
});

it('a hole of zeros before later valid records is a write cut by a crash, not damage',
  async () => {
    // Records 1..30 were written; the disk kept 1..5 and 21..30 but never the sectors of
    // 6..20 (the fsync covering them never returned, so none of them was acknowledged).
    const { dir, path } = await logWith(30);
    const bytes = await readFile(path);
    const holeStart = recordOffset(5);
    const holeEnd = Math.floor(recordOffset(20) / SECTOR_BYTES) * SECTOR_BYTES;
    expect(holeEnd - Math.ceil(holeStart / SECTOR_BYTES) * SECTOR_BYTES)
      .toBeGreaterThanOrEqual(SECTOR_BYTES);
    bytes.fill(0, holeStart, holeEnd);
    await writeFile(path, bytes);
    expect(await recoverIndexes(dir)).toEqual([1, 2, 3, 4, 5]);
  });

it('a flipped byte followed by valid records, with no unwritten sector, is corruption',
  async () => {
    const { dir, path } = await logWith(30);
    const bytes = await readFile(path);
    const at = recordOffset(10) + 40;
    bytes[at] = (bytes[at] ?? 0) ^ 0x01;
    await writeFile(path, bytes);
    const storage = new FileStorage(dir, { segmentBytesMax: SEGMENT_BYTES });
    const failure = await storage.recover().then(() => null, (error: unknown) => error);
    expect(failure).toBeInstanceOf(StorageCorruptionError);
    expect((failure as StorageCorruptionError).offset).toBe(recordOffset(10));
  });

it('a zero tail in an older segment is its unused room; garbage there is corruption',
  async () => {
    const dir = await freshDir();
    const storage = await open(dir);
    await appendSynced(storage, 1, 400);
    await storage.close();
    const [older] = await segments(dir);
    if (older === undefined) throw new Error('no segment');
    expect((await stat(older)).size).toBe(SEGMENT_BYTES);
    expect(await recoverIndexes(dir)).toHaveLength(400);
    const bytes = await readFile(older);
    bytes[SEGMENT_BYTES - 3] = 0x77;
    await writeFile(older, bytes);
    await expect(recoverIndexes(dir)).rejects.toThrow(older);
  });

it('startWrite puts records in the file before their fsync', async () => {
  const { dir, path } = await logWith(3);
  const storage = await open(dir);
  storage.append(entries(4, 2));
  storage.startWrite();
  // The write runs on the thread pool; a moment later it is in the file, before any fsync.
  await new Promise((resolve) => setTimeout(resolve, 50));
  const bytes = await readFile(path);
  expect(bytes[recordOffset(3) + RECORD_HEADER_BYTES]).toBe((4 + 0 + 1) & 0xff);
  await storage.sync();
  await storage.close();
  expect(await recoverIndexes(dir)).toEqual([1, 2, 3, 4, 5]);
});

it('startWrite holds records of a new term back until the term is durable', async () => {
  const { dir, path } = await logWith(3);
  const storage = await open(dir);
  storage.setHardState({ term: 2, votedFor: 'n1', commitIndex: 0 });
  storage.append(entries(4, 2, 2));
  storage.startWrite();
  const before = await readFile(path);
  expect(before.subarray(recordOffset(3)).every((byte) => byte === 0)).toBe(true);
  await storage.sync();
  await storage.close();
  expect(await recoverIndexes(dir)).toEqual([1, 2, 3, 4, 5]);
});

it('segments a snapshot covers are zeroed into the spares later segments are renamed from',
  async () => {
    const dir = await freshDir();
    const storage = await open(dir);
    await appendSynced(storage, 1, 400);
    const { handles: covered, inodes: coveredInodes } = await holdFirstSegments(dir, 2);
    try {
      const lastCovered = await snapshotCovering(storage, 2);
      expect(await segments(dir)).toHaveLength(2);
      // The next roll takes the spare on hand and zeroes one of the covered files into the next.
      storage.append(entries(401, 100));
      await storage.sync();
      const zeroed = Buffer.alloc(SEGMENT_BYTES);
      await waitFor('a covered segment zeroed into a spare', 10_000, async () => {
        for (const handle of covered) {
          const bytes = Buffer.alloc(SEGMENT_BYTES);
          await handle.read(bytes, 0, SEGMENT_BYTES, 0);
          if (bytes.equals(zeroed)) return true;
        }
        return undefined;
      });
      await appendSynced(storage, 501, 1_200);
      await storage.close();
      expect((await segmentInodes(dir)).filter((ino) => coveredInodes.has(ino))).toHaveLength(2);
      expect(await recoverIndexes(dir))
        .toEqual(Array.from({ length: 1_200 - lastCovered }, (_, i) => lastCovered + 1 + i));
      expect((await readySpares(dir)).length).toBeLessThanOrEqual(1);
      expect((await readdir(join(dir, 'wal'))).filter((name) => /\.(recycled|zeroing)$/
        .test(name))).toEqual([]);
    } finally {
      for (const handle of covered) await handle.close();
    }
  });

it('while the disk is short of space, covered segments are unlinked, their room given back',
  async () => {
    const dir = await freshDir();
    const storage = new FileStorage(dir, { segmentBytesMax: SEGMENT_BYTES,
      minFreeBytes: Number.MAX_SAFE_INTEGER });
    await storage.recover();
    expect(storage.isLowOnSpace()).toBe(true);
    await appendSynced(storage, 1, 400);
    const { handles: covered, inodes } = await holdFirstSegments(dir, 2);
    try {
      await snapshotCovering(storage, 2);
      await appendSynced(storage, 401, 1_200);
      await storage.close();
      expect((await segmentInodes(dir)).filter((ino) => inodes.has(ino))).toEqual([]);
      // Unlinked, not zeroed: the open handles still read the records they held.
      for (const handle of covered) {
        const header = Buffer.alloc(SEGMENT_HEADER_BYTES);
        await handle.read(header, 0, SEGMENT_HEADER_BYTES, 0);
        expect(header.some((byte) => byte !== 0)).toBe(true);
      }
    } finally {
      for (const handle of covered) await handle.close();
    }
  });
