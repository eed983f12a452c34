/**
 * The cross-check: the same put and get at 64 connections driven by an independent tool (wrk
 * for the HTTP targets, redis-benchmark for Redis) right after the suite's own generator, so
 * a reader can see whether the generator, not the target, set a figure. A missing tool is
 * skipped with the line that installs it.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';

import { ROOT, which, type Entry, type Target } from './targets.js';

export interface ReferenceFigure {
  readonly target: string;
  readonly workload: 'put' | 'get';
  readonly tool: string;
  readonly command: string;
  readonly opsPerSecond: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly non2xx: number;
}

const CONNECTIONS = 64;

function run(command: string, args: string[], env: Record<string, string>, timeoutMs: number):
  Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(command, args, { cwd: ROOT, env: { ...process.env, ...env }, timeout: timeoutMs,
      maxBuffer: 16 * 1024 * 1024 }, (error, stdout) => error ? reject(error) : resolve(stdout));
  });
}

function millis(text: string | undefined): number {
  const match = /([\d.]+)(us|ms|s)/.exec(text ?? '');
  if (!match) return NaN;
  const value = Number(match[1]);
  return match[2] === 'us' ? value / 1000 : match[2] === 's' ? value * 1000 : value;
}

async function wrk(target: Target, entry: Entry, workload: 'put' | 'get', seconds: number,
  keys: number): Promise<ReferenceFigure> {
  const script = target.kind === 'etcd' ? 'etcd.lua' : `${workload}.lua`;
  const args = ['-t', '1', '-c', String(CONNECTIONS), '-d', `${seconds}s`, '--latency', '-s',
    join(ROOT, 'bench', 'wrk', script), `http://${target.host}:${entry.ports[0]}`];
  const out = await run('wrk', args, { HIVEKV_BENCH_DIR: join(ROOT, 'bench', 'wrk'),
    HIVEKV_BENCH_KEYS: String(keys), HIVEKV_BENCH_OP: workload }, (seconds + 30) * 1000);
  return { target: entry.name, workload, tool: 'wrk', command: `wrk ${args.join(' ')}`,
    opsPerSecond: Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1] ?? NaN),
    p50Ms: millis(/\s50%\s+(\S+)/.exec(out)?.[1]), p99Ms: millis(/\s99%\s+(\S+)/.exec(out)?.[1]),
    non2xx: Number(/Non-2xx or 3xx responses:\s+(\d+)/.exec(out)?.[1] ?? 0) };
}

async function redisBenchmark(target: Target, entry: Entry, workload: 'put' | 'get',
  requests: number, keys: number): Promise<ReferenceFigure> {
  const test = workload === 'put' ? 'set' : 'get';
  const args = ['-h', target.host, '-p', String(entry.ports[0]), '-c', String(CONNECTIONS),
    '-n', String(requests), '-t', test, '-d', '100', '-r', String(keys), '--csv'];
  const out = await run('redis-benchmark', args, {}, 120_000);
  // "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms",
  // "p99_latency_ms","max_latency_ms"
  const row = out.split('\n').find((line) => line.toUpperCase().startsWith(`"${test
    .toUpperCase()}"`))?.split(',').map((cell) => Number(cell.replace(/"/g, '')));
  return { target: entry.name, workload, tool: 'redis-benchmark',
    command: `redis-benchmark ${args.join(' ')}`, opsPerSecond: row?.[1] ?? NaN,
    p50Ms: row?.[4] ?? NaN, p99Ms: row?.[6] ?? NaN, non2xx: 0 };
}

/** The install line for the tool `target` needs, or null when it is here. */
export function referenceMissing(target: Target): string | null {
  if (target.kind === 'redis') {
    return which('redis-benchmark') === null ? 'redis-benchmark is not installed (Debian: ' +
      'apt-get install -y redis-tools)' : null;
  }
  return which('wrk') === null ? 'wrk is not installed (Debian: apt-get install -y wrk)' : null;
}

/**
 * Drives put and get on `entry` with the reference tool for `seconds` each. `peaks` (the
 * suite's own ops/s) sizes redis-benchmark, which counts requests instead of seconds.
 */
export async function runReference(target: Target, entry: Entry, seconds: number,
  keys: number, peaks: Record<'put' | 'get', number>): Promise<ReferenceFigure[]> {
  const out: ReferenceFigure[] = [];
  const wholeSeconds = Math.max(1, Math.round(seconds));
  for (const workload of ['put', 'get'] as const) {
    out.push(target.kind === 'redis'
      ? await redisBenchmark(target, entry, workload,
        Math.max(1000, Math.round(peaks[workload] * wholeSeconds)), keys)
      : await wrk(target, entry, workload, wholeSeconds, keys));
  }
  return out;
}
