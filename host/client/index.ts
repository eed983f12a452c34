/**
 * `hivekv/client`: a typed client for hivekv's HTTP surface whose `kv` has the shape of Queen
 * MQ's `queen.kv`, so code written for Queen runs by swapping the constructor.
 *
 *     import { createClient } from 'hivekv/client';
 *     const client = createClient({ urls: ['http://127.0.0.1:6632'] });
 *     await client.kv.put('orders', '9137', { status: 'paid' }, { ttl: '30d' });
 *
 * Depends on nothing but the platform's `fetch`: it runs in Node 20 and in browsers (no
 * `node:` import anywhere under host/client/; the lint and a browser-library type-check hold
 * it to that). Reference: docs/client.md.
 */
import { Kv, type CallContext } from './kv.js';
import { Transaction } from './transaction.js';
import {
  checkIdempotencyKey, newIdempotencyKey, Transport, type FetchFunction,
} from './transport.js';
import type { NodeHealth } from './types.js';

export { HivekvError, isHivekvError, NO_HTTP_STATUS, type HivekvErrorFields } from './errors.js';
export { parseTtl, TTL_SECONDS_MAX } from './expiry.js';
export { Kv, KvBatch, LIST_ALL_PAGES_MAX, type OnceResult } from './kv.js';
export { Transaction, type TransactionKv } from './transaction.js';
export {
  IDEMPOTENCY_KEY_CHARS_MAX, newIdempotencyKey, RETRIES_MAX, RETRY_AFTER_WAIT_MS_MAX,
  type FetchFunction,
} from './transport.js';
export type * from './types.js';

/** `createClient`'s options. Only `urls` is required. */
export interface ClientOptions {
  /** One node or several (`http://host:port`); calls move to the next one on failure. */
  readonly urls: string | readonly string[];
  /** A JWT, sent as `Authorization: Bearer`, for nodes with `JWT_ENABLED=true`. */
  readonly token?: string | null;
  /** The tenant (a UUID), sent as `x-queen-tenant`; only a node behind a trusted proxy
   * with `QUEEN_TENANCY_HEADER=true` reads it. */
  readonly tenant?: string | null;
  /** Attempts after the first on 503, 429, timeouts and failed connections. Default 3. */
  readonly retries?: number;
  /** Time allowed to one attempt, in ms. Default 10,000 (a node answers 503 after 5,000). */
  readonly timeoutMs?: number;
  /** First backoff wait in ms, doubled on each retry up to `retryCapMs`. Default 250. */
  readonly retryBaseMs?: number;
  /** Longest backoff wait in ms. Default 5,000. */
  readonly retryCapMs?: number;
  /** A `fetch` to use instead of the platform's. */
  readonly fetch?: FetchFunction;
}

export const CLIENT_DEFAULTS = Object.freeze({
  retries: 3,
  timeoutMs: 10_000,
  retryBaseMs: 250,
  retryCapMs: 5_000,
});

/** One node's `/health` answer. */
export interface HealthAnswer {
  /** The node that answered. */
  readonly url: string;
  /** True when it answered 200 with `status: "ok"` (it serves requests). */
  readonly ok: boolean;
  readonly health: NodeHealth;
}

/** A call to any route, for routes the client has no method for. */
export interface RequestSpec {
  readonly method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  /** The path with its leading slash, such as `/api/v1/system/kv-quota/<tenant>`. */
  readonly path: string;
  readonly body?: unknown;
  /** A write: carries an `Idempotency-Key` (this one, or a fresh one) on every attempt. */
  readonly write?: boolean;
  readonly idempotencyKey?: string;
}

export interface HivekvClient {
  /** The nodes, as normalised. */
  readonly urls: readonly string[];
  /** Queen's `queen.kv`: get, getMany, getPrefix, listAll, put, putIfAbsent, delete, incr,
   * check, once, batch. */
  readonly kv: Kv;
  /** A transaction: `client.transaction().kv.put(...).commit()`. */
  transaction(): Transaction;
  /**
   * `GET /health` of the first node that answers, or of `url` alone (one attempt). A node
   * that is starting or stopping answers too (`ok: false`).
   * @throws HivekvError when no node answered.
   */
  health(options?: { readonly url?: string }): Promise<HealthAnswer>;
  /**
   * Any route, with the same retries: resolves to the parsed 200 body.
   * @throws HivekvError on any other answer, or none.
   */
  request<T = unknown>(spec: RequestSpec): Promise<T>;
}

const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * Creates a client. Nothing is sent until the first call.
 * @throws TypeError or RangeError on an option that cannot work (a URL that is not http(s),
 * a tenant that is not a UUID, a negative timeout).
 */
export function createClient(options: ClientOptions): HivekvClient {
  if (typeof options !== 'object' || options === null) {
    throw new TypeError('createClient needs options: { urls: ["http://127.0.0.1:6632"] }');
  }
  const tenant = options.tenant ?? null;
  if (tenant !== null && tenant !== '' && !UUID_PATTERN.test(tenant)) {
    throw new TypeError('tenant must be a UUID such as 00000000-0000-0000-0000-000000000001');
  }
  const transport = new Transport({
    urls: typeof options.urls === 'string' ? [options.urls] : options.urls,
    token: options.token ?? null,
    tenant,
    retries: options.retries ?? CLIENT_DEFAULTS.retries,
    timeoutMs: options.timeoutMs ?? CLIENT_DEFAULTS.timeoutMs,
    retryBaseMs: options.retryBaseMs ?? CLIENT_DEFAULTS.retryBaseMs,
    retryCapMs: options.retryCapMs ?? CLIENT_DEFAULTS.retryCapMs,
    ...(options.fetch === undefined ? {} : { fetch: options.fetch }),
  });
  const context: CallContext = { transport, nowMs: () => Date.now() };
  return {
    urls: transport.urls,
    kv: new Kv(context),
    transaction: () => new Transaction(context),
    health: (healthOptions = {}) => health(transport, healthOptions.url),
    request: async <T>(spec: RequestSpec) => {
      const write = spec.write === true || spec.idempotencyKey !== undefined;
      const idempotencyKey = !write ? null : spec.idempotencyKey === undefined
        ? newIdempotencyKey() : checkIdempotencyKey(spec.idempotencyKey);
      const answer = await transport.call({ method: spec.method, path: spec.path,
        body: spec.body, idempotencyKey });
      return answer.body as T;
    },
  };
}

async function health(transport: Transport, url: string | undefined): Promise<HealthAnswer> {
  const onlyUrl = url === undefined ? undefined : transport.urlOf(url);
  const answer = await transport.call({
    method: 'GET', path: '/health', idempotencyKey: null, answerStatuses: [503],
    ...(onlyUrl === undefined ? {} : { onlyUrl }),
  });
  const health = answer.body as NodeHealth;
  return { url: answer.url, ok: answer.status === 200 && health?.status === 'ok', health };
}
