/**
 * `Ready`: everything the Raft core asks its driver to do after a batch of inputs.
 *
 * Pure types: no I/O. The driver (host/node/replica.ts, and the simulator) MUST handle one
 * Ready in exactly this order, then call `advance(ready)` before asking for the next one:
 *
 *   1. send `earlyMessages` (a leader's appends and heartbeats, §10.2.1 of the thesis: the
 *      leader writes its log in parallel with replicating it, and counts its own copy
 *      toward commit only once `persisted` says it is durable);
 *   2. write the `receivedSnapshot` steps to the snapshot being received, in order (storage
 *      that refuses the bytes for want of room: `abandonReceivedSnapshot`); a `snapshot`
 *      (one received whole and written, see 7): first wait until every earlier write is
 *      durable, then make it durable (and drop every log entry after its index: the log
 *      restarts after it) and restore the machine from it, before anything else of this Ready;
 *   3. apply `committedEntries` in order (they are durable here already; a `config` entry
 *      changes nothing in the machine: the core already uses it); hand out `readStates`
 *      (serve a read once applied >= readIndex; -1: answer 503) and `membershipAnswers`;
 *   4. hand `entries` (they may overwrite a suffix) and `hardState` to storage, in order
 *      after every earlier Ready's;
 *   5. `advance(ready)`; the next Ready may be taken at once;
 *   6. once an fsync covers this Ready's entries and hard state: send its `messages` (votes
 *      and responses promise durable state, §5.1 / §5.2), in Ready order, then call
 *      `persisted(lastIndex, lastTerm)` for the last entry that fsync covered;
 *   7. once the steps of 2 have written every byte of a snapshot, and this Ready is done:
 *      `snapshotWritten(index)`. The core installs it only then (a driver that runs out of
 *      room on its last bytes abandons it instead), and hands it out in a later Ready.
 */
import type { MembershipRefusal } from './configuration.js';
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

/**
 * What became of a membership change: the `config` entry the leader appended (the change is
 * done when that index commits with that term), or why it was refused.
 */
export type MembershipResult =
  | { readonly kind: 'proposed'; readonly index: number; readonly term: number }
  | { readonly kind: 'refused'; readonly refusal: MembershipRefusal; readonly detail: string };

/** The leader's answer to a change this node forwarded under `requestId`. */
export interface MembershipAnswer {
  readonly requestId: number;
  readonly result: MembershipResult;
}

/** Role and leader, reported when either changed. */
export interface SoftState {
  readonly role: Role;
  readonly leader: string | null;
}

export interface Ready {
  /** Changed since the last Ready: durable before `messages` are sent. */
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
  /** Everything else (votes, responses): send only once this Ready is durable. */
  readonly messages: readonly Message[];
  /** Apply in order; every one is committed and already durable on this node. */
  readonly committedEntries: readonly Entry[];
  readonly readStates: readonly ReadState[];
  /** Answers to membership changes this node forwarded to the leader. */
  readonly membershipAnswers: readonly MembershipAnswer[];
  /** Present when role or leader changed. */
  readonly softState: SoftState | null;
}
