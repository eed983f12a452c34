/**
 * The Live view's arithmetic: two scrapes of `/metrics` a second apart become one point
 * (KV calls per second, p50/p99 of request and fsync latency, refusals per second by
 * reason), and the last HISTORY_POINTS_MAX points are kept for the charts. Pure: no DOM.
 *
 * Quantiles come from the histogram buckets' growth between the two scrapes, interpolated
 * inside a bucket as Prometheus' `histogram_quantile` does, so a p99 describes the calls of
 * that second, not the node's whole life. A counter that went down (the node restarted)
 * gives an empty point rather than a negative rate.
 */
import type { Sample } from './prometheus.js';

/** Five minutes at one point a second. */
export const HISTORY_POINTS_MAX = 300;
/** Refusal reasons drawn as their own line; later ones are summed into `other`. */
export const REASON_SERIES_MAX = 8;
/** The routes whose calls the Live view counts: the KV surface, not the operator's. */
export const KV_ROUTES: ReadonlySet<string> = new Set([
  '/api/v1/kv', '/api/v1/kv/:ns/*key', '/api/v1/transaction',
]);

const REQUESTS = 'hivekv_http_requests_total';
const LATENCY_BUCKET = 'hivekv_http_request_duration_seconds_bucket';
const FSYNC_BUCKET = 'hivekv_fsync_duration_seconds_bucket';
const REFUSALS = 'hivekv_refusals_total';
const OTHER_REASON = 'other';

/** A cumulative histogram bucket: observations at or below `le` seconds. */
export interface Bucket {
  readonly le: number;
  readonly count: number;
}

/** What one scrape says, reduced to what the Live view draws. */
export interface Scrape {
  readonly atMs: number;
  readonly kvCalls: number;
  readonly latency: readonly Bucket[];
  readonly fsync: readonly Bucket[];
  readonly refusals: ReadonlyMap<string, number>;
}

export interface Point {
  /** Unix seconds. */
  readonly at: number;
  readonly callsPerSec: number | null;
  readonly latencyP50Ms: number | null;
  readonly latencyP99Ms: number | null;
  readonly fsyncP50Ms: number | null;
  readonly fsyncP99Ms: number | null;
  readonly refusalsPerSec: ReadonlyMap<string, number>;
}

function addBucket(into: Map<number, number>, sample: Sample): void {
  const le = sample.labels['le'];
  if (le === undefined) return;
  const bound = le === '+Inf' ? Infinity : Number(le);
  if (Number.isNaN(bound)) return;
  into.set(bound, (into.get(bound) ?? 0) + sample.value);
}

function sortedBuckets(byBound: Map<number, number>): Bucket[] {
  return [...byBound].sort((a, b) => a[0] - b[0]).map(([le, count]) => ({ le, count }));
}

/** Reduces the samples of one scrape taken at `atMs`. */
export function summarize(samples: readonly Sample[], atMs: number): Scrape {
  let kvCalls = 0;
  const latency = new Map<number, number>();
  const fsync = new Map<number, number>();
  const refusals = new Map<string, number>();
  for (const sample of samples) {
    const route = sample.labels['route'] ?? '';
    if (sample.name === REQUESTS && KV_ROUTES.has(route)) kvCalls += sample.value;
    else if (sample.name === LATENCY_BUCKET && KV_ROUTES.has(route)) addBucket(latency, sample);
    else if (sample.name === FSYNC_BUCKET) addBucket(fsync, sample);
    else if (sample.name === REFUSALS) {
      const reason = sample.labels['reason'] ?? OTHER_REASON;
      refusals.set(reason, (refusals.get(reason) ?? 0) + sample.value);
    }
  }
  return { atMs, kvCalls, latency: sortedBuckets(latency), fsync: sortedBuckets(fsync),
    refusals };
}

/**
 * The `q` quantile (0..1) of cumulative `buckets`, in seconds, or null with no
 * observations. Linear inside a bucket; a rank in the `+Inf` bucket answers the highest
 * finite bound, as `histogram_quantile` does.
 */
export function quantile(q: number, buckets: readonly Bucket[]): number | null {
  const total = buckets.at(-1)?.count ?? 0;
  if (!(total > 0)) return null;
  const rank = q * total;
  let lowerBound = 0;
  let lowerCount = 0;
  for (const bucket of buckets) {
    if (bucket.count >= rank) {
      if (bucket.le === Infinity) return lowerBound;
      const inBucket = bucket.count - lowerCount;
      if (inBucket <= 0) return bucket.le;
      return lowerBound + (bucket.le - lowerBound) * (rank - lowerCount) / inBucket;
    }
    lowerBound = bucket.le;
    lowerCount = bucket.count;
  }
  return lowerBound;
}

/** `next - prev` per bucket; null when a count went down (a restart) or bounds differ. */
export function bucketGrowth(prev: readonly Bucket[],
  next: readonly Bucket[]): Bucket[] | null {
  const before = new Map(prev.map((b) => [b.le, b.count]));
  const out: Bucket[] = [];
  for (const bucket of next) {
    const growth = bucket.count - (before.get(bucket.le) ?? 0);
    if (growth < 0) return null;
    out.push({ le: bucket.le, count: growth });
  }
  return out;
}

function millis(seconds: number | null): number | null {
  return seconds === null ? null : seconds * 1000;
}

/** The point between two scrapes, or null when they are not in time order. */
export function pointBetween(prev: Scrape, next: Scrape): Point | null {
  const seconds = (next.atMs - prev.atMs) / 1000;
  if (!(seconds > 0)) return null;
  const calls = next.kvCalls - prev.kvCalls;
  const latency = bucketGrowth(prev.latency, next.latency);
  const fsync = bucketGrowth(prev.fsync, next.fsync);
  const refusalsPerSec = new Map<string, number>();
  for (const [reason, count] of next.refusals) {
    const growth = count - (prev.refusals.get(reason) ?? 0);
    if (growth >= 0) refusalsPerSec.set(reason, growth / seconds);
  }
  return {
    at: next.atMs / 1000,
    callsPerSec: calls >= 0 ? calls / seconds : null,
    latencyP50Ms: latency === null ? null : millis(quantile(0.5, latency)),
    latencyP99Ms: latency === null ? null : millis(quantile(0.99, latency)),
    fsyncP50Ms: fsync === null ? null : millis(quantile(0.5, fsync)),
    fsyncP99Ms: fsync === null ? null : millis(quantile(0.99, fsync)),
    refusalsPerSec,
  };
}

type Column = Array<number | null>;

/** The last HISTORY_POINTS_MAX points, column by column, as uPlot draws them. */
export class History {
  readonly at: number[] = [];
  readonly calls: Column = [];
  readonly latencyP50: Column = [];
  readonly latencyP99: Column = [];
  readonly fsyncP50: Column = [];
  readonly fsyncP99: Column = [];
  /** One column per reason (at most REASON_SERIES_MAX, then `other`), aligned with `at`. */
  readonly refusals = new Map<string, Column>();

  push(point: Point): void {
    this.at.push(point.at);
    this.calls.push(point.callsPerSec);
    this.latencyP50.push(point.latencyP50Ms);
    this.latencyP99.push(point.latencyP99Ms);
    this.fsyncP50.push(point.fsyncP50Ms);
    this.fsyncP99.push(point.fsyncP99Ms);
    const row = new Map<string, number>();
    for (const [reason, rate] of point.refusalsPerSec) {
      const known = this.refusals.has(reason) || this.refusals.size < REASON_SERIES_MAX;
      const name = known ? reason : OTHER_REASON;
      row.set(name, (row.get(name) ?? 0) + rate);
    }
    for (const name of row.keys()) {
      if (!this.refusals.has(name)) {
        this.refusals.set(name, new Array<number | null>(this.at.length - 1).fill(null));
      }
    }
    for (const [name, column] of this.refusals) column.push(row.get(name) ?? 0);
    if (this.at.length > HISTORY_POINTS_MAX) this.dropOldest();
  }

  get length(): number {
    return this.at.length;
  }

  private dropOldest(): void {
    for (const column of [this.at, this.calls, this.latencyP50, this.latencyP99,
      this.fsyncP50, this.fsyncP99, ...this.refusals.values()]) {
      column.shift();
    }
  }
}
