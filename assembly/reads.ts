/**
 * The read side of a call: get, getMany and getPrefix results, evaluated at emission time
 * (after every write of the call) with one byte ceiling over all value bytes the call reads.
 * The row that crosses the ceiling is kept; afterwards getMany/getPrefix return nothing more
 * and say `truncated`. A get is always answered (one value is bounded by the value ceiling),
 * and its bytes count. Never changes state.
 */
import {
  RES_GET_FOUND, RES_GET_MISSING, RES_GET_MANY, RES_GET_PREFIX, EXPIRES_NEVER_WIRE,
  FLAG_KEYS_ONLY,
} from './abi';
import {
  putU8, putU32, putI64, putBytes, outputPtr, outputLen,
} from './buffers';
import {
  Row, rowLive, rowVersion, rowExpiresAt, rowUpdatedAt, rowKeyPtr, rowKeyLen, rowValuePtr,
  rowValueLen, compareBytes, EXPIRES_NEVER,
} from './row';
import { tree } from './state';
import { Op, composeKey, keyScratch } from './ops';
import { manyPtr, manyLen } from './decode';

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

function putRow(r: Row, userKeyOffset: i32, withValue: bool): void {
  putBytes(rowKeyPtr(r) + <usize>userKeyOffset, <usize>(rowKeyLen(r) - userKeyOffset));
  putU8(withValue ? 1 : 0);
  if (withValue) putBytes(rowValuePtr(r), <usize>rowValueLen(r));
  putI64(rowVersion(r));
  let e = rowExpiresAt(r);
  putI64(e == EXPIRES_NEVER ? EXPIRES_NEVER_WIRE : e);
  putI64(rowUpdatedAt(r));
}

function liveRow(tid: i32, op: Op, kPtr: usize, kLen: i32, timeMs: i64): Row | null {
  let len = composeKey(tid, op.nsPtr, op.nsLen, kPtr, kLen);
  let r = tree.find(keyScratch, len);
  return r != null && rowLive(r, timeMs) ? r : null;
}

export function emitGet(op: Op, tid: i32, timeMs: i64): void {
  let r = liveRow(tid, op, op.keyPtr, op.keyLen, timeMs);
  if (r == null) {
    putU8(RES_GET_MISSING);
    putBytes(op.keyPtr, <usize>op.keyLen);
    return;
  }
  putU8(RES_GET_FOUND);
  putBytes(op.keyPtr, <usize>op.keyLen);
  putBytes(rowValuePtr(r), <usize>rowValueLen(r));
  putI64(rowVersion(r));
  let e = rowExpiresAt(r);
  putI64(e == EXPIRES_NEVER ? EXPIRES_NEVER_WIRE : e);
  putI64(rowUpdatedAt(r));
  countBytes(rowValueLen(r));
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

export function emitGetMany(op: Op, tid: i32, timeMs: i64): void {
  order.length = 0;
  fate.length = 0;
  for (let i = 0; i < op.manyCount; i++) {
    order.push(op.manyStart + i);
    fate.push(0);
  }
  order.sort(byKey);
  putU8(RES_GET_MANY);
  let countAt = outputLen;
  putU32(0);
  let rows: u32 = 0;
  let truncated = false;
  for (let j = 0; j < order.length; j++) {
    let k = unchecked(order[j]);
    if (stopped) { truncated = true; continue; }
    let r = liveRow(tid, op, unchecked(manyPtr[k]), unchecked(manyLen[k]), timeMs);
    if (r == null) { fate[k - op.manyStart] = 2; continue; }
    fate[k - op.manyStart] = 1;
    putRow(r, 5 + op.nsLen, true);
    rows++;
    countBytes(rowValueLen(r));
  }
  store<u32>(outputPtr + countAt, rows);
  let missingAt = outputLen;
  putU32(0);
  let missing: u32 = 0;
  for (let i = 0; i < op.manyCount; i++) {
    if (fate[i] != 2) continue;
    putBytes(unchecked(manyPtr[op.manyStart + i]), <usize>unchecked(manyLen[op.manyStart + i]));
    missing++;
  }
  store<u32>(outputPtr + missingAt, missing);
  putU8(truncated ? 1 : 0);
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
  putU8(RES_GET_PREFIX);
  let countAt = outputLen;
  putU32(0);
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
      putRow(r, userOff, !keysOnly);
      if (!keysOnly) countBytes(rowValueLen(r));
      rows++;
      last = r;
    }
    tree.advance();
  }
  store<u32>(outputPtr + countAt, <u32>rows);
  putU8(truncated ? 1 : 0);
  emitNextAfter(op, truncated, last, userOff);
}

function emitNextAfter(op: Op, truncated: bool, last: Row | null, userOff: i32): void {
  if (!truncated) { putU8(0); return; }
  if (last != null) {
    putU8(1);
    putBytes(rowKeyPtr(last) + <usize>userOff, <usize>(rowKeyLen(last) - userOff));
  } else if (op.afterLen > 0) {
    putU8(1);
    putBytes(op.afterPtr, <usize>op.afterLen);
  } else {
    putU8(0);
  }
}
