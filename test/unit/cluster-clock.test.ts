// The stamping clock (host/node/cluster-clock.ts): the own clock held within what a majority
// of voters' clocks allow. Properties over generated clusters where fewer than a majority of
// clocks are wrong by any amount, and the cache's refresh on a wall-clock step.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

import {
  boundedClock, CLOCK_REFRESH_EVERY_MS, CLOCK_TOLERANCE_MS, ClusterClock, type BoundedClock,
} from '../../host/node/cluster-clock.js';

const YEAR_MS = 365 * 24 * 3600 * 1000;
const TRUE_MS = 1_790_000_000_000;

describe('boundedClock', () => {
  it('a single node, or too few clocks known, keeps its own clock', () => {
    expect(boundedClock(TRUE_MS + YEAR_MS, [TRUE_MS + YEAR_MS], 1).nowMs).toBe(TRUE_MS + YEAR_MS);
    expect(boundedClock(TRUE_MS + YEAR_MS, [TRUE_MS + YEAR_MS], 3).standing).toBe('within');
    expect(boundedClock(TRUE_MS, [TRUE_MS, TRUE_MS + 9], 5).nowMs).toBe(TRUE_MS);
  });

  it('a leader a year ahead of two right voters stamps by theirs', () => {
    const clock = boundedClock(TRUE_MS + YEAR_MS, [TRUE_MS + YEAR_MS, TRUE_MS + 5, TRUE_MS], 3);
    expect(clock).toEqual({ nowMs: TRUE_MS + 5, standing: 'ahead', offsetMs: YEAR_MS - 5 });
    const behind = boundedClock(TRUE_MS - YEAR_MS, [TRUE_MS - YEAR_MS, TRUE_MS + 5, TRUE_MS], 3);
    expect(behind).toMatchObject({ nowMs: TRUE_MS, standing: 'behind' });
  });

  it('a right leader with one voter a year off keeps its own clock', () => {
    expect(boundedClock(TRUE_MS, [TRUE_MS, TRUE_MS + YEAR_MS, TRUE_MS - 3], 3))
      .toEqual({ nowMs: TRUE_MS, standing: 'within', offsetMs: 0 });
    expect(boundedClock(TRUE_MS, [TRUE_MS, TRUE_MS - YEAR_MS, TRUE_MS - 3], 3).nowMs)
      .toBe(TRUE_MS);
    expect(boundedClock(TRUE_MS, [TRUE_MS, TRUE_MS + YEAR_MS], 3).nowMs).toBe(TRUE_MS);
  });

  it('with a voter unheard, the earlier of two disagreeing clocks stamps: never the later', () => {
    // Which of the two is wrong cannot be told; a stamp too late would expire keys early.
    expect(boundedClock(TRUE_MS, [TRUE_MS, TRUE_MS - YEAR_MS], 3))
      .toMatchObject({ nowMs: TRUE_MS - YEAR_MS, standing: 'ahead' });
    expect(boundedClock(TRUE_MS + YEAR_MS, [TRUE_MS + YEAR_MS, TRUE_MS], 3).nowMs).toBe(TRUE_MS);
  });

  it('within the tolerance the own clock stands, past it the bound replaces it', () => {
    const voters = [TRUE_MS + 2000, TRUE_MS, TRUE_MS];
    expect(boundedClock(TRUE_MS + CLOCK_TOLERANCE_MS, voters, 3))
      .toEqual({ nowMs: TRUE_MS + CLOCK_TOLERANCE_MS, standing: 'within',
        offsetMs: CLOCK_TOLERANCE_MS });
    expect(boundedClock(TRUE_MS + CLOCK_TOLERANCE_MS + 1, voters, 3).nowMs).toBe(TRUE_MS);
  });

  // Voters' clocks: a majority within 20 ms of the true time, the rest anywhere in a year
  // either way. The own clock is one of them; which others are known (heard lately) varies.
  const cluster = fc.integer({ min: 1, max: 7 }).chain((voterCount) => {
    const quorum = Math.floor(voterCount / 2) + 1;
    return fc.record({
      voterCount: fc.constant(voterCount),
      right: fc.array(fc.integer({ min: -20, max: 20 }), { minLength: quorum,
        maxLength: voterCount }),
      wrong: fc.array(fc.integer({ min: -YEAR_MS, max: YEAR_MS }), { maxLength: voterCount }),
      ownRight: fc.boolean(),
      knownMask: fc.array(fc.boolean(), { minLength: voterCount, maxLength: voterCount }),
    });
  });

  it('with a majority of clocks right, never stamps later than they read, nor earlier with ' +
    'every clock known; a right own clock stands then', () => {
    fc.assert(fc.property(cluster, ({ voterCount, right, wrong, ownRight, knownMask }) => {
      const quorum = Math.floor(voterCount / 2) + 1;
      const clocks = [...right, ...wrong.slice(0, voterCount - right.length)]
        .map((d) => TRUE_MS + d);
      const ownIndex = ownRight ? 0 : clocks.length - 1;
      const ownMs = clocks[ownIndex]!;
      const others = clocks.filter((_, i) => i !== ownIndex && knownMask[i] === true);
      const clock = boundedClock(ownMs, [ownMs, ...others], voterCount);
      const rightMin = TRUE_MS + Math.min(...right);
      const rightMax = TRUE_MS + Math.max(...right);
      if (others.length + 1 < quorum) {
        expect(clock.nowMs).toBe(ownMs);
        return;
      }
      expect(clock.nowMs).toBeLessThanOrEqual(rightMax + CLOCK_TOLERANCE_MS);
      if (others.length + 1 < voterCount) return;
      expect(clock.nowMs).toBeGreaterThanOrEqual(rightMin - CLOCK_TOLERANCE_MS);
      if (ownIndex < right.length) expect(clock.nowMs).toBe(ownMs);
    }), { numRuns: 3000 });
  });
});

describe('ClusterClock', () => {
  function harness(voterClocksMs: () => number[]) {
    const time = { wall: TRUE_MS, monotonic: 0 };
    const standings: string[] = [];
    let refreshes = 0;
    const clock = new ClusterClock({
      wallMs: () => time.wall, monotonicMs: () => time.monotonic,
      voterClocks: (ownMs) => {
        refreshes += 1;
        return { voterCount: 3, clocksMs: [ownMs, ...voterClocksMs()] };
      },
      onStanding: (bounded) => void standings.push(bounded.standing),
    });
    return { clock, time, standings, refreshes: () => refreshes };
  }

  it('caches the correction, refreshes on time and at once when the wall clock steps', () => {
    const { clock, time, standings, refreshes } = harness(() => [TRUE_MS, TRUE_MS]);
    expect(clock.nowMs()).toBe(TRUE_MS);
    time.wall += 10;
    time.monotonic += 10;
    expect(clock.nowMs()).toBe(TRUE_MS + 10);
    expect(refreshes()).toBe(1);
    // The host's clock is set a year ahead: the very next stamp still reads the voters' time.
    time.wall += YEAR_MS;
    expect(clock.nowMs()).toBe(TRUE_MS);
    expect(refreshes()).toBe(2);
    expect(clock.offsetMs()).toBe(YEAR_MS + 10);
    expect(standings).toEqual(['ahead']);
    time.wall += CLOCK_REFRESH_EVERY_MS - YEAR_MS;
    time.monotonic += CLOCK_REFRESH_EVERY_MS;
    expect(clock.nowMs()).toBe(TRUE_MS + 10 + CLOCK_REFRESH_EVERY_MS);
    expect(standings).toEqual(['ahead', 'within']);
  });

  it('moves on with the monotonic clock between refreshes while bounded', () => {
    let peers = TRUE_MS;
    const { clock, time } = harness(() => [peers, peers]);
    time.wall = TRUE_MS + YEAR_MS;
    expect(clock.nowMs()).toBe(TRUE_MS);
    time.wall += 40;
    time.monotonic += 40;
    peers += 40;
    expect(clock.nowMs()).toBe(TRUE_MS + 40);
  });

  it('knows a majority once q clocks are heard, and the next stamp is bounded at once', () => {
    let heard: number[] = [];
    const { clock, time } = harness(() => heard);
    time.wall = TRUE_MS + YEAR_MS;
    // Only its own clock: no bound, and the own clock stands.
    expect(clock.knowsMajority()).toBe(false);
    expect(clock.nowMs()).toBe(TRUE_MS + YEAR_MS);
    // A status arrives within the cached refresh period: asking works the bound out afresh.
    heard = [TRUE_MS];
    time.monotonic += 1;
    expect(clock.knowsMajority()).toBe(true);
    expect(clock.nowMs()).toBe(TRUE_MS);
  });
});
