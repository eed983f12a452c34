/**
 * Virtual time for the simulator: one event queue ordered by (time, seq), and per-node views
 * of it that implement the production `Scheduler` seam.
 *
 * The clock counts microseconds so that network delays can be finer than a millisecond;
 * `nowMs()` reports whole milliseconds because entry stamps must be safe integers. Nothing
 * here reads the wall clock. Ties in time run in scheduling order (`seq`), so a run is a
 * pure function of its seed.
 */
import type { Scheduler, TimerHandle } from '../../host/node/scheduler.js';

/** Unix time at which every simulated run starts (2026-01-01T00:00:00Z). */
export const SIM_EPOCH_MS = 1_767_225_600_000;
/** Events waiting at once; past it the run is broken (a timer storm), so it fails loudly. */
export const EVENTS_PENDING_MAX = 1_000_000;
const US_PER_MS = 1000;

interface SimEvent {
  readonly timeUs: number;
  readonly seq: number;
  readonly callback: () => void;
  /** The label the trace prints; empty for timers of a node (the node traces itself). */
  readonly label: string;
  cancelled: boolean;
}

function before(a: SimEvent, b: SimEvent): boolean {
  return a.timeUs < b.timeUs || (a.timeUs === b.timeUs && a.seq < b.seq);
}

/** The simulated clock and its event queue (a binary min-heap). */
export class SimScheduler {
  private readonly heap: SimEvent[] = [];
  private nowUs = 0;
  private nextSeq = 0;
  /** Events that ran, for statistics and the bench. */
  eventsRun = 0;

  /** Microseconds since the start of the run. */
  elapsedUs(): number {
    return this.nowUs;
  }

  nowMs(): number {
    return SIM_EPOCH_MS + Math.floor(this.nowUs / US_PER_MS);
  }

  /** Schedules `callback` after `delayUs` (>= 0); returns a handle that cancels it. */
  atDelayUs(delayUs: number, label: string, callback: () => void): TimerHandle {
    if (!(delayUs >= 0) || !Number.isFinite(delayUs)) {
      throw new Error(`scheduler: bad delay ${delayUs} us`);
    }
    if (this.heap.length >= EVENTS_PENDING_MAX) {
      throw new Error(`scheduler: more than ${EVENTS_PENDING_MAX} events pending`);
    }
    const event: SimEvent = {
      timeUs: this.nowUs + Math.round(delayUs), seq: this.nextSeq++, callback, label,
      cancelled: false,
    };
    this.push(event);
    return { cancel: () => { event.cancelled = true; } };
  }

  /** Pops the next live event, advances the clock to it and runs it; false when none. */
  runNext(onEvent?: (label: string) => void): boolean {
    for (;;) {
      const event = this.pop();
      if (event === undefined) return false;
      if (event.cancelled) continue;
      if (event.timeUs < this.nowUs) throw new Error('scheduler: time went backwards');
      this.nowUs = event.timeUs;
      this.eventsRun++;
      if (onEvent !== undefined && event.label !== '') onEvent(event.label);
      event.callback();
      return true;
    }
  }

  /** Time of the next event, or null when the queue is empty (cancelled ones included). */
  peekTimeUs(): number | null {
    return this.heap[0]?.timeUs ?? null;
  }

  pendingCount(): number {
    return this.heap.length;
  }

  private push(event: SimEvent): void {
    const heap = this.heap;
    heap.push(event);
    let at = heap.length - 1;
    while (at > 0) {
      const parent = (at - 1) >> 1;
      const up = heap[parent] as SimEvent;
      if (!before(event, up)) break;
      heap[at] = up;
      at = parent;
    }
    heap[at] = event;
  }

  private pop(): SimEvent | undefined {
    const heap = this.heap;
    const top = heap[0];
    const last = heap.pop();
    if (top === undefined || last === undefined || heap.length === 0) return top;
    let at = 0;
    for (;;) {
      const left = 2 * at + 1;
      if (left >= heap.length) break;
      const right = left + 1;
      const child = right < heap.length && before(heap[right] as SimEvent, heap[left] as SimEvent)
        ? right : left;
      if (!before(heap[child] as SimEvent, last)) break;
      heap[at] = heap[child] as SimEvent;
      at = child;
    }
    heap[at] = last;
    return top;
  }
}

/**
 * One incarnation of a node's view of time. Killing it cancels every timer the node armed,
 * which is what a crash does to a process: its timers simply never fire.
 */
export class NodeClock implements Scheduler {
  private readonly live = new Set<TimerHandle>();
  private dead = false;

  constructor(private readonly scheduler: SimScheduler) {}

  nowMs(): number {
    return this.scheduler.nowMs();
  }

  after(delayMs: number, callback: () => void): TimerHandle {
    if (this.dead) return { cancel: () => undefined };
    let handle: TimerHandle | null = null;
    const inner = this.scheduler.atDelayUs(Math.max(0, delayMs) * US_PER_MS, '', () => {
      if (handle !== null) this.live.delete(handle);
      if (!this.dead) callback();
    });
    handle = {
      cancel: () => {
        inner.cancel();
        if (handle !== null) this.live.delete(handle);
      },
    };
    this.live.add(handle);
    return handle;
  }

  soon(callback: () => void): void {
    this.after(0, callback);
  }

  /** The process is gone: cancel every timer and ignore any armed later. */
  kill(): void {
    this.dead = true;
    for (const handle of [...this.live]) handle.cancel();
    this.live.clear();
  }

  timerCount(): number {
    return this.live.size;
  }
}
