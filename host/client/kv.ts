/**
 * `client.kv`, `client.kv.batch()` and `client.transaction()`: the shape of Queen MQ's
 * `queen.kv`, over hivekv's HTTP surface.
 *
 * Every operation goes through `POST /api/v1/kv` (or the transaction route), never the path
 * routes: it is the only route that takes every op, a key never needs percent-encoding, and
 * keys stay out of URLs, so out of access logs and proxies. A call with a write in it carries
 * an `Idempotency-Key` (the caller's `idempotencyKey`, or a fresh random one) reused by every
 * retry of that call. Browser-safe.
 */
import { HivekvError } from './errors.js';
import { kvOp, materialize, type PendingOp } from './ops.js';
import {
  checkIdempotencyKey, newIdempotencyKey, type Answer, type Transport,
} from './transport.js';
import type {
  BatchResult, CallOptions, CheckOptions, DeleteOptions, GetManyResult, GetPrefixOptions,
  GetPrefixResult, GetResult, IncrOptions, KeyRow, PreconditionAbort, PutIfAbsentOptions,
  PutOptions, ResultElement, Row, TransactionResult, WireOp, WriteResult,
} from './types.js';

/** What the client needs to send a call: the transport and a clock for `until`. */
export interface CallContext {
  readonly transport: Transport;
  readonly nowMs: () => number;
}

/** What `kv.once` answers: whether this caller wrote the marker, and the winner's value. */
export interface OnceResult<T> {
  readonly won: boolean;
  readonly value: T | null;
  readonly version: number;
  readonly result: WriteResult<T>;
}

/** Pages `listAll` reads at most; a bound on a walk that should never get near it. */
export const LIST_ALL_PAGES_MAX = 10_000_000;

function badAnswer(answer: Answer, detail: string, key: string | null): HivekvError {
  return new HivekvError({ status: answer.status, error: 'bad_response', reason: 'bad_envelope',
    detail: `${answer.url}: ${detail}`, retryAfterSeconds: null, url: answer.url, attempts: 1,
    idempotencyKey: key });
}

function isPrecondition(body: unknown): body is PreconditionAbort {
  return typeof body === 'object' && body !== null &&
    (body as { ok?: unknown }).ok === false &&
    (body as { reason?: unknown }).reason === 'kv_precondition';
}

/** The key a call carries: the caller's (checked), a fresh one for a write, none for a read. */
function keyFor(ops: readonly PendingOp[], options: CallOptions): string | null {
  if (!ops.some((op) => op.write)) return null;
  if (options.idempotencyKey !== undefined) return checkIdempotencyKey(options.idempotencyKey);
  return newIdempotencyKey();
}

/**
 * Sends `ops` as one `POST /api/v1/kv` and checks the answer's shape: index-aligned results,
 * or the precondition abort.
 */
export async function runCall(context: CallContext, ops: readonly PendingOp[],
  options: CallOptions = {}): Promise<BatchResult> {
  const nowMs = context.nowMs();
  const operations = ops.map((op) => materialize(op, nowMs));
  const idempotencyKey = keyFor(ops, options);
  const answer = await context.transport.call({
    method: 'POST', path: '/api/v1/kv', body: { operations }, idempotencyKey,
  });
  const body = answer.body;
  const replayed = answer.replayed ? { replayed: true as const } : {};
  if (isPrecondition(body)) return { ...body, ...replayed };
  const results = (body as { results?: unknown } | null)?.results;
  if (!Array.isArray(results)) {
    throw badAnswer(answer, 'expected {"results":[...]} or a kv_precondition answer',
      idempotencyKey);
  }
  // One result per operation, in order, or result i would be read as the verdict of op j.
  if (results.length !== operations.length) {
    throw badAnswer(answer, `${results.length} results for ${operations.length} operations`,
      idempotencyKey);
  }
  return { ok: true, results: results as ResultElement[], ...replayed };
}

/** A precondition abort, folded into the write result shape: `applied` stays the field. */
function abortedWrite(op: PendingOp, abort: PreconditionAbort): WriteResult {
  return {
    op: op.base.op as WriteResult['op'],
    key: op.base['key'] as string,
    applied: false,
    precondition: true,
    reason: abort.kvReason,
    value: abort.value,
    version: abort.version,
    failedIndex: abort.failedIndex,
    ...(abort.replayed === true ? { replayed: true as const } : {}),
  };
}

async function one(context: CallContext, op: PendingOp, options: CallOptions = {}):
  Promise<ResultElement | WriteResult> {
  const outcome = await runCall(context, [op], options);
  if (!outcome.ok) return abortedWrite(op, outcome);
  const result = outcome.results[0] as ResultElement;
  if (result.op !== op.base.op) {
    throw new HivekvError({ status: 200, error: 'bad_response', reason: 'bad_envelope',
      detail: `the result of ${op.base.op} names op ${String(result.op)}`,
      retryAfterSeconds: null, url: null, attempts: 1, idempotencyKey: null });
  }
  // A replayed write says so in its result: it applied on an earlier attempt.
  if (outcome.replayed === true && 'applied' in result) return { ...result, replayed: true };
  return result;
}

async function write<T>(context: CallContext, op: PendingOp, options: CallOptions):
  Promise<WriteResult<T>> {
  const result = await one(context, op, options);
  if (typeof (result as WriteResult).applied !== 'boolean') {
    throw new HivekvError({ status: 200, error: 'bad_response', reason: 'bad_envelope',
      detail: `the result of ${op.base.op} carries no applied field`, retryAfterSeconds: null,
      url: null, attempts: 1, idempotencyKey: null });
  }
  return result as WriteResult<T>;
}

/** The caller's per-call options, split from the op's own. */
function callOptions(options: CallOptions | undefined): CallOptions {
  return options?.idempotencyKey === undefined ? {} : { idempotencyKey: options.idempotencyKey };
}

/** `client.kv`: one method per operation, each one call. Results are always objects. */
export class Kv {
  constructor(private readonly context: CallContext) {}

  /** One key: `{found, key, value, version, expiresAt, updatedAt}` (`found: false, key`). */
  async get<T = unknown>(ns: string, key: string): Promise<GetResult<T>> {
    return await one(this.context, kvOp.get(ns, key)) as GetResult<T>;
  }

  /** Several keys of one namespace: `{rows, missing, truncated}`. */
  async getMany<T = unknown>(ns: string, keys: readonly string[]): Promise<GetManyResult<T>> {
    return await one(this.context, kvOp.getMany(ns, keys)) as GetManyResult<T>;
  }

  /** One page of keys under a non-empty prefix: `{rows, truncated, nextAfter}`. */
  async getPrefix<T = unknown>(ns: string, prefix: string,
    options: GetPrefixOptions = {}): Promise<GetPrefixResult<T>> {
    return await one(this.context, kvOp.getPrefix(ns, prefix, options)) as GetPrefixResult<T>;
  }

  /**
   * Every row under a prefix, page after page (each page is its own snapshot: good for
   * walking state, not for an exact count). `limit` sets the page size.
   */
  async *listAll<T = unknown>(ns: string, prefix: string,
    options: GetPrefixOptions = {}): AsyncGenerator<Row<T> | KeyRow, void, undefined> {
    let after = options.after ?? null;
    for (let page = 0; page < LIST_ALL_PAGES_MAX; page++) {
      const result = await this.getPrefix<T>(ns, prefix, { ...options, after });
      for (const row of result.rows) yield row;
      if (!result.truncated) return;
      // The cursor must move forward, or the walk would read one page forever.
      if (result.nextAfter === null || result.nextAfter === after) {
        throw new HivekvError({ status: 200, error: 'bad_response', reason: 'bad_envelope',
          detail: 'a truncated getPrefix page gave no new nextAfter cursor',
          retryAfterSeconds: null, url: null, attempts: 1, idempotencyKey: null });
      }
      after = result.nextAfter;
    }
  }

  /** Writes a value with a new lifetime (`ttl`, `ttlSeconds`, `until` or `forever`). */
  put<T = unknown>(ns: string, key: string, value: T, options: PutOptions = {}):
    Promise<WriteResult<T>> {
    return write<T>(this.context, kvOp.put(ns, key, value, options), callOptions(options));
  }

  /** `put` with `expect: 0`: one winner; a loser gets the winner's value and version. */
  putIfAbsent<T = unknown>(ns: string, key: string, value: T,
    options: PutIfAbsentOptions = {}): Promise<WriteResult<T>> {
    return write<T>(this.context, kvOp.putIfAbsent(ns, key, value, options),
      callOptions(options));
  }

  /** Deletes a key, optionally only at version `expect`. */
  delete<T = unknown>(ns: string, key: string, options: DeleteOptions = {}):
    Promise<WriteResult<T>> {
    return write<T>(this.context, kvOp.delete(ns, key, options), callOptions(options));
  }

  /**
   * Adds `delta` (default 1). With `min`/`max`, `applied` is the admission decision: past a
   * bound nothing is written (`reason: 'limit'`). The lifetime is set when the counter is
   * created; a live counter keeps its own.
   */
  incr(ns: string, key: string, delta: number = 1, options: IncrOptions = {}):
    Promise<WriteResult<number>> {
    return write<number>(this.context, kvOp.incr(ns, key, delta, options),
      callOptions(options));
  }

  /** Asserts that the key is at version `expect` (0: absent) without writing. */
  check(ns: string, key: string, expect: number, options: CheckOptions = {}):
    Promise<WriteResult> {
    return write(this.context, kvOp.check(ns, key, expect, options), {});
  }

  /**
   * An idempotency marker: `putIfAbsent` with `value` (default `true`). `won` is whether
   * this caller wrote it; `value` is the winner's.
   */
  async once<T = true>(ns: string, key: string,
    options: PutIfAbsentOptions & { readonly value?: T } = {}): Promise<OnceResult<T>> {
    const { value, ...rest } = options;
    const marker = (value === undefined ? true : value) as T;
    const result = await this.putIfAbsent<T>(ns, key, marker, rest);
    return { won: result.applied, value: result.value, version: result.version, result };
  }

  /** A builder of one call holding several operations (one log entry when it writes). */
  batch(): KvBatch {
    return new KvBatch(this.context);
  }
}

/**
 * Several operations, sent as one call by `run()`. A call with writes is one log entry: its
 * reads see its writes, and a lost `required` aborts all of it.
 */
export class KvBatch {
  private readonly ops: PendingOp[] = [];

  constructor(private readonly context: CallContext) {}

  /** Operations added so far. */
  get size(): number {
    return this.ops.length;
  }

  private push(op: PendingOp): this {
    this.ops.push(op);
    return this;
  }

  get(ns: string, key: string): this {
    return this.push(kvOp.get(ns, key));
  }

  getMany(ns: string, keys: readonly string[]): this {
    return this.push(kvOp.getMany(ns, keys));
  }

  getPrefix(ns: string, prefix: string, options?: GetPrefixOptions): this {
    return this.push(kvOp.getPrefix(ns, prefix, options));
  }

  put(ns: string, key: string, value: unknown, options?: PutOptions): this {
    return this.push(kvOp.put(ns, key, value, options));
  }

  putIfAbsent(ns: string, key: string, value: unknown, options?: PutIfAbsentOptions): this {
    return this.push(kvOp.putIfAbsent(ns, key, value, options));
  }

  delete(ns: string, key: string, options?: DeleteOptions): this {
    return this.push(kvOp.delete(ns, key, options));
  }

  incr(ns: string, key: string, delta?: number, options?: IncrOptions): this {
    return this.push(kvOp.incr(ns, key, delta, options));
  }

  check(ns: string, key: string, expect: number, options?: CheckOptions): this {
    return this.push(kvOp.check(ns, key, expect, options));
  }

  /** An operation in the wire's own shape (`ttl` and `until` are resolved too). */
  add(op: WireOp): this {
    return this.push(kvOp.raw(op));
  }

  /**
   * Sends the call: `{ok: true, results}` index-aligned with the operations, or the
   * `kv_precondition` abort (`ok: false`) when a `required` operation lost.
   */
  run(options: CallOptions = {}): Promise<BatchResult> {
    return runCall(this.context, this.ops, options);
  }
}
