/**
 * The one catalogue of client-visible error codes of the HTTP surface: code -> HTTP status,
 * the `{"error","reason","detail"}` envelope, and `KvError`, the refusal value that
 * validation and the guards return as data (never thrown).
 *
 * Pure: no I/O. Clients branch on `error` and `reason`, never on `detail` (WIRE.md,
 * "Envelopes"), so a code or reason once published is never renamed or reused.
 */

/** Every `error` value this surface may answer with. */
export type ErrorCode =
  | 'kv_bad_request'
  | 'payload_too_large'
  | 'unauthorized'
  | 'forbidden'
  | 'feature_gated'
  | 'kv_quota_exceeded'
  | 'kv_disabled'
  | 'rate_limited'
  | 'kv_unavailable'
  | 'not_found'
  | 'method_not_allowed'
  | 'conflict'
  | 'internal_error';

/** Which wire a call arrived on: a pause answers 503 on the KV routes, 403 in a transaction
 * (kv-routes.md, "Status codes"). */
export type Wire = 'kv' | 'transaction';

const STATUS_BY_CODE: Readonly<Record<ErrorCode, number>> = {
  kv_bad_request: 400,
  payload_too_large: 413,
  unauthorized: 401,
  forbidden: 403,
  feature_gated: 403,
  kv_quota_exceeded: 403,
  kv_disabled: 503,
  rate_limited: 429,
  kv_unavailable: 503,
  not_found: 404,
  method_not_allowed: 405,
  conflict: 409,
  internal_error: 500,
};

/** `Retry-After` is whole seconds, at least this many (WIRE.md, "Refusals"). */
export const RETRY_AFTER_SECONDS_MIN = 1;
/** A bound so that a bogus hint from below never tells a client to go away for a day. */
export const RETRY_AFTER_SECONDS_MAX = 3600;

/**
 * A refusal, as data: returned, never thrown. A class only so that `isKvError` is an
 * `instanceof` test that no parsed JSON body can imitate. `status` is already resolved for
 * the wire it answers on.
 */
export class KvError {
  constructor(
    readonly status: number,
    readonly error: ErrorCode,
    /** A stable id: the validation reason, or the code itself when there is no finer one. */
    readonly reason: string,
    readonly detail: string,
    /** Whole seconds; set on every 429 and 503, null otherwise. */
    readonly retryAfterSeconds: number | null,
  ) {}
}

/** The HTTP status of `code` on `wire`. */
export function statusOf(code: ErrorCode, wire: Wire = 'kv'): number {
  if (code === 'kv_disabled' && wire === 'transaction') return 403;
  return STATUS_BY_CODE[code];
}

/** Clamps a retry hint to whole seconds in RETRY_AFTER_SECONDS_MIN..MAX. */
export function retryAfter(seconds: number): number {
  if (!Number.isFinite(seconds)) return RETRY_AFTER_SECONDS_MIN;
  const whole = Math.ceil(seconds);
  if (whole < RETRY_AFTER_SECONDS_MIN) return RETRY_AFTER_SECONDS_MIN;
  return whole > RETRY_AFTER_SECONDS_MAX ? RETRY_AFTER_SECONDS_MAX : whole;
}

/**
 * Builds a refusal. `retryAfterSeconds` is required in effect for 429/503 and ignored
 * otherwise: a `Retry-After` on a 403 would be a lie (kv-routes.md, "Status codes").
 */
export function kvError(
  error: ErrorCode,
  reason: string,
  detail: string,
  options: { readonly wire?: Wire; readonly retryAfterSeconds?: number } = {},
): KvError {
  const status = statusOf(error, options.wire ?? 'kv');
  const wantsRetry = status === 429 || status === 503;
  const retry = wantsRetry ? retryAfter(options.retryAfterSeconds ?? 1) : null;
  return new KvError(status, error, reason, detail, retry);
}

/** Shorthand for the 400s of the validation table. */
export function badRequest(reason: string, detail: string): KvError {
  return kvError('kv_bad_request', reason, detail);
}

/** Shorthand for the 413s: `kv_value_too_large`, `kv_key_too_large`, `kv_body_too_large`. */
export function tooLarge(reason: string, detail: string): KvError {
  return kvError('payload_too_large', reason, detail);
}

export function isKvError(value: unknown): value is KvError {
  return value instanceof KvError;
}

/** The envelope text of a refusal: `{"error","reason","detail"}`. */
export function errorBody(error: KvError): string {
  return '{"error":"' + error.error + '","reason":' + JSON.stringify(error.reason) +
    ',"detail":' + JSON.stringify(error.detail) + '}';
}
