/**
 * The transaction wire, `POST /api/v1/transaction {operations, requiredLeases, kv}`: its
 * body into a `KvCall`, and its outcome into the commit or rollback answer of WIRE.md,
 * "The transaction wire".
 *
 * This build has no queue, so `operations` (push, ack) and `requiredLeases` must be empty:
 * a queue operation is refused as `queue_not_available` rather than silently dropped, since
 * the KV writes beside it are meant to commit with it. Pure: no I/O.
 */
import type { CallOutcome, KvCall, KvOp, OpResult } from '../machine/commands.js';
import type { KvLimits } from '../node/config.js';
import { badRequest, isKvError, KvError } from './errors.js';
import { refusalOf, renderElement, sentName } from './render.js';
import { validateTransactionKv } from './validate.js';

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** An absent or null field is an empty list; anything else but an array is `kv_bad_body`. */
function listField(body: Record<string, unknown>, field: string): unknown[] | KvError {
  const value = body[field];
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) return badRequest('kv_bad_body', `${field} must be an array`);
  return value;
}

/**
 * Validates a transaction body; its `kv` array becomes the call, answered under
 * `transactionId` (drawn when the request arrived, so the log entry carries it).
 */
export function validateTransactionBody(body: unknown, tenant: string,
  limits: KvLimits, transactionId: string): KvCall | KvError {
  if (isKvError(body)) return body;
  if (!isObject(body)) {
    return badRequest('kv_bad_body', 'the body must be {operations, requiredLeases, kv}');
  }
  const operations = listField(body, 'operations');
  if (isKvError(operations)) return operations;
  const leases = listField(body, 'requiredLeases');
  if (isKvError(leases)) return leases;
  const kv = listField(body, 'kv');
  if (isKvError(kv)) return kv;
  if (operations.length > 0 || leases.length > 0) {
    return badRequest('queue_not_available',
      'push, ack and leases need the queue, which is not part of this build; send only kv');
  }
  const call = validateTransactionKv(kv, tenant, limits);
  if (isKvError(call)) return call;
  return { ...call, shape: 'transaction', transactionId };
}

/**
 * The 200 answer of a transaction, or the refusal its outcome stands for (a pause is 403
 * here). `queueResultCount` is the number of queue result slots before the kv elements;
 * `failedIndex` and each element's `index` are in that flat space.
 */
export function renderTransactionOutcome(call: KvCall, outcome: CallOutcome,
  transactionId: string, queueResultCount = 0): string | KvError {
  const idJson = JSON.stringify(transactionId);
  if (outcome.status === 'ok') {
    const results = outcome.results;
    if (results.length !== call.ops.length) {
      throw new Error(`${results.length} results for ${call.ops.length} transaction ops`);
    }
    let text = '{"transactionId":' + idJson + ',"success":true,"results":[';
    for (let i = 0; i < results.length; i++) {
      const op = call.ops[i] as KvOp;
      if (i > 0) text += ',';
      const head = '{"index":' + (queueResultCount + i) + ',"opIndex":' + i +
        ',"type":"kv","op":"' + sentName(op) + '"';
      text += renderElement(op, results[i] as OpResult, head);
    }
    return text + ']}';
  }
  if (outcome.status === 'precondition') {
    return '{"transactionId":' + idJson + ',"success":false,"ok":false,' +
      '"reason":"kv_precondition","failedIndex":' + (queueResultCount + outcome.failedIndex) +
      ',"kvReason":"' + outcome.kvReason + '","version":' + outcome.version + ',"value":' +
      outcome.valueJson + ',"results":[]}';
  }
  return refusalOf(outcome, 'transaction') as KvError;
}

/** The commit answer of a transaction with nothing in it. */
export function renderEmptyTransaction(transactionId: string): string {
  return '{"transactionId":' + JSON.stringify(transactionId) + ',"success":true,"results":[]}';
}
