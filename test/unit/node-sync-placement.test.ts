/**
 * Where a group's fsync runs (host/node/sync-placement.ts): on the event loop only after a
 * run of lone calls seen with the loop free, and back to the thread pool the moment calls
 * are seen queued (a group of several entries, or a second entry in one turn of the loop).
 */
import { expect, it } from 'vitest';

import { LONE_SYNCS_BEFORE_LOOP, SyncPlacement } from '../../host/node/sync-placement.js';

/** Places syncs of `entries` each, one a turn, and returns where each ran. */
function inTurns(placement: SyncPlacement, entries: readonly number[]): boolean[] {
  return entries.map((n) => {
    let turnEnds = 0;
    const onLoop = placement.place(n, () => { turnEnds++; });
    expect(turnEnds).toBe(onLoop && n > 0 ? 1 : 0);
    placement.endTurn();
    return onLoop;
  });
}

it('takes the loop after a run of lone calls, and keeps it while calls come one a turn', () => {
  const placement = new SyncPlacement();
  const lone = Array<number>(LONE_SYNCS_BEFORE_LOOP).fill(1);
  expect(inTurns(placement, lone)).toEqual(lone.map(() => false));
  expect(inTurns(placement, [1, 1, 1])).toEqual([true, true, true]);
});

it('a sync of no entry neither starts nor breaks the run', () => {
  const placement = new SyncPlacement();
  const seen = inTurns(placement, [...Array<number>(LONE_SYNCS_BEFORE_LOOP - 1).fill(1), 0, 0, 1]);
  expect(seen.every((onLoop) => !onLoop)).toBe(true);
  // The run is complete; a commit index between lone calls changes nothing.
  expect(inTurns(placement, [1, 0, 1])).toEqual([true, true, true]);
});

it('gives the loop up at a group of several entries, and starts the run over', () => {
  const placement = new SyncPlacement();
  inTurns(placement, Array<number>(LONE_SYNCS_BEFORE_LOOP).fill(1));
  // The lone call after the group is the first of a new run.
  expect(inTurns(placement, [1, 3, 1])).toEqual([true, false, false]);
  const again = inTurns(placement, Array<number>(LONE_SYNCS_BEFORE_LOOP - 1).fill(1));
  expect(again.every((onLoop) => !onLoop)).toBe(true);
  expect(inTurns(placement, [1])).toEqual([true]);
});

it('gives the loop up when a second entry is synced in the turn of one it ran', () => {
  const placement = new SyncPlacement();
  inTurns(placement, Array<number>(LONE_SYNCS_BEFORE_LOOP).fill(1));
  let turnEnds = 0;
  const count = () => { turnEnds++; };
  // One turn: the loop runs one lone sync, then a commit index, then another call's entry.
  expect(placement.place(1, count)).toBe(true);
  expect(placement.place(0, count)).toBe(true);
  expect(placement.place(1, count)).toBe(false);
  expect(turnEnds).toBe(1);
  placement.endTurn();
  // Back on the pool until a new run of lone calls.
  expect(inTurns(placement, [1, 1])).toEqual([false, false]);
});

it('a run broken before its end starts over', () => {
  const placement = new SyncPlacement();
  const almost = Array<number>(LONE_SYNCS_BEFORE_LOOP - 1).fill(1);
  inTurns(placement, [...almost, 2]);
  expect(inTurns(placement, almost).every((onLoop) => !onLoop)).toBe(true);
  expect(inTurns(placement, [1, 1])).toEqual([false, true]);
});
