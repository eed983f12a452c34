/**
 * Majority arithmetic for one voter set: the committed index from match indexes (§5.3,
 * §5.4.2) and the result of an election from votes (§5.2).
 *
 * Pure: no I/O. Differentially tested against naive versions in test/unit/raft-quorum.
 */

export type VoteResult = 'won' | 'lost' | 'pending';

/** The number of voters that make a majority of `voterCount` (>= 1). */
export function majority(voterCount: number): number {
  if (!Number.isInteger(voterCount) || voterCount < 1) {
    throw new Error(`quorum: voterCount must be a positive integer, got ${voterCount}`);
  }
  return Math.floor(voterCount / 2) + 1;
}

/**
 * The largest index that a majority of voters hold: sort descending and take the
 * majority-th value. `matchIndexes` has one value per voter (missing voters count as 0).
 */
export function committedIndex(matchIndexes: readonly number[]): number {
  const need = majority(matchIndexes.length);
  const sorted = [...matchIndexes].sort((a, b) => b - a);
  const value = sorted[need - 1];
  if (value === undefined) throw new Error('quorum: sorted match indexes lost a value');
  return value;
}

/**
 * The outcome of a vote among `voterCount` voters: `granted` and `rejected` count distinct
 * voters. Lost as soon as a majority can no longer be reached.
 */
export function voteResult(voterCount: number, granted: number, rejected: number): VoteResult {
  const need = majority(voterCount);
  if (granted + rejected > voterCount) {
    throw new Error(`quorum: ${granted} + ${rejected} votes from ${voterCount} voters`);
  }
  if (granted >= need) return 'won';
  if (voterCount - rejected < need) return 'lost';
  return 'pending';
}
