/**
 * The loop's stalls in the log: a check timer that fires late by LOOP_STALL_MS or more is a
 * stall; the log gets one line per window at most, with the stalls since the last line and
 * the longest of them, and the total counts every one.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

import {
  LOOP_CHECK_MS, LOOP_STALL_MS, LOOP_STALL_REPORT_MS, LoopStallWatch, type LoopStallReport,
} from '../../host/node/loop-stalls.js';

/** Checks on time for `ms`, from `nowMs`; returns the time reached and what was told. */
function onTime(watch: LoopStallWatch, nowMs: number, ms: number):
  { nowMs: number; told: LoopStallReport[] } {
  const told: LoopStallReport[] = [];
  for (let at = nowMs + LOOP_CHECK_MS; at <= nowMs + ms; at += LOOP_CHECK_MS) {
    const report = watch.check(at);
    if (report !== null) told.push(report);
  }
  return { nowMs: nowMs + Math.floor(ms / LOOP_CHECK_MS) * LOOP_CHECK_MS, told };
}

describe('the event loop stall watch', () => {
  it('says nothing of a loop that fires on time, or a little late', () => {
    const watch = new LoopStallWatch(0);
    let now = 0;
    for (let i = 0; i < 1000; i++) {
      now += LOOP_CHECK_MS + (i % 7 === 0 ? LOOP_STALL_MS - 1 : 3);
      expect(watch.check(now)).toBeNull();
    }
    expect(watch.total).toBe(0);
  });

  it('tells the first stall at once, then at most one line per window', () => {
    const watch = new LoopStallWatch(0);
    let { nowMs: now, told } = onTime(watch, 0, 1000);
    expect(told).toEqual([]);
    now += LOOP_CHECK_MS + 140;
    expect(watch.check(now)).toEqual({ stalls: 1, longestMs: 140, sinceMs: now });
    const reportedAt = now;
    // Three more within the window: held back, then told together with the longest.
    for (const late of [100, 250, 120]) {
      now += LOOP_CHECK_MS + late;
      expect(watch.check(now)).toBeNull();
    }
    while (now - reportedAt < LOOP_STALL_REPORT_MS - LOOP_CHECK_MS) {
      now += LOOP_CHECK_MS;
      expect(watch.check(now)).toBeNull();
    }
    now += LOOP_CHECK_MS;
    expect(watch.check(now)).toEqual({ stalls: 3, longestMs: 250, sinceMs: now - reportedAt });
    expect(watch.total).toBe(4);
    // Nothing held back once told.
    expect(onTime(watch, now, 2 * LOOP_STALL_REPORT_MS).told).toEqual([]);
  });

  it('counts every stall and tells each one in some line, whatever the timing', () => {
    fc.assert(fc.property(fc.array(fc.integer({ min: 0, max: 3 * LOOP_STALL_MS }),
      { minLength: 1, maxLength: 400 }), (lates) => {
      const watch = new LoopStallWatch(0);
      let now = 0;
      let told = 0;
      let longestTold = 0;
      for (const late of lates) {
        now += LOOP_CHECK_MS + late;
        const report = watch.check(now);
        if (report !== null) {
          told += report.stalls;
          longestTold = Math.max(longestTold, report.longestMs);
        }
      }
      // Held-back stalls are told within a window of checks on time.
      for (const report of onTime(watch, now, LOOP_STALL_REPORT_MS + LOOP_CHECK_MS).told) {
        told += report.stalls;
        longestTold = Math.max(longestTold, report.longestMs);
      }
      const stalls = lates.filter((late) => late >= LOOP_STALL_MS);
      expect(watch.total).toBe(stalls.length);
      expect(told).toBe(stalls.length);
      expect(longestTold).toBe(Math.max(0, ...stalls));
    }));
  });

  it('refuses a window shorter than its check', () => {
    expect(() => new LoopStallWatch(0, 100, 100, 50)).toThrow(/assertion failed/);
  });
});
