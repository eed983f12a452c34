/**
 * A new leader holds its proposals until it knows a majority of the voters' clocks, for a
 * bounded number of ticks (host/node/leader-clock-wait.ts).
 */
import { expect, it } from 'vitest';
import { LeaderClockWait } from '../../host/node/leader-clock-wait.js';

const NOT_LEADING = -1;

function waitWith(known: { value: boolean }, waitTicks = 3) {
  const waitedOut: number[] = [];
  const wait = new LeaderClockWait({ knowsMajority: () => known.value }, waitTicks,
    (ticks) => waitedOut.push(ticks));
  return { wait, waitedOut };
}

it('a leader may stamp once a majority of the voters\' clocks are known, not before', () => {
  const known = { value: false };
  const { wait, waitedOut } = waitWith(known);
  expect(wait.mayStamp(2)).toBe(false);
  expect(wait.tick(2)).toBe(false);
  expect(wait.waiting(2)).toBe(true);
  expect(wait.waiting(NOT_LEADING)).toBe(false);
  known.value = true;
  expect(wait.mayStamp(2)).toBe(true);
  expect(wait.waiting(2)).toBe(false);
  // Known for the term: a majority unheard later (statuses late) holds nothing.
  known.value = false;
  expect(wait.tick(2)).toBe(true);
  expect(wait.mayStamp(2)).toBe(true);
  expect(waitedOut).toEqual([]);
});

it('each new term of leading waits again', () => {
  const known = { value: true };
  const { wait } = waitWith(known);
  expect(wait.mayStamp(2)).toBe(true);
  known.value = false;
  expect(wait.mayStamp(NOT_LEADING)).toBe(true);
  expect(wait.mayStamp(3)).toBe(false);
  known.value = true;
  expect(wait.mayStamp(3)).toBe(true);
});

it('the wait ends after its ticks, stamping by the own clock, and says so once', () => {
  const known = { value: false };
  const { wait, waitedOut } = waitWith(known, 3);
  expect([1, 2, 3].map(() => wait.tick(5))).toEqual([false, false, false]);
  expect(wait.mayStamp(5)).toBe(true);
  expect(wait.tick(5)).toBe(true);
  expect(waitedOut).toEqual([3]);
  // The next term starts its count again.
  expect(wait.tick(6)).toBe(false);
});

it('a node that does not lead never waits (its leader stamps what it forwards)', () => {
  const { wait } = waitWith({ value: false });
  expect(wait.mayStamp(NOT_LEADING)).toBe(true);
  expect(wait.tick(NOT_LEADING)).toBe(true);
});

it('without a stamping clock nothing waits; a wait of no ticks is refused', () => {
  expect(new LeaderClockWait(undefined, 1).mayStamp(1)).toBe(true);
  expect(() => new LeaderClockWait(undefined, 0)).toThrow(/positive integer/);
});
