/**
 * IdlePoll: the loop is polled only while no call is in flight, for at most the window
 * after it went idle, and only when the last idle gap was within the window; the time it
 * reports polled is the time it polled. A manual clock and a queue of next-turn callbacks
 * stand in for the event loop.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

import { IdlePoll } from '../../host/http/idle-poll.js';

class Loop {
  nowMs = 1000;
  private queue: Array<() => void> = [];

  readonly nextTurn = (run: () => void): void => {
    this.queue.push(run);
  };

  get pending(): number {
    return this.queue.length;
  }

  /** One turn of the loop: `stepMs` pass, then the callbacks queued before it run. */
  turn(stepMs: number): number {
    this.nowMs += stepMs;
    const runs = this.queue;
    this.queue = [];
    for (const run of runs) run();
    return runs.length;
  }
}

function setUp(windowMs: number): { loop: Loop; poll: IdlePoll } {
  const loop = new Loop();
  return { loop, poll: new IdlePoll(windowMs, () => loop.nowMs, loop.nextTurn) };
}

describe('IdlePoll', () => {
  it('polls for the window once idle, then lets the loop sleep', () => {
    const { loop, poll } = setUp(0.2);
    poll.arrived();
    poll.idle();
    let turns = 0;
    while (loop.pending > 0) turns += loop.turn(0.01);
    expect(turns).toBe(21);
    expect(poll.polledMs).toBeCloseTo(0.2, 9);
  });

  it('stops polling when a call arrives, counting the gap it polled', () => {
    const { loop, poll } = setUp(0.2);
    poll.idle();
    loop.turn(0.03);
    loop.turn(0.03);
    poll.arrived();
    expect(loop.turn(0.01)).toBe(1);
    expect(loop.pending).toBe(0);
    expect(poll.polledMs).toBeCloseTo(0.06, 9);
  });

  it('does not wait for a client that paused longer than the window, until one comes back',
    () => {
      const { loop, poll } = setUp(0.2);
      poll.idle();
      while (loop.pending > 0) loop.turn(0.05);
      loop.nowMs += 5;
      poll.arrived();
      poll.idle();
      expect(loop.pending).toBe(0);
      loop.nowMs += 0.1;
      poll.arrived();
      poll.idle();
      expect(loop.pending).toBe(1);
    });

  it('keeps one poll in flight however often the node goes idle', () => {
    const { loop, poll } = setUp(0.2);
    poll.idle();
    poll.arrived();
    poll.idle();
    poll.idle();
    expect(loop.pending).toBe(1);
  });

  it('never polls with a window of 0', () => {
    const { loop, poll } = setUp(0);
    poll.idle();
    poll.arrived();
    poll.idle();
    expect(loop.pending).toBe(0);
    expect(poll.polledMs).toBe(0);
  });

  it('refuses a window outside 0 to 1,000 ms', () => {
    expect(() => new IdlePoll(-1, () => 0, () => undefined)).toThrow(/assertion failed/);
    expect(() => new IdlePoll(1001, () => 0, () => undefined)).toThrow(/assertion failed/);
  });

  it('polls only while idle, within the window of each gap, and counts no more than that',
    () => {
      // Times in whole microseconds, turns weighted so that polls run for several turns.
      const micros = (max: number) => fc.integer({ min: 0, max }).map((us) => us / 1000);
      const event = fc.oneof(
        { arbitrary: fc.record({ kind: fc.constant('arrive' as const) }), weight: 1 },
        { arbitrary: fc.record({ kind: fc.constant('answer' as const) }), weight: 2 },
        { arbitrary: fc.record({ kind: fc.constant('turn' as const), stepMs: micros(300) }),
          weight: 6 },
        { arbitrary: fc.record({ kind: fc.constant('pause' as const), pauseMs: micros(2000) }),
          weight: 1 },
      );
      fc.assert(fc.property(fc.constantFrom(0, 0.05, 0.2, 1), 
        fc.array(event, { maxLength: 200 }), (windowMs, events) => {
          const { loop, poll } = setUp(windowMs);
          // The model: calls in flight, and when the current idle gap began.
          let inFlight = 0;
          let idleSince: number | null = 1000;
          let idleMsTotal = 0;
          let lastGapShort = true;
          poll.idle();
          for (const e of events) {
            if (e.kind === 'arrive') {
              if (idleSince !== null) {
                idleMsTotal += loop.nowMs - idleSince;
                lastGapShort = loop.nowMs - idleSince <= windowMs;
              }
              idleSince = null;
              inFlight++;
              poll.arrived();
            } else if (e.kind === 'answer' && inFlight > 0) {
              inFlight--;
              if (inFlight === 0) {
                idleSince = loop.nowMs;
                poll.idle();
                if (windowMs > 0 && lastGapShort) expect(loop.pending).toBe(1);
              }
            } else if (e.kind === 'turn') {
              const ran = loop.turn(e.stepMs);
              // A poll that ran found the loop idle, or stopped at its first turn after a call.
              expect(ran).toBeLessThanOrEqual(1);
              if (ran === 1 && loop.pending === 1) {
                expect(inFlight).toBe(0);
                expect(idleSince).not.toBeNull();
                expect(loop.nowMs - idleSince!).toBeLessThan(windowMs);
                expect(lastGapShort).toBe(true);
              }
            } else if (e.kind === 'pause') {
              loop.nowMs += e.pauseMs;
            }
            expect(loop.pending).toBeLessThanOrEqual(1);
            if (windowMs === 0) expect(loop.pending).toBe(0);
          }
          expect(poll.polledMs).toBeLessThanOrEqual(idleMsTotal +
            (idleSince === null ? 0 : loop.nowMs - idleSince) + windowMs + 1e-9);
        }), { numRuns: 300 });
    });
});
