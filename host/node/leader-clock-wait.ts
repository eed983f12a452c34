/**
 * A new leader's wait for its voters' clocks before it stamps the log.
 *
 * Stamps never go back along the log, and lifetimes are measured against them (DESIGN.md),
 * so one entry stamped a year ahead moves every replica's time a year ahead for good: every
 * key with a lifetime expires at the next sweep. A leader holds its clock within what a
 * majority of the voters' clocks allow (cluster-clock.ts), but only once it has heard them;
 * a node just started, or just elected after its peers restarted, may not have yet. So a
 * leader holds its proposals (client writes, sweeps, checkpoints) from the start of its term
 * until it knows a majority of the voters' clocks. Members send their status the moment a
 * link comes up (cluster-status.ts), which arrives before their votes on the same link, so
 * the wait is usually over before it begins.
 *
 * Bounded: after `waitTicks` ticks without them (status frames lost, or a peer that sends
 * none) the leader stamps by its own clock, as a node with no peers does, and says so once.
 * Counted in ticks, not by the wall clock, which is the thing in doubt.
 */

/** The stamping clock's part in the wait (cluster-clock.ts, `ClusterClock`). */
export interface MajorityClock {
  /** Whether a majority of the voters' clocks are known now. */
  knowsMajority(): boolean;
}

/** How long a new leader waits for its voters' clocks: past one status round and a retry. */
export const LEADER_CLOCK_WAIT_MS = 2500;

export class LeaderClockWait {
  /** The term whose leadership the wait is for; -1 before this node first leads. */
  private term = -1;
  private known = true;
  private waitedTicks = 0;

  /**
   * `clock` undefined: nothing to wait for (no stamping clock, as in the simulator).
   * `onWaitedOut` is called when a term's wait ran out without a majority heard.
   */
  constructor(
    private readonly clock: MajorityClock | undefined,
    private readonly waitTicks: number,
    private readonly onWaitedOut: (waitedTicks: number) => void = () => {},
  ) {
    if (!Number.isInteger(waitTicks) || waitTicks < 1) {
      throw new Error(`leader clock wait: ${waitTicks} ticks is not a positive integer`);
    }
  }

  /**
   * Whether a node may stamp a proposal now; `leaderTerm` is its term while it leads, else
   * -1 (a node that does not lead never waits: its leader stamps what it forwards).
   */
  mayStamp(leaderTerm: number): boolean {
    if (this.clock === undefined || leaderTerm < 0) return true;
    if (leaderTerm !== this.term) {
      this.term = leaderTerm;
      this.known = false;
      this.waitedTicks = 0;
    }
    if (this.known) return true;
    if (this.clock.knowsMajority()) {
      this.known = true;
    } else if (this.waitedTicks >= this.waitTicks) {
      this.known = true;
      this.onWaitedOut(this.waitedTicks);
    }
    return this.known;
  }

  /** True while a leader in `leaderTerm` waits (as its last `mayStamp` or `tick` found). */
  waiting(leaderTerm: number): boolean {
    return leaderTerm >= 0 && leaderTerm === this.term && !this.known;
  }

  /** A tick passed: a leader still waiting counts it, and learns whether the wait is over. */
  tick(leaderTerm: number): boolean {
    const may = this.mayStamp(leaderTerm);
    if (!may) this.waitedTicks += 1;
    return may;
  }
}
