/**
 * The node's Prometheus metrics (prom-client), on a registry of its own so that two nodes in
 * one process (tests, the simulator) never share or clash on series. Every label set is
 * bounded: routes are route templates, never raw paths; distinct routes, methods and refusal
 * reasons are capped; tenant usage series are exactly the (capped) list last given.
 * Recording never throws into a request and never sees a key or a value.
 */

import {
  collectDefaultMetrics,
  Counter,
  Gauge,
  Histogram,
  Registry,
} from 'prom-client';
import type { RequestMetrics } from '../http/guards.js';

/** Latency buckets in seconds, from 100 us to 10 s. */
export const LATENCY_BUCKETS_SECONDS: readonly number[] = [
  0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
  10,
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
  readonly machineMemoryBytes: number;
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

/** Metrics of one node; `render()` answers GET /metrics. */
export class NodeMetrics implements RequestMetrics {
  readonly registry = new Registry();
  private readonly routes = new BoundedLabel();
  private readonly methods = new BoundedLabel();
  private readonly reasons = new BoundedLabel();
  private readonly requests: Counter<'route' | 'method' | 'status'>;
  private readonly latency: Histogram<'route' | 'method'>;
  private readonly fsync: Histogram;
  private readonly refusals: Counter<'reason'>;
  private readonly swept: Counter;
  private readonly raft: Record<keyof RaftGauges, Gauge>;
  /** Read at every scrape, so the memory figures are never stale. */
  private memorySource: (() => MemoryGauges) | null = null;
  private readonly tenantKeys: Gauge<'tenant'>;
  private readonly tenantBytes: Gauge<'tenant'>;

  /** @param options.defaultMetrics process metrics (CPU, memory, event loop); default true. */
  constructor(options: { readonly defaultMetrics?: boolean } = {}) {
    const registers = [this.registry];
    this.requests = new Counter({
      name: 'hivekv_http_requests_total',
      help: 'HTTP requests answered, by route template, method and status.',
      labelNames: ['route', 'method', 'status'],
      registers,
    });
    this.latency = new Histogram({
      name: 'hivekv_http_request_duration_seconds',
      help: 'Time from request to response, by route template and method.',
      labelNames: ['route', 'method'],
      buckets: [...LATENCY_BUCKETS_SECONDS],
      registers,
    });
    this.fsync = new Histogram({
      name: 'hivekv_fsync_duration_seconds',
      help: 'Time one fsync of the write-ahead log or hard state took.',
      buckets: [...LATENCY_BUCKETS_SECONDS],
      registers,
    });
    this.refusals = new Counter({
      name: 'hivekv_refusals_total',
      help: 'Calls refused before the machine, by reason (rate_limited, forbidden, ...).',
      labelNames: ['reason'],
      registers,
    });
    this.swept = new Counter({
      name: 'hivekv_swept_keys_total',
      help: 'Expired keys removed by sweep entries.',
      registers,
    });
    this.raft = raftGauges(registers);
    memoryGauges(registers, () => this.memorySource?.() ?? null);
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
    const routeLabel = this.routes.value(route);
    const methodLabel = this.methods.value(method.toUpperCase());
    this.requests.inc({ route: routeLabel, method: methodLabel, status: statusLabel(status) });
    if (Number.isFinite(seconds) && seconds >= 0) {
      this.latency.observe({ route: routeLabel, method: methodLabel }, seconds);
    }
  }

  /** One call refused by a guard or the machine, by its stable reason id. */
  refusal(reason: string): void {
    this.refusals.inc({ reason: this.reasons.value(reason) });
  }

  observeFsync(seconds: number): void {
    if (Number.isFinite(seconds) && seconds >= 0) this.fsync.observe(seconds);
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

  /** The Prometheus text exposition of every series. */
  render(): Promise<string> {
    return this.registry.metrics();
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
    machineMemoryBytes: ['machine_memory_bytes', 'Size of the machine\'s wasm memory (it ' +
      'only grows).'],
  };
  for (const key of Object.keys(names) as Array<keyof MemoryGauges>) {
    const [name, help] = names[key];
    new Gauge({ name: `hivekv_${name}`, help, registers, collect() {
      const figures = read();
      if (figures !== null) this.set(figures[key]);
    } });
  }
}

/** Status codes outside 100..599 are a bug upstream; they collapse to one label. */
function statusLabel(status: number): string {
  const valid = Number.isInteger(status) && status >= 100 && status <= 599;
  return valid ? String(status) : OVERFLOW_LABEL;
}
