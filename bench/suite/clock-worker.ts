/**
 * The open-loop generator's clock: a thread that sleeps in `Atomics.wait` (a futex, precise
 * to tens of microseconds, where Node's timers round to milliseconds) until the next intended
 * send time, then posts a tick to the generator thread, which dispatches every operation due
 * by then, unless the generator already did (it dispatches after every reply as well). Ticks
 * are at least `TICK_GAP_MS_MIN` apart: at high rates one tick carries several operations.
 */
import { parentPort, workerData, type MessagePort } from 'node:worker_threads';

const TICK_GAP_MS_MIN = 0.1;

const { port, startMs, intervalMs, dispatched } = workerData as { port: MessagePort;
  startMs: number; intervalMs: number; dispatched: Int32Array };
const cell = new Int32Array(new SharedArrayBuffer(4));
/** Wall time in ms, comparable across threads (each has its own `performance.now()` origin). */
const now = (): number => performance.timeOrigin + performance.now();

if (parentPort !== null) {
  let next = 0;
  // Runs until the generator terminates this thread.
  for (;;) {
    const waitMs = startMs + next * intervalMs - now();
    if (waitMs > 0) Atomics.wait(cell, 0, 0, waitMs);
    // The generator dispatches on every reply too; tick only if operation `next` is not sent.
    if (Atomics.load(dispatched, 0) <= next) port.postMessage(0);
    const elapsed = now() - startMs + TICK_GAP_MS_MIN;
    next = Math.max(next + 1, Math.ceil(elapsed / intervalMs));
  }
}
