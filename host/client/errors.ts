/**
 * The one error class of the client: every call that did not get a usable answer rejects
 * with a `HivekvError`, whether the node refused it (the `{error, reason, detail}` envelope
 * with its HTTP status) or no answer arrived at all (status 0).
 *
 * Runs in browsers as well as Node: no `node:` import, no Node global. Misuse of the API
 * itself (a value that is `undefined`, a TTL string the parser does not know) is not a
 * `HivekvError` but a `TypeError` or `RangeError`, thrown before anything is sent.
 */

/** `status` of an error that no HTTP answer produced: a timeout or a failed connection. */
export const NO_HTTP_STATUS = 0;

/** What a `HivekvError` carries besides its message. */
export interface HivekvErrorFields {
  /** The HTTP status, or 0 when no answer arrived (`client_timeout`, `connection_failed`). */
  readonly status: number;
  /** The envelope's `error`: a stable code to branch on (`kv_bad_request`, `rate_limited`...). */
  readonly error: string;
  /** The envelope's `reason`: a stable id, finer than `error` (`kv_bad_ttl`, `no_leader`...). */
  readonly reason: string;
  /** Human text. Never branch on it. */
  readonly detail: string;
  /** From `Retry-After` on a 429 or 503, in whole seconds; null otherwise. */
  readonly retryAfterSeconds: number | null;
  /** The node URL of the last attempt, or null when nothing was sent. */
  readonly url: string | null;
  /** How many attempts were made (1 when the first answer was final). */
  readonly attempts: number;
  /**
   * The `Idempotency-Key` every attempt of this write carried, or null for a read. Sending
   * the same call again with this key (the `idempotencyKey` option) is safe: a node that
   * already applied it answers the first answer and applies nothing.
   */
  readonly idempotencyKey: string | null;
}

/**
 * A refused or unanswered call. Branch on `status`, `error` and `reason`, never on
 * `message` or `detail`.
 *
 * - `status` 400/413: the call's shape; sending it again will not help.
 * - 401/403: credentials, role, grant, quota or a paused KV in a transaction.
 * - 429 `rate_limited`: retried by the client after `Retry-After`; seen here only once the
 *   retries are spent.
 * - 503 `kv_unavailable` / `kv_disabled`, and status 0 (`client_timeout`,
 *   `connection_failed`): the outcome of a write is unknown. Send it again with the same
 *   `idempotencyKey` to learn it without applying it twice.
 */
export class HivekvError extends Error implements HivekvErrorFields {
  override readonly name = 'HivekvError';
  readonly status: number;
  readonly error: string;
  readonly reason: string;
  readonly detail: string;
  readonly retryAfterSeconds: number | null;
  readonly url: string | null;
  readonly attempts: number;
  readonly idempotencyKey: string | null;

  constructor(fields: HivekvErrorFields, options?: { readonly cause?: unknown }) {
    super(`${fields.error} (${fields.reason}): ${fields.detail}`, options);
    this.status = fields.status;
    this.error = fields.error;
    this.reason = fields.reason;
    this.detail = fields.detail;
    this.retryAfterSeconds = fields.retryAfterSeconds;
    this.url = fields.url;
    this.attempts = fields.attempts;
    this.idempotencyKey = fields.idempotencyKey;
  }

  /** The same as `error`, under the name Queen's client gives it. */
  get code(): string {
    return this.error;
  }

  /** The envelope as the node sent it, with the status and hint: what the CLI prints. */
  toJSON(): Record<string, unknown> {
    return {
      error: this.error,
      reason: this.reason,
      detail: this.detail,
      status: this.status,
      retryAfterSeconds: this.retryAfterSeconds,
    };
  }

  /** A copy that records the attempts made and the key they carried. */
  withAttempts(attempts: number, idempotencyKey: string | null): HivekvError {
    const fields = { ...this.fieldsOf(), attempts, idempotencyKey };
    return this.cause === undefined ? new HivekvError(fields)
      : new HivekvError(fields, { cause: this.cause });
  }

  private fieldsOf(): HivekvErrorFields {
    return {
      status: this.status,
      error: this.error,
      reason: this.reason,
      detail: this.detail,
      retryAfterSeconds: this.retryAfterSeconds,
      url: this.url,
      attempts: this.attempts,
      idempotencyKey: this.idempotencyKey,
    };
  }
}

/** True for a `HivekvError`, also one made by another copy of this module. */
export function isHivekvError(value: unknown): value is HivekvError {
  return value instanceof HivekvError ||
    (value instanceof Error && value.name === 'HivekvError' && 'status' in value);
}
