/**
 * The write-ahead log on disk: segment files in `<dir>/wal/`, each named by the index of its
 * first record and rolled at a bounded size, holding the framed records of record.ts.
 *
 * `append` encodes into memory; `writeThrough` copies the records to the page cache at once
 * when no flush runs and nothing has to be made durable before them, and `flush` (called by
 * FileStorage.sync under its lock) writes what is left and fdatasyncs. Everything else takes
 * the ordered path in `flush`: an overwrite of a suffix is made durable before any new record
 * is written (later segments are unlinked newest first, so a crash leaves a prefix of the old
 * log, then the segment holding the conflict point is cut and fsynced); segments are written
 * in index order, and a new segment's directory entry is fsynced before the next one is
 * touched, so a crash never leaves a hole between segments.
 *
 * Segments are zero-filled before use (wal-prealloc.ts), so an fdatasync commits data, not a
 * new file size. Recovery reads zeros after the last record as the segment's unused room, and
 * in the newest segment a zero sector between damaged bytes and a later valid record as a
 * write that a crash cut before its fsync: no record after it was ever acknowledged.
 *
 * Must never: write outside `<dir>/wal/`, retry a failed write or fsync, or drop a record
 * that recovery cannot prove was torn at the very end of the newest segment.
 */
import { fdatasync, fdatasyncSync, writeSync } from 'node:fs';
import { open, readdir, rename, unlink, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';

import type { Entry } from '../core/raft/types.js';
import { StorageCorruptionError } from './storage.js';
import {
  isZeroRange,
  encodeRecord,
  encodeSegmentHeader,
  readU64,
  RECORD_BYTES_MAX,
  RECORD_HEADER_BYTES,
  SEGMENT_HEADER_BYTES,
} from './record.js';
import { readSegments } from './segment-reader.js';
import type { SegmentScan } from './segment-scan.js';
import { SegmentPreallocator, type SpareSegment } from './wal-prealloc.js';
import { openWith } from './descriptors.js';

/** Default roll size of a segment (64 MiB). */
export const SEGMENT_BYTES_DEFAULT = 64 * 1024 * 1024;
/** Smallest configurable roll size (4 KiB); tests use it to force many rolls. */
export const SEGMENT_BYTES_MIN = 4 * 1024;
/** Largest configurable roll size (1 GiB); one segment is read whole at recovery. */
export const SEGMENT_BYTES_MAX = 1024 * 1024 * 1024;
/** Bytes `append` may buffer before a `sync` (256 MiB); beyond it is a driver bug. */
export const PENDING_BYTES_MAX = 256 * 1024 * 1024;
/** Segment files one log may hold; beyond it snapshots are not keeping up. */
export const SEGMENT_COUNT_MAX = 100_000;
/**
 * Records buffered by one `append` that are written through to the page cache at once, on the
 * calling thread (1 MiB: a memory copy of well under a millisecond). Larger batches wait for
 * `flush`, which writes them on the thread pool.
 */
export const WRITE_THROUGH_BYTES_MAX = 1024 * 1024;

const SEGMENT_NAME = /^(\d{20})\.wal$/;
const INDEX_DIGITS = 20;

// A batch bigger than a single record must fit in the buffer, or no entry could ever be written.
if (PENDING_BYTES_MAX < 2 * (RECORD_BYTES_MAX + SEGMENT_HEADER_BYTES)) {
  throw new Error('assertion failed: PENDING_BYTES_MAX must hold two largest records');
}

/** Called with the seconds each fsync took (for a latency histogram). */
export type FsyncObserver = (seconds: number) => void;

/**
 * fdatasync with timing: the data and the size, not the mtime. Through the callback API on
 * the handle's descriptor: `FileHandle.datasync` makes a promise request that allocates a
 * buffer of its own for file stats each time, about 2 µs of the event loop per fsync more
 * (bench/RESULTS.md, "A fsync's cost to the event loop"). Every caller awaits this before it
 * closes the handle, so the descriptor outlives the call.
 */
export function datasyncTimed(handle: FileHandle, observe?: FsyncObserver): Promise<void> {
  const startMs = performance.now();
  return new Promise((resolve, reject) => {
    fdatasync(handle.fd, (error) => {
      if (error !== null) {
        reject(error);
        return;
      }
      observe?.((performance.now() - startMs) / 1000);
      resolve();
    });
  });
}

/** Makes a directory's entries (creates, renames, unlinks) durable. */
export async function fsyncDirectory(path: string, observe?: FsyncObserver): Promise<void> {
  const handle = await openWith(() => open(path, 'r'));
  try {
    const startMs = performance.now();
    await handle.sync();
    observe?.((performance.now() - startMs) / 1000);
  } finally {
    await handle.close();
  }
}

/** Writes every byte at `position`, looping over short writes; each pass must make progress. */
export async function writeFully(
  handle: FileHandle,
  bytes: Uint8Array,
  position: number,
): Promise<void> {
  let done = 0;
  while (done < bytes.length) {
    const { bytesWritten } = await handle.write(bytes, done, bytes.length - done,
      position + done);
    if (bytesWritten <= 0) throw new Error(`write made no progress at byte ${position + done}`);
    done += bytesWritten;
  }
}

/** `writeFully` on the calling thread: for writes small enough to copy at once. */
function writeFullySync(fd: number, bytes: Uint8Array, position: number): void {
  for (let done = 0; done < bytes.length;) {
    const written = writeSync(fd, bytes, done, bytes.length - done, position + done);
    if (written <= 0) throw new Error(`write made no progress at byte ${position + done}`);
    done += written;
  }
}

export function segmentFileName(firstIndex: number): string {
  return `${String(firstIndex).padStart(INDEX_DIGITS, '0')}.wal`;
}

interface Segment {
  readonly firstIndex: number;
  readonly path: string;
  /** `offsets[i]` is the byte offset of the record with index `firstIndex + i`. */
  readonly offsets: number[];
  /** Bytes the file holds once every started write has completed. */
  fileBytes: number;
  /** Where buffered bytes start; below `fileBytes` means the file is cut here first. */
  pendingStart: number;
  /** Buffered frames, one per record (the header is one too), in file order. */
  pendingChunks: Uint8Array[];
  pendingBytes: number;
  /** The file exists, or a flush that creates it has been planned. */
  onDisk: boolean;
  handle: FileHandle | null;
  /** Bytes were written through to the page cache since this segment's last fdatasync. */
  dirty: boolean;
  /** The zero-filled spare this segment will be renamed from when first written, if any. */
  spare: SpareSegment | null;
}

/** One segment's share of a flush, captured synchronously when the flush starts. */
interface SegmentWrite {
  readonly segment: Segment;
  /** Records from this byte on were cut away: zero them up to `eraseToBytes` first. */
  readonly eraseFromBytes: number | null;
  readonly eraseToBytes: number;
  readonly position: number;
  readonly bytes: Uint8Array | null;
  readonly create: boolean;
}

/** What the scan of the log found, after cutting a torn tail. */
export interface WalRecovery {
  /** Entries with index > the snapshot index, in order, contiguous. */
  readonly entries: Entry[];
  /** The index of the first record still on disk, or null when the log holds none. */
  readonly firstRecordIndex: number | null;
  /** The last index of the log (the snapshot index when no record is after it). */
  readonly lastIndex: number;
}

function assertion(condition: boolean, message: string): asserts condition {
  if (!condition) assertionFailed(message);
}

/** For hot paths: test first, then build the message only for the failure. */
function assertionFailed(message: string): never {
  throw new Error(`assertion failed: ${message}`);
}

export class Wal {
  /** In index order; each starts at the previous one's last index + 1. */
  private segments: Segment[] = [];
  /** Segments cut away by an overwrite whose files the next flush unlinks. */
  private unlinkQueue: Segment[] = [];
  /** Segments a snapshot covers whose files `removeDiscarded` recycles or unlinks. */
  private discarded: Segment[] = [];
  private lastIndexValue = 0;
  /** The snapshot index: records at or below it are never overwritten. */
  private floorIndex = 0;
  private totalPendingBytes = 0;
  private readonly spares: SegmentPreallocator;
  /** A flush is running: its fdatasync may be writing back the tail's last page. */
  private flushing = false;

  /** `preallocate` false creates every segment file on demand (tests of file layouts). */
  constructor(
    private readonly walDir: string,
    private readonly segmentBytesMax: number,
    private readonly observe?: FsyncObserver,
    preallocate = true,
  ) {
    assertion(Number.isSafeInteger(segmentBytesMax) && segmentBytesMax >= SEGMENT_BYTES_MIN &&
      segmentBytesMax <= SEGMENT_BYTES_MAX, `segmentBytesMax out of range: ${segmentBytesMax}`);
    this.spares = new SegmentPreallocator(walDir, segmentBytesMax, preallocate);
  }

  /** Spare segments that failed to prepare (a roll then created its file the slow way). */
  get spareFailures(): number {
    return this.spares.failures;
  }

  get lastIndex(): number {
    return this.lastIndexValue;
  }

  /** True when the next flush has work to do. */
  hasPending(): boolean {
    return this.totalPendingBytes > 0 || this.unlinkQueue.length > 0 ||
      this.segments.some((segment) => segment.pendingStart < segment.fileBytes || segment.dirty);
  }

  /**
   * Buffers entries; see storage.ts for the overwrite rule. Throws (a caller bug) on a hole,
   * an overwrite at or below the snapshot index, a non-contiguous batch, an oversized entry
   * or a buffer over PENDING_BYTES_MAX. Throws before changing any state.
   */
  append(entries: readonly Entry[]): void {
    const first = entries[0];
    if (first === undefined) return;
    // The tests come before the messages: this runs for every Ready, and a message with a
    // number in it costs a conversion and a concatenation each time it is built.
    if (first.index <= this.floorIndex) {
      assertionFailed(`append at ${first.index} overwrites the snapshot at ${this.floorIndex}`);
    }
    if (first.index > this.lastIndexValue + 1) {
      assertionFailed(`append at ${first.index} leaves a hole after ${this.lastIndexValue}`);
    }
    for (let i = 1; i < entries.length; i++) {
      const index = entries[i]!.index;
      if (index !== first.index + i) assertionFailed(`batch index ${index} is not contiguous`);
    }
    const frames = entries.map(encodeRecord);
    const frameBytes = frames.reduce((sum, frame) => sum + frame.length, 0);
    const headerBytes = SEGMENT_HEADER_BYTES * frames.length;
    assertion(this.totalPendingBytes + frameBytes + headerBytes <= PENDING_BYTES_MAX,
      `buffered WAL bytes would exceed ${PENDING_BYTES_MAX}; sync first`);
    if (first.index <= this.lastIndexValue) this.truncateFrom(first.index);
    frames.forEach((frame, i) => this.place(frame, first.index + i));
    this.lastIndexValue = first.index + entries.length - 1;
  }

  /**
   * Writes the buffered records to the page cache now, when no flush is running, they all
   * belong to the open tail segment and nothing before them must be made durable first (no
   * unlink, cut or new file pending); otherwise leaves them to `flush`, which writes them
   * just before its fdatasync. The caller makes sure nothing else must precede the records
   * (FileStorage: a new term or vote).
   *
   * Measured (bench/RESULTS.md, "WAL writes"), per batch: a synchronous write of a few KiB
   * costs about 5 µs of the event loop; handing it to the thread pool cost 11 to 18 µs just to
   * start, and made puts at 64 connections a third slower. A write while an fdatasync is
   * running can wait for the page it shares with the last batch to be written back, so none
   * is made then: those records wait for the next flush, which starts the moment the running
   * one returns. The disk still never waits for the CPU.
   */
  writeThrough(): void {
    const tail = this.segments.at(-1);
    if (tail === undefined || tail.handle === null || !tail.onDisk) return;
    if (this.unlinkQueue.length > 0 || tail.pendingBytes === 0) return;
    const pendingBytes = tail.pendingBytes;
    if (this.totalPendingBytes !== pendingBytes || pendingBytes > WRITE_THROUGH_BYTES_MAX) return;
    if (this.segments.some((segment) => segment.pendingStart < segment.fileBytes)) return;
    // Checked before the copy: while a flush runs, every append lands here and would
    // otherwise join a growing list of records only to throw the copy away.
    if (this.flushing) return;
    const bytes = tail.pendingChunks.length === 1 ? tail.pendingChunks[0]!
      : Buffer.concat(tail.pendingChunks, tail.pendingBytes);
    writeFullySync(tail.handle.fd, bytes, tail.pendingStart);
    tail.fileBytes = tail.pendingStart + tail.pendingBytes;
    tail.pendingStart = tail.fileBytes;
    tail.pendingChunks = [];
    tail.pendingBytes = 0;
    tail.dirty = true;
    this.totalPendingBytes = 0;
  }

  private place(frame: Uint8Array, index: number): void {
    let tail = this.segments.at(-1);
    const tailBytes = tail === undefined ? 0 : tail.pendingStart + tail.pendingBytes;
    if (tail === undefined ||
      (tail.offsets.length > 0 && tailBytes + frame.length > this.segmentBytesMax)) {
      tail = this.roll(index);
    }
    if (tail.firstIndex + tail.offsets.length !== index) {
      assertionFailed(`record ${index} out of place`);
    }
    tail.offsets.push(tail.pendingStart + tail.pendingBytes);
    tail.pendingChunks.push(frame);
    tail.pendingBytes += frame.length;
    this.totalPendingBytes += frame.length;
  }

  private roll(firstIndex: number): Segment {
    assertion(this.segments.length < SEGMENT_COUNT_MAX, `more than ${SEGMENT_COUNT_MAX} segments`);
    const header = encodeSegmentHeader(firstIndex);
    const segment: Segment = {
      firstIndex,
      path: join(this.walDir, segmentFileName(firstIndex)),
      offsets: [],
      fileBytes: 0,
      pendingStart: 0,
      pendingChunks: [header],
      pendingBytes: header.length,
      onDisk: false,
      handle: null,
      dirty: false,
      spare: this.spares.take(),
    };
    this.segments.push(segment);
    this.totalPendingBytes += header.length;
    return segment;
  }

  /** Removes records from `index` on (Raft §5.3), in memory; flush makes it durable. */
  private truncateFrom(index: number): void {
    for (let tail = this.segments.at(-1); tail !== undefined && tail.firstIndex > index;
      tail = this.segments.at(-1)) {
      this.segments.pop();
      this.totalPendingBytes -= tail.pendingBytes;
      this.returnSpare(tail);
      if (tail.onDisk) this.unlinkQueue.push(tail);
    }
    const segment = this.segments.at(-1);
    assertion(segment !== undefined, `no segment holds index ${index}`);
    const kept = index - segment.firstIndex;
    const cutAt = segment.offsets[kept];
    assertion(cutAt !== undefined, `segment ${segment.firstIndex} does not hold index ${index}`);
    segment.offsets.length = kept;
    if (cutAt >= segment.pendingStart) {
      while (segment.pendingStart + segment.pendingBytes > cutAt) {
        const chunk = segment.pendingChunks.pop();
        assertion(chunk !== undefined, 'pending chunks do not cover the cut');
        segment.pendingBytes -= chunk.length;
        this.totalPendingBytes -= chunk.length;
      }
      assertion(segment.pendingStart + segment.pendingBytes === cutAt, 'cut inside a frame');
    } else {
      this.totalPendingBytes -= segment.pendingBytes;
      segment.pendingChunks = [];
      segment.pendingBytes = 0;
      segment.pendingStart = cutAt;
    }
    this.lastIndexValue = index - 1;
  }

  /**
   * `flush` on the calling thread, when all it would do is fdatasync segments whose records
   * were written through (no buffered record, no cut, no unlink, no new file); false, having
   * done nothing, otherwise. Throws the OS error of a failed fdatasync, which leaves the log
   * in an unknown state as `flush` does. The caller serializes it with flushes.
   */
  flushOnLoop(): boolean {
    if (this.flushing || this.totalPendingBytes !== 0 || this.unlinkQueue.length > 0) return false;
    for (const segment of this.segments) {
      if (segment.pendingStart < segment.fileBytes || segment.pendingBytes !== 0) return false;
      if (segment.dirty && segment.handle === null) return false;
    }
    for (const segment of this.segments) {
      if (!segment.dirty || segment.handle === null) continue;
      segment.dirty = false;
      const startMs = performance.now();
      fdatasyncSync(segment.handle.fd);
      this.observe?.((performance.now() - startMs) / 1000);
    }
    return true;
  }

  /**
   * Makes everything buffered durable. The caller serializes flushes; `append` may run while
   * one is in progress and lands in the next. An error leaves the log in an unknown state:
   * the caller must stop using it.
   */
  async flush(): Promise<void> {
    this.flushing = true;
    try {
      await this.flushInOrder();
    } finally {
      this.flushing = false;
    }
  }

  private async flushInOrder(): Promise<void> {
    const unlinks = this.unlinkQueue.splice(0).sort((a, b) => b.firstIndex - a.firstIndex);
    const dirty = this.segments.filter((segment) => segment.dirty);
    const writes = this.segments.flatMap((segment) => takePending(segment));
    this.totalPendingBytes = 0;
    // Records written through come first in index order: make them durable before any
    // ordered step below can create a newer segment.
    for (const segment of dirty) {
      segment.dirty = false;
      if (segment.handle !== null) await datasyncTimed(segment.handle, this.observe);
    }
    for (const segment of unlinks) {
      await closeHandle(segment);
      await unlink(segment.path);
      await fsyncDirectory(this.walDir, this.observe);
    }
    for (const write of writes) {
      if (write.eraseFromBytes === null) continue;
      // Zeros, not a shorter file: the segment keeps its preallocated room, and recovery
      // reads zeros as the end of the records.
      const handle = await this.handleOf(write.segment, false);
      await writeFully(handle, new Uint8Array(write.eraseToBytes - write.eraseFromBytes),
        write.eraseFromBytes);
      await datasyncTimed(handle, this.observe);
    }
    for (const write of writes) {
      if (write.bytes === null) continue;
      // An open segment's handle without an await: a flush started from a reaction (the
      // last fsync's return) then writes and hands its fdatasync over in that call.
      const handle = write.segment.handle ?? await this.handleOf(write.segment, write.create);
      if (write.bytes.length <= WRITE_THROUGH_BYTES_MAX) {
        writeFullySync(handle.fd, write.bytes, write.position);
      } else {
        await writeFully(handle, write.bytes, write.position);
      }
      await datasyncTimed(handle, this.observe);
      if (write.create) await fsyncDirectory(this.walDir, this.observe);
    }
    const tail = this.segments.at(-1);
    for (const write of writes) {
      if (write.segment !== tail) await closeHandle(write.segment);
    }
  }

  /**
   * The segment's open file. A new segment takes its zero-filled spare when it has one: the
   * spare is renamed into place, and the caller fsyncs the directory, as for a created file.
   */
  private async handleOf(segment: Segment, create: boolean): Promise<FileHandle> {
    if (segment.handle !== null) return segment.handle;
    const spare = segment.spare;
    segment.spare = null;
    if (create && spare !== null) {
      await rename(spare.path, segment.path);
      segment.handle = spare.handle;
      return segment.handle;
    }
    if (spare !== null) await discardSpare(spare);
    segment.handle = await openWith(() => open(segment.path, create ? 'wx+' : 'r+'));
    return segment.handle;
  }

  /**
   * The term of the record at `index`, or null when the log does not hold it. Reads the
   * record header from the buffer or the file; used to compare a snapshot with the log.
   */
  async termAt(index: number): Promise<number | null> {
    let segment: Segment | undefined;
    for (const candidate of this.segments) if (candidate.firstIndex <= index) segment = candidate;
    const offset = segment?.offsets[index - (segment?.firstIndex ?? 0)];
    if (segment === undefined || offset === undefined || index > this.lastIndexValue) return null;
    let header: Uint8Array | undefined;
    if (offset >= segment.pendingStart) {
      let chunkStart = segment.pendingStart;
      for (const chunk of segment.pendingChunks) {
        if (chunkStart === offset) header = chunk;
        chunkStart += chunk.length;
      }
    } else {
      header = Buffer.alloc(RECORD_HEADER_BYTES);
      const handle = segment.handle ?? await openWith(() => open(segment.path, 'r'));
      try {
        await handle.read(header, 0, RECORD_HEADER_BYTES, offset);
      } finally {
        if (handle !== segment.handle) await handle.close();
      }
    }
    assertion(header !== undefined, `record ${index} not found at its offset`);
    const decoded = readU64(new DataView(header.buffer, header.byteOffset, 24), 8);
    assertion(decoded !== null, `record ${index} has a term out of range`);
    return decoded;
  }

  /**
   * Removes the records from `index` on and makes that durable before returning. For a
   * snapshot that conflicts with the log at its own index (§7): those records were never
   * committed, and cutting them first means no crash can leave them after the snapshot.
   */
  async truncateDurably(index: number): Promise<void> {
    assertion(index > this.floorIndex && index <= this.lastIndexValue,
      `cannot cut the log at ${index}`);
    this.truncateFrom(index);
    await this.flush();
  }

  /**
   * Drops the segments whose records are all at or below `index`, after a snapshot at
   * `index` is durable; raises the overwrite floor to `index`. The segment being written
   * stays while the snapshot does not pass the log's end: a node's own snapshot often covers
   * every entry (taken while no call came), and dropping the segment then would restart the
   * log after it at every quiet snapshot, losing the history `replay --from-start` reads
   * for nothing (its room is zero-filled already). When the snapshot is past the whole log
   * (installed from a leader), the log restarts at `index + 1`.
   *
   * Their files stay until `removeDiscarded`, which the caller runs without holding up log
   * flushes: unlinking a 64 MiB segment took 17 ms under puts here, and with it inside the
   * storage's lock every write of the node waited meanwhile. A crash before the removal
   * leaves files that a snapshot covers, as a crash just after it did: recovery drops them.
   */
  discardThrough(index: number): void {
    this.floorIndex = Math.max(this.floorIndex, index);
    for (let head = this.segments[0]; head !== undefined; head = this.segments[0]) {
      const next = this.segments[1];
      const headLastIndex = next === undefined ? this.lastIndexValue : next.firstIndex - 1;
      if (headLastIndex > index) break;
      if (next === undefined && index <= this.lastIndexValue) break;
      this.segments.shift();
      this.totalPendingBytes -= head.pendingBytes;
      this.returnSpare(head);
      if (head.onDisk) this.discarded.push(head);
    }
    if (this.segments.length === 0) this.lastIndexValue = Math.max(this.lastIndexValue, index);
  }

  /**
   * Closes the files of the segments `discardThrough` dropped and hands them to the spares
   * (wal-prealloc.ts, `recycle`), or unlinks those it does not take, and all of them when
   * `recycle` is false (the disk is short of space: the room goes back at once); then makes
   * that durable. No flush touches them any more, so this may run beside one; one call at a
   * time.
   */
  async removeDiscarded(recycle = true): Promise<void> {
    const segments = this.discarded.splice(0);
    for (const segment of segments) {
      await closeHandle(segment);
      if (!recycle || !(await this.spares.recycle(segment.path))) await unlink(segment.path);
    }
    if (segments.length > 0) await fsyncDirectory(this.walDir, this.observe);
  }

  /** Closes file handles; buffered records are dropped (nothing was asked to be durable). */
  async close(): Promise<void> {
    await this.spares.close();
    for (const segment of [...this.segments, ...this.unlinkQueue, ...this.discarded]) {
      await closeHandle(segment);
      if (segment.spare !== null) await discardSpare(segment.spare);
      segment.spare = null;
    }
  }

  /**
   * Reads the log at start-up: drops segments wholly covered by the snapshot at
   * `snapshotIndex`, verifies every record, erases a torn tail (zeros and fsync), and
   * rejects any other damage with a StorageCorruptionError naming the file and offset.
   */
  async recover(snapshotIndex: number, meanwhile?: () => Promise<void>): Promise<WalRecovery> {
    this.floorIndex = snapshotIndex;
    await this.spares.adoptLeftovers();
    const names = await this.retainedSegmentNames(snapshotIndex);
    const entries: Entry[] = [];
    let firstRecordIndex: number | null = null;
    let expectedFirst: number | null = null;
    const pathOf = (firstIndex: number): string => join(this.walDir, segmentFileName(firstIndex));
    const source = readSegments({ paths: names.map(pathOf), firstIndexes: names }, snapshotIndex);
    try {
      // The segments are read (and, in the worker, checked) while the caller works.
      await meanwhile?.();
      for (const [i, firstIndex] of names.entries()) {
        const path = pathOf(firstIndex);
        const gapLimit = expectedFirst ?? snapshotIndex + 1;
        if (expectedFirst === null ? firstIndex > gapLimit : firstIndex !== gapLimit) {
          throw new StorageCorruptionError(path, 0,
            `segment starts at index ${firstIndex} but the log needs index ${gapLimit} next`);
        }
        const { bytes, scan } = await source.next(i);
        const kept = await this.recoverSegment(path, bytes, firstIndex, scan);
        if (kept === null) continue;
        // A loop, not push(...): a segment can hold more records than a call has arguments.
        for (const entry of kept.entries) entries.push(entry);
        if (kept.offsets.length > 0) firstRecordIndex ??= firstIndex;
        expectedFirst = firstIndex + kept.offsets.length;
      }
    } finally {
      await source.close();
    }
    this.lastIndexValue = Math.max(snapshotIndex, (expectedFirst ?? 1) - 1);
    await this.dropCoveredTail(snapshotIndex);
    await this.openTail();
    // The next roll should find a spare. A log with no segment rolls at its first append, so
    // that one waits for the zero-fill here; otherwise it runs while the node restores its
    // snapshot and applies its log, and a roll that comes first creates its segment.
    this.spares.prepare();
    if (this.segments.length === 0) await this.spares.ready();
    return { entries, firstRecordIndex, lastIndex: this.lastIndexValue };
  }

  /** The first index of every segment file on disk, ascending. Reads the directory only. */
  async segmentFirstIndexes(): Promise<number[]> {
    return (await openWith(() => readdir(this.walDir)))
      .map((name) => SEGMENT_NAME.exec(name)?.[1])
      .filter((digits): digits is string => digits !== undefined)
      .map(Number)
      .sort((a, b) => a - b);
  }

  /** Segment first indexes in order, after unlinking those wholly covered by the snapshot. */
  private async retainedSegmentNames(snapshotIndex: number): Promise<number[]> {
    const names = await this.segmentFirstIndexes();
    if (names.length > SEGMENT_COUNT_MAX) {
      throw new StorageCorruptionError(this.walDir, 0, `${names.length} segments exceed the bound`);
    }
    let dropped = 0;
    while (names.length > 1 && (names[1] ?? Infinity) <= snapshotIndex + 1) {
      const covered = names.shift() as number;
      await unlink(join(this.walDir, segmentFileName(covered)));
      dropped += 1;
    }
    if (dropped > 0) await fsyncDirectory(this.walDir, this.observe);
    return names;
  }

  /** Acts on one segment's scan: refuses damage, drops a torn header, cuts a torn tail. */
  private async recoverSegment(
    path: string,
    bytes: Buffer,
    firstIndex: number,
    scan: SegmentScan,
  ): Promise<Extract<SegmentScan, { kind: 'ok' }> | null> {
    if (scan.kind === 'corrupt') throw new StorageCorruptionError(path, scan.offset, scan.reason);
    if (scan.kind === 'torn-header') {
      await unlink(path);
      await fsyncDirectory(this.walDir, this.observe);
      return null;
    }
    if (!isZeroRange(bytes, scan.validBytes, bytes.byteLength)) {
      await zeroTornTail(path, bytes, scan.validBytes, this.observe);
    }
    this.segments.push({
      firstIndex, path, offsets: scan.offsets, fileBytes: scan.validBytes,
      pendingStart: scan.validBytes, pendingChunks: [], pendingBytes: 0, onDisk: true,
      handle: null, dirty: false, spare: null,
    });
    return scan;
  }

  private returnSpare(segment: Segment): void {
    if (segment.spare === null) return;
    this.spares.giveBack(segment.spare);
    segment.spare = null;
  }

  /** Opens the newest segment for writing, so the first appends can write through. */
  private async openTail(): Promise<void> {
    const tail = this.segments.at(-1);
    if (tail !== undefined && tail.handle === null) {
      tail.handle = await openWith(() => open(tail.path, 'r+'));
    }
  }

  /**
   * A lone segment that ends before the snapshot (one installed past the whole log) goes
   * too; one that ends at the snapshot's index stays and goes on being written, as
   * `discardThrough` leaves it.
   */
  private async dropCoveredTail(snapshotIndex: number): Promise<void> {
    const only = this.segments[0];
    if (this.segments.length !== 1 || only === undefined) return;
    const lastInSegment = only.firstIndex + only.offsets.length - 1;
    if (lastInSegment >= snapshotIndex || snapshotIndex === 0) return;
    this.segments = [];
    await unlink(only.path);
    await fsyncDirectory(this.walDir, this.observe);
  }
}

/**
 * Overwrites a torn tail with zeros, from `from` to the last non-zero byte, and fsyncs: the
 * segment keeps its zero-filled room, and the cut is durable before anything is appended.
 */
async function zeroTornTail(path: string, bytes: Uint8Array, from: number,
  observe?: FsyncObserver): Promise<void> {
  let end = bytes.byteLength;
  while (end > from && bytes[end - 1] === 0) end--;
  const handle = await openWith(() => open(path, 'r+'));
  try {
    await writeFully(handle, new Uint8Array(end - from), from);
    await datasyncTimed(handle, observe);
  } finally {
    await handle.close();
  }
}

function takePending(segment: Segment): SegmentWrite[] {
  const erase = segment.pendingStart < segment.fileBytes;
  if (!erase && segment.pendingBytes === 0) return [];
  const write: SegmentWrite = {
    segment,
    eraseFromBytes: erase ? segment.pendingStart : null,
    eraseToBytes: segment.fileBytes,
    position: segment.pendingStart,
    bytes: segment.pendingBytes === 0 ? null : Buffer.concat(segment.pendingChunks),
    create: !segment.onDisk,
  };
  segment.fileBytes = segment.pendingStart + segment.pendingBytes;
  segment.pendingStart = segment.fileBytes;
  segment.pendingChunks = [];
  segment.pendingBytes = 0;
  segment.onDisk = true;
  return [write];
}

async function discardSpare(spare: SpareSegment): Promise<void> {
  await spare.handle.close();
  await unlink(spare.path).catch(() => undefined);
}

async function closeHandle(segment: Segment): Promise<void> {
  const handle = segment.handle;
  segment.handle = null;
  if (handle !== null) await handle.close();
}
