/**
 * The client's HTTP transport: one call, sent to the listed nodes with retries.
 *
 * - Retried: a 503 and a 502/504 from a proxy (on the next node), a 429 (on the same node,
 *   after its `Retry-After`), a timeout and a failed connection (on the next node). Waits
 *   grow exponentially with jitter, so that clients that failed together do not come back
 *   together. Any other status is final at once: a 4xx will not change by being sent again.
 * - A write call carries one `Idempotency-Key`, the same on every attempt, so that a node
 *   which already applied an earlier attempt answers that first answer instead of applying
 *   it again. Reads carry none.
 * - The node that last answered is where the next call starts, so a dead first URL costs
 *   one failed connection, not one per call.
 *
 * Browser-safe: only `fetch`, `AbortController`, `setTimeout` and `crypto.getRandomValues`.
 * Everything is bounded: attempts (`retries + 1`), each attempt's time (`timeoutMs`), each
 * wait (`retryCapMs`, or a `Retry-After` of at most RETRY_AFTER_WAIT_MS_MAX).
 */
import { HivekvError, NO_HTTP_STATUS } from './errors.js';

/** A `Retry-After` longer than this is not waited out: the error goes to the caller. */
export const RETRY_AFTER_WAIT_MS_MAX = 60_000;
/** A retry after `Retry-After` waits up to this share of it longer (jitter). */
const RETRY_AFTER_JITTER_SHARE = 0.2;
/** The most retries one call may ask for. */
export const RETRIES_MAX = 100;
/** An idempotency key is 1 to this many characters. */
export const IDEMPOTENCY_KEY_CHARS_MAX = 255;
/** Printable ASCII, space included, and no space at either end (HTTP trims those). */
const IDEMPOTENCY_KEY_PATTERN = /^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/;
/** Statuses that mean "not answered by a node that could decide": try again. */
const RETRIED_STATUSES: ReadonlySet<number> = new Set([502, 503, 504]);
/** Characters of a non-JSON answer quoted in an error's detail. */
const QUOTED_BODY_CHARS_MAX = 200;

export type FetchFunction = (input: string, init: RequestInit) => Promise<Response>;

export interface TransportOptions {
  /** Base URLs of the nodes, `http://host:port`, without a path. */
  readonly urls: readonly string[];
  /** Sent as `Authorization: Bearer <token>`. */
  readonly token?: string | null;
  /** Sent as `x-queen-tenant`. */
  readonly tenant?: string | null;
  /** Attempts after the first; 0 turns retries off. */
  readonly retries: number;
  /** Time allowed to one attempt, answer body included. */
  readonly timeoutMs: number;
  /** The first wait; each retry doubles it, up to `retryCapMs`. */
  readonly retryBaseMs: number;
  readonly retryCapMs: number;
  /** The `fetch` to use; the platform's own by default. */
  readonly fetch?: FetchFunction;
  /** Randomness in [0, 1) for jitter; `Math.random` by default (tests pin it). */
  readonly random?: () => number;
}

export interface CallSpec {
  readonly method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  /** The path, with its leading slash. */
  readonly path: string;
  /** Sent as JSON when present. */
  readonly body?: unknown;
  /** The write's key; null for a read. */
  readonly idempotencyKey: string | null;
  /** Ask only this URL, once (health of one node). */
  readonly onlyUrl?: string;
  /** Statuses whose JSON body is an answer rather than a refusal (`/health` answers 503). */
  readonly answerStatuses?: readonly number[];
}

export interface Answer {
  readonly status: number;
  readonly body: unknown;
  readonly url: string;
  /** `Idempotent-Replayed: true`: a node answered this write from its record. */
  readonly replayed: boolean;
}

/** One attempt's result: an answer, or an error and where the next attempt should go. */
type Attempt =
  | { readonly kind: 'answer'; readonly answer: Answer }
  | { readonly kind: 'retry'; readonly error: HivekvError; readonly sameUrl: boolean }
  | { readonly kind: 'final'; readonly error: HivekvError };

/** Normalises and checks node URLs; throws TypeError on anything but absolute http(s). */
export function normaliseUrls(urls: string | readonly string[]): string[] {
  const list = typeof urls === 'string' ? [urls] : [...urls];
  const out: string[] = [];
  for (const raw of list) {
    if (typeof raw !== 'string' || raw.trim() === '') {
      throw new TypeError('urls: every entry is a URL such as http://127.0.0.1:6632');
    }
    let parsed: URL;
    try {
      parsed = new URL(raw.trim());
    } catch {
      throw new TypeError(`urls: ${JSON.stringify(raw)} is not a URL (http://host:port)`);
    }
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
      throw new TypeError(`urls: ${JSON.stringify(raw)} must start with http:// or https://`);
    }
    if (parsed.search !== '' || parsed.hash !== '') {
      throw new TypeError(`urls: ${JSON.stringify(raw)} must not carry a query or fragment`);
    }
    out.push(parsed.origin + parsed.pathname.replace(/\/+$/, ''));
  }
  if (out.length === 0) throw new TypeError('urls: name at least one node');
  return out;
}

/** Checks a caller's idempotency key; throws TypeError naming the rule. */
export function checkIdempotencyKey(key: unknown): string {
  if (typeof key !== 'string' || key.length === 0 || key.length > IDEMPOTENCY_KEY_CHARS_MAX ||
      !IDEMPOTENCY_KEY_PATTERN.test(key)) {
    throw new TypeError(`idempotencyKey must be 1 to ${IDEMPOTENCY_KEY_CHARS_MAX} printable ` +
      'ASCII characters, with no space at either end');
  }
  return key;
}

/**
 * A fresh key: a random (version 4) UUID. Made from `getRandomValues`, which browsers offer
 * on plain-http pages too, where `crypto.randomUUID` is missing.
 */
export function newIdempotencyKey(): string {
  const bytes = new Uint8Array(16);
  globalThis.crypto.getRandomValues(bytes);
  bytes[6] = ((bytes[6] as number) & 0x0f) | 0x40;
  bytes[8] = ((bytes[8] as number) & 0x3f) | 0x80;
  let hex = '';
  for (const byte of bytes) hex += (byte < 16 ? '0' : '') + byte.toString(16);
  return hex.slice(0, 8) + '-' + hex.slice(8, 12) + '-' + hex.slice(12, 16) + '-' +
    hex.slice(16, 20) + '-' + hex.slice(20);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Sends calls to the nodes; one instance per client, shared by all its calls. */
export class Transport {
  readonly urls: readonly string[];
  /** Index of the URL the next call starts with: the one that answered last. */
  private current = 0;
  private readonly fetchFn: FetchFunction;
  private readonly random: () => number;
  private readonly fixedHeaders: Readonly<Record<string, string>>;

  constructor(private readonly options: TransportOptions) {
    this.urls = normaliseUrls(options.urls);
    if (!Number.isSafeInteger(options.retries) || options.retries < 0 ||
        options.retries > RETRIES_MAX) {
      throw new RangeError(`retries must be an integer from 0 to ${RETRIES_MAX}`);
    }
    for (const name of ['timeoutMs', 'retryBaseMs', 'retryCapMs'] as const) {
      const value = options[name];
      if (!Number.isFinite(value) || value < 0 || (name === 'timeoutMs' && value === 0)) {
        throw new RangeError(`${name} must be a number of milliseconds above 0`);
      }
    }
    if (options.fetch === undefined && typeof globalThis.fetch !== 'function') {
      throw new TypeError('this platform has no fetch: pass one as options.fetch');
    }
    // A bare reference to the global fetch loses its receiver in some browsers.
    this.fetchFn = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
    this.random = options.random ?? Math.random;
    const headers: Record<string, string> = { accept: 'application/json' };
    if (options.token !== undefined && options.token !== null && options.token !== '') {
      headers['authorization'] = `Bearer ${options.token}`;
    }
    if (options.tenant !== undefined && options.tenant !== null && options.tenant !== '') {
      headers['x-queen-tenant'] = options.tenant;
    }
    this.fixedHeaders = headers;
  }

  /** `url` normalised like the listed ones (for a call to one node). */
  urlOf(url: string): string {
    return normaliseUrls([url])[0] as string;
  }

  /**
   * Sends one call, retrying as the file header says.
   * @throws HivekvError when no attempt produced an answer.
   */
  async call(spec: CallSpec): Promise<Answer> {
    const retries = spec.onlyUrl === undefined ? this.options.retries : 0;
    let urlIndex = spec.onlyUrl === undefined ? this.current : -1;
    for (let attempt = 0; ; attempt++) {
      const url = urlIndex < 0 ? (spec.onlyUrl as string) : (this.urls[urlIndex] as string);
      const outcome = await this.attempt(url, spec);
      if (outcome.kind === 'answer') {
        if (urlIndex >= 0) this.current = urlIndex;
        return outcome.answer;
      }
      if (outcome.kind === 'final' || attempt >= retries) {
        throw outcome.error.withAttempts(attempt + 1, spec.idempotencyKey);
      }
      const waitMs = this.waitBeforeRetry(attempt, outcome.error, outcome.sameUrl);
      if (waitMs === null) throw outcome.error.withAttempts(attempt + 1, spec.idempotencyKey);
      if (!outcome.sameUrl && urlIndex >= 0) {
        const next = (urlIndex + 1) % this.urls.length;
        // Move the shared start point on, unless another call already did.
        if (this.current === urlIndex) this.current = next;
        urlIndex = next;
      }
      await sleep(waitMs);
    }
  }

  /**
   * How long to wait before retry number `attempt + 1`, or null to give up now. A 429 (and
   * a 503 that will be sent to the same node) waits out `Retry-After`; everything else
   * waits a backoff with jitter: half the doubled base, plus up to that much at random.
   */
  private waitBeforeRetry(attempt: number, error: HivekvError, sameUrl: boolean): number | null {
    const ceiling = Math.min(this.options.retryCapMs,
      this.options.retryBaseMs * 2 ** Math.min(attempt, 30));
    const backoffMs = ceiling / 2 + this.random() * (ceiling / 2);
    const hintSeconds = error.retryAfterSeconds;
    const honoursHint = error.status === 429 || (sameUrl || this.urls.length === 1);
    if (hintSeconds === null || !honoursHint) return Math.round(backoffMs);
    const hintMs = hintSeconds * 1000;
    if (hintMs > RETRY_AFTER_WAIT_MS_MAX) return null;
    return Math.round(Math.max(backoffMs, hintMs + this.random() * hintMs *
      RETRY_AFTER_JITTER_SHARE));
  }

  private headersFor(spec: CallSpec): Record<string, string> {
    const headers = { ...this.fixedHeaders };
    if (spec.body !== undefined) headers['content-type'] = 'application/json';
    if (spec.idempotencyKey !== null) headers['idempotency-key'] = spec.idempotencyKey;
    return headers;
  }

  /** One request to one node, within `timeoutMs` (body included). */
  private async attempt(url: string, spec: CallSpec): Promise<Attempt> {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), this.options.timeoutMs);
    const init: RequestInit = {
      method: spec.method,
      headers: this.headersFor(spec),
      signal: controller.signal,
    };
    if (spec.body !== undefined) init.body = JSON.stringify(spec.body);
    try {
      const response = await this.fetchFn(url + spec.path, init);
      const text = await response.text();
      return this.judge(url, spec, response, text);
    } catch (error) {
      return { kind: 'retry', error: this.unanswered(url, error, controller.signal.aborted),
        sameUrl: false };
    } finally {
      clearTimeout(timer);
    }
  }

  private unanswered(url: string, error: unknown, timedOut: boolean): HivekvError {
    const reason = timedOut ? 'client_timeout' : 'connection_failed';
    const cause = (error as { cause?: { code?: unknown; message?: unknown } } | null)?.cause;
    const why = typeof cause?.code === 'string' ? cause.code
      : typeof cause?.message === 'string' ? cause.message
        : error instanceof Error ? error.message : String(error);
    const detail = timedOut ? `no answer from ${url} within ${this.options.timeoutMs} ms`
      : `could not reach ${url} (${why})`;
    return new HivekvError({ status: NO_HTTP_STATUS, error: 'kv_unavailable', reason, detail,
      retryAfterSeconds: null, url, attempts: 1, idempotencyKey: null }, { cause: error });
  }

  /** Sorts an HTTP answer into an answer, a retry or a final refusal. */
  private judge(url: string, spec: CallSpec, response: Response, text: string): Attempt {
    const status = response.status;
    let body: unknown;
    let parsed = true;
    try {
      body = JSON.parse(text);
    } catch {
      parsed = false;
    }
    const isAnswer = status === 200 ||
      ((spec.answerStatuses?.includes(status) ?? false) && !isEnvelope(body));
    if (isAnswer && parsed) {
      const replayed = response.headers.get('idempotent-replayed') === 'true';
      return { kind: 'answer', answer: { status, body, url, replayed } };
    }
    const retryAfterSeconds = parseRetryAfter(response.headers.get('retry-after'));
    const error = refusal(url, status, parsed ? body : undefined, text, retryAfterSeconds);
    if (status === 429) return { kind: 'retry', error, sameUrl: true };
    if (RETRIED_STATUSES.has(status)) return { kind: 'retry', error, sameUrl: false };
    return { kind: 'final', error };
  }
}

/** `Retry-After` in whole seconds; an HTTP date or garbage counts as absent. */
function parseRetryAfter(header: string | null): number | null {
  if (header === null || !/^\s*\d{1,9}\s*$/.test(header)) return null;
  return Number(header.trim());
}

function isEnvelope(body: unknown): body is { error: string; reason?: unknown; detail?: unknown } {
  return typeof body === 'object' && body !== null && typeof (body as { error?: unknown })
    .error === 'string';
}

/** The error for a non-answer: the node's envelope, or a description of what came instead. */
function refusal(url: string, status: number, body: unknown, text: string,
  retryAfterSeconds: number | null): HivekvError {
  const base = { status, retryAfterSeconds, url, attempts: 1, idempotencyKey: null };
  if (isEnvelope(body)) {
    return new HivekvError({
      ...base,
      error: body.error,
      reason: typeof body.reason === 'string' ? body.reason : body.error,
      detail: typeof body.detail === 'string' ? body.detail : '',
    });
  }
  const quoted = text.length > QUOTED_BODY_CHARS_MAX
    ? text.slice(0, QUOTED_BODY_CHARS_MAX) + '...' : text;
  const what = status === 200 ? 'an answer that is not JSON'
    : `HTTP ${status} without the error envelope`;
  return new HivekvError({
    ...base,
    error: status === 200 ? 'bad_response' : `http_${status}`,
    reason: status === 200 ? 'not_json' : 'no_envelope',
    detail: `${url} sent ${what}: ${JSON.stringify(quoted)}`,
  });
}
