/**
 * `npm run bench:startup`: how long a node holding 1M keys, with 1M log entries after its
 * snapshot, takes to serve. Writes the data directory once with the node's own code
 * (startup-dir.ts), then for each run copies it afresh (a start changes the directory: a new
 * term, a new snapshot), flushes the copy to disk, and starts a real `hivekv serve` on it,
 * timing from the spawn:
 *   - health: the first GET /health answered at the last index (its digest, when exactly
 *     there, the one the builder computed),
 *   - read: the first successful get of the key the last entry wrote, with that value.
 * The node's own log line "serving" gives the breakdown of its start (`startup`, ms since
 * the process began: Node's own start and imports, wasm instantiate, snapshot verify and
 * load, WAL scan and verify, entry apply, listen).
 *
 * HIVEKV_BENCH_KEYS, HIVEKV_BENCH_TAIL (1,000,000 each) and HIVEKV_BENCH_RUNS (3) size it;
 * HIVEKV_BENCH_COMMITTED=snapshot leaves the hard state's commit index at the snapshot, as a
 * node's own stop does (it then listens first and applies the log once elected);
 * HIVEKV_BENCH_NODE_ARGS passes flags to the node's `node` (e.g. `--cpu-prof
 * --cpu-prof-dir=/tmp/prof`). Everything
 * listens on 127.0.0.1, each start is bounded by START_TIMEOUT_MS, the node is stopped by
 * its PID, and the directories under the system temp directory are removed at the end.
 * Run it alone (`flock -x` on a shared machine): the target is under 5 s.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import {
  closeSync, cpSync, fsyncSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync,
} from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';

import { buildStartupDir, STARTUP_NAMESPACE, type StartupDir } from './startup-dir.js';

const ROOT = new URL('../../', import.meta.url).pathname;
const KEYS = Number(process.env['HIVEKV_BENCH_KEYS'] ?? '1000000');
const TAIL = Number(process.env['HIVEKV_BENCH_TAIL'] ?? '1000000');
const RUNS = Number(process.env['HIVEKV_BENCH_RUNS'] ?? '3');
const NODE_ARGS = (process.env['HIVEKV_BENCH_NODE_ARGS'] ?? '').split(' ').filter((a) => a);
const COMMITTED = process.env['HIVEKV_BENCH_COMMITTED'] === 'snapshot' ? 'snapshot' : 'last';
const START_TIMEOUT_MS = 120_000;
/** Writing the directory of 1M keys and 1M entries takes about 20 s. */
const BUILD_TIMEOUT_MS = 600_000;
const POLL_MS = 5;
const STOP_TIMEOUT_MS = 30_000;
const TARGET_MS = 5000;

interface Run {
  readonly healthMs: number;
  readonly readMs: number;
  /** CPU time of the node process (user + system, all threads) when /health first answered. */
  readonly cpuMs: number;
  /** The node's own marks ("serving" log line), ms since its process began. */
  readonly startup: Record<string, number>;
}

/** One request, answered or not: null while nothing listens (or the answer is not JSON). */
async function tryJson(url: string, body?: unknown): Promise<Record<string, unknown> | null> {
  try {
    const init: RequestInit = body === undefined ? { signal: AbortSignal.timeout(2000) }
      : { method: 'POST', headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body), signal: AbortSignal.timeout(2000) };
    const response = await fetch(url, init);
    return response.ok ? await response.json() as Record<string, unknown> : null;
  } catch {
    return null;
  }
}

async function pollUntil<T>(deadline: number, child: ChildProcess,
  probe: () => Promise<T | null>): Promise<T> {
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`the node exited (${child.exitCode ?? child.signalCode}) while starting`);
    }
    const value = await probe();
    if (value !== null) return value;
    if (performance.now() > deadline) throw new Error('the node did not serve in time');
    await sleep(POLL_MS);
  }
}

function startupMarks(log: string): Record<string, number> {
  for (const line of log.split('\n')) {
    if (!line.includes('"msg":"serving"')) continue;
    const record = JSON.parse(line) as { startup?: Record<string, number> };
    return record.startup ?? {};
  }
  return {};
}

/** utime + stime of `pid` from /proc (clock ticks of 10 ms on Linux). */
function processCpuMs(pid: number): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return NaN;
  }
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS);
  await exited;
  clearTimeout(timer);
}

async function freePort(): Promise<number> {
  const { createServer } = await import('node:net');
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

async function startOnce(dir: string, built: StartupDir): Promise<Run> {
  const port = await freePort();
  let log = '';
  const started = performance.now();
  const child = spawn(process.execPath, [...NODE_ARGS, 'bin/hivekv.js', 'serve', '--host',
    '127.0.0.1', '--port', String(port), '--data', dir], { cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, HIVEKV_LOG_LEVEL: 'info',
      QUEEN_KV_READ_RATE: '0', QUEEN_KV_WRITE_RATE: '0' } });
  const keep = (chunk: Buffer): void => {
    if (log.length < 1_000_000) log += chunk.toString();
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  try {
    const deadline = started + START_TIMEOUT_MS;
    const base = `http://127.0.0.1:${port}`;
    // A node whose hard state commits less than its log applies the rest only once elected,
    // after it listens: wait for the last index, not just for an answer.
    const health = await pollUntil(deadline, child, async () => {
      const answer = await tryJson(`${base}/health`);
      return Number(answer?.['appliedIndex'] ?? 0) >= built.lastIndex ? answer : null;
    });
    const healthMs = performance.now() - started;
    const cpuMs = processCpuMs(child.pid ?? -1);
    // Past the last index, the node has applied its new term's empty entry, which moves the
    // digest (it covers the applied index and time): compare only at the last index.
    if (health?.['appliedIndex'] === built.lastIndex && health['digest'] !== built.digest) {
      throw new Error(`/health at ${built.lastIndex} has digest ${health['digest']}, ` +
        `expected ${built.digest}`);
    }
    await pollUntil(deadline, child, async () => {
      const answer = await tryJson(`${base}/api/v1/kv`, { operations: [{ op: 'get',
        ns: STARTUP_NAMESPACE, key: built.lastKey }] });
      const result = (answer?.['results'] as Array<Record<string, unknown>> | undefined)?.[0];
      return result?.['value'] === built.lastValue ? true : null;
    });
    const readMs = performance.now() - started;
    return { healthMs, readMs, cpuMs, startup: startupMarks(log) };
  } catch (error) {
    throw new Error(`${(error as Error).message}\n${log.slice(-4000)}`);
  } finally {
    await stop(child);
  }
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? NaN;
}

function report(built: StartupDir, runs: readonly Run[]): void {
  const f = (ms: number): string => `${Math.round(ms)} ms`;
  process.stdout.write(`directory: ${KEYS.toLocaleString('en-US')} keys in a snapshot at ` +
    `${built.snapshotIndex} (${(built.snapshotBytes / 2 ** 20).toFixed(0)} MiB), ` +
    `${TAIL.toLocaleString('en-US')} entries after it (last ${built.lastIndex}), committed ` +
    `through the ${COMMITTED} index; written in ` +
    `${f(built.ms.load)} load + ${f(built.ms.snapshot)} snapshot + ${f(built.ms.tail)} log\n`);
  runs.forEach((run, i) => {
    process.stdout.write(`run ${i + 1}: /health at the last index after ${f(run.healthMs)} ` +
      `(node CPU ${f(run.cpuMs)}), the last entry's key read after ${f(run.readMs)}\n` +
      `  node marks (ms since its process began): ${JSON.stringify(run.startup)}\n`);
  });
  const health = median(runs.map((r) => r.healthMs));
  process.stdout.write(`median: serving after ${f(health)}, read after ` +
    `${f(median(runs.map((r) => r.readMs)))} (target ${f(TARGET_MS)}: ` +
    `${health < TARGET_MS ? 'met' : 'not met'}); Node ${process.version}, ` +
    `${cpus().length} x ${cpus()[0]?.model ?? 'unknown CPU'}\n`);
}

/** fsyncs every file under `dir` (bounded by the tree a run copies: a few files). */
function syncTree(dir: string): void {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      syncTree(path);
    } else if (entry.isFile()) {
      const fd = openSync(path, 'r');
      try {
        fsyncSync(fd);
      } finally {
        closeSync(fd);
      }
    }
  }
}

/** Flag of the child process that writes the directory (see `buildInChild`). */
const BUILD_FLAG = '--build-into';

/**
 * Writes the directory in a child process of this script: the machine that computes it
 * holds 600 MB of wasm memory, which in this process would stay until V8 collects it,
 * meanwhile competing with the first timed start for the second core.
 */
function buildInChild(dir: string): StartupDir {
  const out = execFileSync(process.execPath, [fileURLToPath(import.meta.url), BUILD_FLAG, dir],
    { encoding: 'utf8', maxBuffer: 1 << 20, timeout: BUILD_TIMEOUT_MS,
      stdio: ['ignore', 'pipe', 'inherit'] });
  return JSON.parse(out) as StartupDir;
}

async function main(): Promise<void> {
  const buildInto = process.argv.indexOf(BUILD_FLAG);
  if (buildInto >= 0) {
    const built = await buildStartupDir(process.argv[buildInto + 1] as string,
      { keys: KEYS, tailEntries: TAIL, committed: COMMITTED });
    process.stdout.write(JSON.stringify(built));
    return;
  }
  const work = mkdtempSync(join(tmpdir(), 'hivekv-bench-startup-'));
  try {
    const pristine = join(work, 'pristine');
    const built = buildInChild(pristine);
    const runs: Run[] = [];
    syncTree(pristine);
    for (let i = 0; i < RUNS; i++) {
      const dir = join(work, `run-${i}`);
      cpSync(pristine, dir, { recursive: true });
      // A restarting node finds its files long written: the copy's 400 MB are flushed
      // first, so the kernel's writeback of them does not run beside the timed start.
      syncTree(dir);
      runs.push(await startOnce(dir, built));
      rmSync(dir, { recursive: true, force: true });
    }
    report(built, runs);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

await main();
