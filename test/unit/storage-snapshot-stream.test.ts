// Snapshots written and read as streams (host/storage/snapshot-files.ts, file-storage.ts):
// slices in, the same file as a whole write; chunks out, with the checksum checked before
// the last one; temp files that never outlive an abort or a restart; ranges for followers
// read from a verified file, still readable after it is pruned.
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterEach, expect, it } from 'vitest';

import type { SnapshotMeta } from '../../host/core/raft/types.js';
import { DataDir, DataDirError } from '../../host/replay/data-dir.js';
import { FileStorage } from '../../host/storage/file-storage.js';
import {
  SNAPSHOT_SYNC_STEP_BYTES, SnapshotFileError, SnapshotFileReader, SnapshotFileWriter,
  snapshotFileName,
  writeSnapshotFile,
} from '../../host/storage/snapshot-files.js';
import { saveSnapshotBytes, StorageCorruptionError } from '../../host/storage/storage.js';

const dirs: string[] = [];

afterEach(async () => {
  for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
});

async function freshDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'hivekv-snapstream-'));
  dirs.push(dir);
  return dir;
}

function meta(index: number, term = 1): SnapshotMeta {
  return { index, term, timeMs: 9_000 + index, voters: ['n1', 'n2', 'n3'],
    learners: [], peers: ['n1', 'n2', 'n3'].map((id) => ({ id, address: '' })), removed: [] };
}

function data(index: number, length = 10_000): Uint8Array {
  return Uint8Array.from({ length }, (_, i) => (index * 7 + i * 31) & 0xff);
}

async function openStorage(dir: string) {
  const storage = new FileStorage(dir, { segmentBytesMax: 4096 });
  const state = await storage.recover();
  return { storage, state };
}

async function readAll(chunks: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const parts: Uint8Array[] = [];
  for await (const chunk of chunks) parts.push(chunk);
  return Buffer.concat(parts);
}

it('a snapshot written in slices is the same file as one written whole', async () => {
  const dir = await freshDir();
  const bytes = data(5);
  await writeSnapshotFile(dir, meta(5), bytes);
  const whole = await readFile(join(dir, snapshotFileName(5)));
  await rm(join(dir, snapshotFileName(5)));
  const writer = await SnapshotFileWriter.create(dir, meta(5), bytes.length);
  for (let at = 0; at < bytes.length; at += 333) await writer.write(bytes.subarray(at, at + 333));
  await writer.finish();
  await writer.publish();
  expect(await readFile(join(dir, snapshotFileName(5)))).toEqual(whole);
  const reader = await SnapshotFileReader.open(dir, 5);
  expect(reader.meta).toEqual(meta(5));
  expect(await readAll(reader.chunks(1000))).toEqual(Buffer.from(bytes));
  expect(await reader.read(100, 7)).toEqual(Buffer.from(bytes.subarray(100, 107)));
  await reader.close();
});

it('a writer refuses bytes past its size and a finish short of it', async () => {
  const dir = await freshDir();
  const writer = await SnapshotFileWriter.create(dir, meta(3), 4);
  await expect(writer.write(new Uint8Array(5))).rejects.toThrow(/passes 4 bytes/);
  await writer.write(new Uint8Array(3));
  await expect(writer.finish()).rejects.toThrow(/3 of 4 bytes/);
  await writer.abort();
  expect(await readdir(dir)).toEqual([]);
});

it('the checksum is checked before the last chunk: a flipped bit never gets through', async () => {
  const dir = await freshDir();
  await writeSnapshotFile(dir, meta(8), data(8));
  const path = join(dir, snapshotFileName(8));
  const bytes = await readFile(path);
  bytes[bytes.length - 100] = (bytes[bytes.length - 100] ?? 0) ^ 0x04;
  await writeFile(path, bytes);
  // Chunks of their own, and transient chunks taking turns in two buffers, alike.
  for (const transient of [false, true]) {
    const reader = await SnapshotFileReader.open(dir, 8);
    let got = 0;
    const failure = await (async () => {
      for await (const chunk of reader.chunks(1024, transient)) got += chunk.length > 0 ? 1 : 0;
    })().then(() => null, (error: unknown) => error);
    await reader.close();
    expect(failure, `transient ${transient}`).toBeInstanceOf(SnapshotFileError);
    expect(String(failure)).toMatch(/checksum mismatch/);
    // Everything but the last chunk came out; the damaged tail never did.
    expect(got).toBe(Math.ceil(10_000 / 1024) - 1);
  }
});

it('transient chunks reuse two buffers and, copied, give the same data', async () => {
  const dir = await freshDir();
  const bytes = data(9, 10_000);
  await writeSnapshotFile(dir, meta(9), bytes);
  const reader = await SnapshotFileReader.open(dir, 9);
  const copies: Uint8Array[] = [];
  // A place in memory: small buffers may share one pool's ArrayBuffer at different offsets.
  const ids = new Map<ArrayBufferLike, number>();
  const buffers = new Set<string>();
  for await (const chunk of reader.chunks(1024, true)) {
    copies.push(chunk.slice());
    if (!ids.has(chunk.buffer)) ids.set(chunk.buffer, ids.size);
    buffers.add(`${ids.get(chunk.buffer)}:${chunk.byteOffset}`);
  }
  expect(Buffer.concat(copies).equals(Buffer.from(bytes))).toBe(true);
  expect(copies.map((c) => c.length)).toEqual([...Array<number>(9).fill(1024), 10_000 - 9 * 1024]);
  expect(buffers.size).toBe(2);
  // A consumer that stops early leaves a read ahead in flight; closing waits it out.
  for await (const chunk of reader.chunks(1024, true)) if (chunk.length > 0) break;
  await reader.close();
});

it('an empty snapshot streams as one empty chunk', async () => {
  const dir = await freshDir();
  await writeSnapshotFile(dir, meta(2), new Uint8Array(0));
  const reader = await SnapshotFileReader.open(dir, 2);
  const chunks: Uint8Array[] = [];
  for await (const chunk of reader.chunks(64)) chunks.push(chunk);
  await reader.close();
  expect(chunks.map((c) => c.length)).toEqual([0]);
});

it('an aborted snapshot leaves nothing; a crash leftover is removed at recovery', async () => {
  const dir = await freshDir();
  const { storage } = await openStorage(dir);
  const sink = await storage.createSnapshot(meta(4), 100);
  await sink.write(new Uint8Array(40));
  expect((await readdir(join(dir, 'snap'))).some((n) => n.endsWith('.tmp'))).toBe(true);
  await sink.abort();
  expect(await readdir(join(dir, 'snap'))).toEqual([]);
  await storage.close();
  // What a crash in the middle of a snapshot leaves behind.
  await writeFile(join(dir, 'snap', `${snapshotFileName(5)}.3.tmp`), new Uint8Array(40));
  const { storage: again, state } = await openStorage(dir);
  await again.close();
  expect(state.snapshot).toBeNull();
  expect(await readdir(join(dir, 'snap'))).toEqual([]);
});

it('a snapshot that lost the race to a newer one is not installed', async () => {
  const dir = await freshDir();
  const { storage } = await openStorage(dir);
  const older = await storage.createSnapshot(meta(10), 3);
  await older.write(new Uint8Array(3));
  expect(await saveSnapshotBytes(storage, meta(20), data(20, 30))).toBe(true);
  expect(await older.commit()).toBe(false);
  expect((await readdir(join(dir, 'snap'))).sort()).toEqual([snapshotFileName(20)]);
  await expect(storage.createSnapshot(meta(15), 3)).rejects.toThrow(/older than 20/);
  await storage.close();
});

it('chunks for followers come from a verified file, even after it was pruned', async () => {
  const dir = await freshDir();
  const { storage } = await openStorage(dir);
  await saveSnapshotBytes(storage, meta(10), data(10));
  expect(await storage.readSnapshot(10, 9_990, 10)).toEqual(Buffer.from(data(10).subarray(9_990)));
  // Two newer snapshots prune the file; the open handle still reads it.
  await saveSnapshotBytes(storage, meta(20), data(20));
  await saveSnapshotBytes(storage, meta(30), data(30));
  expect(await readdir(join(dir, 'snap'))).not.toContain(snapshotFileName(10));
  expect(await storage.readSnapshot(10, 0, 5)).toEqual(Buffer.from(data(10).subarray(0, 5)));
  await expect(storage.readSnapshot(30, 9_999, 2)).rejects.toThrow(/outside/);
  await expect(storage.readSnapshot(7, 0, 1)).rejects.toMatchObject({ code: 'ENOENT' });
  await storage.close();
});

it('a damaged file sends no chunk to followers and no restore gets its end', async () => {
  const dir = await freshDir();
  const { storage } = await openStorage(dir);
  await saveSnapshotBytes(storage, meta(10), data(10));
  const path = join(dir, 'snap', snapshotFileName(10));
  const bytes = await readFile(path);
  bytes[200] = (bytes[200] ?? 0) ^ 0x80;
  await writeFile(path, bytes);
  await expect(storage.readSnapshot(10, 0, 10)).rejects.toThrow(/checksum mismatch/);
  await expect(readAll(storage.snapshotChunks(10, 4096)))
    .rejects.toBeInstanceOf(StorageCorruptionError);
  await storage.close();
});

it('a snapshot is fdatasynced in steps as it is written, not only at the end', async () => {
  const dir = await freshDir();
  const step = SNAPSHOT_SYNC_STEP_BYTES;
  const bytes = data(7, Math.floor(step * 3.5));
  const syncs: number[] = [];
  const writer = await SnapshotFileWriter.create(dir, meta(7), bytes.length, (s) => syncs.push(s));
  const slice = Math.floor(step / 4) + 1;
  const afterEachSlice: number[] = [];
  for (let at = 0; at < bytes.length; at += slice) {
    await writer.write(bytes.subarray(at, at + slice));
    afterEachSlice.push(syncs.length);
  }
  // Three full steps of dirty data were flushed while writing, each once it was a step.
  expect(syncs).toHaveLength(3);
  expect(afterEachSlice.indexOf(1)).toBe(3);
  await writer.finish();
  await writer.publish();
  // Then the end's fdatasync and the directory's fsync.
  expect(syncs).toHaveLength(5);
  const reread = await readFile(join(dir, snapshotFileName(7)));
  // Compared as buffers: a deep equality over 3.5 MiB, element by element, takes half a minute.
  const body = reread.subarray(reread.length - 4 - bytes.length, reread.length - 4);
  expect(body.length).toBe(bytes.length);
  expect(body.equals(bytes)).toBe(true);
});

/** The snapshot files and temp files of a data directory, by name. */
async function snapNames(dir: string): Promise<string[]> {
  return (await readdir(join(dir, 'snap'))).sort();
}

it('an old snapshot becomes the spare the next is written over, cut to its length', async () => {
  const dir = await freshDir();
  const { storage } = await openStorage(dir);
  // The oldest is the longest, so the snapshot written over it must cut it.
  await saveSnapshotBytes(storage, meta(10), data(10, 30_000));
  await saveSnapshotBytes(storage, meta(20), data(20));
  const oldest = await stat(join(dir, 'snap', snapshotFileName(10)));
  await saveSnapshotBytes(storage, meta(30), data(30));
  const names = await snapNames(dir);
  expect(names.filter((n) => n.endsWith('.snap')))
    .toEqual([snapshotFileName(20), snapshotFileName(30)]);
  const spares = names.filter((n) => n.startsWith('spare.') && n.endsWith('.tmp'));
  expect(spares).toHaveLength(1);
  expect((await stat(join(dir, 'snap', spares[0]!))).ino).toBe(oldest.ino);

  await saveSnapshotBytes(storage, meta(40), data(40, 2_000));
  const written = await stat(join(dir, 'snap', snapshotFileName(40)));
  expect(written.ino).toBe(oldest.ino);
  expect(await readAll(storage.snapshotChunks(40, 512))).toEqual(Buffer.from(data(40, 2_000)));
  const reader = await SnapshotFileReader.open(join(dir, 'snap'), 40);
  await reader.verify();
  await reader.close();
  expect((await snapNames(dir)).filter((n) => n.endsWith('.tmp'))).toHaveLength(1);

  // At rest only the snapshots kept remain, and a restart finds the newest.
  await storage.close();
  expect(await snapNames(dir)).toEqual([snapshotFileName(30), snapshotFileName(40)]);
  const again = await openStorage(dir);
  expect(again.state.snapshot?.meta.index).toBe(40);
  await again.storage.close();
});

it('a snapshot a transfer or a stream still reads is removed, never written over', async () => {
  const dir = await freshDir();
  const { storage } = await openStorage(dir);
  await saveSnapshotBytes(storage, meta(10), data(10));
  await saveSnapshotBytes(storage, meta(20), data(20));
  // A stream on 20 that has begun to read; a transfer's reader on 10.
  const stream = storage.snapshotChunks(20, 1_000);
  const first = await stream.next();
  expect(await storage.readSnapshot(10, 0, 4)).toEqual(Buffer.from(data(10).subarray(0, 4)));

  await saveSnapshotBytes(storage, meta(30), data(30));
  await saveSnapshotBytes(storage, meta(40), data(40));
  await saveSnapshotBytes(storage, meta(50), data(50));
  expect((await snapNames(dir)).filter((n) => n.endsWith('.tmp'))).toHaveLength(1);
  // Neither file was written over: both still read as they were.
  const rest = await readAll({ [Symbol.asyncIterator]: () => stream });
  expect(Buffer.concat([first.value as Uint8Array, rest])).toEqual(Buffer.from(data(20)));
  expect(await storage.readSnapshot(10, 9_000, 1_000))
    .toEqual(Buffer.from(data(10).subarray(9_000)));
  await storage.close();
});

it('a spare removed from under the node is no failure: the next one gets a new file', async () => {
  const dir = await freshDir();
  const { storage } = await openStorage(dir);
  for (const index of [10, 20, 30]) await saveSnapshotBytes(storage, meta(index), data(index));
  const [spare] = (await snapNames(dir)).filter((n) => n.endsWith('.tmp'));
  expect(spare).toBeDefined();
  await rm(join(dir, 'snap', spare!));
  await saveSnapshotBytes(storage, meta(40), data(40));
  expect(await readAll(storage.snapshotChunks(40, 4_096))).toEqual(Buffer.from(data(40)));
  await storage.close();
  expect(await snapNames(dir)).toEqual([snapshotFileName(30), snapshotFileName(40)]);
});

it('a spare a crash left behind is removed at the next start, which finds the newest', async () => {
  const dir = await freshDir();
  const { storage } = await openStorage(dir);
  for (const index of [10, 20, 30]) await saveSnapshotBytes(storage, meta(index), data(index));
  expect((await snapNames(dir)).filter((n) => n.startsWith('spare.'))).toHaveLength(1);
  // No close: the process died with its spare in place.
  const again = await openStorage(dir);
  expect(await snapNames(dir)).toEqual([snapshotFileName(20), snapshotFileName(30)]);
  expect(again.state.snapshot?.meta.index).toBe(30);
  expect(await readAll(again.storage.snapshotChunks(30, 4_096))).toEqual(Buffer.from(data(30)));
  await again.storage.close();
  await storage.close();
});

it('while the disk is short of space, an old snapshot is removed, not kept as a spare',
  async () => {
    const dir = await freshDir();
    const storage = new FileStorage(dir, { segmentBytesMax: 4096,
      minFreeBytes: Number.MAX_SAFE_INTEGER });
    await storage.recover();
    expect(storage.isLowOnSpace()).toBe(true);
    for (const index of [10, 20, 30]) await saveSnapshotBytes(storage, meta(index), data(index));
    expect(await snapNames(dir)).toEqual([snapshotFileName(20), snapshotFileName(30)]);
    await storage.close();
  });

it('a tool whose snapshot the serving node writes over says so; damage stays damage',
  async () => {
    const dir = await freshDir();
    const { storage } = await openStorage(dir);
    const big = (index: number) => data(index, 200_000);
    await saveSnapshotBytes(storage, meta(10), big(10));
    await saveSnapshotBytes(storage, meta(20), big(20));
    const tool = await DataDir.open(dir);
    const chunks = tool.snapshotChunks(20, 4_096);
    await chunks.next();
    // 20's file becomes the spare when 40 is installed, and 50 is written over it.
    for (const index of [30, 40, 50]) await saveSnapshotBytes(storage, meta(index), big(index));
    const failure = await readAll({ [Symbol.asyncIterator]: () => chunks })
      .then(() => null, (error: unknown) => error);
    expect(failure).toBeInstanceOf(DataDirError);
    expect((failure as Error).message).toMatch(/written over while it was read/);

    // A file that keeps its name and fails its check is damaged, and reported so.
    const path = join(dir, 'snap', snapshotFileName(50));
    const bytes = await readFile(path);
    bytes[1_000] = (bytes[1_000] ?? 0) ^ 0x01;
    await writeFile(path, bytes);
    const damaged = await readAll(tool.snapshotChunks(50, 4_096))
      .then(() => null, (error: unknown) => error);
    expect(damaged).toBeInstanceOf(StorageCorruptionError);
    await storage.close();
  });
