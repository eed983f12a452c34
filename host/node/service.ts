/**
 * What the HTTP layer asks of a node. The node (`replica.ts`) implements it over Raft, the
 * log and the WebAssembly machine; HTTP never touches those directly.
 *
 * Domain outcomes come back as data (`CallOutcome`); an answer the node cannot give is an
 * `Unavailable`, which HTTP maps to 503 `kv_unavailable` with `Retry-After`.
 */
import type { CallOutcome, KvCall, QuotaSettings, TenantUsage } from '../machine/commands.js';

export type UnavailableReason =
  | 'no_leader'
  | 'timeout'
  | 'storage_full'
  | 'shutting_down'
  | 'overloaded'
  | 'memory_full';

export interface Unavailable {
  readonly kind: 'unavailable';
  readonly reason: UnavailableReason;
  readonly detail: string;
  readonly retryAfterSeconds: number;
}

export type ServiceResult<T> = { readonly kind: 'done'; readonly value: T } | Unavailable;

export interface NodeHealth {
  readonly status: 'ok' | 'starting' | 'stopping';
  readonly id: string;
  readonly role: string;
  readonly leader: string | null;
  readonly term: number;
  readonly commitIndex: number;
  readonly appliedIndex: number;
  /** The state's byte total, as the memory budget counts it. */
  readonly stateBytes: number;
  /** The memory budget (HIVEKV_MAX_STATE_BYTES). */
  readonly stateBytesMax: number;
}

export interface QuotaView {
  readonly tenant: string;
  /** null when the tenant has no quota row. */
  readonly quota: QuotaSettings | null;
  readonly usage: TenantUsage;
}

export interface KvService {
  /**
   * Runs one validated call. A call with any write goes through the log as one entry; a
   * read-only call is a linearizable read (read index, then a local read).
   */
  execute(call: KvCall): Promise<ServiceResult<CallOutcome>>;
  /** Replicated operator switch (`POST /api/v1/system/kv-timers`). */
  setPaused(paused: boolean): Promise<ServiceResult<void>>;
  /** Replicated quota row (`PUT /api/v1/system/kv-quota/:tenant`). */
  setQuota(tenant: string, quota: QuotaSettings): Promise<ServiceResult<void>>;
  /** Linearizable read of a quota row and the tenant's usage. */
  getQuota(tenant: string): Promise<ServiceResult<QuotaView>>;
  /** This node's local view of the pause switch (for the refusal order; the log decides). */
  isPausedLocally(): boolean;
  /** This node's local view of a tenant's quota row (for grant checks and rate overrides). */
  quotaLocally(tenant: string): QuotaSettings | null;
  health(): NodeHealth;
}
