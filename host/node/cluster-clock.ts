/**
 * The clock a node stamps the log with and evaluates expiry by: its own wall clock, held
 * within what a majority of the voters' clocks allow.
 *
 * Every entry carries its leader's stamp, stamps never go back, and lifetimes are measured
 * against them (DESIGN.md). A leader whose clock ran a year ahead would stamp the log a year
 * ahead, and every key with a lifetime would expire on every node at once. A node hears every
 * member's clock once a second (the status frame's `sentAtMs`, cluster-status.ts), and
 * estimates it now as that reading plus the time since it arrived, on its own monotonic
 * clock.
 *
 * The bound: q is a majority of the voters, and the clocks known are those of the voters heard
 * lately, this node's own among them when it is a voter. With q or more known, `high` is the
 * q-th highest: q clocks read `high` or later, and while fewer than q voters' clocks are
 * wrong, one of those is right, so a stamp no later than `high` is never ahead of every right
 * clock. That is the bound that keeps keys from expiring early, and it holds with any q
 * clocks known. With every voter's clock known, `low`, the q-th lowest, bounds the other way:
 * q clocks read `low` or earlier, and n - q + 1 read it or later, so a right clock is among
 * each, and a stamp at `low` is neither ahead of every right clock nor behind them all.
 *
 * The own clock stands while it is within CLOCK_TOLERANCE_MS of those bounds (the readings
 * are a network hop and some drift apart), and the bound replaces it beyond. With fewer than
 * q clocks known (the first second after a start, or most voters down, when nothing can
 * commit) the own clock stands, but a new leader holds its proposals until it knows q
 * (leader-clock-wait.ts), so nothing is stamped by it unbounded in that first second. With
 * some voters unheard, a right own clock may be held back by a clock that runs behind:
 * lifetimes then run long, never short.
 *
 * Pure below `ClusterClock`, which caches the correction: a put reads two clocks and adds,
 * and the bound is worked out again ten times a second, or at once when the wall clock jumps
 * against the monotonic one.
 */

/** How far outside the voters' bound the own clock may read before it is replaced. */
export const CLOCK_TOLERANCE_MS = 1000;
/** How often the bound is worked out again while the wall clock runs evenly. */
export const CLOCK_REFRESH_EVERY_MS = 100;
/** A wall-clock step larger than this (against the monotonic clock) refreshes at once. */
const CLOCK_STEP_MS = 50;

export type ClockStanding = 'within' | 'ahead' | 'behind';

export interface BoundedClock {
  /** The time to stamp or judge by. */
  readonly nowMs: number;
  /** `ahead`/`behind`: the own clock was replaced by the voters' bound. */
  readonly standing: ClockStanding;
  /** The own clock minus the nearest time in [low, high]; 0 within it, or with no bound. */
  readonly offsetMs: number;
}

/**
 * The stamp this node may use now. `voterClocksMs` are the known clocks of the voters, this
 * node's own included when it is a voter; `voterCount` is the number of voters.
 */
export function boundedClock(ownMs: number, voterClocksMs: readonly number[],
  voterCount: number, toleranceMs = CLOCK_TOLERANCE_MS): BoundedClock {
  const quorum = Math.floor(voterCount / 2) + 1;
  const known = voterClocksMs.length;
  if (known < quorum) return { nowMs: ownMs, standing: 'within', offsetMs: 0 };
  const descending = [...voterClocksMs].sort((a, b) => b - a);
  const high = descending[quorum - 1]!;
  if (ownMs > high) {
    const offsetMs = ownMs - high;
    return offsetMs > toleranceMs ? { nowMs: high, standing: 'ahead', offsetMs }
      : { nowMs: ownMs, standing: 'within', offsetMs };
  }
  if (known < voterCount) return { nowMs: ownMs, standing: 'within', offsetMs: 0 };
  const low = descending[known - quorum]!;
  const offsetMs = ownMs < low ? ownMs - low : 0;
  return offsetMs < -toleranceMs ? { nowMs: low, standing: 'behind', offsetMs }
    : { nowMs: ownMs, standing: 'within', offsetMs };
}

export interface VoterClocks {
  readonly voterCount: number;
  /** The voters' clocks estimated now, this node's own included when it is a voter. */
  readonly clocksMs: readonly number[];
}

export interface ClusterClockDeps {
  /** Wall-clock Unix milliseconds (the scheduler's `nowMs`). */
  readonly wallMs: () => number;
  readonly monotonicMs: () => number;
  /** The voters' clocks as known now, given this node's own reading. */
  readonly voterClocks: (ownMs: number) => VoterClocks;
  /** Called when the own clock is first replaced, and when it stands again. */
  readonly onStanding?: (clock: BoundedClock, ownMs: number) => void;
}

/** The node's stamping clock, with its correction cached between refreshes. */
export class ClusterClock {
  private correctionMs = 0;
  private offset = 0;
  private standing: ClockStanding = 'within';
  private wallAtRefresh = Number.NEGATIVE_INFINITY;
  private monotonicAtRefresh = Number.NEGATIVE_INFINITY;
  private majorityKnown = false;

  constructor(private readonly deps: ClusterClockDeps) {}

  nowMs(): number {
    const wall = this.deps.wallMs();
    const monotonic = this.deps.monotonicMs();
    const elapsed = monotonic - this.monotonicAtRefresh;
    const step = wall - this.wallAtRefresh - elapsed;
    if (elapsed >= CLOCK_REFRESH_EVERY_MS || Math.abs(step) > CLOCK_STEP_MS) {
      this.refresh(wall, monotonic);
    }
    return wall + this.correctionMs;
  }

  /**
   * Whether a majority of the voters' clocks are known now, worked out afresh (and the
   * correction with it, so the next stamp uses them). A leader holds its proposals until
   * this is true (replica.ts, `clockKnown`); it asks only until then, once a tick.
   */
  knowsMajority(): boolean {
    this.refresh(this.deps.wallMs(), this.deps.monotonicMs());
    return this.majorityKnown;
  }

  /** The own clock minus the voters' bound, as last worked out (0 within it). */
  offsetMs(): number {
    this.nowMs();
    return this.offset;
  }

  private refresh(wall: number, monotonic: number): void {
    this.wallAtRefresh = wall;
    this.monotonicAtRefresh = monotonic;
    const { voterCount, clocksMs } = this.deps.voterClocks(wall);
    this.majorityKnown = clocksMs.length >= Math.floor(voterCount / 2) + 1;
    const clock = boundedClock(wall, clocksMs, voterCount);
    // Whole milliseconds: estimates carry the monotonic clock's fractions, stamps may not.
    this.correctionMs = Math.round(clock.nowMs - wall);
    this.offset = clock.offsetMs;
    if (clock.standing !== this.standing) {
      this.standing = clock.standing;
      this.deps.onStanding?.(clock, wall);
    }
  }
}
