/**
 * Decodes a command's ops from the input region into reusable Op objects, validating every
 * field before anything executes (a malformed command changes nothing and yields `invalid`).
 * Addresses in an Op point into the input region, valid for the current call only.
 */
import {
  OP_GET, OP_GET_MANY, OP_GET_PREFIX, OP_CHECK, OP_PUT, OP_DELETE, OP_INCR,
  FLAG_HAS_EXPECT, FLAG_FOREVER, FLAG_HAS_MIN, FLAG_HAS_MAX, OPS_PER_CALL_MAX,
  KEYS_PER_CALL_MAX, KEY_BYTES_MAX, NS_BYTES_MAX, VALUE_BYTES_MAX, SAFE_INTEGER_MAX,
} from './abi';
import { Reader } from './buffers';
import { Op } from './ops';
import { isJsonNumber } from './decimal';

/** Decoded ops of the current command; only the first `opCount` are meaningful. */
export const ops = new Array<Op>();

/**
 * `ops[i]` for i below `ops.length`: a load. `unchecked(ops[i])` compiles to a call of the
 * array's `__uget`, which the collector's shadow stack keeps out of line (a frame pushed,
 * checked and popped per op, several times an op).
 */
// @ts-ignore: decorator
@inline export function opAt(i: i32): Op {
  return changetype<Op>(load<usize>(ops.dataStart + (<usize>i << alignof<usize>())));
}
export let opCount: i32 = 0;
/** Keys of every getMany of the current command. */
export const manyPtr = new Array<usize>();
export const manyLen = new Array<i32>();

function noNul(p: usize, len: i32): bool {
  for (let i = 0; i < len; i++) if (load<u8>(p + i) == 0) return false;
  return true;
}

function readKey(rd: Reader, what: string): usize {
  let p = rd.bytes(<u32>KEY_BYTES_MAX, what);
  if (rd.failed) return 0;
  if (rd.lastLen == 0 || !noNul(p, rd.lastLen)) rd.failParts('bad ', what);
  return p;
}

/** A decimal text; when `present` is false the field is carried empty and not parsed. */
function readNumber(rd: Reader, what: string, present: bool): usize {
  let p = rd.bytes(<u32>VALUE_BYTES_MAX, what);
  if (rd.failed || !present) return 0;
  if (!isJsonNumber(p, <i32>rd.lastLen)) rd.failParts('bad ', what);
  return p;
}

function readSafeNonNegative(rd: Reader, what: string): i64 {
  let v = rd.i64();
  if (v < 0 || v > SAFE_INTEGER_MAX) rd.failParts('bad ', what);
  return v;
}

/**
 * Decodes one op into `op`; `rd.failed` tells whether it was well-formed. True when it is a
 * getMany whose keys follow: the caller decodes them (`decodeMany` may grow an array, and so
 * reach the collector; everything here allocates nothing, so it runs without a frame).
 */
function decodeOp(rd: Reader, op: Op): bool {
  op.code = rd.u8();
  op.flags = rd.u8();
  op.applied = false;
  op.resRow = null;
  op.resZero = false;
  op.nsPtr = rd.bytes(<u32>NS_BYTES_MAX, 'namespace');
  op.nsLen = <i32>rd.lastLen;
  if (rd.failed) return false;
  if (op.nsLen == 0 || !noNul(op.nsPtr, op.nsLen)) { rd.fail('bad namespace'); return false; }
  let code = op.code;
  if (code == OP_GET_MANY) return true;
  if (code == OP_GET_PREFIX) {
    op.keyPtr = readKey(rd, 'prefix');
    op.keyLen = <i32>rd.lastLen;
    op.afterPtr = rd.bytes(<u32>KEY_BYTES_MAX, 'after');
    op.afterLen = <i32>rd.lastLen;
    op.limit = <i32>rd.u32();
    if (op.limit < 1 || op.limit > KEYS_PER_CALL_MAX) rd.fail('bad limit');
    return false;
  }
  if (code < OP_GET || code > OP_INCR) { rd.fail('unknown op'); return false; }
  op.keyPtr = readKey(rd, 'key');
  op.keyLen = <i32>rd.lastLen;
  if (code == OP_PUT) {
    op.valuePtr = rd.bytes(<u32>VALUE_BYTES_MAX, 'value');
    op.valueLen = <i32>rd.lastLen;
    if (!rd.failed && op.valueLen == 0) rd.fail('empty value');
  } else if (code == OP_INCR) {
    op.deltaPtr = readNumber(rd, 'delta', true);
    op.deltaLen = <i32>rd.lastLen;
    op.minPtr = readNumber(rd, 'min', (op.flags & FLAG_HAS_MIN) != 0);
    op.minLen = <i32>rd.lastLen;
    op.maxPtr = readNumber(rd, 'max', (op.flags & FLAG_HAS_MAX) != 0);
    op.maxLen = <i32>rd.lastLen;
  }
  decodeTail(rd, op);
  return false;
}

/** expect and ttl, present in every put/delete/incr/check; get ends before them. */
function decodeTail(rd: Reader, op: Op): void {
  if (op.code == OP_GET) return;
  op.expect = readSafeNonNegative(rd, 'expect');
  op.ttlSeconds = readSafeNonNegative(rd, 'ttl');
  let f = op.flags;
  if (op.code == OP_CHECK && (f & FLAG_HAS_EXPECT) == 0) rd.fail('check without expect');
  if (op.code == OP_INCR && (f & FLAG_HAS_EXPECT) != 0) rd.fail('incr with expect');
  let writesExpiry = op.code == OP_PUT || op.code == OP_INCR;
  if (writesExpiry && (f & FLAG_FOREVER) == 0 && op.ttlSeconds < 1) rd.fail('bad ttl');
  if (op.code != OP_INCR && (f & (FLAG_HAS_MIN | FLAG_HAS_MAX)) != 0) rd.fail('bad flags');
}

function decodeMany(rd: Reader, op: Op): void {
  let count = <i32>rd.u32();
  if (rd.failed) return;
  if (count < 1 || manyPtr.length + count > KEYS_PER_CALL_MAX) { rd.fail('bad keys'); return; }
  op.manyStart = manyPtr.length;
  op.manyCount = count;
  for (let i = 0; i < count && !rd.failed; i++) {
    let p = readKey(rd, 'key');
    manyPtr.push(p);
    manyLen.push(<i32>rd.lastLen);
  }
}

/** Decodes `count` ops; returns false (with rd.why set) on any malformed field. */
export function decodeOps(rd: Reader): bool {
  let count = <i32>rd.u32();
  opCount = 0;
  manyPtr.length = 0;
  manyLen.length = 0;
  if (rd.failed) return false;
  if (count < 0 || count > OPS_PER_CALL_MAX) { rd.fail('too many ops'); return false; }
  while (ops.length < count) ops.push(new Op());
  for (let i = 0; i < count; i++) {
    let op = opAt(i);
    if (decodeOp(rd, op)) decodeMany(rd, op);
    if (rd.failed) return false;
  }
  opCount = count;
  return true;
}
