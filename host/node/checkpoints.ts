/**
 * Checkpoint entries on the host side (assembly/checkpoints.ts compares them): when a leader
 * proposes one, and what a replica does with each verdict. Every `every` applied entries the
 * leader proposes its digest at its applied index; every replica, the leader included,
 * compares it with its own digest at that index when the entry applies. A divergence stops the
 * node: a replica whose state is not the leader's must not answer reads or vote on it.
 */
import { CHECKPOINT_RING_ENTRIES } from '../machine/abi.js';
import type { CheckpointOutcome } from '../machine/commands.js';

/** Default of HIVEKV_DIGEST_EVERY: entries between two checkpoints (0 turns them off). */
export const DIGEST_EVERY_DEFAULT = 10_000;
/**
 * A checkpoint is proposed only while fewer entries than this are appended past the leader's
 * applied index, so it lands well inside every replica's ring of recent digests.
 */
export const CHECKPOINT_LAG_MAX = CHECKPOINT_RING_ENTRIES / 2;

/** The process exit code of a node stopped by a divergence (1 is any other fatal error). */
export const DIVERGED_EXIT_CODE = 3;

/** This replica's state is not the one the leader's checkpoint describes. */
export class DivergenceError extends Error {
  override readonly name = 'DivergenceError';
  constructor(readonly entryIndex: number, readonly outcome: CheckpointOutcome) {
    super(`state diverged: at index ${outcome.index} the leader's digest is ` +
      `${outcome.expected} and this node's is ${outcome.own ?? 'unknown'} (checkpoint entry ` +
      `${entryIndex}); the node stops rather than serve a state the others do not have. ` +
      'Compare the data directories with `hivekv diff`, then replace this node\'s data ' +
      'directory with a copy of a healthy member\'s (docs/replay.md, "Checkpoints")');
  }
}

/** Counts of the checkpoints this node applied, by verdict. */
export interface CheckpointCounts {
  passed: number;
  unverifiable: number;
}

/**
 * When a leader proposes the next checkpoint: once its applied index reaches the next
 * multiple of `every`, with no earlier checkpoint of this term still unapplied and the log
 * not too far ahead of what is applied. Pure: the replica passes everything in.
 */
export class CheckpointSchedule {
  private proposed = { index: 0, term: 0 };
  private nextAt: number;

  constructor(private readonly every: number) {
    this.nextAt = every;
  }

  due(role: string, term: number, appliedIndex: number, lastIndex: number): boolean {
    if (this.every <= 0 || role !== 'leader' || appliedIndex < this.nextAt) return false;
    const last = this.proposed;
    const settled = appliedIndex >= last.index || term !== last.term;
    return settled && lastIndex - appliedIndex < CHECKPOINT_LAG_MAX;
  }

  /** The checkpoint for `appliedIndex` went into the log at `index` in `term`. */
  noteProposed(appliedIndex: number, index: number, term: number): void {
    this.proposed = { index, term };
    this.nextAt = (Math.floor(appliedIndex / this.every) + 1) * this.every;
  }
}
