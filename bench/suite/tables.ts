/**
 * The report's tables, built once from a run's results and written as markdown and HTML:
 * throughput with p50/p99 per target, hivekv's ratio to every peer, the open-loop sweep, what
 * the checks found and what the generator cost, and the micro benchmarks.
 */
import { REDIS_SCRIPTS } from './codecs.js';
import type { PointResult, SuiteResult } from './run.js';
import { ONE_NODE_AGAIN } from './targets.js';
import { HOT_KEY_LIMIT, HOT_KEYS } from './workloads.js';

export interface Table {
  readonly title: string;
  readonly note?: string;
  readonly headers: readonly string[];
  readonly rows: readonly (readonly string[])[];
}

export interface Ratio {
  readonly workload: string;
  readonly connections: number;
  readonly of: string;
  readonly to: string;
  readonly ratio: number;
}

const fmt = (n: number, digits = 0): string => Number.isFinite(n) ? n.toLocaleString('en-US',
  { maximumFractionDigits: digits, minimumFractionDigits: digits }) : '-';
const ms = (n: number): string => fmt(n, n < 10 ? 2 : 1);

const closed = (r: SuiteResult): PointResult[] => r.points.filter((p) => p.mode === 'closed');

/**
 * The load generator, not the target, may have set this figure: its threads were busy most of
 * the point, or it took more of a nearly full machine than the target did.
 */
export function generatorLimited(p: PointResult, cores: number): boolean {
  const f = p.figures;
  if (f.generatorBound) return true;
  return f.serverCores !== null && f.generatorCores >= f.serverCores &&
    f.generatorCores + f.serverCores >= 0.8 * cores;
}

/** Entries in the order they ran. */
function entries(points: readonly PointResult[]): string[] {
  return [...new Set(points.map((p) => p.target))];
}

/** Pairs compared: every hivekv entry with every peer of its size, and the cluster with one. */
function pairs(r: SuiteResult): Array<[string, string]> {
  const names = entries(closed(r));
  const family = new Map(r.points.map((p) => [p.target, p.family]));
  // The second one-node turn only steadies the cluster's ratio (ratioPairs).
  const ours = names.filter((n) => family.get(n) === 'hivekv' && n !== ONE_NODE_AGAIN);
  const peers = names.filter((n) => family.get(n) !== 'hivekv');
  const clusterish = (n: string) => n.includes('-3');
  const out: Array<[string, string]> = [];
  for (const h of ours) {
    for (const p of peers) {
      const viaFollower = h.includes('follower') === p.includes('follower');
      if (!clusterish(h) || (clusterish(p) && viaFollower)) out.push([h, p]);
    }
  }
  if (names.includes('hivekv-3') && names.includes('hivekv-1')) out.push(['hivekv-3', 'hivekv-1']);
  if (names.includes('hivekv-3 via follower')) out.push(['hivekv-3 via follower', 'hivekv-3']);
  return out;
}

/** What the cluster is compared with when one node was measured on either side of it. */
export const BOTH_ONE_NODE_TURNS = 'hivekv-1 (mean of both turns)';

export function ratioPairs(r: SuiteResult): Ratio[] {
  const out: Ratio[] = [];
  const at = (target: string, workload: string, connections: number) => closed(r).find((p) =>
    p.target === target && p.workload === workload && p.connections === connections);
  for (const [of, to] of pairs(r)) {
    for (const p of closed(r).filter((x) => x.target === of)) {
      const peer = at(to, p.workload, p.connections);
      if (peer === undefined || peer.figures.opsPerSecond <= 0) continue;
      const again = to === 'hivekv-1' ? at(ONE_NODE_AGAIN, p.workload, p.connections)
        : undefined;
      const bracketed = again !== undefined && again.figures.opsPerSecond > 0;
      const peerOps = bracketed ? (peer.figures.opsPerSecond + again.figures.opsPerSecond) / 2
        : peer.figures.opsPerSecond;
      out.push({ workload: p.workload, connections: p.connections, of,
        to: bracketed ? BOTH_ONE_NODE_TURNS : to, ratio: p.figures.opsPerSecond / peerOps });
    }
  }
  return out;
}

function throughputTable(r: SuiteResult, connections: number): Table | null {
  const points = closed(r).filter((p) => p.connections === connections);
  if (points.length === 0) return null;
  const names = entries(points);
  const workloads = [...new Set(points.map((p) => p.workload))];
  const cell = (p: PointResult | undefined) => p === undefined ? '-' :
    `${fmt(p.figures.opsPerSecond)}<br>${ms(p.figures.latency.p50Ms)} / ` +
    `${ms(p.figures.latency.p99Ms)} ms${generatorLimited(p, r.machine.cores) ? ' ‡' : ''}` +
    `${p.checks.every((c) => c.ok) ? '' : ' (check failed)'}`;
  return { title: `Closed loop, ${connections} connection${connections > 1 ? 's' : ''}: ` +
    'ops/s, p50 / p99', headers: ['workload', ...names],
  note: 'Peak throughput: each connection sends its next operation when the last one ' +
    'answered. A batch of 16 puts counts 16 operations. ‡: the load generator may have set ' +
    'the figure (its threads were busy most of the point, or it took more of a nearly full ' +
    'machine than the target did), so the target may well do more: see the cross-check.',
  rows: workloads.map((w) => [w, ...names.map((n) =>
    cell(points.find((p) => p.target === n && p.workload === w)))]) };
}

function ratioTable(r: SuiteResult): Table | null {
  const ratios = ratioPairs(r);
  if (ratios.length === 0) return null;
  const columns = [...new Set(ratios.map((x) => `${x.of} / ${x.to}`))];
  const rows = [...new Set(ratios.map((x) => `${x.workload}|${x.connections}`))];
  return { title: "hivekv's throughput as a multiple of each peer's", headers: ['workload',
    'conns', ...columns], note: 'Above 1: hivekv did more operations per second.',
  rows: rows.map((key) => {
    const [workload, conns] = key.split('|') as [string, string];
    return [workload, conns, ...columns.map((c) => {
      const x = ratios.find((y) => `${y.of} / ${y.to}` === c && y.workload === workload &&
        String(y.connections) === conns);
      return x === undefined ? '-' : `${fmt(x.ratio, 2)}x`;
    })];
  }) };
}

/** The three-node targets: puts through the leader and reads through a follower, as ratios. */
export const CLUSTER_PUT_RATIO_MIN = 0.5;
export const FOLLOWER_READ_RATIO_MIN = 0.5;
export const CLUSTER_PUT_P99_MS_MAX = 10;

/** One three-node target as each load generator measured it; null where one did not. */
export interface ClusterTarget {
  readonly name: string;
  readonly goal: string;
  readonly generator: number | null;
  readonly wrk: number | null;
  readonly met: (value: number) => boolean;
  readonly unit: 'x' | 'ms';
}

const mean = (values: readonly number[]): number | null => values.length === 0 ? null
  : values.reduce((a, b) => a + b, 0) / values.length;

/**
 * The cluster's targets, read off a run that measured one node and three at 64 connections:
 * puts through the leader against one node's (the mean of both one-node turns when there are
 * two), reads through a follower against the leader's, and the put p99 through the leader;
 * by the suite's generator and, where it ran, by wrk. Null without both one node and three.
 */
export function clusterTargets(r: SuiteResult): ClusterTarget[] | null {
  // The generator's ratios are the report's own (ratioPairs: one node is the mean of its turns).
  const ratios = ratioPairs(r).filter((x) => x.connections === 64);
  const ratio = (of: string, workload: string) =>
    ratios.find((x) => x.of === of && x.workload === workload)?.ratio ?? null;
  const clusterPuts = ratio('hivekv-3', 'put');
  const leaderPut = closed(r).find((p) => p.target === 'hivekv-3' && p.workload === 'put' &&
    p.connections === 64);
  if (clusterPuts === null || leaderPut === undefined) return null;
  const byWrk = (target: string) => r.references.find((x) =>
    x.target === target && x.workload === 'put' && x.tool === 'wrk');
  const wrkOneNodeMean = mean(['hivekv-1', ONE_NODE_AGAIN].map(byWrk)
    .filter((x) => x !== undefined && x.opsPerSecond > 0).map((x) => x!.opsPerSecond));
  const wrkLeaderPut = byWrk('hivekv-3');
  return [
    { name: 'puts through the leader, of one node\'s', goal: `at least ${CLUSTER_PUT_RATIO_MIN}x`,
      unit: 'x', met: (v) => v >= CLUSTER_PUT_RATIO_MIN, generator: clusterPuts,
      wrk: wrkLeaderPut === undefined || wrkOneNodeMean === null ? null
        : wrkLeaderPut.opsPerSecond / wrkOneNodeMean },
    { name: 'reads through a follower, of the leader\'s',
      goal: `at least ${FOLLOWER_READ_RATIO_MIN}x`, unit: 'x',
      met: (v) => v >= FOLLOWER_READ_RATIO_MIN, generator: ratio('hivekv-3 via follower', 'get'),
      wrk: null },
    { name: 'put p99 through the leader', goal: `under ${CLUSTER_PUT_P99_MS_MAX} ms`, unit: 'ms',
      met: (v) => v < CLUSTER_PUT_P99_MS_MAX, generator: leaderPut.figures.latency.p99Ms,
      wrk: wrkLeaderPut?.p99Ms ?? null },
  ];
}

/** A target's figure with whether it was met, or '-' where it was not measured. */
export function clusterFigure(target: ClusterTarget, value: number | null): string {
  if (value === null || !Number.isFinite(value)) return '-';
  const figure = target.unit === 'x' ? `${fmt(value, 2)}x` : `${ms(value)} ms`;
  return `${figure} (${target.met(value) ? 'met' : 'not met'})`;
}

function clusterTable(r: SuiteResult): Table | null {
  const targets = clusterTargets(r);
  if (targets === null) return null;
  return { title: 'Three nodes against their targets (64 connections)',
    note: 'One node is the mean of its turns before and after the cluster, by each load ' +
      'generator. wrk does not load a follower, so reads through one have no wrk figure.',
    headers: ['target', 'goal', "the suite's generator", 'wrk'],
    rows: targets.map((t) => [t.name, t.goal, clusterFigure(t, t.generator),
      clusterFigure(t, t.wrk)]) };
}

/** An open-loop rate was sustained: no backlog past the bound, and what was due got done. */
export function sustained(p: PointResult): boolean {
  const f = p.figures;
  const offered = p.offeredPerSecond ?? 0;
  return !f.saturated && f.callsPerSecond >= 0.95 * offered &&
    f.unsent <= Math.max(p.connections, 0.02 * offered * f.windowSeconds);
}

function sweepTable(r: SuiteResult): Table | null {
  const points = r.points.filter((p) => p.mode === 'open');
  if (points.length === 0) return null;
  return { title: 'Open loop: latency at fixed offered rates (64 connections)',
    note: 'Operations are due at fixed intervals whether or not earlier ones answered; ' +
      'latency runs from the intended time, so queueing counts (no coordinated omission). ' +
      'Send wait is the time from the intended start to the send: the generator\'s own ' +
      'lateness when a connection was free, plus the wait for one when all 64 were busy. ' +
      'Sustained: what fell due was done, with no backlog left over.',
    headers: ['target', 'workload', '% of peak', 'offered/s', 'done/s', 'p50 ms', 'p99 ms',
      'p99.9 ms', 'send wait p99 ms', 'sustained'],
    rows: points.map((p) => [p.target, p.workload, fmt((p.fractionOfPeak ?? 0) * 100),
      fmt(p.offeredPerSecond ?? 0), fmt(p.figures.callsPerSecond), ms(p.figures.latency.p50Ms),
      ms(p.figures.latency.p99Ms), ms(p.figures.latency.p999Ms),
      p.figures.sendLag === null ? '-' : ms(p.figures.sendLag.p99Ms),
      sustained(p) ? 'yes' : 'no']) };
}

function honestyTable(r: SuiteResult): Table | null {
  if (r.points.length === 0) return null;
  return { title: 'Checks, and what the load generator cost',
    note: 'Generator: this process\'s CPU over the point (1.00 = one core), all its threads. ' +
      'Server: the target\'s processes over the measured window, from /proc. The machine ' +
      'has as many cores as the header says: generator and server share them.',
    headers: ['target', 'workload', 'conns', 'mode', 'p99.9 ms', 'generator cores',
      'generator µs/request', 'server cores', 'checks'],
    rows: r.points.map((p) => [p.target, p.workload, String(p.connections),
      p.mode === 'open' ? `open ${fmt((p.fractionOfPeak ?? 0) * 100)}%` : 'closed',
      ms(p.figures.latency.p999Ms), fmt(p.figures.generatorCores, 2),
      fmt(p.figures.generatorMicrosPerRequest, 1),
      p.figures.serverCores === null ? '-' : fmt(p.figures.serverCores, 2),
      p.checks.map((c) => `${c.ok ? 'ok' : 'FAILED'} ${c.name}: ${c.detail}`).join('<br>')]) };
}

function microTables(r: SuiteResult): Table[] {
  return r.micro.map((m) => ({ title: `Micro: ${m.title}`,
    note: `\`${m.command}\`${m.error ? `: failed (${m.error})` : ''}` +
      `${m.notes.length > 0 ? `. ${m.notes.join('; ')}` : ''}`,
    headers: ['task', 'per second', 'unit', 'p50 µs', 'p99 µs', 'rme %'],
    rows: m.rows.map((row) => [row.name, fmt(row.perSecond), row.unit,
      row.p50us === null ? '-' : fmt(row.p50us, 1), row.p99us === null ? '-' : fmt(row.p99us, 1),
      row.rmePercent === null ? '-' : fmt(row.rmePercent, 1)]) }));
}

function referenceTable(r: SuiteResult): Table | null {
  if (r.references.length === 0 && r.referencesSkipped.length === 0) return null;
  const suite = (target: string, workload: string) => closed(r).find((p) =>
    p.target === target && p.workload === workload && p.connections === 64);
  return { title: 'Cross-check: the same put and get by an independent tool (64 connections)',
    note: 'wrk (one thread) for HTTP targets, redis-benchmark for Redis, run right after the ' +
      'suite\'s own generator on the same server. A ratio near 1 means the generator did ' +
      'not set the figure.' + (r.referencesSkipped.length > 0
      ? ` Skipped: ${r.referencesSkipped.join('; ')}.` : ''),
    headers: ['target', 'workload', 'suite ops/s', 'tool', 'tool ops/s', 'suite / tool',
      'suite p50 / p99 ms', 'tool p50 / p99 ms'],
    rows: r.references.map((x) => {
      const own = suite(x.target, x.workload);
      const ops = own?.figures.opsPerSecond ?? NaN;
      return [x.target, x.workload, fmt(ops), x.tool, fmt(x.opsPerSecond),
        `${fmt(ops / x.opsPerSecond, 2)}x`, own === undefined ? '-'
          : `${ms(own.figures.latency.p50Ms)} / ${ms(own.figures.latency.p99Ms)}`,
        `${ms(x.p50Ms)} / ${ms(x.p99Ms)}${x.non2xx > 0 ? ` (${x.non2xx} non-2xx)` : ''}`];
    }) };
}

export function tables(r: SuiteResult): Table[] {
  const connectionCounts = [...new Set(closed(r).map((p) => p.connections))]
    .sort((a, b) => b - a);
  return [...connectionCounts.map((c) => throughputTable(r, c)), ratioTable(r), clusterTable(r),
    sweepTable(r), referenceTable(r), honestyTable(r), ...microTables(r)]
    .filter((t): t is Table => t !== null);
}

const HIVEKV_NOTE = '- hivekv: one `POST /api/v1/kv` per operation; CAS is a `put` with ' +
  '`expect`; the bounded increment is `incr` with `max` and `ttlSeconds`; a batch is one call ' +
  'of 16 puts.';
const ETCD_NOTE = '- etcd: JSON gateway (`/v3/kv/range`, `/put`, `/txn`), linearizable reads; ' +
  'CAS is a txn comparing `mod_revision` whose failure branch reads the key; a batch is one ' +
  'txn of 16 puts; the bounded increment is a compare-and-swap loop (read the counter when ' +
  'the cached count says full, else a txn on `mod_revision`; a lost race retries with the ' +
  'value the failure branch returned). etcd counters carry no lease.';
const lua = (s: string) => s.replace(/\n/g, ' ');
const REDIS_NOTE = '- Redis: GET, SET, MSET of 16; CAS is a Lua script on a hash {v: version, ' +
  `d: value}: \`${lua(REDIS_SCRIPTS.cas)}\`; the bounded increment is ` +
  `\`${lua(REDIS_SCRIPTS.incr)}\`.`;

/** How each workload is defined and how each target runs it: stated in every report. */
export function workloadNotes(r: SuiteResult): string[] {
  const ran = r.targets.filter((t) => t.skipped === null).map((t) => t.name);
  const targets = r.targets.map((t) => `  - ${t.name}: ${t.skipped === null
    ? `${t.label} (${t.version})` : `skipped: ${t.skipped}`}`);
  const family = (prefix: string) => ran.some((name) => name.startsWith(prefix));
  return [
    ...r.workloads.map((w) => `- \`${w.name}\`: ${w.title}.`),
    '- Targets:', ...targets,
    ...(family('hivekv') || family('url') ? [HIVEKV_NOTE] : []),
    ...(family('etcd') ? [ETCD_NOTE] : []),
    ...(family('redis') ? [REDIS_NOTE] : []),
    `- The contended rate limiter runs ${HOT_KEYS} counters admitting ` +
      `${fmt(HOT_KEY_LIMIT)} each; past the limit increments are refused (counted, not errors).`,
  ];
}
