/**
 * The benchmark suite (`npm run bench`, `npx hivekv bench`): micro benchmarks, then every
 * workload against every target with the same load generator, honesty checks after each
 * point, and a report under `bench/results/<timestamp>/` (results.json, results.md, charts,
 * report.html). Servers are started here and stopped by PID, also on Ctrl-C.
 */
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

import { answered, checkPoint, type Check } from './checks.js';
import { runPoint, type PointFigures } from './generator.js';
import type { PointSpec } from './generator-worker.js';
import { machineInfo, toolVersions, type MachineInfo } from './machine-info.js';
import { runMicro, type MicroResult } from './micro.js';
import { makePlan, MANY_CONNECTIONS, secondsPerTarget, type Plan,
  type SuiteOptions } from './plan.js';
import { Progress } from './progress.js';
import { referenceMissing, runReference, type ReferenceFigure } from './reference.js';
import { writeReport } from './report.js';
import { openStore, type Store } from './store.js';
import {
  keepServerLogs, missingFor, ONE_NODE_AGAIN, ROOT, startEtcd, startHivekv, startRedis,
  stopEverything, urlTarget, type Entry, type Target, type TargetName,
} from './targets.js';
import { VALUE_BYTES, workloadNamed, type Workload } from './workloads.js';

export interface PointResult {
  readonly target: string;
  readonly family: string;
  readonly workload: string;
  readonly connections: number;
  readonly mode: 'closed' | 'open';
  /** Open loop: the offered rate and its fraction of the closed-loop peak. */
  readonly offeredPerSecond: number | null;
  readonly fractionOfPeak: number | null;
  readonly figures: PointFigures;
  readonly checks: readonly Check[];
}

export interface TargetRecord {
  readonly name: string;
  readonly label: string;
  readonly version: string;
  readonly skipped: string | null;
}

export interface SuiteResult {
  readonly title: string;
  readonly startedAt: string;
  readonly finishedAt: string;
  readonly machine: MachineInfo;
  readonly versions: Record<string, string>;
  readonly options: SuiteOptions;
  readonly plan: { warmupMs: number; durationMs: number; keyCount: number;
    sweepFractions: readonly number[]; threads: number };
  readonly workloads: readonly Workload[];
  readonly targets: TargetRecord[];
  readonly micro: MicroResult[];
  readonly points: PointResult[];
  /** The cross-check by an independent tool, and the lines of the ones skipped. */
  readonly references: ReferenceFigure[];
  readonly referencesSkipped: string[];
}

async function startTarget(name: TargetName, o: SuiteOptions, hivekvVersion: string):
  Promise<Target> {
  switch (name) {
    case 'hivekv-1': return startHivekv(1, false, hivekvVersion);
    case ONE_NODE_AGAIN: return startHivekv(1, false, hivekvVersion, ONE_NODE_AGAIN);
    case 'hivekv-3': return startHivekv(3, o.viaFollower, hivekvVersion);
    case 'etcd-1': return startEtcd(1, false);
    case 'etcd-3': return startEtcd(3, o.viaFollower);
    case 'redis': return startRedis(false);
    case 'redis-aof': return startRedis(true);
    case 'url': return urlTarget(o.target ?? '');
  }
}

interface TargetRun {
  readonly target: Target;
  readonly store: Store & { shas?: { cas: string; incr: string } };
  readonly plan: Plan;
  readonly options: SuiteOptions;
  readonly progress: Progress;
  readonly result: SuiteResult;
  nextId: number;
}

const valueBytesFor = (t: Target): number => t.kind === 'hivekv' ? VALUE_BYTES - 2 : VALUE_BYTES;

async function measure(run: TargetRun, entry: Entry, w: Workload, connections: number,
  open: { rate: number; fraction: number } | null): Promise<PointResult> {
  const { target, store, plan } = run;
  const id = run.nextId++;
  const tag = `r${id}`;
  const spec: PointSpec = {
    codec: { kind: target.kind, ...(store.shas ? { shas: store.shas } : {}) },
    host: target.host, ports: entry.ports, connections, mode: open ? 'open' : 'closed',
    ratePerSecond: open?.rate ?? 0,
    warmupMs: open ? plan.sweepWarmupMs : plan.warmupMs,
    durationMs: open ? plan.sweepDurationMs : plan.durationMs, workload: w,
    seed: id + 1, tag, keyPrefix: w.space === 'preloaded' ? 'k' : `p${process.pid}-${id}-`,
    valueBytes: valueBytesFor(target),
  };
  run.progress.point(entry.name, w.name, connections, open ? `open ${Math.round(open.rate)}/s`
    : 'closed', (spec.warmupMs + spec.durationMs) / 1000);
  const before = await store.counters();
  const pointRun = await runPoint(spec, run.options.threads, target.pids);
  const after = await store.counters();
  const checks = await checkPoint(store, pointRun, w, tag, before, after);
  const result: PointResult = { target: entry.name, family: target.kind, workload: w.name,
    connections, mode: spec.mode, offeredPerSecond: open?.rate ?? null,
    fractionOfPeak: open?.fraction ?? null, figures: pointRun.figures, checks };
  run.progress.done(result);
  return result;
}

async function measureEntry(run: TargetRun, entry: Entry): Promise<void> {
  const { plan } = run;
  for (const w of plan.workloads) {
    for (const connections of plan.connectionsFor(w)) {
      run.result.points.push(await measure(run, entry, w, connections, null));
    }
  }
  for (const w of plan.workloads.filter((x) => plan.sweepWorkloads.includes(x.name))) {
    const peak = peakOf(run, entry, w.name);
    if (peak === undefined || peak.figures.callsPerSecond <= 0) continue;
    for (const fraction of plan.sweepFractions) {
      const rate = peak.figures.callsPerSecond * fraction;
      run.result.points.push(await measure(run, entry, w, MANY_CONNECTIONS,
        { rate, fraction }));
    }
  }
}

/**
 * A fresh server's first seconds are slower (its JIT, new log files): an unreported stretch of
 * YCSB A on the preloaded keys, so the first workload measured does not pay for them.
 */
async function warmUp(run: TargetRun, entry: Entry): Promise<void> {
  const w = { ...workloadNamed('ycsb-a-uniform'), keyCount: run.plan.keyCount };
  run.progress.point(entry.name, 'warm-up', MANY_CONNECTIONS, 'not reported',
    (run.plan.warmupMs * 2) / 1000);
  await runPoint({ codec: { kind: run.target.kind, ...(run.store.shas ? { shas:
    run.store.shas } : {}) }, host: run.target.host, ports: entry.ports,
  connections: MANY_CONNECTIONS, mode: 'closed', ratePerSecond: 0, warmupMs: run.plan.warmupMs,
  durationMs: run.plan.warmupMs, workload: w, seed: 0, tag: 'warm', keyPrefix: 'k',
  valueBytes: valueBytesFor(run.target) }, run.options.threads, []);
}

function peakOf(run: TargetRun, entry: Entry, workload: string): PointResult | undefined {
  return run.result.points.find((p) => p.target === entry.name && p.workload === workload &&
    p.mode === 'closed' && p.connections === MANY_CONNECTIONS);
}

/** The same put and get by an independent tool, on the entry the suite measured first. */
async function crossCheck(run: TargetRun, entry: Entry): Promise<void> {
  const put = peakOf(run, entry, 'put');
  const get = peakOf(run, entry, 'get');
  if (!run.options.reference || put === undefined || get === undefined) return;
  const missing = referenceMissing(run.target);
  if (missing !== null) {
    run.progress.line(`skip the cross-check of ${entry.name}: ${missing}`);
    run.result.referencesSkipped.push(`${entry.name}: ${missing}`);
    return;
  }
  run.progress.point(entry.name, 'put, get', MANY_CONNECTIONS, 'cross-check',
    2 * Math.max(1, Math.round(run.plan.durationMs / 1000)));
  const figures = await runReference(run.target, entry, run.plan.durationMs / 1000,
    run.plan.keyCount, { put: put.figures.opsPerSecond, get: get.figures.opsPerSecond });
  for (const f of figures) {
    run.progress.line(`  ${f.target} ${f.workload} by ${f.tool}: ` +
      `${Math.round(f.opsPerSecond).toLocaleString('en-US')} ops/s, p50 ${f.p50Ms} ms, ` +
      `p99 ${f.p99Ms} ms`);
  }
  run.result.references.push(...figures);
}

async function benchTarget(name: TargetName, o: SuiteOptions, plan: Plan, progress: Progress,
  result: SuiteResult): Promise<void> {
  const missing = name === 'url' ? null : missingFor(name);
  if (missing !== null) {
    progress.line(`skip ${name}: ${missing}`);
    result.targets.push({ name, label: '', version: '', skipped: missing });
    return;
  }
  progress.target(name);
  const target = await startTarget(name, o, result.versions['hivekv'] ?? '');
  const first = target.entries[0]!;
  let store: TargetRun['store'] | null = null;
  try {
    store = await openStore(target.kind, target.host, first.ports[0]!);
    if (plan.workloads.some((w) => w.space === 'preloaded')) {
      progress.line(`${name}: writing ${plan.keyCount.toLocaleString('en-US')} keys`);
      await store.preload('k', plan.keyCount, valueBytesFor(target));
    }
    const run: TargetRun = { target, store, plan, options: o, progress, result,
      nextId: result.points.length + 1 };
    await warmUp(run, first);
    for (const entry of target.entries) await measureEntry(run, entry);
    await crossCheck(run, first);
    result.targets.push({ name, label: target.label, version: target.version, skipped: null });
  } finally {
    store?.close();
    await target.stop();
  }
}

/**
 * Writes the report of an earlier run again from its results.json (after a change to the
 * report's code, or to publish it); returns the directory.
 */
export async function rerender(dir: string, publish: boolean): Promise<string> {
  const result = JSON.parse(readFileSync(join(dir, 'results.json'), 'utf8')) as SuiteResult;
  // The one check that depends on the figures alone follows the current code.
  const points = result.points.map((p) => ({ ...p, checks: p.checks.map((c) =>
    c.name === 'answered' ? answered(p.figures) : c) }));
  await writeReport({ ...result, points }, dir, publish);
  return dir;
}

/** Runs the suite; returns the directory holding the report. */
export async function runSuite(o: SuiteOptions): Promise<string> {
  const plan = makePlan(o);
  const startedAt = new Date();
  const outDir = o.out ?? join(ROOT, 'bench', 'results',
    startedAt.toISOString().replace(/:/g, '-').replace(/\.\d+Z$/, 'Z'));
  mkdirSync(outDir, { recursive: true });
  keepServerLogs(join(outDir, 'logs'));
  const onSignal = (signal: NodeJS.Signals) => {
    stopEverything();
    process.stderr.write(`\nbench: stopped by ${signal}; servers stopped\n`);
    process.exit(130);
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  const progress = new Progress(plan.targets.length * secondsPerTarget(plan,
    o.viaFollower ? 2 : 1));
  const result: SuiteResult = { title: o.title, startedAt: startedAt.toISOString(),
    finishedAt: '', machine: machineInfo(), versions: toolVersions(), options: o,
    plan: { warmupMs: plan.warmupMs, durationMs: plan.durationMs, keyCount: plan.keyCount,
      sweepFractions: plan.sweepFractions, threads: o.threads },
    workloads: plan.workloads, targets: [], micro: [], points: [], references: [],
    referencesSkipped: [] };
  try {
    if (o.micro) {
      result.micro.push(...await runMicro(plan.microTimeMs, o.quick, progress));
    }
    for (const name of plan.targets) {
      try {
        await benchTarget(name, o, plan, progress, result);
      } catch (error) {
        const message = error instanceof Error ? error.message : String(error);
        progress.line(`${name}: failed: ${message}`);
        result.targets.push({ name, label: '', version: '', skipped: `failed: ${message}` });
      }
    }
  } finally {
    stopEverything();
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    progress.finish();
  }
  const finished = { ...result, finishedAt: new Date().toISOString() };
  await writeReport(finished, outDir, o.publish);
  return outDir;
}
