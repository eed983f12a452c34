/**
 * Runs one measurement point on generator threads (`generator-worker.ts`) and merges what they
 * measured. Beside the figures it records what the generator itself cost: this process's CPU
 * (all its threads: the generator, its clock, the garbage collector) over the run, and the
 * servers' CPU from /proc over the measured window, so a reader can see whether the generator
 * or the target was the bound.
 */
import { readFileSync } from 'node:fs';
import { Worker } from 'node:worker_threads';

import hdr from 'hdr-histogram-js';

import type { Counts, PointSpec, WorkerResult } from './generator-worker.js';
import { opsPerLogical, type OpKind } from './workloads.js';

export interface Latency {
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly p999Ms: number;
  readonly maxMs: number;
  readonly meanMs: number;
}

export interface PointFigures {
  /** Logical operations per second in the measured window (a batch of 16 is 16). */
  readonly opsPerSecond: number;
  readonly callsPerSecond: number;
  readonly requestsPerSecond: number;
  readonly latency: Latency;
  /** Open loop: intended start to send (the generator's lateness, and the wait for a free
   * connection when all were busy). */
  readonly sendLag: Latency | null;
  readonly window: Counts;
  readonly all: Counts;
  readonly saturated: boolean;
  readonly unsent: number;
  readonly stuck: number;
  readonly windowSeconds: number;
  /** This process's CPU over the whole point, in cores (1.0 = one core busy), and per request
   * sent (warm-up included, as the CPU is). */
  readonly generatorCores: number;
  readonly generatorMicrosPerRequest: number;
  /** The generator's threads were busy most of the point: the target may do more. */
  readonly generatorBound: boolean;
  /** The target's processes over the measured window, in cores; null when not ours. */
  readonly serverCores: number | null;
}

export interface PointRun {
  readonly figures: PointFigures;
  readonly checkRequests: Record<string, number>;
  readonly checkKeyWrites: number;
  readonly checkWriteRequests: number;
  readonly checkAppliedByKey: Record<string, number>;
  readonly writtenKeys: string[];
}

const CLOCK_TICKS_PER_SECOND = 100;

/** CPU seconds (user + system) of a process and its threads so far, from /proc. */
export function processCpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_SECOND;
  } catch {
    return NaN;
  }
}

function latencyOf(h: hdr.Histogram): Latency {
  const ms = (micros: number) => micros / 1000;
  return { p50Ms: ms(h.getValueAtPercentile(50)), p99Ms: ms(h.getValueAtPercentile(99)),
    p999Ms: ms(h.getValueAtPercentile(99.9)), maxMs: ms(h.maxValue), meanMs: ms(h.mean) };
}

function addCounts(a: Counts, b: Counts): Counts {
  const statuses = { ...a.statuses };
  for (const [k, v] of Object.entries(b.statuses)) statuses[k] = (statuses[k] ?? 0) + v;
  return { logical: a.logical + b.logical, requests: a.requests + b.requests,
    failed: a.failed + b.failed, statuses, notFound: a.notFound + b.notFound,
    applied: a.applied + b.applied, refused: a.refused + b.refused,
    conflicts: a.conflicts + b.conflicts, retries: a.retries + b.retries,
    gaveUp: a.gaveUp + b.gaveUp };
}

function runThread(spec: PointSpec, onMeasuring: () => void): Promise<WorkerResult> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(new URL('./generator-worker.js', import.meta.url),
      { workerData: spec });
    worker.on('message', (message: { type: string; result?: WorkerResult;
      message?: string }) => {
      if (message.type === 'measuring') onMeasuring();
      else if (message.type === 'result') resolve(message.result!);
      else reject(new Error(`generator thread: ${message.message}`));
    });
    worker.on('error', reject);
    worker.on('exit', (code) => {
      if (code !== 0) reject(new Error(`generator thread exited with ${code}`));
    });
  });
}

/**
 * Runs `spec` on `threads` generator threads: connections and offered rate are split among
 * them, each with its own seed. `serverPids` are sampled for CPU over the measured window.
 */
export async function runPoint(spec: PointSpec, threads: number,
  serverPids: readonly number[]): Promise<PointRun> {
  const count = Math.max(1, Math.min(threads, spec.connections));
  const cpu0 = process.cpuUsage();
  const wall0 = performance.now();
  let serverCpu0 = NaN;
  let measured0 = NaN;
  const serverCpu = () => serverPids.reduce((sum, pid) => sum + processCpuSeconds(pid), 0);
  const onMeasuring = () => {
    if (!Number.isNaN(measured0)) return;
    measured0 = performance.now();
    serverCpu0 = serverCpu();
  };
  const results = await Promise.all(Array.from({ length: count }, (_, i) => runThread({
    ...spec, seed: spec.seed * 31 + i,
    connections: Math.floor(spec.connections / count) + (i < spec.connections % count ? 1 : 0),
    ratePerSecond: spec.ratePerSecond / count,
  }, onMeasuring)));
  const serverCores = serverPids.length === 0 ? null :
    (serverCpu() - serverCpu0) / ((performance.now() - measured0) / 1000);
  const cpu = process.cpuUsage(cpu0);
  const wallS = (performance.now() - wall0) / 1000;
  return merge(spec, results, (cpu.user + cpu.system) / 1e6, wallS, serverCores, count);
}

/** Generator CPU per thread above which a figure is marked as set by the generator. */
const GENERATOR_BOUND_CORES_PER_THREAD = 0.85;

function merge(spec: PointSpec, results: WorkerResult[], cpuS: number, wallS: number,
  serverCores: number | null, threads: number): PointRun {
  const hist = hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: 120_000_000,
    numberOfSignificantValueDigits: 3 });
  const lag = hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: 120_000_000,
    numberOfSignificantValueDigits: 3 });
  for (const r of results) {
    hist.add(hdr.decodeFromCompressedBase64(r.histogram));
    lag.add(hdr.decodeFromCompressedBase64(r.lagHistogram));
  }
  const window = results.map((r) => r.window).reduce(addCounts);
  const all = results.map((r) => r.all).reduce(addCounts);
  const windowSeconds = Math.max(...results.map((r) => r.windowMs)) / 1000;
  const mixOps = Object.entries(spec.workload.mix).reduce((sum, [kind, share]) =>
    sum + share * opsPerLogical(kind as OpKind), 0);
  const calls = window.logical / windowSeconds;
  const checkRequests: Record<string, number> = {};
  const checkAppliedByKey: Record<string, number> = {};
  for (const r of results) {
    for (const [k, v] of Object.entries(r.checkRequests)) {
      checkRequests[k] = (checkRequests[k] ?? 0) + v;
    }
    for (const [k, v] of Object.entries(r.checkAppliedByKey)) {
      checkAppliedByKey[k] = (checkAppliedByKey[k] ?? 0) + v;
    }
  }
  const figures: PointFigures = { opsPerSecond: calls * mixOps, callsPerSecond: calls,
    requestsPerSecond: window.requests / windowSeconds, latency: latencyOf(hist),
    sendLag: spec.mode === 'open' && lag.totalCount > 0 ? latencyOf(lag) : null, window, all,
    saturated: results.some((r) => r.saturated),
    unsent: results.reduce((s, r) => s + r.unsent, 0),
    stuck: results.reduce((s, r) => s + r.stuck, 0), windowSeconds,
    generatorCores: cpuS / wallS,
    generatorMicrosPerRequest: all.requests === 0 ? NaN : cpuS * 1e6 / all.requests,
    generatorBound: cpuS / wallS >= GENERATOR_BOUND_CORES_PER_THREAD * threads, serverCores };
  return { figures, checkRequests, checkAppliedByKey,
    checkKeyWrites: results.reduce((s, r) => s + r.checkKeyWrites, 0),
    checkWriteRequests: results.reduce((s, r) => s + r.checkWriteRequests, 0),
    writtenKeys: results.flatMap((r) => r.writtenKeys) };
}
