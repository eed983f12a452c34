/**
 * The Storage seam on real files (node:fs): the WAL of wal.ts, the hard state of
 * hard-state-file.ts and the snapshots of snapshot-files.ts under one data directory:
 *   <dir>/hardstate   <dir>/wal/<first index>.wal   <dir>/snap/<index>.snap
 *
 * One lock serializes every durable step (sync, a snapshot's install, close), so a sync
 * never races a change to the log's segments. The files an installed snapshot makes garbage
 * are removed outside it, one removal at a time: no sync touches them, and none waits for
 * them. `append` and `setHardState` only buffer and may run at any time.
 * Within a sync the hard state goes first, then the log: a crash between them leaves a term
 * at least as new as every logged entry (§5.1), and the log is never ahead of its term.
 *
 * Must never: retry a failed write or fsync (the page cache is then in an unknown state), or
 * keep serving after one; every call after a failure is refused.
 */
import { mkdir, unlink } from 'node:fs/promises';
import { statfsSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';

import { EMPTY_HARD_STATE } from '../core/raft/types.js';
import type { Entry, HardState, Snapshot, SnapshotMeta } from '../core/raft/types.js';
import {
  assertEncodableHardState,
  HardStateFile,
  removeHardStateTemp,
} from './hard-state-file.js';
import { assertSafeU64 } from './record.js';
import {
  checkSnapshotFile,
  listSnapshotIndexes,
  pruneSnapshots,
  setAsideSnapshot,
  snapshotFileName,
  SnapshotFileReader,
  SnapshotFileWriter,
  type SnapshotCheck,
  verifiedSnapshotChunks,
} from './snapshot-files.js';
import {
  SnapshotNoRoomError, StorageCorruptionError, type RecoveredState, type SnapshotSink,
  type Storage, type SyncOptions,
} from './storage.js';
import {
  fsyncDirectory,
  SEGMENT_BYTES_DEFAULT,
  Wal,
  type FsyncObserver,
  type WalRecovery,
} from './wal.js';

/** Default free-space floor (64 MiB): below it the node refuses writes. */
export const MIN_FREE_BYTES_DEFAULT = 64 * 1024 * 1024;
/** Free space is read from the file system at most this often (statfs is a syscall). */
export const SPACE_CHECK_INTERVAL_MS = 500;
/**
 * Snapshot files kept open for chunks to followers: the kept snapshots and one more, so a
 * transfer of a snapshot pruned meanwhile can still finish from its open handle.
 */
const SNAPSHOT_READERS_MAX = 3;

export interface FileStorageOptions {
  /** Roll size of a WAL segment in bytes: 4 KiB .. 1 GiB, default 64 MiB. */
  readonly segmentBytesMax?: number;
  /** isLowOnSpace() is true while free bytes on the data directory are below this. */
  readonly minFreeBytes?: number;
  /** Called with the duration in seconds of every fsync, for a latency histogram. */
  readonly onFsyncSeconds?: FsyncObserver;
  /** Zero-fill WAL segments ahead of need (default true); false only for tests of layouts. */
  readonly preallocate?: boolean;
  /** Called as `recover()` ends a phase ('snapshot verified', 'log read'): start-up timing. */
  readonly onRecoverPhase?: (phase: string) => void;
  /** Called when the data directory falls below `minFreeBytes` free, and when it is back. */
  readonly onSpaceChange?: (change: SpaceChange) => void;
  /** How free bytes are read (default: statfs of the data directory); tests pass their own. */
  readonly readFreeBytes?: (dir: string) => number;
  /**
   * How long two slow fsyncs on the event loop in a row (LOOP_SYNC_SLOW_MS) send every fsync
   * to the thread pool (ms, default LOOP_SYNC_PAUSE_MS).
   */
  readonly loopSyncPauseMs?: number;
}

/**
 * An fsync on the event loop longer than this is slow: the loop read no socket, answered no
 * heartbeat and served no read meanwhile. A disk that stalls (a degraded volume, a noisy
 * neighbour) makes them slow one after the other: after two in a row its fsyncs run in the
 * thread pool for LOOP_SYNC_PAUSE_MS, so that the stalls hold the loop twice, not once a
 * call. One alone is a blip, and leaves them on the loop: an fdatasync of a log record took
 * 0.11 ms at p50 here and at most 3.6 ms in 5,000, and a lone put at one connection took
 * 0.39 ms at p50 with its fsync on the loop against 0.54 in the pool (wrk, 20 s each).
 */
export const LOOP_SYNC_SLOW_MS = 50;
export const LOOP_SYNC_PAUSE_MS = 30_000;

/** The data directory's free space crossed `minFreeBytes`, one way or the other. */
export interface SpaceChange {
  readonly low: boolean;
  readonly freeBytes: number;
  readonly minFreeBytes: number;
}

/** The snapshot recovery starts from, and the damaged newer one it fell back from, if any. */
interface SnapshotChoice {
  readonly snapshot: Snapshot | null;
  readonly fallback: Fallback | null;
}

type Phase = 'new' | 'recovering' | 'open' | 'closed';

/** The newest snapshot failed to verify and recovery fell back to the one before it. */
interface Fallback {
  readonly index: number;
  readonly path: string;
  readonly decode: Extract<SnapshotCheck, { kind: 'bad' }>;
}

/** Free space a snapshot leaves at least: the log's metadata and the hard state's slack. */
const SNAPSHOT_SLACK_BYTES = 4 * 1024 * 1024;

export class FileStorage implements Storage {
  private readonly wal: Wal;
  private readonly walDir: string;
  private readonly snapDir: string;
  private readonly minFreeBytes: number;
  private readonly observe: FsyncObserver | undefined;
  private readonly onRecoverPhase: ((phase: string) => void) | undefined;
  private phase: Phase = 'new';
  /** The first I/O failure; once set, every call is refused. */
  private failure: unknown = null;
  /** Settles when every durable step started so far has finished. */
  private lock: Promise<void> = Promise.resolve();
  /** A sync that waits for the lock; later callers join it (group commit). */
  private queuedSync: Promise<void> | null = null;
  /** Exclusive steps queued or running; none means the lock is free. */
  private exclusiveSteps = 0;
  /** Settles when the removal of files installed snapshots made garbage has finished. */
  private removal: Promise<void> = Promise.resolve();
  /** An old snapshot's file the next snapshot is written over (`pruneSnapshots`), or null. */
  private spareSnapshot: string | null = null;
  /** Its length, read once when it became the spare: room a snapshot may write over. */
  private spareSnapshotBytes = 0;
  /**
   * Snapshots being written (this node's own, and one from its leader may run beside it),
   * each with the length of the spare it writes over (0: a new file): the room they have yet
   * to take is not free for another (`reservedSnapshotBytes`).
   */
  private readonly snapshotsWriting = new Map<SnapshotFileWriter, number>();
  /** Streams (`snapshotChunks`) open on each snapshot index: such a file is never a spare. */
  private readonly snapshotStreams = new Map<number, number>();
  private latestHardState: HardState = EMPTY_HARD_STATE;
  private durableHardState: HardState = EMPTY_HARD_STATE;
  private readonly hardStateFile: HardStateFile;
  private snapshotIndex = 0;
  private lowOnSpace = false;
  private freeBytesSeen: number | null = null;
  private spaceCheckedAtMs = Number.NEGATIVE_INFINITY;
  private readonly onSpaceChange: ((change: SpaceChange) => void) | undefined;
  private readonly readFreeBytes: (dir: string) => number;
  /** Open, verified snapshot files, by index, least recently used first. */
  private readonly readers = new Map<number, Promise<SnapshotFileReader>>();
  private readonly loopSyncPauseMs: number;
  /** No fsync runs on the loop before this (performance.now()): one there was slow. */
  private loopSyncPausedUntilMs = Number.NEGATIVE_INFINITY;
  private slowLoopSyncCount = 0;
  /** Slow fsyncs on the loop since the last one that was not. */
  private slowLoopSyncsInARow = 0;

  /**
   * `dir` need not exist; `recover()` creates it. Throws on options out of range.
   */
  constructor(private readonly dir: string, options: FileStorageOptions = {}) {
    this.walDir = join(dir, 'wal');
    this.snapDir = join(dir, 'snap');
    this.hardStateFile = new HardStateFile(dir);
    this.observe = options.onFsyncSeconds;
    this.onRecoverPhase = options.onRecoverPhase;
    this.onSpaceChange = options.onSpaceChange;
    this.readFreeBytes = options.readFreeBytes ?? freeBytesOf;
    this.minFreeBytes = options.minFreeBytes ?? MIN_FREE_BYTES_DEFAULT;
    assertSafeU64(this.minFreeBytes, 'minFreeBytes');
    this.loopSyncPauseMs = options.loopSyncPauseMs ?? LOOP_SYNC_PAUSE_MS;
    this.wal = new Wal(this.walDir, options.segmentBytesMax ?? SEGMENT_BYTES_DEFAULT, this.observe,
      options.preallocate ?? true);
  }

  /**
   * Loads the newest valid snapshot, the hard state and the log after the snapshot; cuts a
   * torn tail. Rejects with StorageCorruptionError on any other damage. Call once.
   * `commitIndex` is clamped into [snapshot index, last index]: Raft keeps it volatile
   * (Figure 2), and only a durable log entry may be claimed as committed here.
   */
  async recover(whileLogReads?: (snapshot: Snapshot | null) => Promise<void>):
    Promise<RecoveredState> {
    if (this.phase !== 'new') throw new Error(`assertion failed: recover() when ${this.phase}`);
    this.phase = 'recovering';
    try {
      await this.createDirectories();
      await removeHardStateTemp(this.dir);
      const stored = (await this.hardStateFile.read())?.hardState ?? EMPTY_HARD_STATE;
      const { snapshot, fallback } = await this.chooseSnapshot();
      this.onRecoverPhase?.('snapshot verified');
      const log = await this.recoverLog(snapshot, fallback,
        whileLogReads === undefined ? undefined : () => whileLogReads(snapshot));
      this.onRecoverPhase?.('log read');
      const snapshotIndex = snapshot?.meta.index ?? 0;
      const commitIndex = Math.max(snapshotIndex, Math.min(stored.commitIndex, log.lastIndex));
      const hardState: HardState = { ...stored, commitIndex };
      this.durableHardState = stored;
      this.latestHardState = hardState;
      this.snapshotIndex = snapshotIndex;
      this.phase = 'open';
      this.refreshSpace(performance.now());
      return { hardState, snapshot, entries: log.entries };
    } catch (error) {
      this.failure = error;
      throw error;
    }
  }

  private async createDirectories(): Promise<void> {
    await mkdir(this.walDir, { recursive: true });
    await mkdir(this.snapDir, { recursive: true });
    await fsyncDirectory(this.dir, this.observe);
    await fsyncDirectory(dirname(this.dir), this.observe);
  }

  /** The newest snapshot whose file verifies whole (read in chunks, never held in memory). */
  private async chooseSnapshot(): Promise<SnapshotChoice> {
    const [newest, previous] = await listSnapshotIndexes(this.snapDir);
    if (newest === undefined) return { snapshot: null, fallback: null };
    const decoded = await checkSnapshotFile(this.snapDir, newest);
    if (decoded.kind === 'ok') {
      return { snapshot: { meta: decoded.meta, dataBytes: decoded.dataBytes }, fallback: null };
    }
    const path = join(this.snapDir, snapshotFileName(newest));
    if (previous === undefined) {
      throw new StorageCorruptionError(path, decoded.offset,
        `${decoded.reason}; no older snapshot to fall back to, refusing to start`);
    }
    const older = await checkSnapshotFile(this.snapDir, previous);
    if (older.kind === 'bad') {
      throw new StorageCorruptionError(path, decoded.offset, `${decoded.reason}; the previous ` +
        `snapshot ${snapshotFileName(previous)} is damaged too (${older.reason})`);
    }
    return { snapshot: { meta: older.meta, dataBytes: older.dataBytes },
      fallback: { index: newest, path, decode: decoded } };
  }

  /**
   * Reads the log after the chosen snapshot. After a fallback, the log must still hold every
   * index from the older snapshot up to the damaged one's, or committed state would be lost.
   */
  private async recoverLog(snapshot: Snapshot | null, fallback: Fallback | null,
    meanwhile: (() => Promise<void>) | undefined): Promise<WalRecovery> {
    const snapshotIndex = snapshot?.meta.index ?? 0;
    if (fallback === null) return this.wal.recover(snapshotIndex, meanwhile);
    const refuse = (detail: string): StorageCorruptionError =>
      new StorageCorruptionError(fallback.path, fallback.decode.offset,
        `${fallback.decode.reason}; cannot fall back to snapshot ${snapshotIndex}: ${detail}`);
    const uncovered = `the log does not cover indexes ${snapshotIndex + 1}..${fallback.index}`;
    const [firstSegment] = await this.wal.segmentFirstIndexes();
    if (firstSegment === undefined || firstSegment > snapshotIndex + 1) throw refuse(uncovered);
    let log: WalRecovery;
    try {
      log = await this.wal.recover(snapshotIndex);
    } catch (error) {
      if (error instanceof StorageCorruptionError) throw refuse(`log damaged: ${error.message}`);
      throw error;
    }
    const first = log.firstRecordIndex;
    if (first === null || first > snapshotIndex + 1 || log.lastIndex < fallback.index) {
      throw refuse(uncovered);
    }
    await setAsideSnapshot(this.snapDir, fallback.index, this.observe);
    await meanwhile?.();
    return log;
  }

  /** Buffers entries (storage.ts overwrite rule). Throws on a hole or a refused storage. */
  append(entries: readonly Entry[]): void {
    this.assertUsable();
    this.wal.append(entries);
  }

  /**
   * Writes buffered records through to the page cache unless a new term or vote is waiting
   * to be made durable: entries of a term must never reach the disk before the term does
   * (the hard state goes first in every sync, see above).
   */
  startWrite(): void {
    this.assertUsable();
    const latest = this.latestHardState;
    const durable = this.durableHardState;
    if (latest.term !== durable.term || latest.votedFor !== durable.votedFor) return;
    this.wal.writeThrough();
  }

  /** Buffers a hard state. Throws on values out of range or a refused storage. */
  setHardState(hardState: HardState): void {
    this.assertUsable();
    assertEncodableHardState(hardState);
    this.latestHardState = hardState;
  }

  /**
   * Makes everything buffered durable: the hard state if its term or vote changed (a
   * commitIndex-only change waits), then one write and one fdatasync per touched segment.
   * A sync with nothing else running starts in this call; callers arriving while one runs
   * share the next one. Rejects with the OS error on a failed write or fsync; the storage
   * then refuses every further call.
   */
  sync(options?: SyncOptions): Promise<void> {
    try {
      this.assertUsable();
    } catch (error) {
      return Promise.reject(error);
    }
    if (this.queuedSync !== null) return this.queuedSync;
    if (options?.onLoop === true && this.exclusiveSteps === 0) {
      try {
        if (this.syncOnLoop()) return Promise.resolve();
      } catch (error) {
        return Promise.reject(error);
      }
    }
    // With the lock free, the flush starts in this call: its write and fdatasync are handed
    // to the thread pool now, not after whatever else the caller's turn of the loop does.
    if (this.exclusiveSteps === 0) return this.exclusive(() => this.flushAll(false), true);
    const run = this.exclusive(() => {
      this.queuedSync = null;
      return this.flushAll(false);
    });
    this.queuedSync = run;
    return run;
  }

  /**
   * A small group's fdatasync on the calling thread, when nothing else must be written first
   * (no term or vote to write, every record written through): true once durable. On this
   * machine a thread-pool fdatasync at one connection cost a put 0.24 ms more at p50 than one
   * on the loop (0.51 to 0.59 ms against 0.26 to 0.37): the pool thread and then the loop
   * are woken, each an idle vCPU. It blocks the loop for the fdatasync, so the caller asks
   * only for small groups, where nothing waiting could have used the loop meanwhile.
   * Throws (and refuses everything after) as a failed flush does.
   */
  private syncOnLoop(): boolean {
    const hardState = this.latestHardState;
    const durable = this.durableHardState;
    if (hardState.term !== durable.term || hardState.votedFor !== durable.votedFor) return false;
    const startMs = performance.now();
    if (startMs < this.loopSyncPausedUntilMs) return false;
    let synced: boolean;
    try {
      synced = this.wal.flushOnLoop();
    } catch (error) {
      this.failure = error;
      throw error;
    }
    if (synced) this.timeLoopSync(startMs, performance.now());
    return synced;
  }

  /** Counts a slow fsync on the loop; the second in a row pauses the loop's fsyncs. */
  private timeLoopSync(startMs: number, endMs: number): void {
    if (endMs - startMs <= LOOP_SYNC_SLOW_MS) {
      this.slowLoopSyncsInARow = 0;
      return;
    }
    this.slowLoopSyncCount++;
    if (++this.slowLoopSyncsInARow < 2) return;
    this.slowLoopSyncsInARow = 0;
    this.loopSyncPausedUntilMs = endMs + this.loopSyncPauseMs;
  }

  /**
   * fsyncs on the event loop that were slow (LOOP_SYNC_SLOW_MS): each second in a row sent
   * the next LOOP_SYNC_PAUSE_MS of fsyncs to the thread pool.
   */
  get slowLoopSyncs(): number {
    return this.slowLoopSyncCount;
  }

  private async flushAll(includeCommitIndex: boolean): Promise<void> {
    this.assertUsable();
    const hardState = this.latestHardState;
    const durable = this.durableHardState;
    const voteChanged = hardState.term !== durable.term || hardState.votedFor !== durable.votedFor;
    try {
      if (voteChanged || (includeCommitIndex && hardState.commitIndex !== durable.commitIndex)) {
        await this.hardStateFile.write(hardState, this.observe);
        this.durableHardState = hardState;
      }
      await this.wal.flush();
    } catch (error) {
      this.failure = error;
      throw error;
    }
  }

  /**
   * Starts a snapshot written as a stream (storage.ts, SnapshotSink). The bulk of the work,
   * writing and fsyncing the file, happens outside the lock, so log syncs (and the writes
   * waiting on them) go on meanwhile; only the install is serialized with them.
   */
  async createSnapshot(meta: SnapshotMeta, dataBytes: number): Promise<SnapshotSink> {
    this.assertUsable();
    assertSafeU64(meta.index, 'snapshot index');
    if (meta.index < 1 || meta.index < this.snapshotIndex) {
      throw new Error(`assertion failed: snapshot ${meta.index} is older than ` +
        `${this.snapshotIndex}`);
    }
    const spare = this.spareSnapshot;
    const overBytes = this.spareRoomBytes();
    this.assertRoomForSnapshot(meta.index, dataBytes);
    this.spareSnapshot = null;
    const writer = await this.guardIo(() => this.withRoom(meta.index, dataBytes, null,
      () => SnapshotFileWriter.create(this.snapDir, meta, dataBytes, this.observe, spare)));
    this.snapshotsWriting.set(writer, overBytes);
    return {
      meta,
      dataBytes,
      write: (chunk) => this.guardIo(() => this.withRoom(meta.index, dataBytes, writer,
        () => writer.write(chunk))),
      finish: () => this.finishSnapshot(writer),
      commit: () => this.commitSnapshot(writer),
      abort: () => this.guardIo(() => writer.abort()),
    };
  }

  /**
   * Refuses a snapshot that does not fit in the free space with SNAPSHOT_SLACK_BYTES to
   * spare: written anyway, it would run the volume out midway. One that fits is written
   * even below `minFreeBytes`, since installing it is what frees the log segments it covers
   * (removed, not kept as spares, while space is short). A spare written over needs no new
   * room for its own length.
   */
  private assertRoomForSnapshot(index: number, dataBytes: number): void {
    const reserved = this.reservedSnapshotBytes();
    const free = this.readFreeBytes(this.dir) + this.spareRoomBytes() - reserved;
    if (free - dataBytes >= SNAPSHOT_SLACK_BYTES) return;
    throw new SnapshotNoRoomError(index, dataBytes, `${free} bytes free` + (reserved > 0
      ? ` beside the ${reserved} a snapshot being written has yet to take` : ''));
  }

  /**
   * The bytes the snapshots being written have yet to take from the volume: what each has
   * left to write beyond the spare it writes over (bytes written are already off the free
   * space the file system reports).
   */
  private reservedSnapshotBytes(): number {
    let reserved = 0;
    for (const [writer, overBytes] of this.snapshotsWriting) {
      if (writer.isClosed) {
        this.snapshotsWriting.delete(writer);
        continue;
      }
      reserved += Math.max(0, writer.dataBytes - Math.max(writer.writtenBytes, overBytes));
    }
    return reserved;
  }

  /**
   * Runs a step of writing a snapshot; a volume that refuses its bytes (ENOSPC, EDQUOT) gives
   * a SnapshotNoRoomError, with the file removed, and leaves the storage usable: the snapshot
   * is only a copy of what the log holds. Any other failure is the storage's.
   */
  private async withRoom<T>(index: number, dataBytes: number,
    writer: SnapshotFileWriter | null, step: () => Promise<T>): Promise<T> {
    try {
      return await step();
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code !== 'ENOSPC' && code !== 'EDQUOT') throw error;
      await writer?.abort();
      throw new SnapshotNoRoomError(index, dataBytes, `the volume refused its bytes (${code})`);
    }
  }

  /**
   * Installs a written snapshot, then removes what it made garbage (older snapshots, the log
   * segments it covers), or keeps it as a spare to write over. Only the install holds the
   * lock. The removal waits for no log sync and holds none up: the unlink of a 153 MB
   * snapshot took 35 to 70 ms under puts at 1M keys, and every write of the node waited for
   * it when it ran inside the lock (docs/performance.md, "Files a snapshot leaves behind,
   * written over instead of freed"). Resolves once both are done.
   */
  private async finishSnapshot(writer: SnapshotFileWriter): Promise<void> {
    this.assertUsable();
    await this.guardIo(() => this.withRoom(writer.meta.index, writer.dataBytes, writer,
      () => writer.finish()));
  }

  private async commitSnapshot(writer: SnapshotFileWriter): Promise<boolean> {
    if (!writer.finished) await this.finishSnapshot(writer);
    this.assertUsable();
    const installed = await this.exclusive(async () => {
      const meta = writer.meta;
      if (meta.index <= this.snapshotIndex) {
        await this.guardIo(() => writer.abort());
        return false;
      }
      await this.flushAll(true);
      await this.guardIo(async () => {
        // §7: a log entry at the snapshot's index with another term was never committed;
        // it and everything after it go, durably, before the snapshot lands.
        const termAtIndex = await this.wal.termAt(meta.index);
        if (termAtIndex !== null && termAtIndex !== meta.term) {
          await this.wal.truncateDurably(meta.index);
        }
        await writer.publish();
      });
      this.wal.discardThrough(meta.index);
      this.snapshotIndex = meta.index;
      return true;
    });
    if (installed) await this.removeGarbage();
    return installed;
  }

  /** Reads data of the snapshot at `index` from a cached, verified handle. */
  async readSnapshot(index: number, offset: number, length: number): Promise<Uint8Array> {
    this.assertUsable();
    let reader = this.readers.get(index);
    if (reader === undefined) {
      reader = this.openVerified(index);
      this.readers.set(index, reader);
      this.evictReaders();
    } else {
      // Most recently used goes last.
      this.readers.delete(index);
      this.readers.set(index, reader);
    }
    return (await reader).read(offset, length);
  }

  private openVerified(index: number): Promise<SnapshotFileReader> {
    const opened = SnapshotFileReader.open(this.snapDir, index).then(async (reader) => {
      try {
        await reader.verify();
        return reader;
      } catch (error) {
        await reader.close();
        throw error;
      }
    });
    // A file that is gone or damaged is not cached: the next ask tries again.
    opened.catch(() => {
      if (this.readers.get(index) === opened) this.readers.delete(index);
    });
    return opened;
  }

  private evictReaders(): void {
    while (this.readers.size > SNAPSHOT_READERS_MAX) {
      const [oldest, reader] = this.readers.entries().next().value as
        [number, Promise<SnapshotFileReader>];
      this.readers.delete(oldest);
      reader.then((r) => r.close(), () => undefined).catch(() => undefined);
    }
  }

  snapshotChunks(index: number, chunkBytes: number, transient = false):
    AsyncGenerator<Uint8Array> {
    // Also while recovering: the snapshot recovery chose is restored as the log is read.
    if (this.phase !== 'recovering') this.assertUsable();
    return this.countedStream(index,
      verifiedSnapshotChunks(this.snapDir, index, chunkBytes, transient));
  }

  /** `chunks`, counted in `snapshotStreams` from its first read until it ends. */
  private async *countedStream(index: number, chunks: AsyncGenerator<Uint8Array>):
    AsyncGenerator<Uint8Array> {
    this.snapshotStreams.set(index, (this.snapshotStreams.get(index) ?? 0) + 1);
    try {
      yield* chunks;
    } finally {
      const open = (this.snapshotStreams.get(index) ?? 1) - 1;
      if (open === 0) this.snapshotStreams.delete(index);
      else this.snapshotStreams.set(index, open);
    }
  }

  /** Runs an I/O step; a failure makes the storage refuse everything from then on. */
  private async guardIo<T>(step: () => Promise<T>): Promise<T> {
    try {
      return await step();
    } catch (error) {
      // A snapshot with no room is left undone, and the storage stays usable (withRoom).
      if (!(error instanceof SnapshotNoRoomError)) this.failure ??= error;
      throw error;
    }
  }

  /**
   * Removes the snapshots older than those kept and the log segments installed snapshots
   * cover, after any removal still running: removals never overlap one another, and may
   * overlap log syncs, which touch neither.
   */
  private removeGarbage(): Promise<void> {
    const run = this.removal.then(() => this.guardIo(async () => {
      // One spare at most, none while space is short, and never a file someone may still
      // read: a follower's transfer or an export reads a pruned file to its end.
      const spaceShort = this.lowOnSpace;
      const recycle = this.spareSnapshot === null && !spaceShort
        ? (index: number) => !this.readers.has(index) && !this.snapshotStreams.has(index)
        : undefined;
      const spare = await pruneSnapshots(this.snapDir, this.observe, recycle);
      if (spare !== null) {
        this.spareSnapshot = spare;
        this.spareSnapshotBytes = fileBytes(spare);
      }
      await this.wal.removeDiscarded(!spaceShort);
    }));
    this.removal = run.catch(() => undefined);
    return run;
  }

  /**
   * True while free bytes on the data directory's file system are below minFreeBytes. Reads
   * the file system at most every SPACE_CHECK_INTERVAL_MS; calls in between are free.
   */
  isLowOnSpace(): boolean {
    this.assertUsable();
    const nowMs = performance.now();
    if (nowMs - this.spaceCheckedAtMs >= SPACE_CHECK_INTERVAL_MS) this.refreshSpace(nowMs);
    return this.lowOnSpace;
  }

  /** Free bytes on the data directory's file system, read at most every 500 ms. */
  freeBytes(): number {
    this.isLowOnSpace();
    return this.freeBytesSeen ?? 0;
  }

  /**
   * The largest snapshot `createSnapshot` would take now: free bytes (read at most every
   * 500 ms) and the spare snapshot file it would write over, less what the snapshots being
   * written have yet to take and SNAPSHOT_SLACK_BYTES.
   */
  snapshotRoomBytes(): number {
    return Math.max(0, this.freeBytes() + this.spareRoomBytes() - this.reservedSnapshotBytes() -
      SNAPSHOT_SLACK_BYTES);
  }

  /** Bytes of the spare snapshot file a new snapshot would write over (0: none). */
  private spareRoomBytes(): number {
    return this.spareSnapshot === null ? 0 : this.spareSnapshotBytes;
  }

  private refreshSpace(nowMs: number): void {
    const freeBytes = this.readFreeBytes(this.dir);
    const low = freeBytes < this.minFreeBytes;
    // The first reading reports only a shortage: a node with room says nothing.
    const changed = this.freeBytesSeen === null ? low : low !== this.lowOnSpace;
    this.lowOnSpace = low;
    this.freeBytesSeen = freeBytes;
    this.spaceCheckedAtMs = nowMs;
    if (changed) this.onSpaceChange?.({ low, freeBytes, minFreeBytes: this.minFreeBytes });
  }

  /** Waits for a running durable step, then closes files. Buffered data is not written. */
  async close(): Promise<void> {
    if (this.phase === 'closed') return;
    await this.lock;
    await this.removal;
    // At rest the directory holds the snapshots kept, the log and its one ready spare segment
    // (wal-prealloc.ts). A spare snapshot this fails to remove is a temp file, which the next
    // start removes.
    const spare = this.spareSnapshot;
    this.spareSnapshot = null;
    if (spare !== null) await unlink(spare).catch(() => undefined);
    this.phase = 'closed';
    const readers = [...this.readers.values()];
    this.readers.clear();
    for (const reader of readers) await reader.then((r) => r.close(), () => undefined);
    await this.hardStateFile.close();
    await this.wal.close();
  }

  /**
   * Runs `step` once every earlier exclusive step has finished; `now`, with none queued or
   * running, in this call.
   *
   * The count drops in the first reaction to the step's promise, before any reaction the
   * caller adds: a caller that starts the next step from its own reaction (the replica
   * starts the next fsync the moment one returns) finds the lock free and starts in its
   * call. Dropped one reaction later, that step waited in a microtask behind the rest of the
   * caller's turn (applying and answering the calls the fsync released, 0.43 ms at p50 under
   * puts at 64 connections), and the disk idled meanwhile.
   */
  private exclusive<T>(step: () => Promise<T>, now = false): Promise<T> {
    const idle = now && this.exclusiveSteps === 0;
    this.exclusiveSteps++;
    const run = idle ? step() : this.lock.then(step);
    this.lock = run.then(this.releaseStep, this.releaseStep);
    return run;
  }

  private readonly releaseStep = (): void => {
    this.exclusiveSteps--;
  };

  private assertUsable(): void {
    if (this.failure !== null) {
      throw new Error('storage refused: an earlier storage operation failed', {
        cause: this.failure,
      });
    }
    if (this.phase !== 'open') throw new Error(`storage refused: it is ${this.phase}`);
  }
}

/** The length of the file at `path`; 0 when it is gone. */
function fileBytes(path: string): number {
  try {
    return statSync(path).size;
  } catch {
    return 0;
  }
}

function freeBytesOf(dir: string): number {
  const stats = statfsSync(dir);
  return stats.bavail * stats.bsize;
}
