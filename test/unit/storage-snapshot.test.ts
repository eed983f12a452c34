// Hard state and snapshots on real files: atomic replace, the commitIndex-only rule, a
// corrupt hard state refused, snapshot then recovery (snapshot + later entries, covered
// segments gone), keeping two, and the fallback rule for a damaged newest snapshot.
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterEach, expect, it } from 'vitest';

import type { Entry, SnapshotMeta } from '../../host/core/raft/types.js';
import { FileStorage } from '../../host/storage/file-storage.js';
import { saveSnapshotBytes, StorageCorruptionError } from '../../host/storage/storage.js';

const SMALL_SEGMENT_BYTES = 4096;
const dirs: string[] = [];

afterEach(async () => {
  for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
});

async function freshDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'hivekv-snap-'));
  dirs.push(dir);
  return dir;
}

function entries(from: number, count: number, term = 1): Entry[] {
  return Array.from({ length: count }, (_, i) => ({
    term, index: from + i, timeMs: 9_000 + from + i, type: 'normal' as const,
    data: Uint8Array.from({ length: 120 }, (_, j) => (from + i) * 3 + j),
  }));
}

function meta(index: number, term = 1): SnapshotMeta {
  return { index, term, timeMs: 9_000 + index, voters: ['n1', 'n2', 'n3'], learners: ['n4'],
    peers: [{ id: 'n1', address: '10.0.0.1:7001' }, { id: 'n2', address: '10.0.0.2:7001' },
      { id: 'n3', address: '' }, { id: 'n4', address: '10.0.0.4:7001' }], removed: ['n0'] };
}

function machineBytes(index: number): Uint8Array {
  return Uint8Array.from({ length: 3_000 }, (_, i) => (index + i * 13) & 0xff);
}

async function open(dir: string, segmentBytesMax = SMALL_SEGMENT_BYTES) {
  const storage = new FileStorage(dir, { segmentBytesMax });
  const state = await storage.recover();
  return { storage, state };
}

async function recoverOnce(dir: string, segmentBytesMax = SMALL_SEGMENT_BYTES) {
  const { storage, state } = await open(dir, segmentBytesMax);
  await storage.close();
  return state;
}

/** Recovers, and reads the recovered snapshot's data back in small chunks. */
async function recoverWithData(dir: string, segmentBytesMax = SMALL_SEGMENT_BYTES) {
  const { storage, state } = await open(dir, segmentBytesMax);
  let data: Uint8Array | null = null;
  if (state.snapshot !== null) {
    const parts: Uint8Array[] = [];
    for await (const chunk of storage.snapshotChunks(state.snapshot.meta.index, 700)) {
      parts.push(chunk);
    }
    data = new Uint8Array(Buffer.concat(parts));
  }
  await storage.close();
  return { state, data };
}

it('hard state survives a reopen; commitIndex is clamped to the durable log', async () => {
  const dir = await freshDir();
  const { storage } = await open(dir);
  storage.append(entries(1, 5));
  storage.setHardState({ term: 3, votedFor: 'n2', commitIndex: 9 });
  await storage.sync();
  await storage.close();
  expect((await recoverOnce(dir)).hardState).toEqual({ term: 3, votedFor: 'n2', commitIndex: 5 });
});

it('a commitIndex-only change is not written until a term or vote changes', async () => {
  const dir = await freshDir();
  const { storage } = await open(dir);
  storage.append(entries(1, 8));
  storage.setHardState({ term: 2, votedFor: null, commitIndex: 1 });
  await storage.sync();
  const written = await readFile(join(dir, 'hardstate'));
  storage.setHardState({ term: 2, votedFor: null, commitIndex: 6 });
  await storage.sync();
  expect(await readFile(join(dir, 'hardstate'))).toEqual(written);
  storage.setHardState({ term: 2, votedFor: 'n3', commitIndex: 7 });
  await storage.sync();
  await storage.close();
  expect((await recoverOnce(dir)).hardState).toEqual({ term: 2, votedFor: 'n3', commitIndex: 7 });
});

it('a leftover hardstate.tmp from a crash mid-replace is ignored and removed', async () => {
  const dir = await freshDir();
  const { storage } = await open(dir);
  storage.setHardState({ term: 4, votedFor: 'n1', commitIndex: 0 });
  await storage.sync();
  await storage.close();
  await writeFile(join(dir, 'hardstate.tmp'), Buffer.from('half a new hard state'));
  expect((await recoverOnce(dir)).hardState).toEqual({ term: 4, votedFor: 'n1', commitIndex: 0 });
  expect(await readdir(dir)).not.toContain('hardstate.tmp');
});

it('a corrupt hard state refuses recovery, naming the file', async () => {
  const dir = await freshDir();
  const { storage } = await open(dir);
  storage.setHardState({ term: 4, votedFor: 'n1', commitIndex: 0 });
  await storage.sync();
  await storage.close();
  const path = join(dir, 'hardstate');
  const bytes = await readFile(path);
  bytes[9] = (bytes[9] ?? 0) ^ 1;
  await writeFile(path, bytes);
  const failure = await recoverOnce(dir).then(() => null, (error: unknown) => error);
  expect(failure).toBeInstanceOf(StorageCorruptionError);
  expect(String(failure)).toContain(path);
});

it('after a snapshot, recovery gives the snapshot and only later entries', async () => {
  const dir = await freshDir();
  const { storage } = await open(dir);
  storage.append(entries(1, 100));
  storage.setHardState({ term: 1, votedFor: 'n1', commitIndex: 90 });
  await storage.sync();
  const segmentsBefore = (await walSegments(dir)).sort();
  await saveSnapshotBytes(storage, meta(60), machineBytes(60));
  const segmentsAfter = (await walSegments(dir)).sort();
  expect(segmentsAfter.length).toBeLessThan(segmentsBefore.length);
  expect(Number(segmentsAfter[0]?.slice(0, 20))).toBeLessThanOrEqual(61);
  expect(() => storage.append(entries(60, 1, 2))).toThrow(/snapshot/);
  storage.append(entries(101, 5));
  await storage.sync();
  await storage.close();
  const { state, data } = await recoverWithData(dir);
  expect(state.snapshot).toEqual({ meta: meta(60), dataBytes: machineBytes(60).length });
  expect(data).toEqual(machineBytes(60));
  expect(state.entries).toEqual(entries(61, 45));
  expect(state.hardState.commitIndex).toBe(90);
});

it('a snapshot past the end of the log restarts the log after it', async () => {
  const dir = await freshDir();
  const { storage } = await open(dir);
  storage.append(entries(1, 10));
  await storage.sync();
  await saveSnapshotBytes(storage, meta(30, 2), machineBytes(30));
  expect(await walSegments(dir)).toEqual([]);
  storage.append(entries(31, 3, 2));
  await storage.sync();
  await storage.close();
  const state = await recoverOnce(dir);
  expect(state.snapshot?.meta.index).toBe(30);
  expect(state.entries).toEqual(entries(31, 3, 2));
});

it('a snapshot at the end of the log keeps the segment being written, and the log goes on in it',
  async () => {
    const dir = await freshDir();
    const { storage } = await open(dir, 1024 * 1024);
    storage.append(entries(1, 10));
    await storage.sync();
    const segments = await walSegments(dir);
    expect(segments).toHaveLength(1);
    await saveSnapshotBytes(storage, meta(10), machineBytes(10));
    expect(await walSegments(dir)).toEqual(segments);
    storage.append(entries(11, 3));
    await storage.sync();
    await storage.close();
    expect(await walSegments(dir)).toEqual(segments);
    const state = await recoverOnce(dir, 1024 * 1024);
    expect(state.snapshot?.meta.index).toBe(10);
    expect(state.entries).toEqual(entries(11, 3));
    // Reopened with the snapshot at the log's end, the segment stays too.
    const again = await open(dir, 1024 * 1024);
    await saveSnapshotBytes(again.storage, meta(13), machineBytes(13));
    await again.storage.close();
    expect(await walSegments(dir)).toEqual(segments);
    const last = await recoverOnce(dir, 1024 * 1024);
    expect(last.snapshot?.meta.index).toBe(13);
    expect(last.entries).toEqual([]);
    expect(await walSegments(dir)).toEqual(segments);
  });

it('only the newest two snapshots are kept', async () => {
  const dir = await freshDir();
  const { storage } = await open(dir);
  storage.append(entries(1, 40));
  await storage.sync();
  for (const index of [10, 20, 30]) {
    await saveSnapshotBytes(storage, meta(index), machineBytes(index));
  }
  await storage.close();
  expect((await readdir(join(dir, 'snap'))).sort()).toEqual(
    ['00000000000000000020.snap', '00000000000000000030.snap']);
});

async function damageNewestSnapshot(dir: string): Promise<string> {
  const names = (await readdir(join(dir, 'snap'))).sort();
  const path = join(dir, 'snap', names.at(-1) as string);
  const bytes = await readFile(path);
  const offset = Math.floor(bytes.byteLength / 2);
  bytes[offset] = (bytes[offset] ?? 0) ^ 0x10;
  await writeFile(path, bytes);
  return path;
}

it('a damaged newest snapshot falls back to the previous one when the log covers it', async () => {
  const dir = await freshDir();
  // One large segment: the log still holds everything after the older snapshot.
  const { storage } = await open(dir, 1024 * 1024);
  storage.append(entries(1, 50));
  await storage.sync();
  await saveSnapshotBytes(storage, meta(20), machineBytes(20));
  await saveSnapshotBytes(storage, meta(40), machineBytes(40));
  await storage.close();
  const damaged = await damageNewestSnapshot(dir);
  const { state, data } = await recoverWithData(dir, 1024 * 1024);
  expect(state.snapshot?.meta).toEqual(meta(20));
  expect(data).toEqual(machineBytes(20));
  expect(state.entries).toEqual(entries(21, 30));
  expect((await stat(`${damaged}.corrupt`)).isFile()).toBe(true);
});

it('a damaged newest snapshot is refused when the log no longer covers the gap', async () => {
  const dir = await freshDir();
  const { storage } = await open(dir);
  storage.append(entries(1, 120));
  await storage.sync();
  await saveSnapshotBytes(storage, meta(20), machineBytes(20));
  await saveSnapshotBytes(storage, meta(100), machineBytes(100));
  await storage.close();
  const damaged = await damageNewestSnapshot(dir);
  const failure = await recoverOnce(dir).then(() => null, (error: unknown) => error);
  expect(failure).toBeInstanceOf(StorageCorruptionError);
  expect((failure as StorageCorruptionError).file).toBe(damaged);
  expect(String(failure)).toMatch(/does not cover/);
});

it('a lone damaged snapshot is refused, naming the file', async () => {
  const dir = await freshDir();
  const { storage } = await open(dir);
  storage.append(entries(1, 10));
  await storage.sync();
  await saveSnapshotBytes(storage, meta(5), machineBytes(5));
  await storage.close();
  const damaged = await damageNewestSnapshot(dir);
  await expect(recoverOnce(dir)).rejects.toThrow(damaged);
});

it('a snapshot whose term conflicts with the log at its index discards the log (§7)', async () => {
  const dir = await freshDir();
  const { storage } = await open(dir);
  storage.append(entries(1, 40, 1));
  await storage.sync();
  await saveSnapshotBytes(storage, meta(25, 3), machineBytes(25));
  expect(await walSegments(dir)).toEqual([]);
  storage.append(entries(26, 2, 3));
  await storage.sync();
  await storage.close();
  const state = await recoverOnce(dir);
  expect(state.snapshot?.meta).toEqual(meta(25, 3));
  expect(state.entries).toEqual(entries(26, 2, 3));
});

it('a snapshot whose term matches the log at its index keeps the later entries (§7)', async () => {
  const dir = await freshDir();
  const { storage } = await open(dir, 1024 * 1024);
  storage.append([...entries(1, 20, 1), ...entries(21, 20, 2)]);
  storage.append(entries(41, 3, 2));
  await saveSnapshotBytes(storage, meta(30, 2), machineBytes(30));
  await storage.close();
  const state = await recoverOnce(dir, 1024 * 1024);
  expect(state.entries.map((e) => e.index)).toEqual(
    Array.from({ length: 13 }, (_, i) => 31 + i));
});

/** The WAL's segment files, without the zero-filled spare it keeps ready. */
async function walSegments(dir: string): Promise<string[]> {
  return (await readdir(join(dir, 'wal'))).filter((name) => name.endsWith('.wal'));
}

it('a snapshot being written holds the room it has yet to take from another', async () => {
  // A follower's own snapshot and one from its leader may be written side by side: each
  // checked the free space against its own size only, and both could run the volume out.
  const MIB = 1024 * 1024;
  const dir = await freshDir();
  const storage = new FileStorage(dir, { segmentBytesMax: SMALL_SEGMENT_BYTES,
    preallocate: false, readFreeBytes: () => 100 * MIB });
  await storage.recover();
  expect(storage.snapshotRoomBytes()).toBe(96 * MIB);
  const own = await storage.createSnapshot(meta(5), 60 * MIB);
  expect(storage.snapshotRoomBytes()).toBe(36 * MIB);
  await own.write(new Uint8Array(MIB));
  // A byte written is off the free space the file system reports, not reserved twice; the
  // reading here is fixed, so the room grows by it.
  expect(storage.snapshotRoomBytes()).toBe(37 * MIB);
  await expect(storage.createSnapshot(meta(6), 50 * MIB)).rejects.toThrow(
    /a snapshot being written has yet to take/);
  const small = await storage.createSnapshot(meta(7), 30 * MIB);
  await small.abort();
  await own.abort();
  expect(storage.snapshotRoomBytes()).toBe(96 * MIB);
  const after = await storage.createSnapshot(meta(8), 50 * MIB);
  await after.abort();
  await storage.close();
});
