/**
 * Time as the node driver sees it. The real scheduler reads the wall clock and uses Node's
 * timers; the simulator's advances a virtual clock, so a whole cluster runs deterministically
 * in one process. The driver reads time and arms timers only through this seam.
 */

export interface TimerHandle {
  cancel(): void;
}

export interface Scheduler {
  /** Unix milliseconds. */
  nowMs(): number;
  /** Runs `callback` once after `delayMs`. */
  after(delayMs: number, callback: () => void): TimerHandle;
  /**
   * Runs `callback` once this turn's I/O has been handled: every call and peer frame that
   * arrived with this one is seen first, so they are taken in one Ready.
   */
  soon(callback: () => void): void;
}

export const realScheduler: Scheduler = {
  nowMs: () => Date.now(),
  after(delayMs, callback) {
    const timer = setTimeout(callback, delayMs);
    return { cancel: () => clearTimeout(timer) };
  },
  soon(callback) {
    setImmediate(callback);
  },
};
