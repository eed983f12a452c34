/**
 * Typed commands and outcomes of the KV state machine, as the host sees them.
 *
 * This file is the seam between the HTTP layer (which validates a request into a `KvCall`
 * and renders a `CallOutcome`), the node driver (which logs and applies entries) and the
 * WebAssembly machine (which decides every outcome). It holds types and tiny constructors
 * only: no I/O, no clock, no encoding (the binary codec lives in `codec.ts`).
 *
 * Values travel as compact JSON text (`valueJson`), never as parsed objects, so the hot path
 * does not parse and re-serialise values. Times are Unix milliseconds. Versions are positive
 * safe integers; 0 means absent.
 */

/** The tenant that owns every key when tenancy is off (WIRE.md, "Tenancy"). */
export const DEFAULT_TENANT = '00000000-0000-0000-0000-000000000001';

/** A declared lifetime: exactly one of `ttlSeconds` or `forever` (kv-routes.md). */
export type Expiry =
  | { readonly kind: 'ttl'; readonly ttlSeconds: number }
  | { readonly kind: 'forever' };

/**
 * An exact decimal number, as the text of a JSON number in canonical form: an optional `-`,
 * digits, an optional fraction, no exponent, no superfluous zeros (`"0.3"`, `"-12"`, `"100"`).
 * The host turns a client's JSON number into this form once, at validation.
 */
export type DecimalText = string;

export type ReadOp =
  | { readonly op: 'get'; readonly ns: string; readonly key: string }
  | { readonly op: 'getMany'; readonly ns: string; readonly keys: readonly string[] }
  | {
      readonly op: 'getPrefix';
      readonly ns: string;
      readonly prefix: string;
      /** Exclusive keyset cursor; `""` means no cursor. */
      readonly after: string;
      /** Already clamped by the host to 1..QUEEN_KV_PREFIX_LIMIT. */
      readonly limit: number;
      readonly keysOnly: boolean;
    }
  | {
      readonly op: 'check';
      readonly ns: string;
      readonly key: string;
      /** 0 asserts absence. */
      readonly expect: number;
      readonly required: boolean;
    };

export type WriteOp =
  | {
      readonly op: 'put';
      /** The op name as the client sent it; a `putIfAbsent` is a `put` with `expect: 0`. */
      readonly sentAs: 'put' | 'putIfAbsent';
      readonly ns: string;
      readonly key: string;
      readonly valueJson: string;
      readonly expiry: Expiry;
      /** null: unconditional upsert. 0: must not exist. N > 0: must be at version N. */
      readonly expect: number | null;
      readonly required: boolean;
    }
  | {
      readonly op: 'delete';
      readonly ns: string;
      readonly key: string;
      readonly expect: number | null;
      readonly required: boolean;
    }
  | {
      readonly op: 'incr';
      readonly ns: string;
      readonly key: string;
      readonly delta: DecimalText;
      readonly min: DecimalText | null;
      readonly max: DecimalText | null;
      readonly expiry: Expiry;
      readonly required: boolean;
    };

export type KvOp = ReadOp | WriteOp;
export type OpName = KvOp['op'];
/** The op name as sent, which is what every result element echoes. */
export type SentOpName = OpName | 'putIfAbsent';

/** How a call's answer is wrapped: which route it came in on. */
export type CallShape =
  /** `POST /api/v1/kv`: `{"results":[...]}`. */
  | 'batch'
  /** A path route: the single element itself. */
  | 'single'
  /** `POST /api/v1/transaction`: the commit or rollback answer. */
  | 'transaction';

/** One validated call: every op of one request, for one tenant. */
export interface KvCall {
  readonly tenant: string;
  /** The route's answer shape; a call without one answers as a batch. */
  readonly shape?: CallShape;
  /** The transaction's id, generated when the request arrived (`transaction` shape only). */
  readonly transactionId?: string;
  readonly ops: readonly KvOp[];
  /**
   * QUEEN_KV_MAX_READ_BYTES of the receiving node: the byte ceiling over the values the
   * whole call reads. The row that crosses it is kept, then reads stop (`truncated: true`).
   */
  readonly readBytesCeiling: number;
}

/**
 * Switches that every replica must see the same, so they travel inside the logged entry
 * rather than being read from each node's configuration at apply time.
 */
export interface CallFlags {
  /** QUEEN_KV_REQUIRE_GRANT: a write needs an enabled quota row for its tenant. */
  readonly requireGrant: boolean;
}

export type KvReason = 'exists' | 'absent' | 'version' | 'limit' | 'type';

/** One row of `getMany` / `getPrefix`. `valueJson` is null only for `keysOnly` rows. */
export interface Row {
  readonly key: string;
  readonly valueJson: string | null;
  readonly version: number;
  /** null for a `forever` key. */
  readonly expiresAtMs: number | null;
  readonly updatedAtMs: number;
}

export type OpResult =
  | {
      readonly kind: 'get';
      readonly found: true;
      readonly key: string;
      readonly valueJson: string;
      readonly version: number;
      readonly expiresAtMs: number | null;
      readonly updatedAtMs: number;
    }
  | { readonly kind: 'get'; readonly found: false; readonly key: string }
  | {
      readonly kind: 'getMany';
      /** In key byte order. */
      readonly rows: readonly Row[];
      /** In request order. */
      readonly missing: readonly string[];
      readonly truncated: boolean;
    }
  | {
      readonly kind: 'getPrefix';
      readonly rows: readonly Row[];
      readonly truncated: boolean;
      /** The last row's key when truncated, else null. */
      readonly nextAfter: string | null;
    }
  | {
      /** put, delete, incr and check. */
      readonly kind: 'write';
      readonly applied: boolean;
      /** null when applied. */
      readonly reason: KvReason | null;
      readonly key: string;
      /** JSON text; `"null"` for an absent key. */
      readonly valueJson: string;
      /** 0 for an absent key. */
      readonly version: number;
    };

/** What applying or reading a call decided. Domain outcomes are data, never exceptions. */
export type CallOutcome =
  | { readonly status: 'ok'; readonly results: readonly OpResult[] }
  | {
      /** A `required` op lost: nothing of the call was applied. */
      readonly status: 'precondition';
      readonly failedIndex: number;
      readonly kvReason: KvReason;
      readonly version: number;
      readonly valueJson: string;
    }
  | { readonly status: 'paused' }
  | { readonly status: 'notGranted' }
  | { readonly status: 'quotaExceeded' }
  /** The machine refused a malformed command. A bug in the host if it ever happens. */
  | { readonly status: 'invalid'; readonly detail: string };

/** A tenant's grant and quota (WIRE.md, "Quotas"). null limits are unlimited. */
export interface QuotaSettings {
  readonly enabled: boolean;
  readonly maxRows: number | null;
  readonly maxBytes: number | null;
  readonly maxReadsPerSec: number | null;
  readonly maxWritesPerSec: number | null;
}

/** Live rows and bytes a tenant holds, as counted by the machine. */
export interface TenantUsage {
  readonly rows: number;
  readonly bytes: number;
}

/** Every kind of entry the replicated log carries, as the machine applies it. */
/** An Idempotency-Key and how long its record answers retries (host/machine/idempotency.ts). */
export interface Idempotency {
  readonly key: string;
  readonly ttlSeconds: number;
}

export type Command =
  | { readonly kind: 'call'; readonly call: KvCall; readonly flags: CallFlags;
      /** A write call with an Idempotency-Key: logged as CMD_KEYED_CALL. */
      readonly idempotency?: Idempotency }
  /** Remove up to `maxKeys` keys expired at the entry's time. */
  | { readonly kind: 'sweep'; readonly maxKeys: number }
  | { readonly kind: 'setQuota'; readonly tenant: string; readonly quota: QuotaSettings }
  | { readonly kind: 'setPaused'; readonly paused: boolean }
  /** A new leader's empty entry (Raft §5.4.2, §8): applies nothing. */
  | { readonly kind: 'noop' }
  /** The proposing leader's digest (16 hex digits) after `index`; every replica compares. */
  | { readonly kind: 'checkpoint'; readonly index: number; readonly digest: string };

/**
 * What the machine answers a call with, ready to send: the HTTP status, the `ETag` and
 * `Retry-After` headers where there are any, and the JSON body (docs/codec.md, "Answers").
 * The body is the text host/http/render.ts would write for the same `CallOutcome`.
 */
export interface Answer {
  readonly status: number;
  /** A found `get` on a path route: its version, sent as `ETag: "<version>"`. */
  readonly etagVersion: number | null;
  readonly retryAfterSeconds: number | null;
  /** A recorded answer replayed for a retry (`Idempotent-Replayed: true`). */
  readonly replayed?: boolean;
  readonly body: Uint8Array;
}

/** A call's answer, or the machine's refusal of a malformed command (a host bug: a 500). */
export type CallAnswer = Answer | { readonly invalid: string };

/** What the machine decided about one applied entry. */
export type ApplyOutcome =
  /** `answer` is null when the machine was told not to answer (another node's entry). */
  | { readonly kind: 'call'; readonly answer: Answer | null }
  | { readonly kind: 'sweep'; readonly removedKeys: number }
  | { readonly kind: 'admin' }
  | { readonly kind: 'noop' }
  | CheckpointOutcome
  | { readonly kind: 'invalid'; readonly detail: string };

/**
 * A checkpoint entry compared with this replica's own digest at its index: `passed`,
 * `diverged` (this state is not the leader's), or `unverifiable` (the replica no longer knows
 * its digest there: it restored a snapshot past it, or the index is older than the ring of
 * recent digests the machine keeps). `own` is null when unverifiable.
 */
export interface CheckpointOutcome {
  readonly kind: 'checkpoint';
  readonly verdict: 'passed' | 'diverged' | 'unverifiable';
  readonly index: number;
  readonly expected: string;
  readonly own: string | null;
}

/** True when the op changes state; `check` is a read (WIRE.md, "Finer points"). */
export function isWriteOp(op: KvOp): op is WriteOp {
  return op.op === 'put' || op.op === 'delete' || op.op === 'incr';
}

export function assertNever(value: never, what: string): never {
  throw new Error(`unreachable: unexpected ${what}: ${JSON.stringify(value)}`);
}
