/**
 * The event loop's stalls, told in the log. Every call, Raft message and fsync completion of
 * a node waits on its one loop, so a turn that ran long (a large snapshot slice, a full
 * collection, a process the machine did not give a core) is felt by every client at once: a
 * latency spike with no error. `/metrics` has the loop's lag as a distribution
 * (`hivekv_nodejs_eventloop_lag_*`); this names the moment, so an operator reading the log at
 * the time of a spike finds it there.
 *
 * A timer fires every `LOOP_CHECK_MS`; it fires late by as long as the loop was held. A late
 * firing of `LOOP_STALL_MS` or more is a stall. The first stall is told at once; after it the
 * log gets at most one line per `LOOP_STALL_REPORT_MS`: the stalls since the last line, and
 * the longest of them, so a loop held again and again writes a line every ten seconds, not
 * one per stall. (The peer port's `LogThrottle` holds lines back until the next event of
 * their kind; here the held stalls are told at the end of their window, with the longest.)
 * Pure: the clock is given, and the caller writes the line.
 */

/** How often the loop is checked; the timer costs ten wake-ups a second. */
export const LOOP_CHECK_MS = 100;
/** A timer late by this much or more counts as a stall. */
export const LOOP_STALL_MS = 100;
/** At most one line per this window. */
export const LOOP_STALL_REPORT_MS = 10_000;

/** What one log line says: stalls since the last line, and the longest of them. */
export interface LoopStallReport {
  readonly stalls: number;
  readonly longestMs: number;
  /** The window the stalls fell in, in milliseconds. */
  readonly sinceMs: number;
}

export class LoopStallWatch {
  private lastCheckMs: number;
  /** When the last line was told, or when the watch began. */
  private windowStartMs: number;
  /** No line yet: the first stall is told at once. */
  private toldAny = false;
  private stalls = 0;
  private longestMs = 0;
  private stallsTotal = 0;

  constructor(nowMs: number, private readonly stallMs = LOOP_STALL_MS,
    private readonly checkMs = LOOP_CHECK_MS, private readonly reportMs = LOOP_STALL_REPORT_MS) {
    if (!(checkMs > 0 && stallMs > 0 && reportMs >= checkMs)) {
      throw new Error(`assertion failed: loop stall watch ${checkMs}/${stallMs}/${reportMs} ms`);
    }
    this.lastCheckMs = nowMs;
    this.windowStartMs = nowMs;
  }

  /** Stalls seen since the process started. */
  get total(): number {
    return this.stallsTotal;
  }

  /**
   * The check timer fired at `nowMs` (monotonic). Returns a report when one is due: stalls
   * were seen, and either none was told yet or the last line is at least a window old.
   */
  check(nowMs: number): LoopStallReport | null {
    const lateMs = nowMs - this.lastCheckMs - this.checkMs;
    this.lastCheckMs = nowMs;
    if (lateMs >= this.stallMs) {
      this.stalls++;
      this.stallsTotal++;
      this.longestMs = Math.max(this.longestMs, lateMs);
    }
    if (this.stalls === 0 || (this.toldAny && nowMs - this.windowStartMs < this.reportMs)) {
      return null;
    }
    const report = { stalls: this.stalls, longestMs: Math.round(this.longestMs),
      sinceMs: Math.round(nowMs - this.windowStartMs) };
    this.stalls = 0;
    this.longestMs = 0;
    this.windowStartMs = nowMs;
    this.toldAny = true;
    return report;
  }
}
