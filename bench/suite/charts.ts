/**
 * The report's charts as SVG, rendered in this process by vega-lite (spec) and vega (scene
 * graph to SVG, `renderer: 'none'`): no browser, no canvas.
 */
import * as vega from 'vega';
import { compile, type TopLevelSpec } from 'vega-lite';

import type { SuiteResult } from './run.js';

export interface Chart {
  readonly file: string;
  readonly title: string;
  readonly svg: string;
}

const WIDTH = 560;

async function toSvg(spec: TopLevelSpec): Promise<string> {
  const view = new vega.View(vega.parse(compile(spec).spec), { renderer: 'none' });
  const svg = await view.toSVG();
  view.finalize();
  return svg;
}

function throughputSpec(r: SuiteResult, connections: number): TopLevelSpec | null {
  const values = r.points.filter((p) => p.mode === 'closed' && p.connections === connections)
    .map((p) => ({ workload: p.workload, target: p.target, ops: p.figures.opsPerSecond,
      p99: p.figures.latency.p99Ms }));
  if (values.length === 0) return null;
  const workloads = [...new Set(values.map((v) => v.workload))];
  const targets = [...new Set(values.map((v) => v.target))];
  const smallest = Math.min(...values.map((v) => v.ops).filter((ops) => ops > 0));
  const floor = 10 ** Math.floor(Math.log10(Number.isFinite(smallest) ? smallest : 1));
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    background: 'white', width: WIDTH, data: { values },
    height: { step: 7 },
    mark: { type: 'bar', tooltip: true },
    encoding: {
      y: { field: 'workload', type: 'nominal', sort: workloads, title: null },
      yOffset: { field: 'target', type: 'nominal', sort: targets },
      // A log scale has no zero: bars start at the decade below the smallest figure.
      x: { field: 'ops', type: 'quantitative', scale: { type: 'log', domainMin: floor },
        title: 'operations per second (log scale)' },
      x2: { datum: floor },
      color: { field: 'target', type: 'nominal', title: 'target', sort: targets },
    },
  };
}

function latencySpec(r: SuiteResult): TopLevelSpec | null {
  const values = r.points.filter((p) => p.mode === 'open').flatMap((p) =>
    ([['p50', p.figures.latency.p50Ms], ['p99', p.figures.latency.p99Ms],
      ['p99.9', p.figures.latency.p999Ms]] as const).map(([percentile, ms]) => ({
      workload: p.workload, target: p.target, percentile, ms: Math.max(ms, 0.001),
      offered: p.offeredPerSecond ?? 0 })));
  if (values.length === 0) return null;
  const order = ['p50', 'p99', 'p99.9'];
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    background: 'white', data: { values },
    // One panel per workload (columns) and percentile (rows), one line per target.
    facet: { column: { field: 'workload', type: 'nominal', title: null },
      row: { field: 'percentile', type: 'nominal', sort: order, title: null } },
    resolve: { scale: { x: 'independent' } },
    spec: {
      width: WIDTH / 2, height: 150,
      mark: { type: 'line', point: true, tooltip: true },
      encoding: {
        x: { field: 'offered', type: 'quantitative', scale: { type: 'log' },
          title: 'offered operations per second (log scale)' },
        y: { field: 'ms', type: 'quantitative', scale: { type: 'log' },
          title: 'latency, ms (log scale)' },
        color: { field: 'target', type: 'nominal', sort: [...new Set(values.map((v) =>
          v.target))] },
      },
    },
  };
}

export async function renderCharts(r: SuiteResult): Promise<Chart[]> {
  const specs: Array<[string, string, TopLevelSpec | null]> = [
    ['throughput-64.svg', 'Throughput by workload and target, 64 connections',
      throughputSpec(r, 64)],
    ['throughput-1.svg', 'Throughput by workload and target, 1 connection',
      throughputSpec(r, 1)],
    ['latency-vs-rate.svg', 'Latency against offered rate (open loop, 64 connections)',
      latencySpec(r)],
  ];
  const charts: Chart[] = [];
  for (const [file, title, spec] of specs) {
    if (spec !== null) charts.push({ file, title, svg: await toSvg(spec) });
  }
  return charts;
}
