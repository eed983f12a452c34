/**
 * `Ready`: everything the Raft core asks its driver to do after a batch of inputs.
 *
 * Pure types: no I/O. The driver (host/node/replica.ts, and the simulator) MUST handle one
 * Ready in exactly this order, then call `advance(ready)` before asking for the next one:
 *
 *   1. send `earlyMessages` (a leader's appends and heartbeats, §10.2.1 of the thesis: the
 *      leader writes its log in parallel with replicating it, and counts its own copy
 *      toward commit only after `advance`);
 *   2. write `receivedSnapshot` to the snapshot being received, in order; persist `snapshot`
 *      (it is complete: make it durable, and drop every log entry after its index too: the
 *      log restarts after it), then `entries` (they may overwrite a suffix) and `hardState`;
 *      fsync;
 *   3. send `messages` (votes and responses promise durable state, §5.1 / §5.2);
 *   4. restore the machine from `snapshot` if any, then apply `committedEntries` in order;
 *      hand out `readStates` (serve a read once applied >= readIndex; -1: answer 503);
 *   5. `advance(ready)`.
 */
import type { Message } from './messages.js';
import type { Entry, HardState, Role, Snapshot, SnapshotMeta } from './types.js';

/**
 * What happened to the snapshot this follower is receiving, in order: a chunk that arrived
 * in order (write it after the previous one; offset 0 starts a new snapshot, abandoning any
 * other), or the transfer was dropped (remove what was written of it).
 */
export type ReceivedSnapshotStep =
  | { readonly type: 'chunk'; readonly meta: SnapshotMeta; readonly offset: number;
    readonly totalBytes: number; readonly data: Uint8Array }
  | { readonly type: 'abandon'; readonly meta: SnapshotMeta };

/** A read-index answer: serve `requestId` once applied >= readIndex; -1 means failed. */
export interface ReadState {
  readonly requestId: number;
  readonly readIndex: number;
}

/** Role and leader, reported when either changed. */
export interface SoftState {
  readonly role: Role;
  readonly leader: string | null;
}

export interface Ready {
  /** Changed since the last Ready: persist before `messages`. */
  readonly hardState: HardState | null;
  /** Persist (may overwrite a suffix: entries from `entries[0].index` on replace the log). */
  readonly entries: readonly Entry[];
  /** Chunks of a snapshot from the leader, to write before `snapshot` and the messages. */
  readonly receivedSnapshot: readonly ReceivedSnapshotStep[];
  /**
   * Received whole from the leader (its chunks are in this or earlier Readies): make it
   * durable, then restore the machine from it.
   */
  readonly snapshot: Snapshot | null;
  /** Leader appends/heartbeats: safe to send BEFORE this Ready is persisted. */
  readonly earlyMessages: readonly Message[];
  /** Everything else (votes, responses): send only AFTER persisting this Ready. */
  readonly messages: readonly Message[];
  /** Apply in order, after persisting. */
  readonly committedEntries: readonly Entry[];
  readonly readStates: readonly ReadState[];
  /** Present when role or leader changed. */
  readonly softState: SoftState | null;
}
