/**
 * The node's Prometheus metrics (prom-client), on a registry of its own so that two nodes in
 * one process (tests, the simulator) never share or clash on series. Every label set is
 * bounded: routes are route templates, never raw paths; distinct routes, methods and refusal
 * reasons are capped; tenant usage series are exactly the (capped) list last given.
 * Recording never throws into a request and never sees a key or a value. The series every call
 * updates (requests, latency, refusals, fsync) are plain numbers (plain-metrics.ts), turned
 * into text at scrape time; the rest are prom-client's.
 */

import {
  collectDefaultMetrics,
  Counter,
  Gauge,
  Histogram,
  Registry,
} from 'prom-client';
import type { RequestMetrics } from '../http/guards.js';
import type { HttpBudgetFigures } from '../http/server.js';
import type { SnapshotEvent } from './replica.js';
import { PlainCounter, PlainHistogram } from './plain-metrics.js';

/** Latency buckets in seconds, from 100 us to 10 s. */
export const LATENCY_BUCKETS_SECONDS: readonly number[] = [
  0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
  10,
];
/**
 * Snapshot duration buckets in seconds: a paced snapshot of a 2 GiB state takes about 32 s
 * at the default pace (HIVEKV_SNAPSHOT_BYTES_PER_SEC), one of a few MB well under a second.
 */
export const SNAPSHOT_BUCKETS_SECONDS: readonly number[] = [
  0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600,
];

/** Distinct values one bounded label may take; later values are reported as `other`. */
export const LABEL_VALUES_MAX = 64;
/** Tenants with a usage series at once; the largest by bytes are kept. */
export const TENANT_USAGE_SERIES_MAX = 1000;
/** The label value that stands in for a value past its bound. */
export const OVERFLOW_LABEL = 'other';

/** Raft progress as the driver sees it after each Ready. */
export interface RaftGauges {
  readonly term: number;
  readonly commitIndex: number;
  readonly appliedIndex: number;
  readonly lastIndex: number;
  readonly isLeader: boolean;
}

/** The machine's memory, as the budget counts it and as wasm memory holds it. */
export interface MemoryGauges {
  readonly stateBytes: number;
  readonly stateBytesMax: number;
  readonly preimageBytes: number;
  readonly fullCollections: number;
  readonly heapDeadBytes: number;
  readonly machineMemoryBytes: number;
  /** Idempotency records held and their bytes; evictions and replays since start. */
  readonly idempotencyRecords: number;
  readonly idempotencyBytes: number;
  readonly idempotencyEvictions: number;
  readonly idempotencyReplays: number;
}

/** One tenant's live keys and bytes, as counted by the machine. */
export interface TenantUsageSample {
  readonly tenant: string;
  readonly rows: number;
  readonly bytes: number;
}

/** Admits at most LABEL_VALUES_MAX distinct label values; the rest map to OVERFLOW_LABEL. */
class BoundedLabel {
  private readonly seen = new Set<string>();

  value(raw: string): string {
    if (this.seen.has(raw)) return raw;
    if (this.seen.size >= LABEL_VALUES_MAX) return OVERFLOW_LABEL;
    this.seen.add(raw);
    return raw;
  }
}

/** The request counts and latency of one (route, method). */
class RouteSeries {
  /** Requests answered, by status code. */
  readonly statuses = new Map<number, number>();
  constructor(readonly route: string, readonly method: string,
    readonly latency: ReturnType<PlainHistogram['seriesFor']>) {}
}

/** Metrics of one node; `render()` answers GET /metrics. */
export class NodeMetrics implements RequestMetrics {
  readonly registry = new Registry();
  private readonly routes = new BoundedLabel();
  private readonly methods = new BoundedLabel();
  private readonly reasons = new BoundedLabel();
  /** route as given -> method as given -> its series (aliases share one per label pair). */
  private readonly requestSeries = new Map<string, Map<string, RouteSeries>>();
  /** `<route label> <method label>` -> series: what is rendered. */
  private readonly seriesByLabels = new Map<string, RouteSeries>();
  /**
   * The series of the last request, and its route and method as given: under load most
   * requests in a row share them, and need no lookup.
   */
  private lastSeries: RouteSeries | null = null;
  private lastRoute = '';
  private lastMethod = '';
  private readonly latency = new PlainHistogram('hivekv_http_request_duration_seconds',
    'Time from request to response, by route template and method.', LATENCY_BUCKETS_SECONDS,
    ['route', 'method']);
  private readonly fsync = new PlainHistogram('hivekv_fsync_duration_seconds',
    'Time from starting one fsync of the write-ahead log or hard state to its completion ' +
    'on the event loop: the disk\'s time plus the waits for a pool thread and for the loop.',
    LATENCY_BUCKETS_SECONDS);
  private readonly fsyncSeries = this.fsync.seriesFor();
  private readonly refusals = new PlainCounter('hivekv_refusals_total',
    'Calls refused before the machine, by reason (rate_limited, forbidden, ...).', ['reason']);
  private readonly swept: Counter;
  private readonly checkpoints: Counter<'verdict'>;
  private readonly raft: Record<keyof RaftGauges, Gauge>;
  /** Read at every scrape, so the memory figures are never stale. */
  private memorySource: (() => MemoryGauges) | null = null;
  /** Seconds the loop has polled while idle, read at every scrape. */
  private idlePollSource: (() => number) | null = null;
  private loopStallsSource: (() => number) | null = null;
  private acceptingSource: (() => AcceptingGauges) | null = null;
  private budgetsSource: (() => HttpBudgetFigures) | null = null;
  private freeBytesSource: (() => number | null) | null = null;
  private slowLoopSyncsSource: (() => number) | null = null;
  private clockOffsetSource: (() => number) | null = null;
  private readonly tenantKeys: Gauge<'tenant'>;
  private readonly tenantBytes: Gauge<'tenant'>;
  private readonly snapshots: Counter<'event'>;
  private readonly snapshotSeconds: Histogram;
  private readonly snapshotWriting: Gauge;
  private readonly snapshotIndex: Gauge;
  private readonly snapshotBytes: Gauge;

  /** @param options.defaultMetrics process metrics (CPU, memory, event loop); default true. */
  constructor(options: { readonly defaultMetrics?: boolean } = {}) {
    const registers = [this.registry];
    this.swept = new Counter({ name: 'hivekv_swept_keys_total',
      help: 'Expired keys removed by sweep entries.', registers });
    this.checkpoints = new Counter({
      name: 'hivekv_checkpoints_total',
      help: 'Checkpoint entries applied, by verdict: passed (this state matched the ' +
        'leader\'s digest) or unverifiable (restored past the index, or too old).',
      labelNames: ['verdict'],
      registers,
    });
    for (const verdict of ['passed', 'unverifiable']) this.checkpoints.inc({ verdict }, 0);
    this.raft = raftGauges(registers);
    memoryGauges(registers, () => this.memorySource?.() ?? null);
    loopSeries(registers, () => this.idlePollSource?.() ?? 0,
      () => this.loopStallsSource?.() ?? 0);
    connectionSeries(registers, () => this.acceptingSource?.() ?? null,
      () => this.budgetsSource?.() ?? null);
    environmentGauges(registers, () => this.freeBytesSource?.() ?? null,
      () => this.clockOffsetSource?.() ?? 0, () => this.slowLoopSyncsSource?.() ?? 0);
    this.tenantKeys = new Gauge({
      name: 'hivekv_tenant_live_keys',
      help: 'Live keys per tenant.',
      labelNames: ['tenant'],
      registers,
    });
    this.tenantBytes = new Gauge({
      name: 'hivekv_tenant_live_bytes',
      help: 'Live key and value bytes per tenant.',
      labelNames: ['tenant'],
      registers,
    });
    this.snapshots = new Counter({
      name: 'hivekv_snapshots_total',
      help: 'Snapshots by event: begun, taken (durable), abandoned (a newer state ' +
        'superseded it), installed (received from the leader), restored (at start-up).',
      labelNames: ['event'],
      registers,
    });
    for (const event of ['begun', 'taken', 'abandoned', 'installed', 'restored']) {
      this.snapshots.inc({ event }, 0);
    }
    this.snapshotSeconds = new Histogram({
      name: 'hivekv_snapshot_duration_seconds',
      help: 'Time this node took to write one of its own snapshots, from its start until ' +
        'it was durable (paced by HIVEKV_SNAPSHOT_BYTES_PER_SEC).',
      buckets: [...SNAPSHOT_BUCKETS_SECONDS],
      registers,
    });
    this.snapshotWriting = new Gauge({
      name: 'hivekv_snapshot_in_progress',
      help: '1 while this node writes a snapshot of its own, else 0.',
      registers,
    });
    this.snapshotIndex = new Gauge({
      name: 'hivekv_snapshot_last_index',
      help: 'Log index of the newest snapshot this node holds durably (0: none yet).',
      registers,
    });
    this.snapshotBytes = new Gauge({
      name: 'hivekv_snapshot_last_bytes',
      help: 'Data bytes of the newest snapshot this node holds durably.',
      registers,
    });
    if (options.defaultMetrics ?? true) {
      collectDefaultMetrics({ register: this.registry, prefix: 'hivekv_' });
    }
  }

  /** Content-Type of `render()`. */
  get contentType(): string {
    return this.registry.contentType;
  }

  /** One answered request. `route` must be the route template (`/api/v1/kv/:ns/:key`). */
  observeRequest(route: string, method: string, status: number, seconds: number): void {
    let series = this.lastSeries;
    if (series === null || route !== this.lastRoute || method !== this.lastMethod) {
      series = this.seriesOf(route, method);
      this.lastSeries = series;
      this.lastRoute = route;
      this.lastMethod = method;
    }
    const code = Number.isInteger(status) && status >= 100 && status <= 599 ? status : 0;
    series.statuses.set(code, (series.statuses.get(code) ?? 0) + 1);
    this.latency.observe(series.latency, seconds);
  }

  /** The series of (route, method): two lookups by the caller's own strings once seen. */
  private seriesOf(route: string, method: string): RouteSeries {
    let byMethod = this.requestSeries.get(route);
    if (byMethod === undefined) {
      byMethod = new Map();
      if (this.requestSeries.size < 4 * LABEL_VALUES_MAX) this.requestSeries.set(route, byMethod);
    }
    let series = byMethod.get(method);
    if (series === undefined) {
      const routeLabel = this.routes.value(route);
      const methodLabel = this.methods.value(method.toUpperCase());
      const key = routeLabel + ' ' + methodLabel;
      series = this.seriesByLabels.get(key);
      if (series === undefined) {
        series = new RouteSeries(routeLabel, methodLabel,
          this.latency.seriesFor(routeLabel, methodLabel));
        this.seriesByLabels.set(key, series);
      }
      if (byMethod.size < 4 * LABEL_VALUES_MAX) byMethod.set(method, series);
    }
    return series;
  }

  /** One call refused by a guard or the machine, by its stable reason id. */
  refusal(reason: string): void {
    this.refusals.inc(1, this.reasons.value(reason));
  }

  observeFsync(seconds: number): void {
    this.fsync.observe(this.fsyncSeries, seconds);
  }

  /** hivekv_http_requests_total, from the plain counts. */
  private renderRequests(): string {
    const name = 'hivekv_http_requests_total';
    let text = `# HELP ${name} HTTP requests answered, by route template, method and status.\n` +
      `# TYPE ${name} counter\n`;
    for (const series of this.seriesByLabels.values()) {
      for (const [status, count] of series.statuses) {
        const label = status === 0 ? OVERFLOW_LABEL : String(status);
        text += `${name}{route="${series.route}",method="${series.method}",status="${label}"} ` +
          `${count}\n`;
      }
    }
    return text;
  }

  setRaft(state: RaftGauges): void {
    this.raft.term.set(state.term);
    this.raft.commitIndex.set(state.commitIndex);
    this.raft.appliedIndex.set(state.appliedIndex);
    this.raft.lastIndex.set(state.lastIndex);
    this.raft.isLeader.set(state.isLeader ? 1 : 0);
  }

  /** Where the memory gauges read their figures from at each scrape. */
  readMemoryFrom(source: () => MemoryGauges): void {
    this.memorySource = source;
  }

  /** Where `hivekv_idle_poll_seconds_total` reads its total from at each scrape. */
  readIdlePollFrom(source: () => number): void {
    this.idlePollSource = source;
  }

  /** Where `hivekv_event_loop_stalls_total` is read from at each scrape (loop-stalls.ts). */
  readLoopStallsFrom(source: () => number): void {
    this.loopStallsSource = source;
  }

  /** Where the clock's offset from its voters' bound is read at each scrape (cluster-clock.ts). */
  readClockOffsetFrom(source: () => number): void {
    this.clockOffsetSource = source;
  }

  /** Where the data directory's free bytes are read from at each scrape (null: unknown). */
  readFreeBytesFrom(source: () => number | null): void {
    this.freeBytesSource = source;
  }

  /** Where the count of slow fsyncs on the event loop is read from at each scrape. */
  readSlowLoopSyncsFrom(source: () => number): void {
    this.slowLoopSyncsSource = source;
  }

  /** Where the answers waiting and the bodies held are read from at each scrape. */
  readHttpBudgetsFrom(source: () => HttpBudgetFigures): void {
    this.budgetsSource = source;
  }

  /** Where the accept gate's figures are read from at each scrape (http/accept-gate.ts). */
  readAcceptingFrom(source: () => AcceptingGauges): void {
    this.acceptingSource = source;
  }

  /** Replaces every tenant usage series with `list` (the largest TENANT_USAGE_SERIES_MAX). */
  setTenantUsage(list: readonly TenantUsageSample[]): void {
    const kept =
      list.length <= TENANT_USAGE_SERIES_MAX
        ? list
        : [...list].sort((a, b) => b.bytes - a.bytes).slice(0, TENANT_USAGE_SERIES_MAX);
    this.tenantKeys.reset();
    this.tenantBytes.reset();
    for (const sample of kept) {
      this.tenantKeys.set({ tenant: sample.tenant }, sample.rows);
      this.tenantBytes.set({ tenant: sample.tenant }, sample.bytes);
    }
  }

  /** Expired keys removed by one applied sweep entry. */
  sweptKeys(count: number): void {
    if (Number.isFinite(count) && count > 0) this.swept.inc(count);
  }

  checkpointApplied(verdict: 'passed' | 'unverifiable'): void {
    this.checkpoints.inc({ verdict });
  }

  /** A snapshot began, became durable, was abandoned, installed or restored. */
  snapshotMilestone(event: SnapshotEvent): void {
    this.snapshots.inc({ event: event.kind });
    if (event.kind === 'begun') {
      this.snapshotWriting.set(1);
      return;
    }
    if (event.kind === 'taken' || event.kind === 'abandoned' || event.kind === 'no_room') {
      this.snapshotWriting.set(0);
    }
    if (event.kind === 'taken' && Number.isFinite(event.ms) && event.ms >= 0) {
      this.snapshotSeconds.observe(event.ms / 1000);
    }
    if (event.kind === 'refused') return;
    if (event.kind !== 'abandoned' && event.kind !== 'no_room') {
      this.snapshotIndex.set(event.index);
      this.snapshotBytes.set(event.dataBytes);
    }
  }

  /** The Prometheus text exposition of every series. */
  async render(): Promise<string> {
    return (await this.registry.metrics()) + this.renderRequests() + this.latency.render() +
      this.fsync.render() + this.refusals.render();
  }
}

function raftGauges(registers: Registry[]): Record<keyof RaftGauges, Gauge> {
  const gauge = (name: string, help: string): Gauge =>
    new Gauge({ name: `hivekv_raft_${name}`, help, registers });
  return {
    term: gauge('term', 'Current Raft term of this node (§5.1).'),
    commitIndex: gauge('commit_index', 'Highest log index known committed (§5.3).'),
    appliedIndex: gauge('applied_index', 'Highest log index applied to the state machine.'),
    lastIndex: gauge('last_index', 'Index of the last entry in the local log.'),
    isLeader: gauge('is_leader', '1 when this node is the leader, else 0.'),
  };
}

/**
 * `hivekv_idle_poll_seconds_total`: the CPU time the loop spent polling for a next call
 * instead of sleeping (HIVEKV_IDLE_POLL_US), a total `read` at each scrape.
 */
function idlePollCounter(registers: Registry[], read: () => number): void {
  totalCounter(registers, 'hivekv_idle_poll_seconds_total', 'Seconds the event loop spent ' +
    'polling for a next call once none was in flight, instead of sleeping ' +
    '(HIVEKV_IDLE_POLL_US); a busy core meanwhile.', read);
}

/** A counter that follows a total kept elsewhere, `read` at each scrape. */
/** The event loop's idle polling and its stalls. */
function loopSeries(registers: Registry[], idlePoll: () => number, stalls: () => number): void {
  idlePollCounter(registers, idlePoll);
  totalCounter(registers, 'hivekv_event_loop_stalls_total', 'Times the event loop was held ' +
    '100 ms or more (a timer that fired that late); each window of them is also a ' +
    '"event loop stalled" line in the log.', stalls);
}

/** Whether the HTTP server accepts connections, and how often descriptors ran short. */
export interface AcceptingGauges {
  readonly accepting: boolean;
  /** Times the listening socket was closed because descriptors ran short. */
  readonly pauses: number;
  /** Opens of the node's own files that found no descriptor and were tried again. */
  readonly shortages: number;
}

/** What the node reads of its surroundings: the data directory's disk and its own clock. */
function environmentGauges(registers: Registry[], readFreeBytes: () => number | null,
  readClockOffset: () => number, readSlowLoopSyncs: () => number): void {
  freeBytesGauge(registers, readFreeBytes);
  totalCounter(registers, 'hivekv_fsync_loop_slow_total', 'fsyncs run on the event loop ' +
    'that took over 50 ms (a stalling disk): two in a row send the next 30 s of fsyncs to ' +
    'the thread pool, so the loop goes on answering.', readSlowLoopSyncs);
  new Gauge({ name: 'hivekv_clock_offset_seconds', help: 'This node\'s wall clock minus the ' +
    'nearest time a majority of the voters\' clocks allow (0 within it). Past 1 s either way ' +
    'the node stamps the log by the voters\' time instead of its own.', registers, collect() {
    this.set(readClockOffset() / 1000);
  } });
}

function freeBytesGauge(registers: Registry[], read: () => number | null): void {
  new Gauge({ name: 'hivekv_storage_free_bytes', help: 'Free bytes on the data directory\'s ' +
    'file system, as the node reads it every 500 ms: below HIVEKV_MIN_FREE_BYTES it refuses ' +
    'writes (503 storage_full).', registers, collect() {
    const free = read();
    if (free !== null) this.set(free);
  } });
}

/**
 * What the HTTP server holds and turns away: its listening socket (accept-gate.ts), the
 * answers waiting for clients and the bodies held (answer-budget.ts, body-budget.ts).
 */
function connectionSeries(registers: Registry[], read: () => AcceptingGauges | null,
  readBudgets: () => HttpBudgetFigures | null): void {
  new Gauge({ name: 'hivekv_http_answer_bytes_waiting', help: 'Bytes of answers the ' +
    'socket has not taken yet, waiting for clients to read them (every connection).',
  registers, collect() {
    this.set(readBudgets()?.answerBytesWaiting ?? 0);
  } });
  totalCounter(registers, 'hivekv_http_slow_readers_closed_total', 'Connections closed ' +
    'because their answer would have taken the bytes waiting for clients past ' +
    'HIVEKV_MAX_WAITING_ANSWER_BYTES.',
  () => readBudgets()?.slowReadersClosed ?? 0);
  new Gauge({ name: 'hivekv_http_body_bytes_held', help: 'Bytes of request bodies held now ' +
    '(declared lengths; a chunked body counts as QUEEN_MAX_BODY_BYTES).', registers, collect() {
    this.set(readBudgets()?.bodyBytesHeld ?? 0);
  } });
  totalCounter(registers, 'hivekv_http_bodies_refused_total', 'Calls refused with 503 ' +
    'overloaded because their body would have taken the bytes held past ' +
    'HIVEKV_MAX_HELD_BODY_BYTES.', () => readBudgets()?.bodiesRefused ?? 0);
  totalCounter(registers, 'hivekv_http_slow_uploads_closed_total', 'Connections closed ' +
    'because their body had stopped arriving for a second or more while another call\'s ' +
    'body needed room within HIVEKV_MAX_HELD_BODY_BYTES.',
  () => readBudgets()?.slowUploadsClosed ?? 0);
  new Gauge({ name: 'hivekv_http_accepting', help: '1 while the HTTP server accepts ' +
    'connections; 0 while it has closed its listening socket because the process\'s file ' +
    'descriptors run short (new clients are refused, open connections served).', registers,
  collect() {
    const figures = read();
    this.set(figures === null || figures.accepting ? 1 : 0);
  } });
  totalCounter(registers, 'hivekv_http_accept_pauses_total', 'Times the HTTP server stopped ' +
    'accepting connections because file descriptors ran short.', () => read()?.pauses ?? 0);
  totalCounter(registers, 'hivekv_descriptor_shortages_total', 'Opens of the node\'s own ' +
    'files (log, snapshots, hard state) that found no free descriptor and were tried again ' +
    'with the reserve given back.', () => read()?.shortages ?? 0);
}

function totalCounter(registers: Registry[], name: string, help: string,
  read: () => number): void {
  let counted = 0;
  new Counter({ name, help, registers, collect() {
    const total = read();
    if (total > counted) this.inc(total - counted);
    counted = Math.max(counted, total);
  } });
}

function memoryGauges(registers: Registry[], read: () => MemoryGauges | null): void {
  const names: Record<keyof MemoryGauges, [string, string]> = {
    stateBytes: ['state_bytes', 'The state\'s byte total (rows and tenants), as the ' +
      'memory budget counts it.'],
    stateBytesMax: ['state_bytes_max', 'The memory budget (HIVEKV_MAX_STATE_BYTES): past ' +
      'it, writes that grow the state are refused.'],
    preimageBytes: ['snapshot_preimage_bytes', 'Replaced rows a snapshot being written ' +
      'still holds; they count against the budget.'],
    fullCollections: ['machine_full_collections', 'Full collections the machine ran to stay ' +
      'under its 4 GiB ceiling.'],
    heapDeadBytes: ['machine_heap_dead_bytes', 'Replaced and deleted TTL rows the expiry ' +
      'heap keeps alive until it compacts (past 256 MiB it compacts).'],
    machineMemoryBytes: ['machine_memory_bytes', 'Size of the machine\'s wasm memory (it ' +
      'only grows).'],
    idempotencyRecords: ['idempotency_records', 'Idempotency-Key records held (replicated ' +
      'state; bounded per tenant and in all).'],
    idempotencyBytes: ['idempotency_bytes', 'Bytes the idempotency records count against ' +
      'their bounds.'],
    idempotencyEvictions: ['idempotency_evictions', 'Records evicted at a bound before they ' +
      'expired, since this process started: a retry of such a call would apply again.'],
    idempotencyReplays: ['idempotency_replays', 'Retries answered with a recorded answer ' +
      'by this node\'s machine since it started (every replica counts them).'],
  };
  for (const key of Object.keys(names) as Array<keyof MemoryGauges>) {
    const [name, help] = names[key];
    new Gauge({ name: `hivekv_${name}`, help, registers, collect() {
      const figures = read();
      if (figures !== null) this.set(figures[key]);
    } });
  }
}
