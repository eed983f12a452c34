// The driver's side of snapshots (host/node/snapshotter.ts) over real files and the real
// machine: a snapshot taken in slices while entries apply between them restores to the
// state it began at; an aborted one leaves no file; a restore from a damaged file leaves the
// machine as it was; received chunks become an installed snapshot; chunks to a follower
// are filled from storage, in order; an earlier release's file, the driver's table ahead of
// the machine's bytes, still restores.
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterEach, expect, it } from 'vitest';

import type { SnapshotChunkMessage } from '../../host/core/raft/messages.js';
import type { SnapshotMeta } from '../../host/core/raft/types.js';
import { snapshotToBytes } from '../../host/machine/snapshot-bytes.js';
import type { Scheduler } from '../../host/node/scheduler.js';
import {
  ChunkSender, paceDelayMs, PACE_PREIMAGE_BYTES_MIN, restoreMachine, snapshotDue,
  SnapshotReceiver, Snapshotter,
} from '../../host/node/snapshotter.js';
import { FileStorage } from '../../host/storage/file-storage.js';
import { snapshotFileName } from '../../host/storage/snapshot-files.js';
import {
  SnapshotNoRoomError, type SnapshotSink, type Storage,
} from '../../host/storage/storage.js';
import { Harness, put } from '../model/machine-harness.js';

const dirs: string[] = [];
const storages: FileStorage[] = [];

afterEach(async () => {
  for (const s of storages.splice(0)) await s.close();
  for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
});

async function storageIn(): Promise<{ dir: string; storage: FileStorage }> {
  const dir = await mkdtemp(join(tmpdir(), 'hivekv-snapshotter-'));
  dirs.push(dir);
  const storage = new FileStorage(dir);
  await storage.recover();
  storages.push(storage);
  return { dir, storage };
}

function loaded(keys: number): Harness {
  const h = new Harness();
  for (let i = 0; i < keys; i += 100) {
    h.ok(Array.from({ length: Math.min(100, keys - i) },
      (_, j) => put(`k${String(i + j).padStart(5, '0')}`, `"${'v'.repeat((i + j) % 200)}"`)));
  }
  return h;
}

function metaOf(h: Harness): SnapshotMeta {
  return { index: h.m.appliedIndex, term: 1, timeMs: h.m.lastTimeMs, voters: ['n1'],
    learners: [], peers: [{ id: 'n1', address: '' }], removed: [] };
}

/** Storage whose snapshot writes run `between` first: entries apply between slices. */
function interleaving(storage: Storage, between: () => void): Storage {
  return Object.assign(Object.create(storage) as Storage, {
    createSnapshot: async (meta: SnapshotMeta, dataBytes: number): Promise<SnapshotSink> => {
      const sink = await storage.createSnapshot(meta, dataBytes);
      return { ...sink, write: (chunk: Uint8Array) => { between(); return sink.write(chunk); } };
    },
  });
}

it('a snapshot in slices, entries applying between them, restores to its begin state', async () => {
  const { storage } = await storageIn();
  const h = loaded(2000);
  const copy = new Harness();
  const at = metaOf(h);
  const digestAtBegin = h.m.digest();
  let n = 0;
  const snapshotter = new Snapshotter(h.m, interleaving(storage, () => {
    h.ok([put(`k${String(n * 37 % 2000).padStart(5, '0')}`, '"changed"'), put(`new${n}`, '1')]);
    n++;
  }), 4096);
  const taken = await snapshotter.take(at);
  expect(n).toBeGreaterThan(20);
  expect(taken).toEqual({ meta: at, dataBytes: expect.any(Number) as number });
  expect(h.m.memoryUse().preimageBytes).toBe(0);
  await restoreMachine(storage, copy.m, taken!, 1000);
  expect(copy.m.digest()).toBe(digestAtBegin);
  expect(copy.m.appliedIndex).toBe(at.index);
});

it('an aborted snapshot resolves null and leaves no file', async () => {
  const { dir, storage } = await storageIn();
  const h = loaded(500);
  let snapshotter: Snapshotter | null = null;
  let aborting: Promise<void> | null = null;
  snapshotter = new Snapshotter(h.m, interleaving(storage, () => {
    aborting ??= snapshotter!.abort();
  }), 1024);
  const taken = snapshotter.take(metaOf(h));
  expect(await taken).toBeNull();
  await aborting;
  expect(snapshotter.running).toBe(false);
  expect(await readdir(join(dir, 'snap'))).toEqual([]);
  expect(h.m.memoryUse().preimageBytes).toBe(0);
});

it('a pace waits out the bytes written ahead of it, and gives way to preimages', () => {
  const MiB = 1024 * 1024;
  // 4 MiB at 64 MiB/s are due 62.5 ms after the start.
  expect(paceDelayMs(1000, 1000, 4 * MiB, 64 * MiB, 0, 200 * MiB)).toBe(63);
  expect(paceDelayMs(1000, 1050, 4 * MiB, 64 * MiB, 0, 200 * MiB)).toBe(13);
  expect(paceDelayMs(1000, 1070, 4 * MiB, 64 * MiB, 0, 200 * MiB)).toBe(0);
  expect(paceDelayMs(1000, 1000, 4 * MiB, 0, 0, 200 * MiB)).toBe(0);
  // Preimages of an eighth of the snapshot (25 MiB here) end the waits; below it they wait.
  expect(paceDelayMs(1000, 1000, 4 * MiB, 64 * MiB, 25 * MiB - 1, 200 * MiB)).toBe(63);
  expect(paceDelayMs(1000, 1000, 4 * MiB, 64 * MiB, 25 * MiB, 200 * MiB)).toBe(0);
  // A small snapshot waits until its preimages reach PACE_PREIMAGE_BYTES_MIN.
  expect(paceDelayMs(1000, 1000, 4 * MiB, 64 * MiB, PACE_PREIMAGE_BYTES_MIN - 1, 8 * MiB))
    .toBe(63);
  expect(paceDelayMs(1000, 1000, 4 * MiB, 64 * MiB, PACE_PREIMAGE_BYTES_MIN, 8 * MiB)).toBe(0);
});

it('a snapshot is due at an interval, once the log holds its share of the last one', () => {
  const cadence = { everyEntries: 100, everyBytes: 1000, logPercent: 25 };
  // No snapshot yet: the interval alone decides.
  expect(snapshotDue(cadence, 99, 999, 0)).toBe(false);
  expect(snapshotDue(cadence, 100, 10, 0)).toBe(true);
  expect(snapshotDue(cadence, 5, 1000, 0)).toBe(true);
  // A last snapshot of 40,000 bytes: 10,000 bytes of log are wanted, whatever the count.
  expect(snapshotDue(cadence, 5000, 9_999, 40_000)).toBe(false);
  expect(snapshotDue(cadence, 5000, 10_000, 40_000)).toBe(true);
  // The share never makes a snapshot due before its interval.
  expect(snapshotDue(cadence, 99, 999, 100)).toBe(false);
  expect(snapshotDue({ ...cadence, logPercent: 0 }, 100, 0, 1e12)).toBe(true);
});

/** A clock that moves only when a timer it holds is run by hand. */
class ManualClock implements Scheduler {
  now = 5_000;
  readonly waits: number[] = [];
  private readonly timers: { atMs: number; callback: () => void; cancelled: boolean }[] = [];

  nowMs(): number {
    return this.now;
  }

  after(delayMs: number, callback: () => void): { cancel: () => void } {
    const timer = { atMs: this.now + delayMs, callback, cancelled: false };
    this.waits.push(delayMs);
    this.timers.push(timer);
    return { cancel: () => { timer.cancelled = true; } };
  }

  soon(callback: () => void): void {
    queueMicrotask(callback);
  }

  /** Runs the next timer, the clock moved to its time; false when none is pending. */
  runNext(): boolean {
    const timer = this.timers.shift();
    if (timer === undefined) return false;
    this.now = Math.max(this.now, timer.atMs);
    if (!timer.cancelled) timer.callback();
    return true;
  }

  get pending(): number {
    return this.timers.length;
  }
}

/** Lets every settled promise run its continuations, file I/O included. */
async function settle(clock: ManualClock): Promise<void> {
  for (let i = 0; i < 200 && clock.pending === 0; i++) {
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
}

it('a paced snapshot waits between slices on its scheduler and restores whole', async () => {
  const { storage } = await storageIn();
  const h = loaded(2000);
  const at = metaOf(h);
  const digestAtBegin = h.m.digest();
  const clock = new ManualClock();
  const sliceLengths: number[] = [];
  const recording = Object.assign(Object.create(storage) as Storage, {
    createSnapshot: async (meta: SnapshotMeta, dataBytes: number): Promise<SnapshotSink> => {
      const sink = await storage.createSnapshot(meta, dataBytes);
      return { ...sink, write: (chunk: Uint8Array) => {
        sliceLengths.push(chunk.length);
        return sink.write(chunk);
      } };
    },
  });
  // Slices of about 4 KiB at 64 KiB/s: each is due about 63 ms after the one before.
  const bytesPerSecond = 64 * 1024;
  const snapshotter = new Snapshotter(h.m, recording, 4096, { bytesPerSecond, scheduler: clock });
  const taken = snapshotter.take(at);
  let done = false;
  void taken.then(() => { done = true; });
  let slicesWaited = 0;
  for (; !done && slicesWaited < 1000; slicesWaited++) {
    await settle(clock);
    if (done) break;
    // A write meanwhile: the snapshot still holds the state it began with.
    h.ok([put(`k${String(slicesWaited).padStart(5, '0')}`, '"moved"')]);
    expect(clock.runNext()).toBe(true);
  }
  const snapshot = await taken;
  expect(snapshot?.dataBytes).toBeGreaterThan(4096 * 10);
  // One wait before every slice but the first, each as long as the slice before it takes
  // at the pace: the clock ends where the bytes before the last slice were due.
  expect(clock.waits).toHaveLength(sliceLengths.length - 1);
  for (const [i, wait] of clock.waits.entries()) {
    expect(Math.abs(wait - sliceLengths[i]! * 1000 / bytesPerSecond)).toBeLessThanOrEqual(1);
  }
  const beforeLast = snapshot!.dataBytes - sliceLengths.at(-1)!;
  expect(clock.now - 5_000).toBe(Math.ceil(beforeLast * 1000 / bytesPerSecond));
  const copy = new Harness();
  await restoreMachine(storage, copy.m, snapshot!, 1000);
  expect(copy.m.digest()).toBe(digestAtBegin);
});

it('a paced snapshot stops waiting once the log outgrows a snapshot interval', async () => {
  const { storage } = await storageIn();
  const h = loaded(2000);
  const clock = new ManualClock();
  let outgrew = false;
  const snapshotter = new Snapshotter(h.m, storage, 4096,
    { bytesPerSecond: 64 * 1024, scheduler: clock, logOutgrew: () => outgrew });
  const taken = snapshotter.take(metaOf(h));
  let done = false;
  void taken.then(() => { done = true; });
  // Three slices at the pace, then the log outgrows its interval: no wait after that.
  for (let i = 0; i < 3; i++) {
    await settle(clock);
    expect(clock.runNext()).toBe(true);
  }
  outgrew = true;
  for (let i = 0; i < 20 && !done; i++) await settle(clock);
  expect(done).toBe(true);
  expect(await taken).not.toBeNull();
  expect(clock.waits).toHaveLength(3);
  expect(clock.pending).toBe(0);
});

it('a snapshot taken unpaced on a paced snapshotter never waits', async () => {
  const { storage } = await storageIn();
  const h = loaded(2000);
  const clock = new ManualClock();
  const snapshotter = new Snapshotter(h.m, storage, 4096,
    { bytesPerSecond: 1024, scheduler: clock });
  const taken = await snapshotter.take(metaOf(h), false);
  expect(taken?.dataBytes).toBeGreaterThan(4096 * 10);
  expect(clock.waits).toEqual([]);
});

it('an abort ends a paced snapshot\'s wait at once and leaves no file', async () => {
  const { dir, storage } = await storageIn();
  const h = loaded(2000);
  const clock = new ManualClock();
  const snapshotter = new Snapshotter(h.m, storage, 4096,
    { bytesPerSecond: 1024, scheduler: clock });
  const taken = snapshotter.take(metaOf(h));
  await settle(clock);
  // The first slice (a little over 4 KiB) at 1 KiB/s: about four seconds to wait.
  expect(clock.waits).toHaveLength(1);
  expect(clock.waits[0]).toBeGreaterThanOrEqual(4000);
  await snapshotter.abort();
  expect(await taken).toBeNull();
  expect(snapshotter.running).toBe(false);
  expect(await readdir(join(dir, 'snap'))).toEqual([]);
  expect(h.m.memoryUse().preimageBytes).toBe(0);
});

it('a restore from a damaged file fails and leaves the machine as it was', async () => {
  const { dir, storage } = await storageIn();
  const h = loaded(300);
  const taken = await new Snapshotter(h.m, storage).take(metaOf(h));
  const path = join(dir, 'snap', snapshotFileName(taken!.meta.index));
  const bytes = await readFile(path);
  bytes[bytes.length - 50] = (bytes[bytes.length - 50] ?? 0) ^ 1;
  await writeFile(path, bytes);
  const other = loaded(10);
  const digest = other.m.digest();
  await expect(restoreMachine(storage, other.m, taken!, 512)).rejects.toThrow(/checksum/);
  expect(other.m.digest()).toBe(digest);
});

it('received chunks are written as they come, then installed; a dropped one goes', async () => {
  const { dir, storage } = await storageIn();
  const source = loaded(200);
  const { storage: sourceStorage } = await storageIn();
  const taken = await new Snapshotter(source.m, sourceStorage).take(metaOf(source));
  const receiver = new SnapshotReceiver(storage);
  const meta = taken!.meta;
  const total = taken!.dataBytes;
  // A first transfer is dropped half way.
  await receiver.write([{ type: 'chunk', meta, offset: 0, totalBytes: total,
    data: await sourceStorage.readSnapshot(meta.index, 0, 1000) }]);
  await receiver.write([{ type: 'abandon', meta }]);
  expect(await readdir(join(dir, 'snap'))).toEqual([]);
  for (let offset = 0; offset < total; offset += 1000) {
    const data = await sourceStorage.readSnapshot(meta.index, offset,
      Math.min(1000, total - offset));
    await receiver.write([{ type: 'chunk', meta, offset, totalBytes: total, data }]);
  }
  await receiver.complete({ meta, dataBytes: total });
  const restored = new Harness();
  await restoreMachine(storage, restored.m, { meta, dataBytes: total });
  expect(restored.m.digest()).toBe(source.m.digest());
  await expect(receiver.write([{ type: 'chunk', meta, offset: 5, totalBytes: total,
    data: new Uint8Array(1) }])).rejects.toThrow(/does not follow/);
});

it('a received snapshot storage has no room for is refused, its later chunks skipped',
  async () => {
    const dir = await mkdtemp(join(tmpdir(), 'hivekv-snapshotter-'));
    dirs.push(dir);
    let free = 1024;
    const storage = new FileStorage(dir, { readFreeBytes: () => free });
    await storage.recover();
    storages.push(storage);
    const source = loaded(200);
    const { storage: sourceStorage } = await storageIn();
    const taken = await new Snapshotter(source.m, sourceStorage).take(metaOf(source));
    const meta = taken!.meta;
    const total = taken!.dataBytes;
    const chunkAt = async (offset: number) => ({ type: 'chunk' as const, meta, offset,
      totalBytes: total, data: await sourceStorage.readSnapshot(meta.index, offset,
        Math.min(1000, total - offset)) });
    const receiver = new SnapshotReceiver(storage);
    // No room at its start: nothing is written, and the chunks after it are skipped.
    expect(await receiver.write([await chunkAt(0), await chunkAt(1000)]))
      .toEqual({ index: meta.index, totalBytes: total });
    expect(await receiver.write([await chunkAt(2000)])).toBeNull();
    expect(await readdir(join(dir, 'snap'))).toEqual([]);
    // The volume refuses bytes midway: storage removes the file, the receiver skips the rest.
    free = 1024 ** 4;
    let writes = 0;
    const refusing = Object.assign(Object.create(storage) as Storage, {
      createSnapshot: async (m: SnapshotMeta, bytes: number): Promise<SnapshotSink> => {
        const sink = await storage.createSnapshot(m, bytes);
        return { ...sink, write: async (chunk: Uint8Array) => {
          if (++writes === 2) {
            await sink.abort();
            throw new SnapshotNoRoomError(m.index, bytes, 'the volume refused its bytes');
          }
          return sink.write(chunk);
        } };
      },
    });
    const midway = new SnapshotReceiver(refusing);
    expect(await midway.write([await chunkAt(0), await chunkAt(1000), await chunkAt(2000)]))
      .toEqual({ index: meta.index, totalBytes: total });
    expect(await readdir(join(dir, 'snap'))).toEqual([]);
    // Sent again from its start, every byte written, and its final fsync refused: the same.
    const steps = [];
    for (let offset = 0; offset < total; offset += 1000) steps.push(await chunkAt(offset));
    const finishRefused = new SnapshotReceiver(Object.assign(Object.create(storage) as Storage, {
      createSnapshot: async (m: SnapshotMeta, bytes: number): Promise<SnapshotSink> => {
        const sink = await storage.createSnapshot(m, bytes);
        return { ...sink, finish: async () => {
          await sink.abort();
          throw new SnapshotNoRoomError(m.index, bytes, 'the volume refused its bytes');
        } };
      },
    }));
    expect(await finishRefused.write(steps)).toEqual({ index: meta.index, totalBytes: total });
    expect(finishRefused.wholeIndex()).toBe(-1);
    expect(await readdir(join(dir, 'snap'))).toEqual([]);
    // Sent again, it is taken whole: durable before the driver tells the core.
    expect(await midway.write(steps)).toBeNull();
    expect(midway.wholeIndex()).toBe(meta.index);
    await midway.complete({ meta, dataBytes: total });
    const restored = new Harness();
    await restoreMachine(storage, restored.m, { meta, dataBytes: total });
    expect(restored.m.digest()).toBe(source.m.digest());
  });

it('chunks to followers are filled from storage, in order per follower', async () => {
  const { storage } = await storageIn();
  const h = loaded(300);
  const taken = await new Snapshotter(h.m, storage).take(metaOf(h));
  const sent: SnapshotChunkMessage[] = [];
  const unreadable: number[] = [];
  const sender = new ChunkSender(storage, (m) => sent.push(m), (m) => unreadable.push(m.offset));
  const chunk = (to: string, offset: number, index = taken!.meta.index): SnapshotChunkMessage =>
    ({ type: 'snapshotChunk', from: 'n1', to, term: 1, meta: { ...taken!.meta, index },
      offset, totalBytes: taken!.dataBytes, chunkBytes: 100, data: new Uint8Array(0) });
  for (let i = 0; i < 20; i++) sender.post(chunk(i % 2 === 0 ? 'n2' : 'n3', i * 100));
  sender.post(chunk('n2', 0, 999));
  await sender.drain();
  expect(unreadable).toEqual([0]);
  expect(sent.filter((m) => m.to === 'n2').map((m) => m.offset))
    .toEqual([0, 200, 400, 600, 800, 1000, 1200, 1400, 1600, 1800]);
  for (const m of sent) {
    expect(m.data).toEqual(await storage.readSnapshot(m.meta.index, m.offset, 100));
  }
});

it('an earlier release\'s file, its dedup table ahead of the machine\'s, restores', async () => {
  const { storage } = await storageIn();
  const h = loaded(400);
  const machineBytes = snapshotToBytes(h.m);
  const table = new TextEncoder().encode('[["1:n1",7,3,[7]]]');
  const legacy = new Uint8Array(8 + table.length + machineBytes.length);
  const view = new DataView(legacy.buffer);
  view.setUint32(0, 0x48_4b_53_31, true);
  view.setUint32(4, table.length, true);
  legacy.set(table, 8);
  legacy.set(machineBytes, 8 + table.length);
  const meta = metaOf(h);
  const sink = await storage.createSnapshot(meta, legacy.length);
  for (let at = 0; at < legacy.length; at += 333) {
    await sink.write(legacy.subarray(at, at + 333));
  }
  expect(await sink.commit()).toBe(true);
  const restored = new Harness();
  await restoreMachine(storage, restored.m, { meta, dataBytes: legacy.length }, 5);
  expect(restored.m.digest()).toBe(h.m.digest());
});
