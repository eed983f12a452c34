/**
 * Renders what the machine decided (`CallOutcome`) as the response text of WIRE.md,
 * "Result elements", by string concatenation: each stored `valueJson` is spliced in raw and
 * never parsed, keys are JSON-escaped, times are ISO-8601 UTC with milliseconds.
 *
 * Pure: no I/O, no clock. A result that does not fit its operation is a broken contract
 * between host and machine: it throws, and the server answers 500 and logs it.
 */
import type { CallOutcome, KvCall, KvOp, OpResult, Row, SentOpName } from '../machine/commands.js';
import { assertNever } from '../machine/commands.js';
import type { Wire } from './errors.js';
import { KvError, kvError } from './errors.js';

/** How the results of a call are wrapped. */
export type ResponseShape =
  /** `POST /api/v1/kv`: `{"results":[...]}`. */
  | 'batch'
  /** The path routes: the single element itself. */
  | 'single';

/** The op name as the client sent it, which every element echoes. */
export function sentName(op: KvOp): SentOpName {
  return op.op === 'put' ? op.sentAs : op.op;
}

/** The last instant `isoUtc` accepts: 9999-12-31T23:59:59.999Z. */
const ISO_MS_MAX = 253_402_300_799_999;
const MS_PER_DAY = 86_400_000;
/** '00'..'99', so that formatting a time allocates only its result. */
const TWO_DIGITS: readonly string[] = Array.from({ length: 100 },
  (_, i) => (i < 10 ? '0' : '') + i);

function two(n: number): string {
  return TWO_DIGITS[n] as string;
}

/**
 * `new Date(ms).toISOString()` without a Date: every read renders two of these per row, and
 * the civil-from-days arithmetic (H. Hinnant, "chrono-compatible low-level date algorithms")
 * costs a fraction of it. Years 0..9999 only; other instants fall back to Date.
 */
export function isoUtc(ms: number): string {
  if (!(ms >= 0 && ms <= ISO_MS_MAX) || !Number.isInteger(ms)) {
    return new Date(ms).toISOString();
  }
  const days = Math.floor(ms / MS_PER_DAY);
  let rest = ms - days * MS_PER_DAY;
  const hours = Math.floor(rest / 3_600_000);
  rest -= hours * 3_600_000;
  const minutes = Math.floor(rest / 60_000);
  rest -= minutes * 60_000;
  const seconds = Math.floor(rest / 1000);
  const millis = rest - seconds * 1000;
  const z = days + 719_468;
  const era = Math.floor(z / 146_097);
  const dayOfEra = z - era * 146_097;
  const yearOfEra = Math.floor((dayOfEra - Math.floor(dayOfEra / 1460) +
    Math.floor(dayOfEra / 36_524) - Math.floor(dayOfEra / 146_096)) / 365);
  const dayOfYear = dayOfEra - (365 * yearOfEra + Math.floor(yearOfEra / 4) -
    Math.floor(yearOfEra / 100));
  const mp = Math.floor((5 * dayOfYear + 2) / 153);
  const day = dayOfYear - Math.floor((153 * mp + 2) / 5) + 1;
  const month = mp < 10 ? mp + 3 : mp - 9;
  const year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0);
  return two(Math.floor(year / 100)) + two(year % 100) + '-' + two(month) + '-' + two(day) +
    'T' + two(hours) + ':' + two(minutes) + ':' + two(seconds) + '.' +
    (millis < 10 ? '00' : millis < 100 ? '0' : '') + millis + 'Z';
}

/** `"2026-09-22T10:15:30.123Z"`, or `null` for a forever key. */
function timeJson(ms: number | null): string {
  return ms === null ? 'null' : '"' + isoUtc(ms) + '"';
}

function rowJson(row: Row): string {
  const value = row.valueJson === null ? '' : ',"value":' + row.valueJson;
  return '{"key":' + JSON.stringify(row.key) + value + ',"version":' + row.version +
    ',"expiresAt":' + timeJson(row.expiresAtMs) + ',"updatedAt":' + timeJson(row.updatedAtMs) +
    '}';
}

function rowsJson(rows: readonly Row[]): string {
  let text = '[';
  for (let i = 0; i < rows.length; i++) {
    if (i > 0) text += ',';
    text += rowJson(rows[i] as Row);
  }
  return text + ']';
}

function keysJson(keys: readonly string[]): string {
  let text = '[';
  for (let i = 0; i < keys.length; i++) {
    if (i > 0) text += ',';
    text += JSON.stringify(keys[i]);
  }
  return text + ']';
}

function mismatch(op: KvOp, result: OpResult): never {
  throw new Error(`result of kind ${result.kind} does not answer op ${op.op}`);
}

/**
 * One result element. `head` is the element's opening text up to and including its `op`
 * field (`{"index":0,"op":"get"`), so that the transaction wire can add its own fields.
 */
export function renderElement(op: KvOp, result: OpResult, head: string): string {
  switch (result.kind) {
    case 'get':
      if (op.op !== 'get') return mismatch(op, result);
      if (!result.found) return head + ',"found":false,"key":' + JSON.stringify(result.key) + '}';
      return head + ',"found":true,"key":' + JSON.stringify(result.key) + ',"value":' +
        result.valueJson + ',"version":' + result.version + ',"expiresAt":' +
        timeJson(result.expiresAtMs) + ',"updatedAt":' + timeJson(result.updatedAtMs) + '}';
    case 'getMany':
      if (op.op !== 'getMany') return mismatch(op, result);
      return head + ',"rows":' + rowsJson(result.rows) + ',"missing":' +
        keysJson(result.missing) + ',"truncated":' + result.truncated + '}';
    case 'getPrefix':
      if (op.op !== 'getPrefix') return mismatch(op, result);
      return head + ',"rows":' + rowsJson(result.rows) + ',"truncated":' + result.truncated +
        ',"nextAfter":' + (result.nextAfter === null ? 'null' : JSON.stringify(result.nextAfter)) +
        '}';
    case 'write': {
      if (op.op === 'get' || op.op === 'getMany' || op.op === 'getPrefix') {
        return mismatch(op, result);
      }
      const verdict = result.applied ? ',"applied":true'
        : ',"applied":false,"reason":"' + result.reason + '"';
      return head + verdict + ',"key":' + JSON.stringify(result.key) + ',"value":' +
        result.valueJson + ',"version":' + result.version + '}';
    }
    default:
      return assertNever(result, 'op result');
  }
}

function checkCount(call: KvCall, results: readonly OpResult[]): void {
  if (results.length !== call.ops.length) {
    throw new Error(`${results.length} results for ${call.ops.length} operations`);
  }
}

/** `{"results":[...]}`, index-aligned with the call's operations. */
export function renderResults(call: KvCall, results: readonly OpResult[]): string {
  checkCount(call, results);
  let text = '{"results":[';
  for (let i = 0; i < results.length; i++) {
    const op = call.ops[i] as KvOp;
    if (i > 0) text += ',';
    text += renderElement(op, results[i] as OpResult, '{"index":' + i + ',"op":"' +
      sentName(op) + '"');
  }
  return text + ']}';
}

/** The 200 answer of a lost `required` operation (kv-routes.md, "Escalating a verdict"). */
export function renderPrecondition(failedIndex: number, kvReason: string, version: number,
  valueJson: string): string {
  return '{"ok":false,"reason":"kv_precondition","failedIndex":' + failedIndex +
    ',"kvReason":"' + kvReason + '","version":' + version + ',"value":' + valueJson + '}';
}

/**
 * The refusal that a non-`ok`, non-`precondition` outcome stands for, on `wire`.
 * `invalid` is a host bug: a 500 the server logs.
 */
export function refusalOf(outcome: CallOutcome, wire: Wire): KvError | null {
  switch (outcome.status) {
    case 'ok':
    case 'precondition':
      return null;
    case 'paused':
      return kvError('kv_disabled', 'kv_disabled', 'KV is paused by the operator',
        { wire, retryAfterSeconds: 1 });
    case 'notGranted':
      return kvError('feature_gated', 'feature_gated',
        'this tenant has no enabled KV grant; writes need one');
    case 'quotaExceeded':
      return kvError('kv_quota_exceeded', 'kv_quota_exceeded',
        'the write would take the tenant over its row or byte quota');
    case 'invalid':
      return kvError('internal_error', 'kv_invalid_command',
        'the state machine refused a command the host validated: ' + outcome.detail);
    default:
      return assertNever(outcome, 'call outcome');
  }
}

/**
 * The 200 body of a call on the KV routes, or the refusal it stands for. `single` answers
 * the only element of a path route's call.
 */
export function renderCallOutcome(call: KvCall, outcome: CallOutcome,
  shape: ResponseShape): string | KvError {
  if (outcome.status === 'ok') {
    if (shape === 'batch') return renderResults(call, outcome.results);
    checkCount(call, outcome.results);
    const op = call.ops[0] as KvOp;
    return renderElement(op, outcome.results[0] as OpResult, '{"index":0,"op":"' +
      sentName(op) + '"');
  }
  if (outcome.status === 'precondition') {
    return renderPrecondition(outcome.failedIndex, outcome.kvReason, outcome.version,
      outcome.valueJson);
  }
  return refusalOf(outcome, 'kv') as KvError;
}
