/**
 * The durable log's seam: the Raft log, the hard state and snapshots, as the node driver sees
 * them. Two implementations: `file-storage.ts` (node:fs, real fsync) and the simulator's
 * in-memory one (test/sim), which can lose unsynced data, tear writes and flip bits.
 *
 * Contract, for both:
 * - Nothing is durable until `sync()` resolves. After a crash, `recover()` returns exactly the
 *   state as of some completed `sync()` or later, never a mix with lost middle records.
 * - `append` may overwrite a suffix: entries from `entries[0].index` on replace what was there
 *   (Raft §5.3 conflict resolution). The first appended index is at most `lastIndex + 1`.
 * - A torn record at the very end of the log is cut at recovery; damage anywhere else makes
 *   `recover()` reject with a `StorageCorruptionError` naming the file and the offset.
 * - A failed write or fsync rejects `sync()`; the driver then crashes the process and never
 *   retries (an fsync failure leaves the page cache in an unknown state).
 * - Snapshots are streamed both ways and never held whole in memory.
 */
import type { Entry, HardState, Snapshot, SnapshotMeta } from '../core/raft/types.js';

export interface RecoveredState {
  readonly hardState: HardState;
  /** The newest valid snapshot (its checksum verified), or null; read it with `snapshotChunks`. */
  readonly snapshot: Snapshot | null;
  /** Every entry after the snapshot's index, in order, with no holes. */
  readonly entries: readonly Entry[];
}

/**
 * A snapshot being written as a stream of slices: this node's own, or one a leader sends in
 * chunks. Writes are awaited one at a time, in order, `dataBytes` in all.
 */
export interface SnapshotSink {
  readonly meta: SnapshotMeta;
  readonly dataBytes: number;
  /** Appends the next bytes. Rejects on an I/O error (the storage then refuses everything). */
  write(chunk: Uint8Array): Promise<void>;
  /**
   * Every byte written: makes them durable without installing the snapshot, so that a volume
   * that runs out does so here (SnapshotNoRoomError, the file removed) and not in `commit`.
   * Optional: `commit` finishes a snapshot not finished yet.
   */
  finish(): Promise<void>;
  /**
   * Every byte written: flushes what is buffered, makes the snapshot durable and installs it
   * (Raft §7: a log entry at its index with another term goes, and everything after it),
   * keeps the newest two and drops log records it covers; entries after `meta.index` stay.
   * Resolves false, having removed it, when a snapshot at or past its index was installed
   * meanwhile (the driver then ignores it).
   */
  commit(): Promise<boolean>;
  /** Abandons the snapshot: nothing of it remains. */
  abort(): Promise<void>;
}

/** How `sync` may run. */
export interface SyncOptions {
  readonly onLoop?: boolean;
}

export interface Storage {
  /**
   * Reads the directory once, at start-up. Creates an empty store if there is none.
   * `whileLogReads` is called with the snapshot recovery chose, once it is chosen, and runs
   * while the log is read and checked (a node restores the snapshot then); recovery waits
   * for it and rejects with its error.
   */
  recover(whileLogReads?: (snapshot: Snapshot | null) => Promise<void>): Promise<RecoveredState>;
  /** Buffers entries to write; see the overwrite rule above. */
  append(entries: readonly Entry[]): void;
  /** Buffers a new hard state; it becomes durable with the next `sync()`. */
  setHardState(hardState: HardState): void;
  /**
   * Hands what is buffered to the OS now, where nothing must be durable before it, so it is
   * written while an earlier `sync()` is still running; otherwise leaves it to `sync()`. Never
   * makes anything durable and never lets entries of a new term reach the disk before that
   * term does. Call it after handing a Ready's entries and hard state over.
   */
  startWrite(): void;
  /**
   * Makes everything buffered durable: one write and one fsync per file touched. `onLoop`:
   * the caller's group is small, and the fdatasync may run on the calling thread when
   * nothing but written-through records waits for it (see FileStorage.sync).
   */
  sync(options?: SyncOptions): Promise<void>;
  /**
   * Starts writing a snapshot of `dataBytes` bytes at `meta.index` (see SnapshotSink).
   * Rejects when it is older than the installed snapshot. Several may be under way.
   */
  createSnapshot(meta: SnapshotMeta, dataBytes: number): Promise<SnapshotSink>;
  /**
   * Bytes [offset, offset + length) of the data of the installed snapshot at `index`, after
   * its checksum is verified; for chunks sent to followers. Rejects once it is gone.
   */
  readSnapshot(index: number, offset: number, length: number): Promise<Uint8Array>;
  /**
   * The data of the installed snapshot at `index`, in order, `chunkBytes` at a time. Its
   * checksum is checked before the last chunk is handed out: on a mismatch the iteration
   * throws instead, so a consumer commits nothing it read from a damaged snapshot.
   * `transient`: the consumer copies what it keeps, so a chunk need only stay valid until
   * the next is asked for (an implementation may then reuse its buffers).
   */
  snapshotChunks(index: number, chunkBytes: number, transient?: boolean):
    AsyncIterable<Uint8Array>;
  /** True while free space is too low to take writes safely; the driver refuses writes. */
  isLowOnSpace(): boolean;
  /** The largest snapshot `createSnapshot` would take now (it refuses larger ones). */
  snapshotRoomBytes(): number;
  close(): Promise<void>;
}

/**
 * A snapshot was not written for want of room: the volume would have gone below the free
 * space the node keeps (HIVEKV_MIN_FREE_BYTES), or refused a byte (ENOSPC, EDQUOT). Nothing
 * of it is left behind, and the storage stays usable: the log holds everything a snapshot
 * would, it is only not compacted until there is room.
 */
export class SnapshotNoRoomError extends Error {
  constructor(readonly index: number, readonly dataBytes: number, detail: string) {
    super(`no room for snapshot ${index} (${dataBytes} bytes): ${detail}`);
    this.name = 'SnapshotNoRoomError';
  }
}

export class StorageCorruptionError extends Error {
  constructor(
    readonly file: string,
    readonly offset: number,
    detail: string,
  ) {
    super(`corrupt data in ${file} at byte offset ${offset}: ${detail}`);
    this.name = 'StorageCorruptionError';
  }
}

/** Writes a whole snapshot given as bytes (tests and tools); resolves whether it installed. */
export async function saveSnapshotBytes(storage: Storage, meta: SnapshotMeta,
  data: Uint8Array): Promise<boolean> {
  const sink = await storage.createSnapshot(meta, data.byteLength);
  await sink.write(data);
  return sink.commit();
}
