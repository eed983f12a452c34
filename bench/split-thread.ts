/**
 * A measurement of the "HTTP in worker threads" design (docs/performance.md, "Using more
 * cores") before building it: hyper-express answers a fixed body after a fixed amount of CPU
 * work per call, which stands for what the log thread does for a put beyond HTTP.
 *
 *   single: one thread reads the request, does the work and answers (as a node does today).
 *   split:  worker threads run hyper-express on the same port and hand each turn's calls to
 *           the main thread in one message (postMessage); the main thread does the work per
 *           call and hands the answers back in one message.
 *
 * Prints `{"port":N}` once listening; stop it with SIGTERM. Drive it with wrk:
 *
 *   node dist/bench/split-thread.js split 14 &            # mode, µs of work a call [, workers]
 *   HIVEKV_BENCH_DIR=bench/wrk wrk -t2 -c64 -d8s -s bench/wrk/put.lua http://127.0.0.1:PORT
 *
 * The work is a calibrated loop of arithmetic, so a thread that loses its core does the same
 * work later instead of less of it.
 */
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';

import HyperExpress from 'hyper-express';

const ANSWER = '{"results":[{"index":0,"op":"put","key":"k1","applied":true,"version":1}]}';

let workSink = 1;

function loop(iterations: number): void {
  let x = workSink;
  for (let i = 0; i < iterations; i++) x = (Math.imul(x, 1103515245) + 12345) | 0;
  workSink = x;
}

/**
 * Iterations of `loop` per microsecond on this thread, measured once the way calls use it
 * (many short runs, not one long one, which the compiler optimises differently).
 */
function calibrate(): number {
  const chunk = 10_000;
  for (let i = 0; i < 2_000; i++) loop(chunk);
  const start = performance.now();
  for (let i = 0; i < 4_000; i++) loop(chunk);
  return (4_000 * chunk) / ((performance.now() - start) * 1000);
}

interface WorkerSetup {
  readonly port: number;
}

async function serveSingle(workUs: number): Promise<number> {
  const iterations = Math.round(workUs * calibrate());
  const server = new HyperExpress.Server({ max_body_length: 1 << 20 });
  // Not an async handler: the work inlined into a resumed async function ran five times
  // slower than the same loop called from a plain callback.
  server.post('/api/v1/kv', (request, response) => {
    void request.text().then(() => {
      loop(iterations);
      response.type('json').send(ANSWER);
    });
  });
  await server.listen(0, '127.0.0.1');
  return server.port;
}

/** The worker side of `split`: HTTP, one message of calls per turn, answers as they return. */
async function serveInWorker(setup: WorkerSetup): Promise<void> {
  const port = parentPort;
  if (port === null) throw new Error('split-thread: worker without a parent port');
  const server = new HyperExpress.Server({ max_body_length: 1 << 20 });
  const waiting = new Map<number, HyperExpress.Response>();
  let nextId = 1;
  let batch: Array<number | string> = [];
  const flush = (): void => {
    const calls = batch;
    batch = [];
    port.postMessage(calls);
  };
  port.on('message', (answered: number[]) => {
    for (const id of answered) {
      const response = waiting.get(id);
      waiting.delete(id);
      response?.type('json').send(ANSWER);
    }
  });
  server.post('/api/v1/kv', async (request, response) => {
    const body = await request.text();
    const id = nextId++;
    waiting.set(id, response);
    if (batch.length === 0) setImmediate(flush);
    batch.push(id, body);
  });
  await server.listen(setup.port, '127.0.0.1');
  port.postMessage('listening');
}

async function serveSplit(workUs: number, workers: number): Promise<number> {
  const iterations = Math.round(workUs * calibrate());
  // uWebSockets listens with SO_REUSEPORT: each worker binds the same port. Pick one first.
  const probe = new HyperExpress.Server();
  await probe.listen(0, '127.0.0.1');
  const port = probe.port;
  probe.close();
  const started: Array<Promise<void>> = [];
  for (let i = 0; i < workers; i++) {
    const worker = new Worker(new URL(import.meta.url), { workerData: { port } });
    started.push(new Promise((resolve, reject) => {
      worker.once('error', reject);
      worker.on('message', (message: Array<number | string> | 'listening') => {
        if (message === 'listening') {
          resolve();
          return;
        }
        const answered: number[] = [];
        for (let at = 0; at < message.length; at += 2) {
          loop(iterations);
          answered.push(message[at] as number);
        }
        worker.postMessage(answered);
      });
    }));
  }
  await Promise.all(started);
  return port;
}

if (isMainThread) {
  const [mode, workArg, workersArg] = process.argv.slice(2);
  const workUs = Number(workArg ?? 0);
  if ((mode !== 'single' && mode !== 'split') || !Number.isFinite(workUs) || workUs < 0) {
    console.error('usage: split-thread.js single|split WORK_US [WORKERS]');
    process.exit(2);
  }
  const port = mode === 'single' ? await serveSingle(workUs)
    : await serveSplit(workUs, Math.max(1, Number(workersArg ?? 1)));
  console.log(JSON.stringify({ port }));
  process.on('SIGTERM', () => process.exit(0));
} else {
  await serveInWorker(workerData as WorkerSetup);
}
