/**
 * The growth estimate of a parsed call: how the state's byte total (rowFootprint of every
 * row) would change if every write applied, looked up with the machine's own tree and key
 * composition. put: the new row's footprint minus that of the row it replaces (live or
 * expired: both still occupy memory until a write or a sweep removes them); delete: minus
 * the row's footprint; incr: a new counter row's footprint when there is no row, else the
 * change of the counter's text (exact for two small integers, the delta's length as an upper
 * bound otherwise, see docs/codec.md). The tenant may be unknown to the machine: no rows.
 *
 * The host checks the estimate only while the state is at its memory budget
 * (host/machine/memory-budget.ts, `memoryFull`: only growing calls are refused, and only
 * there). Below the budget there is nothing to check, and the estimate is 0 without looking
 * anything up (one tree lookup per write was about a tenth of a batch's parse and apply).
 */
import { OP_PUT, OP_DELETE } from '../abi';
import { Row, rowFootprint, rowKeyLen, rowValueLen, rowValuePtr } from '../row';
import { tree, tenantIdOfBytes, stateBytes } from '../state';
import { preimageBytes } from '../preimages';
import { composeKey, keyScratch } from '../ops';
import { isJsonNumber } from '../decimal';
import {
  writeCount, writeCode, writeNsOff, writeNsLen, writeKeyOff, writeKeyLen, writeAux,
  writeAuxLen,
} from './writes';
import { addressOf } from './command';

function footprint(r: Row): i64 {
  return rowFootprint(rowKeyLen(r), rowValueLen(r));
}

/** Digits (and sign) of v in decimal. */
function decimalLength(v: i64): i32 {
  let n = v < 0 ? 2 : 1;
  let u = v < 0 ? -v : v;
  while (u >= 10) { u /= 10; n++; }
  return n;
}

/** |v| below 10^15 and written plainly: what incr's fast path takes. */
function smallInteger(p: usize, len: i32): i64 {
  let i = len > 0 && load<u8>(p) == 0x2d ? 1 : 0;
  if (len - i < 1 || len - i > 15 || (len - i > 1 && load<u8>(p + <usize>i) == 0x30)) {
    return i64.MIN_VALUE;
  }
  let v: i64 = 0;
  for (let j = i; j < len; j++) {
    let c = <u32>load<u8>(p + <usize>j) - 0x30;
    if (c > 9) return i64.MIN_VALUE;
    v = v * 10 + <i64>c;
  }
  return i == 1 ? -v : v;
}

/** The change in value bytes of an incr of `row` (live or expired) by the delta text. */
function incrValueGrowth(row: Row, deltaPtr: usize, deltaLen: i32): i64 {
  let curPtr = rowValuePtr(row);
  let curLen = rowValueLen(row);
  let cur = smallInteger(curPtr, curLen);
  let delta = smallInteger(deltaPtr, deltaLen);
  if (cur != i64.MIN_VALUE && delta != i64.MIN_VALUE) {
    // Live, the counter becomes cur + delta; expired, it restarts at delta.
    return <i64>max(decimalLength(cur + delta), deltaLen) - <i64>curLen;
  }
  // Not a number: only an expired row is replaced (by delta). A number: the sum of two
  // canonical decimals is at most as long as both together.
  if (!isJsonNumber(curPtr, curLen)) return <i64>deltaLen - <i64>curLen;
  return <i64>deltaLen;
}

/** The memory budget the host set; 0 (unset) makes every estimate exact. */
let budgetBytes: i64 = 0;

export function setGrowthBudget(bytes: i64): void {
  budgetBytes = bytes;
}

/** True when the host checks the estimate: the state is at its budget (memoryFull). */
function estimateRead(): bool {
  return stateBytes() + preimageBytes >= budgetBytes;
}

/** The growth estimate of the writes recorded for the call of tenant [p, p+len). */
export function callGrowth(tenantPtr: usize, tenantLen: i32): i64 {
  if (writeCount == 0 || !estimateRead()) return 0;
  let tid = tenantIdOfBytes(tenantPtr, tenantLen, false);
  let total: i64 = 0;
  for (let r = 0; r < writeCount; r++) {
    let nsLen = unchecked(writeNsLen[r]), keyLen = unchecked(writeKeyLen[r]);
    let storeKeyLen = 5 + nsLen + keyLen;
    let row: Row | null = null;
    if (tid >= 0) {
      let k = composeKey(tid, addressOf(unchecked(writeNsOff[r])), nsLen,
        addressOf(unchecked(writeKeyOff[r])), keyLen);
      row = tree.find(keyScratch, k);
    }
    let code = unchecked(writeCode[r]);
    if (code == OP_PUT) {
      total += rowFootprint(storeKeyLen, unchecked(writeAux[r]));
      if (row != null) total -= footprint(row);
    } else if (code == OP_DELETE) {
      if (row != null) total -= footprint(row);
    } else if (row == null) {
      total += rowFootprint(storeKeyLen, unchecked(writeAuxLen[r]));
    } else {
      // The value's length changes; the row's footprint only when it crosses a size class.
      let valueLen = <i64>rowValueLen(row) +
        incrValueGrowth(row, addressOf(unchecked(writeAux[r])), unchecked(writeAuxLen[r]));
      total += rowFootprint(rowKeyLen(row), <i32>valueLen) - footprint(row);
    }
  }
  return total;
}
