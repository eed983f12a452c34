// Recovery rules of storage.ts on damaged files: a torn tail at the very end of the newest
// segment is cut; damage anywhere else is a StorageCorruptionError naming file and offset.
// These cases use segments created on demand (no zero-filled spares), whose files end at their
// last record; storage-prealloc.test.ts covers the preallocated layout.
// Randomized cases print their seed and replay from env SEED.
import {
  appendFile, mkdtemp, readdir, readFile, rm, stat, truncate, writeFile,
} from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterEach, expect, it } from 'vitest';

import type { Entry } from '../../host/core/raft/types.js';
import { FileStorage } from '../../host/storage/file-storage.js';
import { RECORD_HEADER_BYTES, SEGMENT_HEADER_BYTES } from '../../host/storage/record.js';
import { StorageCorruptionError } from '../../host/storage/storage.js';

const SMALL_SEGMENT_BYTES = 4096;
/** Storage options for every case here: files end at their last record. */
function options(segmentBytesMax?: number) {
  return segmentBytesMax === undefined ? { preallocate: false }
    : { segmentBytesMax, preallocate: false };
}
const DATA_BYTES = 100;
const FRAME_BYTES = RECORD_HEADER_BYTES + DATA_BYTES;
const dirs: string[] = [];

afterEach(async () => {
  for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
});

function entries(from: number, count: number, term = 1): Entry[] {
  return Array.from({ length: count }, (_, i) => ({
    term, index: from + i, timeMs: 5_000 + i, type: 'normal' as const,
    data: Uint8Array.from({ length: DATA_BYTES }, (_, j) => (from + i + j) & 0xff),
  }));
}

/** A directory whose log holds `count` synced entries of FRAME_BYTES each. */
async function logWith(count: number, segmentBytesMax?: number): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'hivekv-recovery-'));
  dirs.push(dir);
  const storage = new FileStorage(dir, options(segmentBytesMax));
  await storage.recover();
  storage.append(entries(1, count));
  await storage.sync();
  await storage.close();
  return dir;
}

async function segmentPaths(dir: string): Promise<string[]> {
  return (await readdir(join(dir, 'wal'))).filter((name) => name.endsWith('.wal')).sort()
    .map((name) => join(dir, 'wal', name));
}

async function recoverIndexes(dir: string, segmentBytesMax?: number): Promise<number[]> {
  const storage = new FileStorage(dir, options(segmentBytesMax));
  const state = await storage.recover();
  await storage.close();
  return state.entries.map((entry) => entry.index);
}

/** A cut tail is erased with zeros (the file keeps its length and any preallocated room). */
async function expectZerosFrom(path: string, offset: number): Promise<void> {
  const bytes = await readFile(path);
  expect(bytes.subarray(offset).every((byte) => byte === 0)).toBe(true);
}

async function flipByte(path: string, offset: number): Promise<void> {
  const bytes = await readFile(path);
  bytes[offset] = (bytes[offset] ?? 0) ^ 0x5a;
  await writeFile(path, bytes);
}

function seeded(): { seed: number; next: (bound: number) => number } {
  const seed = Number(process.env.SEED ?? Date.now() % 1_000_000);
  console.log(`storage-recovery seed=${seed} (replay with SEED=${seed})`);
  let state = seed >>> 0 || 1;
  return {
    seed,
    next: (bound) => {
      state ^= state << 13; state >>>= 0;
      state ^= state >>> 17;
      state ^= state << 5; state >>>= 0;
      return state % bound;
    },
  };
}

it('a tail torn by 1..N bytes is cut back to the last whole record', async () => {
  for (const cut of [1, 2, 7, RECORD_HEADER_BYTES - 1, RECORD_HEADER_BYTES, FRAME_BYTES - 1]) {
    const dir = await logWith(10);
    const [path] = await segmentPaths(dir);
    if (path === undefined) throw new Error('no segment');
    const size = (await stat(path)).size;
    await truncate(path, size - cut);
    expect(await recoverIndexes(dir)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9]);
    await expectZerosFrom(path, SEGMENT_HEADER_BYTES + 9 * FRAME_BYTES);
    expect(await recoverIndexes(dir)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9]);
  }
});

it('zeros or garbage appended after the last record are cut off', async () => {
  const random = seeded();
  for (const kind of ['zeros', 'garbage', 'zeros', 'garbage']) {
    const dir = await logWith(5);
    const [path] = await segmentPaths(dir);
    if (path === undefined) throw new Error('no segment');
    const length = 1 + random.next(3 * FRAME_BYTES);
    const tail = Buffer.alloc(length);
    if (kind === 'garbage') for (let i = 0; i < length; i += 1) tail[i] = random.next(256);
    await appendFile(path, tail);
    expect(await recoverIndexes(dir)).toEqual([1, 2, 3, 4, 5]);
    await expectZerosFrom(path, SEGMENT_HEADER_BYTES + 5 * FRAME_BYTES);
  }
});

it('a bad checksum on the last record with nothing after it is a torn tail', async () => {
  const dir = await logWith(4);
  const [path] = await segmentPaths(dir);
  if (path === undefined) throw new Error('no segment');
  await flipByte(path, SEGMENT_HEADER_BYTES + 3 * FRAME_BYTES + 50);
  expect(await recoverIndexes(dir)).toEqual([1, 2, 3]);
});

it('a byte flipped in the middle of a segment rejects with file and offset', async () => {
  const random = seeded();
  for (let round = 0; round < 6; round += 1) {
    const dir = await logWith(20);
    const [path] = await segmentPaths(dir);
    if (path === undefined) throw new Error('no segment');
    const record = 2 + random.next(15);
    const recordOffset = SEGMENT_HEADER_BYTES + record * FRAME_BYTES;
    await flipByte(path, recordOffset + random.next(FRAME_BYTES));
    const storage = new FileStorage(dir, options());
    const failure = await storage.recover().then(() => null, (error: unknown) => error);
    expect(failure, `seed=${random.seed}`).toBeInstanceOf(StorageCorruptionError);
    const error = failure as StorageCorruptionError;
    expect(error.file).toBe(path);
    expect(error.offset).toBe(recordOffset);
    expect(error.message).toContain(path);
    expect(error.message).toContain(`byte offset ${recordOffset}`);
    await expect(storage.sync()).rejects.toThrow(/refused/);
  }
});

it('damage at the end of an older segment is corruption, not a torn tail', async () => {
  const dir = await logWith(120, SMALL_SEGMENT_BYTES);
  const paths = await segmentPaths(dir);
  const older = paths[0];
  if (older === undefined || paths.length < 3) throw new Error('expected several segments');
  const size = (await stat(older)).size;
  await truncate(older, size - 5);
  await expect(recoverIndexes(dir, SMALL_SEGMENT_BYTES)).rejects.toThrow(older);
});

it('a missing middle segment is a hole and is refused', async () => {
  const dir = await logWith(120, SMALL_SEGMENT_BYTES);
  const paths = await segmentPaths(dir);
  if (paths.length < 3) throw new Error('expected several segments');
  await rm(paths[1] as string);
  await expect(recoverIndexes(dir, SMALL_SEGMENT_BYTES)).rejects.toThrow(StorageCorruptionError);
});

it('a newest segment torn inside its header is removed and the log ends before it', async () => {
  const dir = await logWith(120, SMALL_SEGMENT_BYTES);
  const paths = await segmentPaths(dir);
  const before = await recoverIndexes(dir, SMALL_SEGMENT_BYTES);
  const next = (before.at(-1) ?? 0) + 1;
  const torn = join(dir, 'wal', `${String(next).padStart(20, '0')}.wal`);
  await writeFile(torn, Buffer.from([0x48, 0x57, 0x41]));
  expect(await recoverIndexes(dir, SMALL_SEGMENT_BYTES)).toEqual(before);
  expect(await segmentPaths(dir)).toEqual(paths);
});

it('a record whose index breaks the sequence is refused even with a valid checksum', async () => {
  const dir = await logWith(3);
  const storage = new FileStorage(dir, options());
  await storage.recover();
  await storage.close();
  const [path] = await segmentPaths(dir);
  if (path === undefined) throw new Error('no segment');
  const bytes = await readFile(path);
  // Swap the 2nd and 3rd records: every checksum still holds, the order does not.
  const second = bytes.subarray(SEGMENT_HEADER_BYTES + FRAME_BYTES,
    SEGMENT_HEADER_BYTES + 2 * FRAME_BYTES);
  const third = bytes.subarray(SEGMENT_HEADER_BYTES + 2 * FRAME_BYTES);
  const swapped = Buffer.concat([bytes.subarray(0, SEGMENT_HEADER_BYTES + FRAME_BYTES),
    Buffer.from(third), Buffer.from(second)]);
  await writeFile(path, swapped);
  await expect(recoverIndexes(dir)).rejects.toThrow(
    `byte offset ${SEGMENT_HEADER_BYTES + FRAME_BYTES}`);
});
