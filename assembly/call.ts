/**
 * Runs one call, logged (an entry with writes) or not (a read): pause, then grant, then the
 * writes in op order, then the required checks, then quota, then the results in op order
 * with every read evaluated after all writes. A lost `required` or a quota refusal undoes the
 * whole call through the journal. Versions handed out to an undone call are not reused.
 * What it decided is written as the answer the host sends (answer.ts), unless the caller
 * asks for none (an entry another node is answering).
 */
import {
  OUT_CALL, OUT_INVALID, OP_GET, OP_GET_MANY, OP_GET_PREFIX, OP_CHECK, OP_PUT, OP_DELETE,
  OP_INCR, FLAG_REQUIRED, CALL_REQUIRE_GRANT, TENANT_BYTES_MAX, CMD_CALL_V1,
  SHAPE_BATCH, SHAPE_SINGLE, SHAPE_TRANSACTION, TRANSACTION_ID_BYTES_MAX,
} from './abi';
import { Reader, putU8, putString } from './buffers';
import { rowVersion, rowValuePtr, rowValueLen } from './row';
import { paused, tenants, tenantIdOfBytes } from './state';
import {
  Op, applyPut, applyDelete, applyIncr, evalCheck, journalReset, journalUndo, setJournaling,
} from './ops';
import { ops, opAt, opCount, decodeOps } from './decode';
import { warmKeys, WARM_CHUNK, WARM_OPS_MIN } from './warm';
import { startReads, emitGet, emitGetMany, emitGetPrefix } from './reads';
import {
  beginAnswer, endAnswer, setAnswerEtag, answerPaused, answerNotGranted, answerQuotaExceeded,
  answerPrecondition, putElementHead, openResults, closeResults, putReasonName,
} from './answer';
import { putText, text, putRaw, putByte, putDecimal, putJsonString } from './json-out';

const NULL_TEXT = String.UTF8.encode('null');
const ZERO_TEXT = String.UTF8.encode('0');

function isWrite(code: i32): bool {
  return code == OP_PUT || code == OP_DELETE || code == OP_INCR;
}

export function emitInvalid(why: string): void {
  putU8(OUT_INVALID);
  putString(why);
}

/** The compact JSON a write/check result or a precondition reports as `value`. */
function reportedValuePtr(op: Op): usize {
  let r = op.resRow;
  if (r != null) return rowValuePtr(r);
  return changetype<usize>(op.resZero ? ZERO_TEXT : NULL_TEXT);
}

function reportedValueLen(op: Op): i32 {
  let r = op.resRow;
  if (r != null) return rowValueLen(r);
  return (op.resZero ? ZERO_TEXT : NULL_TEXT).byteLength;
}

function reportedVersion(op: Op): i64 {
  let r = op.resRow;
  return r == null ? 0 : rowVersion(r);
}

/** How the current call's answer is wrapped (a SHAPE_* code). */
export let callShape: i32 = SHAPE_BATCH;
/** The current transaction's id (SHAPE_TRANSACTION only), in the input region. */
export let callTransactionIdPtr: usize = 0;
export let callTransactionIdLen: i32 = 0;

/** The shape and transaction id of a CMD_CALL; a CMD_CALL_V1 answers as a batch. */
function decodeShape(rd: Reader, kind: i32): void {
  callShape = SHAPE_BATCH;
  callTransactionIdPtr = 0;
  callTransactionIdLen = 0;
  if (kind == CMD_CALL_V1) return;
  callShape = rd.u8();
  if (!rd.failed && (callShape < SHAPE_BATCH || callShape > SHAPE_TRANSACTION)) {
    rd.fail('bad shape');
  }
  callTransactionIdPtr = rd.bytes(<u32>TRANSACTION_ID_BYTES_MAX, 'transaction id');
  callTransactionIdLen = <i32>rd.lastLen;
  if (!rd.failed && (callShape == SHAPE_TRANSACTION) != (callTransactionIdLen > 0)) {
    rd.fail('bad transaction id');
  }
}

/**
 * Decodes and runs a call (`kind` CMD_CALL or CMD_CALL_V1) at timeMs; `logged` is true for
 * an entry, false for a read. Writes `OUT_CALL` and, when `answered`, the call's answer.
 */
export function runCall(rd: Reader, kind: i32, timeMs: i64, logged: bool,
  answered: bool): void {
  decodeShape(rd, kind);
  let callFlags = rd.u8();
  let ceiling = rd.i64();
  let tPtr = rd.bytes(<u32>TENANT_BYTES_MAX, 'tenant');
  let tLen = rd.lastLen;
  if (!rd.failed && tLen == 0) rd.fail('empty tenant');
  if (!rd.failed) decodeOps(rd);
  if (!rd.failed && rd.pos != rd.end) rd.fail('trailing bytes');
  if (!rd.failed && ceiling < 0) rd.fail('bad read ceiling');
  let hasWrites = false;
  for (let i = 0; i < opCount && !rd.failed; i++) {
    if (isWrite(opAt(i).code)) hasWrites = true;
  }
  if (!rd.failed && hasWrites && !logged) rd.fail('writes in a read call');
  if (rd.failed) { emitInvalid(rd.why); return; }
  putU8(OUT_CALL);
  if (paused) {
    if (answered) answerPaused(callShape);
    return;
  }
  if (hasWrites && (callFlags & CALL_REQUIRE_GRANT) != 0 && !granted(tPtr, <i32>tLen)) {
    if (answered) answerNotGranted();
    return;
  }
  let tid = tenantIdOfBytes(tPtr, <i32>tLen, hasWrites);
  let rows0: i64 = 0, bytes0: i64 = 0;
  if (tid >= 0) {
    rows0 = unchecked(tenants[tid]).rows;
    bytes0 = unchecked(tenants[tid]).bytes;
  }
  journalReset();
  setJournaling(mayUndo(tid));
  let failed = runWrites(tid, timeMs);
  failed = runRequiredChecks(tid, timeMs, failed);
  if (failed >= 0) {
    journalUndo();
    let op = opAt(failed);
    if (answered) {
      answerPrecondition(callShape, callTransactionIdPtr, callTransactionIdLen, failed,
        op.reason, reportedValuePtr(op), reportedValueLen(op), reportedVersion(op));
    }
    return;
  }
  if (hasWrites && quotaRefuses(tid, rows0, bytes0)) {
    journalUndo();
    if (answered) answerQuotaExceeded();
    return;
  }
  journalReset();
  if (answered) emitResults(tid, timeMs, ceiling);
}

/**
 * Whether the call may have to be undone after its writes: it has a `required` op (a write
 * or check that can be lost), or its tenant has a quota (`quotaRefuses`).
 */
function mayUndo(tid: i32): bool {
  if (tid >= 0 && unchecked(tenants[tid]).quota != null) return true;
  for (let i = 0; i < opCount; i++) {
    if ((opAt(i).flags & FLAG_REQUIRED) != 0) return true;
  }
  return false;
}

function granted(namePtr: usize, nameLen: i32): bool {
  let tid = tenantIdOfBytes(namePtr, nameLen, false);
  if (tid < 0) return false;
  let q = unchecked(tenants[tid]).quota;
  return q != null && q.enabled;
}

/** Applies writes in op order; returns the index of the first lost `required`, or -1. */
function runWrites(tid: i32, timeMs: i64): i32 {
  let warm = tid >= 0 && opCount >= WARM_OPS_MIN;
  for (let i = 0; i < opCount; i++) {
    if (warm && i % WARM_CHUNK == 0) warmKeys(ops, i, opCount, tid);
    let op = opAt(i);
    let code = op.code;
    if (code == OP_PUT) applyPut(op, tid, timeMs);
    else if (code == OP_DELETE) applyDelete(op, tid, timeMs);
    else if (code == OP_INCR) applyIncr(op, tid, timeMs);
    else continue;
    if (!op.applied && (op.flags & FLAG_REQUIRED) != 0) return i;
  }
  return -1;
}

/** Required checks below the failed write (all when none failed), after the writes. */
function runRequiredChecks(tid: i32, timeMs: i64, failed: i32): i32 {
  let end = failed >= 0 ? failed : opCount;
  for (let i = 0; i < end; i++) {
    let op = opAt(i);
    if (op.code != OP_CHECK || (op.flags & FLAG_REQUIRED) == 0) continue;
    evalCheck(op, tid, timeMs);
    if (!op.applied) return i;
  }
  return failed;
}

/**
 * Over quota after the call, and the call grew rows or bytes. Limits apply whenever the
 * tenant has a quota row, enabled or not (`enabled` is the grant).
 */
function quotaRefuses(tid: i32, rows0: i64, bytes0: i64): bool {
  let t = unchecked(tenants[tid]);
  let q = t.quota;
  if (q == null) return false;
  let over = (q.maxRows >= 0 && t.rows > q.maxRows) || (q.maxBytes >= 0 && t.bytes > q.maxBytes);
  let grew = t.rows > rows0 || t.bytes > bytes0;
  return over && grew;
}

/** The 200 answer of a call that ran: one element per op, in op order, in its shape. */
function emitResults(tid: i32, timeMs: i64, ceiling: i64): void {
  let shape = callShape;
  beginAnswer(200);
  openResults(shape, callTransactionIdPtr, callTransactionIdLen);
  startReads(ceiling);
  for (let i = 0; i < opCount; i++) {
    let op = opAt(i);
    let code = op.code;
    if (i > 0) putByte(0x2c);
    putElementHead(shape, i, code, op.flags);
    if (code == OP_GET) {
      let version = emitGet(op, tid, timeMs);
      // A path route's found key carries its version as the ETag (kv-routes.md).
      if (shape == SHAPE_SINGLE && version > 0) setAnswerEtag(version);
    } else if (code == OP_GET_MANY) {
      emitGetMany(op, tid, timeMs);
    } else if (code == OP_GET_PREFIX) {
      emitGetPrefix(op, tid, timeMs);
    } else {
      if (code == OP_CHECK) evalCheck(op, tid, timeMs);
      emitWriteResult(op);
    }
  }
  closeResults(shape);
  endAnswer();
}

const APPLIED_TRUE = text(',"applied":true,"key":');
const APPLIED_FALSE = text(',"applied":false,"reason":"');
const REASON_KEY = text('","key":');
const VALUE = text(',"value":');
const VERSION = text(',"version":');

/** The rest of a put, delete, incr or check element after its head. */
function emitWriteResult(op: Op): void {
  if (op.applied) {
    putText(APPLIED_TRUE);
  } else {
    putText(APPLIED_FALSE);
    putReasonName(op.reason);
    putText(REASON_KEY);
  }
  putJsonString(op.keyPtr, op.keyLen);
  putText(VALUE);
  putRaw(reportedValuePtr(op), <usize>reportedValueLen(op));
  putText(VERSION);
  putDecimal(reportedVersion(op));
  putByte(0x7d);
}

