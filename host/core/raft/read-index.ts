/**
 * Read-index bookkeeping (§6.4 of the thesis, §8 of the paper) for both sides:
 * - leader: reads wait until the leader has committed an entry of its term, then every read
 *   queued at one moment shares one heartbeat round; a round is confirmed when a majority
 *   of the voters in effect (the leader included while it is one) answered a heartbeat
 *   carrying its context or a later one;
 * - follower: reads asked of the leader, waiting for its answer.
 *
 * Pure: no I/O, no clock. Time is the core's tick count. Every queue is bounded; a read
 * that waits longer than its deadline fails, so a lost message never strands a read.
 */
import { majority } from './quorum.js';

/** Reads pending on one node, on either side; more fail at once. */
export const READS_PENDING_MAX = 4096;
/** Heartbeat rounds in flight on a leader; further reads queue until one completes. */
export const READ_ROUNDS_MAX = 64;

/** A read waiting on the leader; `from` is the leader itself for a local read. */
export interface PendingRead {
  readonly requestId: number;
  readonly from: string;
  readonly sinceTick: number;
}

/** An answer to hand out: `readIndex` -1 means the read failed. */
export interface ReadAnswer {
  readonly read: PendingRead;
  readonly readIndex: number;
}

interface ReadRound {
  readonly context: number;
  readonly readIndex: number;
  readonly reads: readonly PendingRead[];
  readonly acks: Set<string>;
}

export class ReadTracker {
  /** Leader: reads waiting for the first commit of the leader's term. */
  private awaitingCommit: PendingRead[] = [];
  /** Leader: reads waiting for the next round to start. */
  private queued: PendingRead[] = [];
  /** Leader: rounds started, oldest first, contexts increasing. */
  private rounds: ReadRound[] = [];
  /** Leader: the context of the next round; contexts start at 1 (0 means none). */
  private nextContext = 1;
  /** Follower: requestId -> tick at which it was asked of the leader. */
  private remote = new Map<number, number>();

  pendingCount(): number {
    let count = this.awaitingCommit.length + this.queued.length + this.remote.size;
    for (const round of this.rounds) count += round.reads.length;
    return count;
  }

  isFull(): boolean {
    return this.pendingCount() >= READS_PENDING_MAX;
  }

  /** Leader: accepts a read; `committedInTerm` says whether it may join a round yet. */
  addLeaderRead(read: PendingRead, committedInTerm: boolean): void {
    (committedInTerm ? this.queued : this.awaitingCommit).push(read);
  }

  /** Leader: the first entry of its term committed; waiting reads may now join a round. */
  releaseAwaitingCommit(): void {
    if (this.awaitingCommit.length === 0) return;
    this.queued.push(...this.awaitingCommit);
    this.awaitingCommit = [];
  }

  hasQueued(): boolean {
    return this.queued.length > 0 && this.rounds.length < READ_ROUNDS_MAX;
  }

  /**
   * Leader: starts one round for every queued read, at `readIndex` (the commit index now).
   * Returns its context, or 0 when nothing was queued or too many rounds are in flight.
   */
  startRound(readIndex: number, selfId: string): number {
    if (!this.hasQueued()) return 0;
    const context = this.nextContext++;
    this.rounds.push({ context, readIndex, reads: this.queued, acks: new Set([selfId]) });
    this.queued = [];
    return context;
  }

  /** The newest round's context, carried by every heartbeat (0: no round pending). */
  latestContext(): number {
    const last = this.rounds.at(-1);
    return last === undefined ? 0 : last.context;
  }

  /**
   * Leader: `from` answered a heartbeat carrying `context`. Every round at or before the
   * newest confirmed one completes: leadership was confirmed after all of them began. Only
   * acknowledgements of `voters` (the configuration in effect now) count; a learner's or a
   * removed member's never does.
   */
  ack(from: string, context: number, voters: readonly string[]): ReadAnswer[] {
    const need = majority(voters.length);
    let confirmed = -1;
    for (let i = 0; i < this.rounds.length; i++) {
      const round = this.rounds[i]!;
      if (round.context > context) break;
      round.acks.add(from);
      let counted = 0;
      for (const id of round.acks) if (voters.includes(id)) counted++;
      if (counted >= need) confirmed = i;
    }
    return this.completeThrough(confirmed);
  }

  /** Leader of a single-voter cluster: its own ack is a majority. */
  completeAll(): ReadAnswer[] {
    return this.completeThrough(this.rounds.length - 1);
  }

  private completeThrough(last: number): ReadAnswer[] {
    if (last < 0) return [];
    const done = this.rounds.splice(0, last + 1);
    const answers: ReadAnswer[] = [];
    for (const round of done) {
      for (const read of round.reads) answers.push({ read, readIndex: round.readIndex });
    }
    return answers;
  }

  /** Follower: a read was asked of the leader. */
  addRemote(requestId: number, tick: number): void {
    this.remote.set(requestId, tick);
  }

  /** Follower: the leader answered; false when the read already failed or is unknown. */
  takeRemote(requestId: number): boolean {
    return this.remote.delete(requestId);
  }

  /** Every read on either side, failed: leadership or the leader changed. */
  failAll(selfId: string): ReadAnswer[] {
    const answers: ReadAnswer[] = [];
    const fail = (read: PendingRead): void => {
      answers.push({ read, readIndex: -1 });
    };
    this.awaitingCommit.forEach(fail);
    this.queued.forEach(fail);
    for (const round of this.rounds) round.reads.forEach(fail);
    for (const [requestId, sinceTick] of this.remote) fail({ requestId, from: selfId, sinceTick });
    this.awaitingCommit = [];
    this.queued = [];
    this.rounds = [];
    this.remote.clear();
    return answers;
  }

  /** Every read older than `deadlineTicks` at tick `now` fails (a message was lost). */
  expire(now: number, deadlineTicks: number, selfId: string): ReadAnswer[] {
    const answers: ReadAnswer[] = [];
    const late = (read: PendingRead): boolean => now - read.sinceTick >= deadlineTicks;
    const split = (reads: PendingRead[]): PendingRead[] => {
      const keep: PendingRead[] = [];
      for (const read of reads) {
        if (late(read)) answers.push({ read, readIndex: -1 });
        else keep.push(read);
      }
      return keep;
    };
    this.awaitingCommit = split(this.awaitingCommit);
    this.queued = split(this.queued);
    // A round is as old as its oldest read; it fails whole, keeping contexts in order.
    while (this.rounds.length > 0 && this.rounds[0]!.reads.some(late)) {
      for (const read of this.rounds.shift()!.reads) answers.push({ read, readIndex: -1 });
    }
    for (const [requestId, sinceTick] of this.remote) {
      if (now - sinceTick < deadlineTicks) continue;
      this.remote.delete(requestId);
      answers.push({ read: { requestId, from: selfId, sinceTick }, readIndex: -1 });
    }
    return answers;
  }
}
