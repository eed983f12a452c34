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
 */
import type { Entry, HardState, Snapshot, SnapshotMeta } from '../core/raft/types.js';

export interface RecoveredState {
  readonly hardState: HardState;
  /** The newest valid snapshot, or null. */
  readonly snapshot: Snapshot | null;
  /** Every entry after the snapshot's index, in order, with no holes. */
  readonly entries: readonly Entry[];
}

export interface Storage {
  /** Reads the directory once, at start-up. Creates an empty store if there is none. */
  recover(): Promise<RecoveredState>;
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
  /** Makes everything buffered durable: one write and one fsync per file touched. */
  sync(): Promise<void>;
  /**
   * Writes a snapshot aside, fsyncs it, renames it into place, then drops log records
   * covered by it. Entries after `meta.index` stay.
   */
  saveSnapshot(meta: SnapshotMeta, data: Uint8Array): Promise<void>;
  /** True while free space is too low to take writes safely; the driver refuses writes. */
  isLowOnSpace(): boolean;
  close(): Promise<void>;
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
