/** Quorum math, table-driven and differential against naive second versions (§5.2, §5.3). */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { committedIndex, majority, voteResult } from '../../host/core/raft/quorum.js';

/** Naive: the largest index held by at least a majority, by trying every candidate. */
function naiveCommitted(matches: readonly number[]): number {
  let best = 0;
  for (const candidate of matches) {
    const holders = matches.filter((m) => m >= candidate).length;
    if (holders * 2 > matches.length && candidate > best) best = candidate;
  }
  return best;
}

/** Naive: won when granted is over half; lost when even all outstanding could not win. */
function naiveVote(voters: number, granted: number, rejected: number): string {
  if (granted * 2 > voters) return 'won';
  if ((voters - rejected) * 2 <= voters) return 'lost';
  return 'pending';
}

describe('quorum', () => {
  it.each([
    [1, 1], [2, 2], [3, 2], [4, 3], [5, 3], [6, 4], [7, 4],
  ])('majority of %i voters is %i (§5.2)', (voters, need) => {
    expect(majority(voters)).toBe(need);
  });

  it.each([
    [[5], 5], [[5, 3], 3], [[5, 3, 1], 3], [[1, 3, 5], 3], [[0, 0, 7], 0],
    [[4, 4, 2, 2], 2], [[9, 8, 7, 6, 5], 7],
  ])('committed index of %j is %i (§5.3)', (matches, expected) => {
    expect(committedIndex(matches)).toBe(expected);
  });

  it.each([
    [3, 2, 0, 'won'], [3, 1, 1, 'pending'], [3, 1, 2, 'lost'], [4, 2, 2, 'lost'],
    [4, 3, 0, 'won'], [5, 2, 2, 'pending'], [1, 1, 0, 'won'],
  ])('%i voters, %i granted, %i rejected: %s (§5.2)', (voters, granted, rejected, result) => {
    expect(voteResult(voters, granted, rejected)).toBe(result);
  });

  it('committed index agrees with the naive version (differential)', () => {
    fc.assert(fc.property(fc.array(fc.nat(50), { minLength: 1, maxLength: 9 }), (matches) => {
      expect(committedIndex(matches)).toBe(naiveCommitted(matches));
    }), { seed: Number(process.env['SEED'] ?? 7), numRuns: 500 });
  });

  it('vote result agrees with the naive version (differential)', () => {
    for (let voters = 1; voters <= 9; voters++) {
      for (let granted = 0; granted <= voters; granted++) {
        for (let rejected = 0; granted + rejected <= voters; rejected++) {
          expect(voteResult(voters, granted, rejected)).toBe(naiveVote(voters, granted, rejected));
        }
      }
    }
  });
});
