/**
 * A list of operations (`validateOps` of validate.ts): at most `opsMax` of them, each valid,
 * the call naming at most `keysMax` keys, one write per key. The list is walked once: the
 * count is written after the ops, and only when an op is refused (or the bound is reached)
 * are the remaining elements counted, since an over-long list is refused before anything in
 * it (`kv_too_many_ops` comes first in validate.ts).
 */
import { firstElement, nextElement, countFrom } from './body';
import { validateOp, opKeyCount, opWriteCode, opAux, opAuxLen, opAfter } from './op';
import { keyOff, keyLen, nsOff, nsLen } from './keys';
import { addWrite } from './writes';
import { mark, addressOf, writeU32 } from './command';
import {
  isRefused, resetRefusal, refuseTooManyOps, refuseTooManyKeysInCall, refuseDuplicateWrite,
} from './refusal';

/** Ops written by the last successful validateList. */
export let listOpCount: i32 = 0;

/**
 * Called when the walk stops at element `rest` after `validated` ops: a list longer than
 * opsMax is refused as such, whatever refusal its ops would give.
 */
function refuseIfTooLong(validated: i32, rest: usize, opsMax: i32): void {
  let count = validated + countFrom(rest, i32.MAX_VALUE - validated);
  if (count <= opsMax) return;
  resetRefusal();
  refuseTooManyOps(count, opsMax);
}

/**
 * Validates the array at p (0: an empty list) and writes `u32 opCount, op*`. Returns false
 * with the refusal recorded.
 */
export function validateList(p: usize, opsMax: i32, keysMax: i32, inTransaction: bool): bool {
  let countAt = mark();
  writeU32(0);
  let q: usize = p == 0 ? 0 : firstElement(p);
  let count = 0;
  let keyCount = 0;
  while (q != 0) {
    if (count == opsMax) {
      refuseIfTooLong(count, q, opsMax);
      return false;
    }
    if (!validateOp(q, count, inTransaction, keysMax) || !callChecks(count, keyCount, keysMax)) {
      refuseIfTooLong(count, q, opsMax);
      return false;
    }
    keyCount += opKeyCount;
    count++;
    q = nextElement(opAfter);
  }
  store<u32>(addressOf(countAt), <u32>count);
  listOpCount = count;
  return !isRefused();
}

/** After op `index` validated: the call's key count, then one write per key. */
function callChecks(index: i32, keyCount: i32, keysMax: i32): bool {
  if (keyCount + opKeyCount > keysMax) return refuseTooManyKeysInCall(keysMax);
  if (opWriteCode == 0) return true;
  if (!addWrite(opWriteCode, nsOff, nsLen, keyOff, keyLen, opAux, opAuxLen)) {
    return refuseDuplicateWrite(addressOf(keyOff), keyLen, addressOf(nsOff), nsLen);
  }
  return true;
}
