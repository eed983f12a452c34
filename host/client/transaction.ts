/**
 * `client.transaction()`: the KV rider of `POST /api/v1/transaction`, built the way Queen's
 * `queen.transaction().kv.put(...)...commit()` is. Its KV operations commit as one log entry.
 *
 * This build has no queue, so there is no `ack` or `queue().push` here; the node would refuse
 * them (`queue_not_available`). A transaction is a write call: it always carries an
 * `Idempotency-Key`. Browser-safe.
 */
import { HivekvError } from './errors.js';
import { kvOp, materialize, type PendingOp } from './ops.js';
import { checkIdempotencyKey, newIdempotencyKey } from './transport.js';
import type { CallContext } from './kv.js';
import type {
  CallOptions, DeleteOptions, IncrOptions, PutIfAbsentOptions, PutOptions, TransactionResult,
} from './types.js';

/** The rider's operations; each returns the transaction, so a chain reads as one. */
export interface TransactionKv {
  get(ns: string, key: string): Transaction;
  getMany(ns: string, keys: readonly string[]): Transaction;
  put(ns: string, key: string, value: unknown, options?: PutOptions): Transaction;
  putIfAbsent(ns: string, key: string, value: unknown, options?: PutIfAbsentOptions): Transaction;
  delete(ns: string, key: string, options?: DeleteOptions): Transaction;
  incr(ns: string, key: string, delta?: number, options?: IncrOptions): Transaction;
  /** Refused: a prefix read has no bound on its work inside a commit. */
  getPrefix(): never;
}

/** A transaction under construction; `commit()` sends it. */
export class Transaction {
  private readonly ops: PendingOp[] = [];
  readonly kv: TransactionKv;

  constructor(private readonly context: CallContext) {
    const add = (op: PendingOp): Transaction => {
      this.ops.push(op);
      return this;
    };
    this.kv = {
      get: (ns, key) => add(kvOp.get(ns, key)),
      getMany: (ns, keys) => add(kvOp.getMany(ns, keys)),
      put: (ns, key, value, options) => add(kvOp.put(ns, key, value, options)),
      putIfAbsent: (ns, key, value, options) => add(kvOp.putIfAbsent(ns, key, value, options)),
      delete: (ns, key, options) => add(kvOp.delete(ns, key, options)),
      incr: (ns, key, delta, options) => add(kvOp.incr(ns, key, delta, options)),
      getPrefix: () => {
        throw new TypeError('kv: getPrefix is not allowed inside a transaction (its work has ' +
          'no bound there); use client.kv.getPrefix or client.kv.listAll outside it');
      },
    };
  }

  /**
   * The gate that makes the whole transaction happen at most once: a `putIfAbsent` of
   * `value` (default `true`) with `required: true`, so an existing marker aborts it all.
   */
  once(ns: string, key: string,
    options: PutIfAbsentOptions & { readonly value?: unknown } = {}): Transaction {
    const { value, ...rest } = options;
    const required = rest.required === false ? {} : { required: true };
    return this.kv.putIfAbsent(ns, key, value === undefined ? true : value,
      { ...rest, ...required });
  }

  /**
   * Sends the transaction. Resolves to `{transactionId, success: true, results}`, or, when a
   * `required` operation lost, to `{success: false, reason: 'kv_precondition', failedIndex,
   * kvReason, version, value}`: that verdict is returned, not thrown, because it is the
   * expected answer to a redelivery and must not land in a retry loop.
   * @throws HivekvError when the node refused the call or did not answer.
   */
  async commit(options: CallOptions = {}): Promise<TransactionResult> {
    if (this.ops.length === 0) throw new TypeError('transaction has no operations to commit');
    const nowMs = this.context.nowMs();
    const kv = this.ops.map((op) => materialize(op, nowMs));
    const idempotencyKey = options.idempotencyKey === undefined ? newIdempotencyKey()
      : checkIdempotencyKey(options.idempotencyKey);
    const answer = await this.context.transport.call({
      method: 'POST', path: '/api/v1/transaction',
      body: { operations: [], requiredLeases: [], kv }, idempotencyKey,
    });
    const body = answer.body as Partial<TransactionResult> | null;
    const committed = body?.success === true && Array.isArray(body.results) &&
      body.results.length === kv.length;
    const aborted = body?.success === false && (body as { reason?: unknown }).reason ===
      'kv_precondition';
    if (!committed && !aborted) {
      throw new HivekvError({ status: answer.status, error: 'bad_response',
        reason: 'bad_envelope', detail: `${answer.url}: not a transaction answer`,
        retryAfterSeconds: null, url: answer.url, attempts: 1, idempotencyKey });
    }
    const result = body as TransactionResult;
    return answer.replayed ? { ...result, replayed: true } : result;
  }
}
