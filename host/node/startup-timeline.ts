/**
 * When each phase of a node's start ended, in milliseconds since its process began
 * (`performance.now()` counts from there, so the first mark includes Node's own start and the
 * imports). The node logs them with its "serving" line, so an operator sees where a slow start
 * went (snapshot, log, apply) without a profiler; `npm run bench:startup` reads them too.
 *
 * A handful of marks, one per phase, each set once: bounded by the names its callers use.
 */
import { performance } from 'node:perf_hooks';

const PHASES_MAX = 32;

export class StartupTimeline {
  private readonly marks = new Map<string, number>();

  /** Marks `firstPhase` at once. */
  constructor(firstPhase: string, private readonly nowMs: () => number = () => performance.now()) {
    this.mark(firstPhase);
  }

  /**
   * Records that `phase` ended now; a phase marked again keeps its first time. An arrow, so
   * it can be handed to the storage and the replica as their `on...Phase` callback.
   */
  readonly mark = (phase: string): void => {
    if (this.marks.has(phase) || this.marks.size >= PHASES_MAX) return;
    this.marks.set(phase, Math.round(this.nowMs()));
  };

  /** Marks `lastPhase`; every mark, in the order set: phase -> ms since the process began. */
  end(lastPhase: string): Record<string, number> {
    this.mark(lastPhase);
    return Object.fromEntries(this.marks);
  }
}
