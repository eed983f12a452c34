/**
 * The cluster preset measures one node on either side of the cluster, and compares the cluster
 * with the mean of the two turns: the plan puts the second turn right after the cluster, the
 * ratio uses both, and a run without the second turn keeps its plain ratio.
 */
import { describe, expect, it } from 'vitest';

import { makePlan, type SuiteOptions } from '../../bench/suite/plan.js';
import type { PointResult, SuiteResult } from '../../bench/suite/run.js';
import type { ReferenceFigure } from '../../bench/suite/reference.js';
import {
  BOTH_ONE_NODE_TURNS, clusterFigure, clusterTargets, ratioPairs,
} from '../../bench/suite/tables.js';
import { ONE_NODE_AGAIN, type TargetName } from '../../bench/suite/targets.js';

function options(only: readonly TargetName[] | null, bracketCluster: boolean): SuiteOptions {
  return { quick: true, only, workloads: ['put'], connections: [64], target: null,
    durationSeconds: 1, threads: 1, out: null, viaFollower: false, bracketCluster,
    micro: false, sweep: false, reference: false, publish: false, keys: null,
    microTimeMs: null, title: 't' };
}

function point(target: string, workload: string, opsPerSecond: number, p99Ms = 2): PointResult {
  const latency = { p50Ms: 1, p99Ms, p999Ms: 3, maxMs: 4, meanMs: 1 };
  const counts = { logical: 1, requests: 1, failed: 0, statuses: {}, notFound: 0, applied: 0,
    refused: 0, conflicts: 0, retries: 0, gaveUp: 0 };
  return { target, family: 'hivekv', workload, connections: 64, mode: 'closed',
    offeredPerSecond: null, fractionOfPeak: null, checks: [],
    figures: { opsPerSecond, callsPerSecond: opsPerSecond, requestsPerSecond: opsPerSecond,
      latency, sendLag: null, window: counts, all: counts, saturated: false, unsent: 0,
      stuck: 0, windowSeconds: 1, generatorCores: 0.5, generatorMicrosPerRequest: 10,
      generatorBound: false, serverCores: 1 } };
}

const result = (points: PointResult[], references: ReferenceFigure[] = []) =>
  ({ points, references }) as unknown as SuiteResult;

function byWrk(target: string, workload: 'put' | 'get', opsPerSecond: number,
  p99Ms: number): ReferenceFigure {
  return { target, workload, tool: 'wrk', command: 'wrk', opsPerSecond, p50Ms: 1, p99Ms,
    non2xx: 0 };
}

describe('the cluster preset brackets the cluster with one node', () => {
  it('runs one node again right after the cluster, only when asked and both are planned', () => {
    expect(makePlan(options(['hivekv-1', 'hivekv-3'], true)).targets)
      .toEqual(['hivekv-1', 'hivekv-3', ONE_NODE_AGAIN]);
    expect(makePlan(options(['hivekv-1', 'hivekv-3', 'redis'], true)).targets)
      .toEqual(['hivekv-1', 'hivekv-3', ONE_NODE_AGAIN, 'redis']);
    expect(makePlan(options(['hivekv-1', 'hivekv-3'], false)).targets)
      .toEqual(['hivekv-1', 'hivekv-3']);
    expect(makePlan(options(['hivekv-3'], true)).targets).toEqual(['hivekv-3']);
    expect(makePlan(options(['hivekv-1'], true)).targets).toEqual(['hivekv-1']);
  });

  it('compares the cluster with the mean of both one-node turns', () => {
    const ratios = ratioPairs(result([point('hivekv-1', 'put', 30_000),
      point('hivekv-3', 'put', 12_000), point('hivekv-3 via follower', 'put', 9_000),
      point(ONE_NODE_AGAIN, 'put', 18_000), point('hivekv-1', 'get', 40_000),
      point('hivekv-3', 'get', 20_000)]));
    const of = (of: string, workload: string) => ratios.filter((r) => r.of === of &&
      r.workload === workload);
    // put: 12,000 against (30,000 + 18,000) / 2; get had no second turn, so one node's alone.
    expect(of('hivekv-3', 'put')).toEqual([expect.objectContaining({ to: BOTH_ONE_NODE_TURNS,
      ratio: 0.5 })]);
    expect(of('hivekv-3', 'get')).toEqual([expect.objectContaining({ to: 'hivekv-1',
      ratio: 0.5 })]);
    // The follower is still compared with the leader, and the second turn with nothing.
    expect(of('hivekv-3 via follower', 'put')).toEqual([expect.objectContaining({
      to: 'hivekv-3', ratio: 0.75 })]);
    expect(of(ONE_NODE_AGAIN, 'put')).toEqual([]);
  });

  it('reads each three-node target off both load generators, met or not', () => {
    const targets = clusterTargets(result([point('hivekv-1', 'put', 40_000),
      point('hivekv-1', 'get', 70_000), point('hivekv-3', 'put', 20_500, 7.9),
      point('hivekv-3', 'get', 30_000), point('hivekv-3 via follower', 'get', 12_000),
      point(ONE_NODE_AGAIN, 'put', 38_000)], [byWrk('hivekv-1', 'put', 46_000, 3),
      byWrk('hivekv-3', 'put', 20_000, 13.8), byWrk(ONE_NODE_AGAIN, 'put', 44_000, 3)]));
    expect(targets).not.toBeNull();
    const [puts, reads, p99] = targets!;
    // 20,500 against (40,000 + 38,000) / 2 by the generator; 20,000 against 45,000 by wrk.
    expect(puts!.generator).toBeCloseTo(20_500 / 39_000, 10);
    expect(puts!.wrk).toBeCloseTo(20_000 / 45_000, 10);
    expect(clusterFigure(puts!, puts!.generator)).toBe('0.53x (met)');
    expect(clusterFigure(puts!, puts!.wrk)).toBe('0.44x (not met)');
    expect(clusterFigure(reads!, reads!.generator)).toBe('0.40x (not met)');
    expect(clusterFigure(reads!, reads!.wrk)).toBe('-');
    expect(clusterFigure(p99!, p99!.generator)).toBe('7.90 ms (met)');
    expect(clusterFigure(p99!, p99!.wrk)).toBe('13.8 ms (not met)');
  });

  it('has no three-node targets without both one node and three, nor wrk figures without wrk',
    () => {
      expect(clusterTargets(result([point('hivekv-1', 'put', 40_000)]))).toBeNull();
      expect(clusterTargets(result([point('hivekv-3', 'put', 20_000)]))).toBeNull();
      const targets = clusterTargets(result([point('hivekv-1', 'put', 40_000),
        point('hivekv-3', 'put', 10_000)]))!;
      expect(targets.map((t) => t.wrk)).toEqual([null, null, null]);
      expect(targets[0]!.generator).toBe(0.25);
      // No reads were measured, so no ratio of them.
      expect(targets[1]!.generator).toBeNull();
    });
});
