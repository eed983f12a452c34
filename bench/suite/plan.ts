/**
 * What a run measures: targets, workloads, connection counts, durations, and the open-loop
 * sweep. `--quick` is a smoke run of the whole suite under two minutes; the full run keeps
 * every target within about three minutes.
 */
import { ONE_NODE_AGAIN, TARGET_NAMES, type TargetName } from './targets.js';
import { KEY_COUNT, WORKLOADS, workloadNamed, type Workload } from './workloads.js';

export interface SuiteOptions {
  readonly quick: boolean;
  readonly only: readonly TargetName[] | null;
  readonly workloads: readonly string[] | null;
  readonly connections: readonly number[] | null;
  readonly target: string | null;
  readonly durationSeconds: number | null;
  readonly threads: number;
  readonly out: string | null;
  readonly viaFollower: boolean;
  /** Measure one node again right after the cluster, when both are in the plan. */
  readonly bracketCluster: boolean;
  readonly micro: boolean;
  readonly sweep: boolean;
  /** Cross-check put and get with an independent tool (wrk, redis-benchmark). */
  readonly reference: boolean;
  readonly publish: boolean;
  readonly keys: number | null;
  /** Budget per micro benchmark task, ms (default 500, quick 100). */
  readonly microTimeMs: number | null;
  readonly title: string;
}

export interface Plan {
  readonly targets: readonly TargetName[];
  readonly workloads: readonly Workload[];
  readonly warmupMs: number;
  readonly durationMs: number;
  readonly sweepWarmupMs: number;
  readonly sweepDurationMs: number;
  /** Fractions of the closed-loop peak offered in the open-loop sweep. */
  readonly sweepFractions: readonly number[];
  readonly sweepWorkloads: readonly string[];
  readonly keyCount: number;
  /** Connection counts a workload runs at. */
  connectionsFor(w: Workload): readonly number[];
  /** Micro benchmark budget per task, ms. */
  readonly microTimeMs: number;
}

/** Workloads every run measures at one connection as well as at 64. */
const SINGLE_CONNECTION = new Set(['put', 'get', 'cas', 'incr', 'batch16']);
export const MANY_CONNECTIONS = 64;

/** With `bracket`, one node runs again right after the cluster (ONE_NODE_AGAIN). */
function bracketed(targets: readonly TargetName[], bracket: boolean): readonly TargetName[] {
  const cluster = targets.indexOf('hivekv-3');
  if (!bracket || cluster < 0 || !targets.includes('hivekv-1')) return targets;
  return [...targets.slice(0, cluster + 1), ONE_NODE_AGAIN, ...targets.slice(cluster + 1)];
}

export function makePlan(o: SuiteOptions): Plan {
  const targets = o.target !== null ? ['url' as const] : bracketed(o.only ?? TARGET_NAMES,
    o.bracketCluster);
  const keyCount = o.keys ?? (o.quick ? 20_000 : KEY_COUNT);
  const chosen = (o.workloads !== null ? o.workloads.map(workloadNamed)
    : WORKLOADS.filter((w) => !o.quick || w.quick))
    .map((w) => w.keyCount === KEY_COUNT ? { ...w, keyCount } : w);
  const durationMs = (o.durationSeconds ?? (o.quick ? 1 : 4)) * 1000;
  const connectionsFor = (w: Workload): readonly number[] => {
    if (o.connections !== null) return o.connections;
    if (o.quick) return [MANY_CONNECTIONS];
    return SINGLE_CONNECTION.has(w.name) ? [MANY_CONNECTIONS, 1] : [MANY_CONNECTIONS];
  };
  return {
    targets, workloads: chosen, connectionsFor,
    warmupMs: Math.min(1000, Math.max(200, durationMs / 4)), durationMs,
    sweepWarmupMs: Math.min(500, Math.max(200, durationMs / 4)),
    sweepDurationMs: o.quick ? durationMs : Math.max(1000, durationMs * 0.75),
    sweepFractions: !o.sweep ? [] : o.quick ? [0.5] : [0.1, 0.5, 0.8, 0.95],
    sweepWorkloads: o.quick ? ['put'] : ['put', 'get'],
    keyCount,
    microTimeMs: o.microTimeMs ?? (o.quick ? 100 : 500),
  };
}

/** Seconds a plan takes per target, roughly: for the progress line's estimate. */
export function secondsPerTarget(plan: Plan, entries = 1): number {
  const point = (plan.warmupMs + plan.durationMs) / 1000 + 0.5;
  const closed = plan.workloads.reduce((n, w) => n + plan.connectionsFor(w).length, 0);
  const sweeps = plan.workloads.filter((w) => plan.sweepWorkloads.includes(w.name)).length *
    plan.sweepFractions.length;
  const sweep = (plan.sweepWarmupMs + plan.sweepDurationMs) / 1000 + 0.5;
  return entries * (closed * point + sweeps * sweep) + 5;
}
