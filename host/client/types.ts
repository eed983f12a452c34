/**
 * The shapes the client sends and receives: the operations of `POST /api/v1/kv` and the
 * result elements the node answers with (docs/http.md, "Result elements"). Types only.
 *
 * Times are the node's ISO-8601 UTC strings with milliseconds, as sent; versions are
 * positive integers below 2^53, and 0 means absent.
 */

/** Why a write or check did not apply. A closed list: switch on it. */
export type KvReason = 'exists' | 'absent' | 'version' | 'limit' | 'type';

/** A TTL string: a whole number and one unit (`'90s'`, `'2m'`, `'1h'`, `'30d'`). */
export type TtlString = `${number}${'s' | 'm' | 'h' | 'd'}`;

/**
 * A declared lifetime. Every `put`, `putIfAbsent` and `incr` names exactly one of `ttl`,
 * `ttlSeconds`, `until` or `forever: true`; the node refuses a write with none
 * (`kv_expiry_not_specified`).
 */
export interface ExpiryOptions {
  /** A duration: `'90s'`, `'2m'`, `'1h'`, `'30d'`. */
  readonly ttl?: TtlString;
  /** Whole seconds above 0: the wire's own field. */
  readonly ttlSeconds?: number;
  /** An instant in the future (a Date, an ISO-8601 string or epoch milliseconds). */
  readonly until?: Date | string | number;
  /** Keep the key until it is deleted. Only `true` is a declaration. */
  readonly forever?: true;
}

/** Per call: the key that makes a write safe to send again (1 to 255 printable ASCII). */
export interface CallOptions {
  readonly idempotencyKey?: string;
}

export interface PutOptions extends ExpiryOptions, CallOptions {
  /** 0: the key must not exist. N > 0: the key must be at version N. */
  readonly expect?: number;
  /** A lost precondition aborts the whole call instead of answering `applied: false`. */
  readonly required?: boolean;
}

export interface PutIfAbsentOptions extends ExpiryOptions, CallOptions {
  readonly required?: boolean;
}

export interface DeleteOptions extends CallOptions {
  readonly expect?: number;
  readonly required?: boolean;
}

export interface IncrOptions extends ExpiryOptions, CallOptions {
  /** The increment applies only if the result stays at or above `min`. */
  readonly min?: number;
  /** The increment applies only if the result stays at or below `max`. */
  readonly max?: number;
  readonly required?: boolean;
}

export interface CheckOptions {
  readonly required?: boolean;
}

export interface GetPrefixOptions {
  /** Exclusive keyset cursor: the `nextAfter` of the previous page. */
  readonly after?: string | null;
  /** Rows per page; the node defaults to 100 and clamps to its `QUEEN_KV_PREFIX_LIMIT`. */
  readonly limit?: number;
  /** Rows without `value`. */
  readonly keysOnly?: boolean;
}

/** One stored key, as reads return it. */
export interface Row<T = unknown> {
  readonly key: string;
  readonly value: T;
  readonly version: number;
  /** null for a `forever` key. */
  readonly expiresAt: string | null;
  readonly updatedAt: string;
}

/** A row of a `keysOnly` page: everything but the value. */
export type KeyRow = Omit<Row, 'value'>;

interface Element<Op extends string> {
  /** The operation's position in its call. */
  readonly index: number;
  /** The op name as sent (`putIfAbsent` stays `putIfAbsent`). */
  readonly op: Op;
}

export type GetResult<T = unknown> =
  | (Element<'get'> & { readonly found: true } & Row<T>)
  | (Element<'get'> & { readonly found: false; readonly key: string });

export interface GetManyResult<T = unknown> extends Element<'getMany'> {
  /** Found keys, in key byte order. */
  readonly rows: readonly Row<T>[];
  /** Absent keys, in request order. */
  readonly missing: readonly string[];
  /** True when the call's read ceiling cut the answer: the cut keys are in neither list. */
  readonly truncated: boolean;
}

export interface GetPrefixResult<T = unknown> extends Element<'getPrefix'> {
  readonly rows: readonly (Row<T> | KeyRow)[];
  /** True when more rows follow this page. */
  readonly truncated: boolean;
  /** The cursor for the next page (the last row's key) when truncated, else null. */
  readonly nextAfter: string | null;
}

export type WriteOpName = 'put' | 'putIfAbsent' | 'delete' | 'incr' | 'check';

/**
 * The verdict of a write or a check. Always an object, so always truthy: read `applied`.
 * A loser carries the key's current value and version (`null` and 0 when absent).
 */
export interface WriteResult<T = unknown> {
  readonly index?: number;
  readonly op: WriteOpName;
  readonly applied: boolean;
  /** Present exactly when `applied` is false. */
  readonly reason?: KvReason;
  readonly key: string;
  readonly value: T | null;
  readonly version: number;
  /**
   * True when a `required: true` operation lost and the call was aborted (nothing of it
   * applied); `failedIndex` says which operation lost.
   */
  readonly precondition?: true;
  readonly failedIndex?: number;
  /**
   * The node answered with the recorded answer of an earlier attempt of this call (same
   * `Idempotency-Key`): it applied once, then, not now (`Idempotent-Replayed: true`).
   */
  readonly replayed?: true;
}

export type ResultElement =
  | GetResult
  | GetManyResult
  | GetPrefixResult
  | (WriteResult & { readonly index: number });

/** The answer of a call aborted by a lost `required` precondition (HTTP 200). */
export interface PreconditionAbort {
  readonly ok: false;
  readonly reason: 'kv_precondition';
  /** The lowest index of the `required` operations that lost. */
  readonly failedIndex: number;
  readonly kvReason: KvReason;
  /** The current version and value of the key that decided it. */
  readonly version: number;
  readonly value: unknown;
  /** The recorded answer of an earlier attempt (see WriteResult.replayed). */
  readonly replayed?: true;
}

/** What `kv.batch().run()` resolves to. */
export type BatchResult =
  | { readonly ok: true; readonly results: readonly ResultElement[];
      /** The recorded answer of an earlier attempt (see WriteResult.replayed). */
      readonly replayed?: true }
  | PreconditionAbort;

/** A transaction's commit answer (`POST /api/v1/transaction`). */
export type TransactionResult =
  | {
      readonly transactionId: string;
      readonly success: true;
      readonly results: readonly (ResultElement & { readonly opIndex: number;
        readonly type: 'kv' })[];
      /** The recorded answer of an earlier attempt (see WriteResult.replayed). */
      readonly replayed?: true;
    }
  | (Omit<PreconditionAbort, 'ok'> & {
      readonly transactionId: string;
      readonly success: false;
      readonly ok: false;
      readonly results: readonly [];
    });

/** `GET /health` of one node. */
export interface NodeHealth {
  readonly status: 'ok' | 'starting' | 'stopping' | string;
  readonly id: string;
  readonly role: string;
  readonly leader: string | null;
  readonly term: number;
  readonly commitIndex: number;
  readonly appliedIndex: number;
  /** Any field a newer node adds (a state digest, membership) comes through as is. */
  readonly [field: string]: unknown;
}

/** An operation as `POST /api/v1/kv` takes it, before expiry sugar is resolved. */
export type WireOp = Readonly<Record<string, unknown>> & { readonly op: string };
