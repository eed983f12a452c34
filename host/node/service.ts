/**
 * What the HTTP layer asks of a node. The node (`replica.ts`) implements it over Raft, the
 * log and the WebAssembly machine; HTTP never touches those directly.
 *
 * Domain outcomes come back as the answer the machine rendered (`CallAnswer`: status, headers
 * and JSON body, sent as they are); an answer the node cannot give is an `Unavailable`, which
 * HTTP maps to 503 `kv_unavailable` with `Retry-After`.
 */
import type { MembershipChange, MembershipRefusal } from '../core/raft/configuration.js';
import type {
  CallAnswer, CallFlags, KvCall, QuotaSettings, TenantUsage,
} from '../machine/commands.js';
import { isWriteOp } from '../machine/commands.js';
import { encodeCommand } from '../machine/codec.js';
import type { ParseOutcome, RequestFrame } from '../machine/request.js';
import type { AnswerHeader } from '../machine/codec.js';

export type UnavailableReason =
  | 'no_leader'
  | 'timeout'
  | 'storage_full'
  | 'shutting_down'
  | 'overloaded'
  | 'not_a_member'
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
  /**
   * leader, follower, pre-candidate, candidate (a voter); learner; joining (started with
   * --join, not added yet); removed (removed from the cluster: it serves nothing).
   */
  readonly role: string;
  readonly leader: string | null;
  readonly term: number;
  readonly commitIndex: number;
  readonly appliedIndex: number;
  /** The state digest at `appliedIndex`, once the node reports one. */
  readonly digest?: string;
  /** The cluster this node belongs to: a node joining it needs it (HIVEKV_CLUSTER_ID). */
  readonly clusterId?: string;
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

/**
 * Whoever waits for a call's end, told exactly once and synchronously. The node keeps it in
 * its table of pending calls (no Promise, no closure per call), so an answer goes from the
 * machine's memory to the socket without a copy: `body` is a view that is valid only during
 * the `answered` call.
 */
export interface CallSink {
  answered(header: AnswerHeader, body: Uint8Array): void;
  /** No answer: 503 `kv_unavailable` (an unknown outcome for a write). */
  unavailable(result: Unavailable): void;
  /** The machine refused the command: a bug in the host that built it, a logged 500. */
  refused(detail: string): void;
}

/** A call parsed and validated into the command a log entry carries (or a read runs). */
export interface SubmittedCall {
  readonly tenant: string;
  /** A put, delete or incr: the call goes through the log. */
  readonly hasWrites: boolean;
  /** The CMD_CALL bytes (docs/codec.md). */
  readonly command: Uint8Array;
  /**
   * Estimated change of the state's byte total if every write applied (may be < 0); 0
   * below the memory budget the machine was given, where no call is refused for memory.
   */
  readonly growthBytes: number;
}

export interface KvService {
  /** Parses and validates one request into its command, in the machine (a 400/413 else). */
  parse(frame: RequestFrame): ParseOutcome;
  /**
   * Runs one validated call and tells `sink` how it ended, possibly before returning. A call
   * with any write goes through the log as one entry; a read-only call is a linearizable read
   * (read index, then a local read).
   */
  submit(call: SubmittedCall, sink: CallSink): void;
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

/** A sink that settles a Promise with a copy of the answer: for callers that want one. */
class SettlingSink implements CallSink {
  constructor(private readonly settle: (result: ServiceResult<CallAnswer>) => void) {}

  answered(header: AnswerHeader, body: Uint8Array): void {
    this.settle({ kind: 'done', value: { status: header.status,
      etagVersion: header.etagVersion, retryAfterSeconds: header.retryAfterSeconds,
      ...(header.replayed === true ? { replayed: true } : {}),
      body: body.slice() } });
  }

  unavailable(result: Unavailable): void {
    this.settle(result);
  }

  refused(detail: string): void {
    this.settle({ kind: 'done', value: { invalid: detail } });
  }
}

/**
 * A typed call (tests, the simulator, tools) as the service runs it: encoded the way the
 * parser would have written it.
 */
export function submittedCall(call: KvCall, flags: CallFlags = { requireGrant: false }):
  SubmittedCall {
  return { tenant: call.tenant, hasWrites: call.ops.some(isWriteOp),
    command: encodeCommand({ kind: 'call', call, flags }), growthBytes: 0 };
}

/**
 * `submit` of a typed call, as a Promise of the answer (tests, the simulator, tools).
 * `growthBytes`: what the call may add to the state, as a request's parse estimates it (the
 * memory budget refuses a call that grows the state past it); 0 by default.
 */
export function execute(service: KvService, call: KvCall,
  flags?: CallFlags, growthBytes = 0): Promise<ServiceResult<CallAnswer>> {
  return new Promise((resolve) => service.submit({ ...submittedCall(call, flags), growthBytes },
    new SettlingSink(resolve)));
}

/** One member as GET /api/v1/system/members shows it. */
export interface MemberView {
  readonly id: string;
  /** `host:port` of its peer listener; '' when this node does not know it. */
  readonly peer: string;
  readonly role: 'voter' | 'learner';
  /** The leader's matchIndex for it (§5.3); null when this node is not the leader. */
  readonly match: number | null;
}

export interface MembersView {
  readonly members: readonly MemberView[];
  readonly leader: string | null;
  readonly term: number;
  /** The index of the entry (or snapshot) that set this configuration. */
  readonly configIndex: number;
  /** False while that entry is not committed: a change is in flight. */
  readonly committed: boolean;
  /** Who answered: the leader (with `match`), or a follower from its own log (no `match`). */
  readonly source: 'leader' | 'follower';
  readonly answeredBy: string;
}

/** Why a node refuses a change, beyond the core's reasons. */
export type MembersRefusal = MembershipRefusal | 'no-peer-link';

export type MembersResult =
  | { readonly kind: 'done'; readonly value: MembersView }
  | { readonly kind: 'refused'; readonly refusal: MembersRefusal; readonly detail: string }
  | Unavailable;

/** The membership routes' view of a node (`/api/v1/system/members`). */
export interface MembersService {
  /** The configuration in effect on this node, with replication progress on the leader. */
  membersView(): MembersView;
  /**
   * One change (thesis §4.1), resolved once its entry is committed and applied here, or
   * refused. Removing the leader hands leadership over first (§3.10).
   */
  changeMembers(change: MembershipChange): Promise<MembersResult>;
}
