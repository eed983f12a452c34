/**
 * The answer to a call, as the host sends it: HTTP status, the ETag and Retry-After headers
 * when there are any, and the JSON body (docs/codec.md, "Answers"). Every body here is the
 * text host/http/render.ts, transaction.ts and errors.ts would write for the same outcome, byte
 * for byte (test/model/machine-model.test.ts compares them), so the host sends it untouched.
 *
 *   answer := u16 status, u8 flags (ANSWER_ETAG | ANSWER_RETRY_AFTER), i64 etagVersion,
 *             u32 retryAfterSeconds, u32 bodyLen, body
 */
import {
  ANSWER_ETAG, ANSWER_RETRY_AFTER, ANSWER_HEADER_BYTES, SHAPE_BATCH, SHAPE_TRANSACTION,
  OP_GET, OP_GET_MANY, OP_GET_PREFIX, OP_CHECK, OP_PUT, OP_DELETE, FLAG_PUT_IF_ABSENT,
  REASON_EXISTS, REASON_ABSENT, REASON_VERSION, REASON_LIMIT,
} from './abi';
import { outputPtr, outputLen, reserveRaw } from './buffers';
import { putText, text, putDecimal, putByte, putRaw, putJsonString } from './json-out';

/** Where the current answer's header starts, as an offset into the output region. */
let answerAt: usize = 0;

/** Starts an answer with `status`; its body follows. */
export function beginAnswer(status: i32): void {
  answerAt = outputLen;
  let at = reserveRaw(<usize>ANSWER_HEADER_BYTES);
  store<u16>(at, <u16>status);
  store<u8>(at, 0, 2);
  store<i64>(at, 0, 3);
  store<u32>(at, 0, 11);
  store<u32>(at, 0, 15);
}

function setFlag(flag: i32): void {
  let at = outputPtr + answerAt;
  store<u8>(at, load<u8>(at, 2) | <u8>flag, 2);
}

/** The answer carries `ETag: "<version>"`. */
export function setAnswerEtag(version: i64): void {
  setFlag(ANSWER_ETAG);
  store<i64>(outputPtr + answerAt, version, 3);
}

/** The answer carries `Retry-After: <seconds>`. */
export function setAnswerRetryAfter(seconds: i32): void {
  setFlag(ANSWER_RETRY_AFTER);
  store<u32>(outputPtr + answerAt, <u32>seconds, 11);
}

/** Closes the answer: its body is everything written since `beginAnswer`. */
export function endAnswer(): void {
  let bodyLen = outputLen - answerAt - <usize>ANSWER_HEADER_BYTES;
  store<u32>(outputPtr + answerAt, <u32>bodyLen, 15);
}

// ---- refusals (host/http/render.ts `refusalOf`, the envelope of errors.ts) ----

const PAUSED_BODY = text('{"error":"kv_disabled","reason":"kv_disabled",' +
  '"detail":"KV is paused by the operator"}');
const NOT_GRANTED_BODY = text('{"error":"feature_gated","reason":"feature_gated",' +
  '"detail":"this tenant has no enabled KV grant; writes need one"}');
const QUOTA_BODY = text('{"error":"kv_quota_exceeded","reason":"kv_quota_exceeded",' +
  '"detail":"the write would take the tenant over its row or byte quota"}');

/** KV paused: 503 with Retry-After on the KV routes, 403 in the transaction wire. */
export function answerPaused(shape: i32): void {
  let inTransaction = shape == SHAPE_TRANSACTION;
  beginAnswer(inTransaction ? 403 : 503);
  if (!inTransaction) setAnswerRetryAfter(1);
  putText(PAUSED_BODY);
  endAnswer();
}

export function answerNotGranted(): void {
  beginAnswer(403);
  putText(NOT_GRANTED_BODY);
  endAnswer();
}

export function answerQuotaExceeded(): void {
  beginAnswer(403);
  putText(QUOTA_BODY);
  endAnswer();
}

// ---- pieces of result elements ----

const OP_NAMES: StaticArray<ArrayBuffer> = [
  text(''), text('get'), text('getMany'), text('getPrefix'), text('check'), text('put'),
  text('delete'), text('incr'),
];
const PUT_IF_ABSENT_NAME = text('putIfAbsent');
const REASON_NAMES: StaticArray<ArrayBuffer> = [
  text(''), text('exists'), text('absent'), text('version'), text('limit'), text('type'),
];

/** The op name as the client sent it: a put flagged putIfAbsent answers `putIfAbsent`. */
export function putOpName(code: i32, flags: i32): void {
  if (code == OP_PUT && (flags & FLAG_PUT_IF_ABSENT) != 0) putText(PUT_IF_ABSENT_NAME);
  else putText(unchecked(OP_NAMES[code]));
}

export function putReasonName(reason: i32): void {
  putText(unchecked(REASON_NAMES[reason]));
}

const HEAD_INDEX = text('{"index":');
const HEAD_TX_OP_INDEX = text(',"opIndex":');
const HEAD_TX_TYPE = text(',"type":"kv","op":"');
const HEAD_OP = text(',"op":"');

/**
 * An element's opening text up to and including its `op` field: `{"index":i,"op":"get"` or,
 * in the transaction wire, `{"index":i,"opIndex":i,"type":"kv","op":"get"`.
 */
export function putElementHead(shape: i32, index: i32, code: i32, flags: i32): void {
  putText(HEAD_INDEX);
  putDecimal(<i64>index);
  if (shape == SHAPE_TRANSACTION) {
    putText(HEAD_TX_OP_INDEX);
    putDecimal(<i64>index);
    putText(HEAD_TX_TYPE);
  } else {
    putText(HEAD_OP);
  }
  putOpName(code, flags);
  putByte(0x22);
}

const RESULTS_OPEN = text('{"results":[');
const TX_OPEN = text('{"transactionId":');
const TX_SUCCESS = text(',"success":true,"results":[');
const LIST_CLOSE = text(']}');

/** Opens the body of an `ok` call in its shape (nothing for a single element). */
export function openResults(shape: i32, txPtr: usize, txLen: i32): void {
  if (shape == SHAPE_BATCH) {
    putText(RESULTS_OPEN);
  } else if (shape == SHAPE_TRANSACTION) {
    putText(TX_OPEN);
    putJsonString(txPtr, txLen);
    putText(TX_SUCCESS);
  }
}

export function closeResults(shape: i32): void {
  if (shape == SHAPE_BATCH || shape == SHAPE_TRANSACTION) putText(LIST_CLOSE);
}

const PRE_TX_OPEN = text(',"success":false,');
const PRE_OPEN = text('{"ok":false,"reason":"kv_precondition","failedIndex":');
const PRE_OPEN_TAIL = text('"ok":false,"reason":"kv_precondition","failedIndex":');
const PRE_KV_REASON = text(',"kvReason":"');
const PRE_VERSION = text('","version":');
const PRE_VALUE = text(',"value":');
const PRE_TX_CLOSE = text(',"results":[]}');

/**
 * A lost `required` (kv-routes.md, "Escalating a verdict"): HTTP 200, nothing applied.
 * `value` is the reported row's compact JSON.
 */
export function answerPrecondition(shape: i32, txPtr: usize, txLen: i32, failedIndex: i32,
  reason: i32, valuePtr: usize, valueLen: i32, version: i64): void {
  beginAnswer(200);
  if (shape == SHAPE_TRANSACTION) {
    putText(TX_OPEN);
    putJsonString(txPtr, txLen);
    putText(PRE_TX_OPEN);
    putText(PRE_OPEN_TAIL);
  } else {
    putText(PRE_OPEN);
  }
  putDecimal(<i64>failedIndex);
  putText(PRE_KV_REASON);
  putReasonName(reason);
  putText(PRE_VERSION);
  putDecimal(version);
  putText(PRE_VALUE);
  putRaw(valuePtr, <usize>valueLen);
  if (shape == SHAPE_TRANSACTION) putText(PRE_TX_CLOSE);
  else putByte(0x7d);
  endAnswer();
}

// Keep the reason table in step with abi.ts.
assert(REASON_EXISTS == 1 && REASON_ABSENT == 2 && REASON_VERSION == 3 && REASON_LIMIT == 4);
assert(OP_GET == 1 && OP_GET_MANY == 2 && OP_GET_PREFIX == 3 && OP_CHECK == 4 &&
  OP_DELETE == 6);
