/**
 * What a leader knows about one follower's log (§5.3 nextIndex/matchIndex), and how it
 * paces sending to it.
 *
 * Pure: no I/O. Three states, after etcd's raft design:
 * - `probe`: the leader does not know where the logs match; one append at a time, waiting
 *   for its answer (or the next heartbeat answer) before sending another.
 * - `replicate`: the logs match at `matchIndex`; appends are pipelined, at most
 *   `maxInflightAppends` messages unacknowledged, `nextIndex` moving optimistically.
 * - `snapshot`: the follower is behind the compacted log; a snapshot is being streamed in
 *   chunks (`SnapshotTransfer`) and appends wait until it is installed.
 */
import type { SnapshotMeta } from './types.js';
import { raftAssert } from './log.js';

export type ProgressState = 'probe' | 'replicate' | 'snapshot';

/** A snapshot being streamed to one follower, with cumulative acknowledgements. */
export interface SnapshotTransfer {
  readonly meta: SnapshotMeta;
  /** Length of the snapshot's data; its bytes stay in the driver's storage. */
  readonly totalBytes: number;
  /** Bytes [0, ackedBytes) are acknowledged by the follower. */
  ackedBytes: number;
  /** Bytes [0, sentBytes) have been sent at least once. */
  sentBytes: number;
  /** Leader ticks since the acknowledgement last moved, to resend lost chunks. */
  idleTicks: number;
  /**
   * Resends since the acknowledgement last moved: each doubles the wait before the next, so
   * a follower that refuses the snapshot (no room for it) is not sent its first chunks anew
   * every few heartbeats.
   */
  stalls: number;
  /** At least one chunk went out (an empty snapshot still needs one, zero-byte, chunk). */
  anySent: boolean;
}

export class Progress {
  /** Highest index known to be replicated on the follower. */
  matchIndex = 0;
  /** Index of the next entry to send. Invariant: `nextIndex > matchIndex`. */
  nextIndex: number;
  state: ProgressState = 'probe';
  /** Probe state: an append is out and unanswered; send no other until an answer. */
  probeSent = false;
  /** Replicate state: last index carried by each unacknowledged append, oldest first. */
  readonly inflightLastIndexes: number[] = [];
  /** Heard from since the last check-quorum round (§6.2 thesis). */
  recentActive = false;
  /** The leader's tick count when this member last answered; -1: never. */
  lastHeardTick = -1;
  transfer: SnapshotTransfer | null = null;

  constructor(nextIndex: number) {
    this.nextIndex = nextIndex;
  }

  becomeProbe(): void {
    if (this.state === 'snapshot' && this.transfer !== null) {
      // After a snapshot the follower holds everything up to it.
      this.nextIndex = Math.max(this.matchIndex + 1, this.transfer.meta.index + 1);
    } else {
      this.nextIndex = this.matchIndex + 1;
    }
    this.state = 'probe';
    this.probeSent = false;
    this.inflightLastIndexes.length = 0;
    this.transfer = null;
  }

  becomeReplicate(): void {
    this.state = 'replicate';
    this.nextIndex = this.matchIndex + 1;
    this.probeSent = false;
    this.inflightLastIndexes.length = 0;
    this.transfer = null;
  }

  becomeSnapshot(meta: SnapshotMeta, totalBytes: number): void {
    this.state = 'snapshot';
    this.probeSent = false;
    this.inflightLastIndexes.length = 0;
    this.transfer = { meta, totalBytes, ackedBytes: 0, sentBytes: 0, idleTicks: 0,
      stalls: 0, anySent: false };
  }

  /** True when no append may be sent now. */
  isPaused(maxInflightAppends: number): boolean {
    switch (this.state) {
      case 'probe':
        return this.probeSent;
      case 'replicate':
        return this.inflightLastIndexes.length >= maxInflightAppends;
      case 'snapshot':
        return true;
    }
  }

  /** Records an append carrying entries up to `lastIndex` (none: `lastIndex < nextIndex`). */
  sentAppend(lastIndex: number, entryCount: number): void {
    if (this.state === 'replicate') {
      if (entryCount > 0) {
        this.nextIndex = lastIndex + 1;
        this.inflightLastIndexes.push(lastIndex);
      }
    } else if (this.state === 'probe') {
      this.probeSent = true;
    }
  }

  /** The follower holds everything up to `index`. Returns true when that is news. */
  maybeUpdate(index: number): boolean {
    let updated = false;
    if (index > this.matchIndex) {
      this.matchIndex = index;
      updated = true;
      this.probeSent = false;
    }
    this.nextIndex = Math.max(this.nextIndex, index + 1);
    this.freeInflightTo(index);
    return updated;
  }

  /** Acknowledged appends leave the window. */
  freeInflightTo(index: number): void {
    let drop = 0;
    while (drop < this.inflightLastIndexes.length && this.inflightLastIndexes[drop]! <= index) {
      drop++;
    }
    if (drop > 0) this.inflightLastIndexes.splice(0, drop);
  }

  /**
   * The follower rejected an append at `rejectedIndex`; `hintIndex` is where the logs may
   * match at best. Returns false when the rejection is stale (answers an older append).
   */
  maybeDecrease(rejectedIndex: number, hintIndex: number): boolean {
    if (this.state === 'snapshot') return false;
    if (this.state === 'replicate') {
      if (rejectedIndex <= this.matchIndex) return false;
      this.becomeProbe();
      this.nextIndex = Math.max(this.matchIndex + 1, Math.min(rejectedIndex, hintIndex + 1));
      return true;
    }
    if (this.nextIndex - 1 !== rejectedIndex) return false;
    this.nextIndex = Math.max(this.matchIndex + 1, Math.min(rejectedIndex, hintIndex + 1));
    this.probeSent = false;
    raftAssert(this.nextIndex > this.matchIndex, 'nextIndex must stay above matchIndex');
    return true;
  }
}
