/**
 * The read side of a call: get, getMany and getPrefix results, evaluated at emission time
 * (after every write of the call) with one byte ceiling over all value bytes the call reads.
 * The row that crosses the ceiling is kept; afterwards getMany/getPrefix return nothing more
 * and say `truncated`. A get is always answered (one value is bounded by the value ceiling),
 * and its bytes count. Never changes state.
 */
import { FLAG_KEYS_ONLY } from './abi';
import {
  Row, rowLive, rowVersion, rowExpiresAt, rowUpdatedAt, rowKeyPtr, rowKeyLen, rowValuePtr,
  rowValueLen, compareBytes, EXPIRES_NEVER,
} from './row';
import { tree } from './state';
import { Op, composeKey, keyScratch } from './ops';
import { manyPtr, manyLen } from './decode';
import {
  putText, text, putRaw, putByte, putDecimal, putJsonString, putIsoTime, putNull, putBool,
} from './json-out';

/** Ceiling state of the current call. */
let ceilingBytes: i64 = 0;
let readBytes: i64 = 0;
let stopped = false;

export function startReads(ceiling: i64): void {
  ceilingBytes = ceiling;
  readBytes = 0;
  stopped = false;
}

function countBytes(n: i32): void {
  readBytes += <i64>n;
  if (readBytes > ceilingBytes) stopped = true;
}

const KEY = text('"key":');
const VALUE = text(',"value":');
const VERSION = text(',"version":');
const EXPIRES_AT = text(',"expiresAt":');
const UPDATED_AT = text(',"updatedAt":');

/** `,"version":v,"expiresAt":t|null,"updatedAt":t` */
function putRowTimes(r: Row): void {
  putText(VERSION);
  putDecimal(rowVersion(r));
  putText(EXPIRES_AT);
  let e = rowExpiresAt(r);
  if (e == EXPIRES_NEVER) putNull();
  else putIsoTime(e);
  putText(UPDATED_AT);
  putIsoTime(rowUpdatedAt(r));
}

/** `{"key":k[,"value":v],"version":...}` for one row of getMany / getPrefix. */
function putRow(r: Row, userKeyOffset: i32, withValue: bool): void {
  putByte(0x7b);
  putText(KEY);
  putJsonString(rowKeyPtr(r) + <usize>userKeyOffset, rowKeyLen(r) - userKeyOffset);
  if (withValue) {
    putText(VALUE);
    putRaw(rowValuePtr(r), <usize>rowValueLen(r));
  }
  putRowTimes(r);
  putByte(0x7d);
}

function liveRow(tid: i32, op: Op, kPtr: usize, kLen: i32, timeMs: i64): Row | null {
  let len = composeKey(tid, op.nsPtr, op.nsLen, kPtr, kLen);
  let r = tree.find(keyScratch, len);
  return r != null && rowLive(r, timeMs) ? r : null;
}

const FOUND_FALSE = text(',"found":false,"key":');
const FOUND_TRUE = text(',"found":true,"key":');

/**
 * The rest of a `get` element after its head; returns the version found (0: missing), which
 * a path route's answer carries as its ETag.
 */
export function emitGet(op: Op, tid: i32, timeMs: i64): i64 {
  let r = liveRow(tid, op, op.keyPtr, op.keyLen, timeMs);
  if (r == null) {
    putText(FOUND_FALSE);
    putJsonString(op.keyPtr, op.keyLen);
    putByte(0x7d);
    return 0;
  }
  putText(FOUND_TRUE);
  putJsonString(op.keyPtr, op.keyLen);
  putText(VALUE);
  putRaw(rowValuePtr(r), <usize>rowValueLen(r));
  putRowTimes(r);
  putByte(0x7d);
  countBytes(rowValueLen(r));
  return rowVersion(r);
}

const order = new Array<i32>();
/** Per key of the current getMany: 0 = cut by the ceiling, 1 = found, 2 = missing. */
const fate = new Array<u8>();

function byKey(a: i32, b: i32): i32 {
  let c = compareBytes(
    unchecked(manyPtr[a]), unchecked(manyLen[a]), unchecked(manyPtr[b]), unchecked(manyLen[b]),
  );
  return c != 0 ? c : a - b;
}

const ROWS = text(',"rows":[');
const MISSING = text('],"missing":[');
const TRUNCATED = text('],"truncated":');
const TRUNCATED_BARE = text(',"truncated":');
const NEXT_AFTER = text(',"nextAfter":');

/** The rest of a `getMany` element: rows in key byte order, `missing` in request order. */
export function emitGetMany(op: Op, tid: i32, timeMs: i64): void {
  order.length = 0;
  fate.length = 0;
  for (let i = 0; i < op.manyCount; i++) {
    order.push(op.manyStart + i);
    fate.push(0);
  }
  order.sort(byKey);
  putText(ROWS);
  let rows = 0;
  let truncated = false;
  for (let j = 0; j < order.length; j++) {
    let k = unchecked(order[j]);
    if (stopped) { truncated = true; continue; }
    let r = liveRow(tid, op, unchecked(manyPtr[k]), unchecked(manyLen[k]), timeMs);
    if (r == null) { fate[k - op.manyStart] = 2; continue; }
    fate[k - op.manyStart] = 1;
    if (rows > 0) putByte(0x2c);
    putRow(r, 5 + op.nsLen, true);
    rows++;
    countBytes(rowValueLen(r));
  }
  putText(MISSING);
  let missing = 0;
  for (let i = 0; i < op.manyCount; i++) {
    if (fate[i] != 2) continue;
    if (missing > 0) putByte(0x2c);
    putJsonString(unchecked(manyPtr[op.manyStart + i]), unchecked(manyLen[op.manyStart + i]));
    missing++;
  }
  putText(TRUNCATED);
  putBool(truncated);
  putByte(0x7d);
}

/** Scratch holding the store-key form of the current prefix. */
const PREFIX_SCRATCH_BYTES: usize = 4 + 256 + 1 + 4096;
const prefixScratch: usize = heap.alloc(PREFIX_SCRATCH_BYTES);

function startsWith(r: Row, p: usize, pLen: i32): bool {
  if (rowKeyLen(r) < pLen) return false;
  return memory.compare(rowKeyPtr(r), p, <usize>pLen) == 0;
}

export function emitGetPrefix(op: Op, tid: i32, timeMs: i64): void {
  let pLen = composeKey(tid, op.nsPtr, op.nsLen, op.keyPtr, op.keyLen);
  memory.copy(prefixScratch, keyScratch, <usize>pLen);
  let afterSet = op.afterLen > 0 &&
    compareBytes(op.afterPtr, op.afterLen, op.keyPtr, op.keyLen) >= 0;
  if (afterSet) {
    let aLen = composeKey(tid, op.nsPtr, op.nsLen, op.afterPtr, op.afterLen);
    tree.seek(keyScratch, aLen);
  } else {
    tree.seek(prefixScratch, pLen);
  }
  let keysOnly = (op.flags & FLAG_KEYS_ONLY) != 0;
  let userOff = 5 + op.nsLen;
  putText(ROWS);
  let rows: i32 = 0;
  let truncated = false;
  let last: Row | null = null;
  while (tree.curLeaf != null) {
    let r = tree.current();
    if (!startsWith(r, prefixScratch, pLen)) break;
    let skip = !rowLive(r, timeMs) || (afterSet &&
      compareBytes(rowKeyPtr(r) + <usize>userOff, rowKeyLen(r) - userOff,
        op.afterPtr, op.afterLen) == 0);
    if (!skip) {
      if (rows >= op.limit || stopped) { truncated = true; break; }
      if (rows > 0) putByte(0x2c);
      putRow(r, userOff, !keysOnly);
      if (!keysOnly) countBytes(rowValueLen(r));
      rows++;
      last = r;
    }
    tree.advance();
  }
  putByte(0x5d);
  putText(TRUNCATED_BARE);
  putBool(truncated);
  putText(NEXT_AFTER);
  emitNextAfter(op, truncated, last, userOff);
  putByte(0x7d);
}

/** The last row's key when truncated; a page cut before its first row gives `after`. */
function emitNextAfter(op: Op, truncated: bool, last: Row | null, userOff: i32): void {
  if (!truncated) {
    putNull();
  } else if (last != null) {
    putJsonString(rowKeyPtr(last) + <usize>userOff, rowKeyLen(last) - userOff);
  } else if (op.afterLen > 0) {
    putJsonString(op.afterPtr, op.afterLen);
  } else {
    putNull();
  }
}
