/**
 * One decoded op of a call, and the write rules: put (incl. putIfAbsent), delete, incr and
 * the check assertion, each deciding applied / reason / the row to report, exactly as
 * spec/WIRE.md ("Result elements", "incr") and kv-routes.md ("expect") say. Every write goes
 * through the undo journal so a lost `required` or a quota refusal can put everything back.
 */
import {
  FLAG_HAS_EXPECT, FLAG_FOREVER, FLAG_HAS_MIN, FLAG_HAS_MAX, REASON_NONE, REASON_EXISTS,
  REASON_ABSENT, REASON_VERSION, SAFE_INTEGER_MAX,
} from './abi';
import {
  Row, newRow, rowLive, rowVersion, rowExpiresAt, rowValuePtr, rowValueLen, EXPIRES_NEVER,
  setRowSucceeded, setRowHeir,
} from './row';
import { tree, placeRow, dropRow, nextVersion } from './state';
import { incrValue, fastText } from './counter';

export class Op {
  code: i32 = 0;
  flags: i32 = 0;
  nsPtr: usize = 0;
  nsLen: i32 = 0;
  keyPtr: usize = 0;
  keyLen: i32 = 0;
  valuePtr: usize = 0;
  valueLen: i32 = 0;
  expect: i64 = 0;
  ttlSeconds: i64 = 0;
  deltaPtr: usize = 0;
  deltaLen: i32 = 0;
  minPtr: usize = 0;
  minLen: i32 = 0;
  maxPtr: usize = 0;
  maxLen: i32 = 0;
  afterPtr: usize = 0;
  afterLen: i32 = 0;
  limit: i32 = 0;
  /** getMany: its keys are manyPtr/manyLen[manyStart .. manyStart + manyCount). */
  manyStart: i32 = 0;
  manyCount: i32 = 0;
  // Result of a write or check.
  applied: bool = false;
  reason: i32 = REASON_NONE;
  /** The row whose value and version the result reports; null = absent. */
  resRow: Row | null = null;
  /** When resRow is null: report value 0 (incr) instead of null. */
  resZero: bool = false;
}

/** Scratch for one store key: tenant id (4) + namespace + NUL + key. */
const KEY_SCRATCH_BYTES: usize = 4 + 256 + 1 + 4096;
export const keyScratch: usize = heap.alloc(KEY_SCRATCH_BYTES);

/** Writes the store key of (tenant, ns, key) into keyScratch; returns its length. */
export function composeKey(tid: i32, nsPtr: usize, nsLen: i32, kPtr: usize, kLen: i32): i32 {
  store<u32>(keyScratch, bswap(<u32>tid));
  memory.copy(keyScratch + 4, nsPtr, <usize>nsLen);
  store<u8>(keyScratch + 4 + <usize>nsLen, 0);
  memory.copy(keyScratch + 5 + <usize>nsLen, kPtr, <usize>kLen);
  return 5 + nsLen + kLen;
}

// ---- undo journal: pairs (replaced or removed row, placed row) in apply order ----
let journalOld = new Array<Row | null>();
let journalNew = new Array<Row | null>();
/**
 * Whether the current call's writes are journaled: only a call that can be undone (one with
 * a `required` op, or whose tenant has a quota) pays for the journal.
 */
let journaling: bool = true;

export function setJournaling(on: bool): void {
  journaling = on;
}

export function journalReset(): void {
  journalOld.length = 0;
  journalNew.length = 0;
}

/**
 * Puts every journaled change back, newest first. Heap entries of revived rows are still in
 * the heap: entries leave it only by a sweep or a compaction, never inside a call.
 */
export function journalUndo(): void {
  assert(journaling, 'undo of a call that kept no journal');
  for (let i = journalOld.length - 1; i >= 0; i--) {
    let placed = unchecked(journalNew[i]);
    let old = unchecked(journalOld[i]);
    if (placed != null) dropRow(placed);
    if (old != null) placeRow(old, false);
  }
  journalReset();
}

function expiryAt(timeMs: i64, op: Op): i64 {
  if (op.flags & FLAG_FOREVER) return EXPIRES_NEVER;
  let at = timeMs + op.ttlSeconds * 1000;
  return at > SAFE_INTEGER_MAX ? SAFE_INTEGER_MAX : at;
}

function refuse(op: Op, reason: i32, live: Row | null): void {
  op.applied = false;
  op.reason = reason;
  op.resRow = live;
}

/**
 * Writes a new row for the key in keyScratch. `heirOf`: the live row an incr replaces keeping
 * its expiry; the new row then takes no expiry-heap entry of its own, the one standing for
 * `heirOf` stands for it (state.ts, "expiry heap"), so a counter renewed by every call of a
 * rate limiter leaves no entry behind per call.
 */
function write(op: Op, keyLen: i32, vPtr: usize, vLen: i32, expiresAt: i64, t: i64,
  heirOf: Row | null = null): void {
  let r = newRow(keyScratch, keyLen, vPtr, vLen, nextVersion(), expiresAt, t);
  let inherits = heirOf != null && expiresAt != EXPIRES_NEVER;
  let old = placeRow(r, !inherits);
  if (inherits) {
    assert(old === heirOf, 'incr replaced another row than the live one');
    setRowSucceeded(heirOf!);
    setRowHeir(r, true);
  }
  if (journaling) {
    journalOld.push(old);
    journalNew.push(r);
  }
  accept(op, r);
}

/** Marks `op` applied, answering with `row` (null: no row). */
function accept(op: Op, row: Row | null): void {
  op.applied = true;
  op.reason = REASON_NONE;
  op.resRow = row;
}

/**
 * The one statement of `expect` (kv-routes.md): 0 means "must not be live", N > 0 means
 * "must be live at version N". Refuses `op` and returns true when the precondition is lost.
 */
function refusedByExpect(op: Op, live: Row | null): bool {
  if (op.expect == 0) {
    if (live != null) { refuse(op, REASON_EXISTS, live); return true; }
  } else if (live == null) {
    refuse(op, REASON_ABSENT, null); return true;
  } else if (rowVersion(live) != op.expect) {
    refuse(op, REASON_VERSION, live); return true;
  }
  return false;
}

/** The live row at the store key in keyScratch, or null. */
function liveAt(keyLen: i32, timeMs: i64): Row | null {
  let r = tree.find(keyScratch, keyLen);
  return r != null && rowLive(r, timeMs) ? r : null;
}

export function applyPut(op: Op, tid: i32, timeMs: i64): void {
  let kLen = composeKey(tid, op.nsPtr, op.nsLen, op.keyPtr, op.keyLen);
  let live = liveAt(kLen, timeMs);
  if ((op.flags & FLAG_HAS_EXPECT) != 0 && refusedByExpect(op, live)) return;
  write(op, kLen, op.valuePtr, op.valueLen, expiryAt(timeMs, op), timeMs);
}

export function applyDelete(op: Op, tid: i32, timeMs: i64): void {
  let kLen = composeKey(tid, op.nsPtr, op.nsLen, op.keyPtr, op.keyLen);
  let live = liveAt(kLen, timeMs);
  if ((op.flags & FLAG_HAS_EXPECT) != 0) {
    if (refusedByExpect(op, live)) return;
  } else if (live == null) {
    refuse(op, REASON_ABSENT, null); return;
  }
  // Only `expect: 0` on an absent key gets here without a row: the assertion held.
  if (live == null) { accept(op, null); return; }
  dropRow(live);
  if (journaling) {
    journalOld.push(live);
    journalNew.push(null);
  }
  accept(op, live);
}

/** check: asserts a version (0 = absent) and writes nothing. */
export function evalCheck(op: Op, tid: i32, timeMs: i64): void {
  let kLen = composeKey(tid, op.nsPtr, op.nsLen, op.keyPtr, op.keyLen);
  let live = liveAt(kLen, timeMs);
  if (refusedByExpect(op, live)) return;
  accept(op, live);
}

export function applyIncr(op: Op, tid: i32, timeMs: i64): void {
  let kLen = composeKey(tid, op.nsPtr, op.nsLen, op.keyPtr, op.keyLen);
  let live = liveAt(kLen, timeMs);
  let res = incrValue(
    live == null ? 0 : rowValuePtr(live), live == null ? -1 : rowValueLen(live),
    op.deltaPtr, op.deltaLen,
    (op.flags & FLAG_HAS_MIN) ? op.minPtr : 0, (op.flags & FLAG_HAS_MIN) ? op.minLen : -1,
    (op.flags & FLAG_HAS_MAX) ? op.maxPtr : 0, (op.flags & FLAG_HAS_MAX) ? op.maxLen : -1,
  );
  if (res.reason != REASON_NONE) {
    refuse(op, res.reason, live);
    op.resZero = live == null;
    return;
  }
  let expiresAt = live == null ? expiryAt(timeMs, op) : rowExpiresAt(live);
  if (res.fastLen >= 0) {
    write(op, kLen, fastText, res.fastLen, expiresAt, timeMs, live);
    return;
  }
  let text = String.UTF8.encode(res.text);
  write(op, kLen, changetype<usize>(text), text.byteLength, expiresAt, timeMs, live);
}
