/**
 * A short poll of the event loop once no call is left in flight, instead of going straight
 * to sleep in epoll (`HIVEKV_IDLE_POLL_US`, 200 µs by default; 0 turns it off).
 *
 * On a virtual machine a thread that sleeps is woken by an interrupt sent to an idle vCPU,
 * and at one connection that wake-up is paid on every call: the client's next call lands
 * tens of microseconds after the answer, while the node's thread has just gone to sleep. A
 * loop that turns over for a moment (a `setImmediate` per turn: each turn's epoll asks
 * for ready sockets without waiting) takes that call at once. bench/RESULTS.md, "A loop
 * that stays awake for its next call", has the figures: a put at one connection about
 * 35 µs faster at p50, for about a seventh of a core more while calls keep coming.
 *
 * Bounded both ways: a poll lasts at most the window after the node went idle, and it
 * starts only when the last idle gap was itself within the window (a client that pauses
 * longer is not waited for, so a node called now and then never spins). Under load the loop
 * is never idle and this never runs. Pure: the clock and the way to run a callback on the
 * loop's next turn are given.
 */
export class IdlePoll {
  /** When the node last went idle (no call in flight), or -1 while a call is in flight. */
  private idleSinceMs = -1;
  /** The last idle gap ended within the window: the next one is polled. */
  private lastGapShort = true;
  /** A poll is scheduled for the loop's next turn. */
  private scheduled = false;
  /** The current idle gap is being polled (its time counts in `polledMs`). */
  private pollingThisGap = false;
  private polledTotalMs = 0;

  constructor(
    private readonly windowMs: number,
    private readonly nowMs: () => number,
    private readonly nextTurn: (run: () => void) => void,
  ) {
    if (!(windowMs >= 0 && windowMs <= 1000)) {
      throw new Error(`assertion failed: idle poll window ${windowMs} ms`);
    }
  }

  /** Milliseconds spent polling so far, for `/metrics`. */
  get polledMs(): number {
    return this.polledTotalMs;
  }

  /** A call arrived: the idle gap, if any, ends here. */
  arrived(): void {
    const since = this.idleSinceMs;
    if (since < 0) return;
    const gapMs = this.nowMs() - since;
    this.lastGapShort = gapMs <= this.windowMs;
    if (this.pollingThisGap) this.polledTotalMs += Math.min(gapMs, this.windowMs);
    this.pollingThisGap = false;
    this.idleSinceMs = -1;
  }

  /** The last call in flight was answered: poll for the next one if it is likely to come. */
  idle(): void {
    if (this.windowMs === 0 || this.idleSinceMs >= 0) return;
    this.idleSinceMs = this.nowMs();
    if (!this.lastGapShort) return;
    this.pollingThisGap = true;
    if (!this.scheduled) {
      this.scheduled = true;
      this.nextTurn(this.poll);
    }
  }

  private readonly poll = (): void => {
    this.scheduled = false;
    // Polling a gap implies an idle node: `arrived` ends both.
    if (!this.pollingThisGap) return;
    const idleMs = this.nowMs() - this.idleSinceMs;
    if (idleMs < this.windowMs) {
      this.scheduled = true;
      this.nextTurn(this.poll);
      return;
    }
    this.polledTotalMs += this.windowMs;
    this.pollingThisGap = false;
  };
}
