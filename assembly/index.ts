/**
 * The module's whole ABI: i32 arguments and results only. The host writes a command into the
 * input region (`inputRegion(bytes)` returns its address), calls an export with the length,
 * and reads `returned length` bytes at `outputRegion()`. 64-bit values are split into two
 * i32 halves (lo, hi) as arguments and travel little-endian inside the buffers.
 * Imports nothing but env.abort: no clock, no randomness, no I/O.
 */
import {
  CMD_CALL, CMD_CALL_V1, CMD_SWEEP, CMD_SET_QUOTA, CMD_SET_PAUSED, CMD_NOOP, OUT_SWEEP, OUT_ADMIN,
  OUT_NOOP, TENANT_BYTES_MAX, SAFE_INTEGER_MAX, ENTRY_NORMAL, ENTRY_EMPTY,
  ENVELOPE_FORMAT_VERSION, ORIGIN_ID_BYTES_MAX, NEXT_EXPIRY_NONE, CMD_KEYED_CALL, CMD_CHECKPOINT,
} from './abi';
import {
  Reader, ensureInput, inputPtr, inputCap, outputPtr, outputLen, resetOutput, putU8, putU32,
  putI64, putBytes,
} from './buffers';
import { admit, isSelf, setSelfOrigin } from './dedup';
import {
  setApplied, lastTimeMs, appliedIndex, lastVersion, paused, setPaused, sweep, tenants,
  tenantId, heapMaybeCompact, tree, nextExpiry, structureBytesWalk, setTenantQuota,
} from './state';
import { EXPIRES_NEVER } from './row';
import { runCall, emitInvalid } from './call';
import { writeDigest, writeDigestRecount, readQuota } from './snapshot';
import * as slices from './snapshot-out';
import * as chunks from './snapshot-in';
import * as memoryUse from './memory-use';
import { setLimits } from './request/limits';
import { parseRequestFrame } from './request/parse';
import { setGrowthBudget as setBudget } from './request/growth';
import * as idempotency from './idempotency';
import * as checkpoints from './checkpoints';

/**
 * The readers of the apply path, one per nesting level (the entries, an entry's envelope, its
 * command): reused, so applying an entry allocates nothing for them. Nothing keeps a reader
 * past the export call that reset it.
 */
const entriesReader = new Reader(0, 0);
const envelopeReader = new Reader(0, 0);
const commandReader = new Reader(0, 0);

function join(lo: i32, hi: i32): i64 {
  return (<i64>hi << 32) | (<i64>lo & 0xffffffff);
}

/** Ensures the input region holds `bytes` and returns its address. */
export function inputRegion(bytes: i32): i32 {
  return <i32>ensureInput(<usize>max(bytes, 0));
}

/** Address of the output of the last call. */
export function outputRegion(): i32 {
  return <i32>outputPtr;
}

/**
 * Applies one committed entry (a command of `len` bytes in the input region) at its index
 * and time. Time never goes back: the machine uses max(time, last entry time). Returns the
 * output length.
 */
export function apply(len: i32, indexLo: i32, indexHi: i32, timeLo: i32, timeHi: i32): i32 {
  resetOutput();
  let index = join(indexLo, indexHi);
  let time = entryTime(index, join(timeLo, timeHi));
  applyCommand(commandReader.reset(inputPtr, <usize>len), time, true);
  setApplied(index, time);
  checkpoints.recordApplied();
  heapMaybeCompact();
  tree.indexStep();
  memoryUse.collectWhenDue();
  return <i32>outputLen;
}

/** The time an entry applies at: never before the last entry's, never past 2^53 - 1. */
function entryTime(index: i64, time: i64): i64 {
  assert(index > appliedIndex, 'entry index not after applied index');
  if (time < lastTimeMs) time = lastTimeMs;
  if (time > SAFE_INTEGER_MAX) time = SAFE_INTEGER_MAX;
  return time;
}

/** Applies one command; a call writes its answer only when `answered`. */
function applyCommand(rd: Reader, time: i64, answered: bool): void {
  let kind = rd.u8();
  if (kind == CMD_CALL || kind == CMD_CALL_V1) runCall(rd, kind, time, true, answered);
  else if (kind == CMD_KEYED_CALL) idempotency.runKeyedCall(rd, time, answered);
  else if (kind == CMD_SWEEP) applySweep(rd, time);
  else if (kind == CMD_SET_QUOTA) applySetQuota(rd);
  else if (kind == CMD_SET_PAUSED) applySetPaused(rd);
  else if (kind == CMD_NOOP && rd.pos == rd.end) putU8(OUT_NOOP);
  else if (kind == CMD_CHECKPOINT) checkpoints.applyCheckpoint(rd);
  else emitInvalid(rd.failed ? rd.why : 'unknown command');
}

/**
 * This node's origin (its id in the input region, and the incarnation drawn at its start):
 * `applyEntries` answers the calls of entries it proposed, and only those.
 */
export function setOrigin(len: i32, incarnation: i32): void {
  let n = min(max(len, 0), ORIGIN_ID_BYTES_MAX);
  setSelfOrigin(inputPtr, n, <u32>incarnation);
}

/**
 * Applies committed entries in one crossing. The input region (`len` bytes) holds `u32
 * count`, then per entry `i64 index, i64 timeMs, u8 type, u32 dataLen, data` (docs/codec.md,
 * "Entries"); the output gets, per entry, `u8 mine, [i64 seq when mine]`, then the outcome
 * `apply` writes: a call proposed by this node carries its answer, a sweep its removed-key
 * count, an invalid command its reason. An entry without a valid envelope, or whose origin
 * and sequence number already applied (a duplicated proposal), applies nothing and is a
 * no-op on every replica.
 */
export function applyEntries(len: i32): i32 {
  resetOutput();
  let rd = entriesReader.reset(inputPtr, <usize>len);
  let count = rd.u32();
  for (let i: u32 = 0; i < count; i++) {
    let index = rd.i64();
    let time = rd.i64();
    let type = rd.u8();
    let dataPtr = rd.bytes(<u32>i32.MAX_VALUE, 'entry');
    let dataLen = <i32>rd.lastLen;
    assert(!rd.failed && (type == ENTRY_NORMAL || type == ENTRY_EMPTY), 'bad entry framing');
    time = entryTime(index, time);
    if (type == ENTRY_NORMAL) applyEntry(dataPtr, dataLen, index, time);
    else noopEntry();
    setApplied(index, time);
    checkpoints.recordApplied();
    heapMaybeCompact();
    tree.indexStep();
    memoryUse.collectWhenDue();
  }
  assert(rd.pos == rd.end, 'trailing bytes after the entries');
  return <i32>outputLen;
}

function noopEntry(): void {
  putU8(0);
  putU8(OUT_NOOP);
}

/** One normal entry: its envelope, the dedup decision, then its command. */
function applyEntry(dataPtr: usize, dataLen: i32, index: i64, time: i64): void {
  let env = envelopeReader.reset(dataPtr, <usize>dataLen);
  let version = env.u8();
  let idLen = env.u8();
  let idPtr = env.pos;
  if (!env.failed && (idLen > ORIGIN_ID_BYTES_MAX || !env.has(<usize>idLen))) env.fail('origin');
  env.pos += env.failed ? 0 : <usize>idLen;
  let incarnation = env.u32();
  let seq = env.i64();
  let valid = !env.failed && version == ENVELOPE_FORMAT_VERSION && seq > 0 &&
    seq <= SAFE_INTEGER_MAX;
  if (!valid || !admit(idPtr, idLen, incarnation, seq, index)) {
    noopEntry();
    return;
  }
  let mine = isSelf(idPtr, idLen, incarnation);
  putU8(mine ? 1 : 0);
  if (mine) putI64(seq);
  applyCommand(commandReader.reset(env.pos, env.end - env.pos), time, mine);
}

function applySweep(rd: Reader, time: i64): void {
  let maxKeys = rd.i64();
  if (!rd.failed && (maxKeys < 0 || maxKeys > SAFE_INTEGER_MAX)) rd.fail('bad maxKeys');
  if (!rd.failed && rd.pos != rd.end) rd.fail('trailing bytes');
  if (rd.failed) { emitInvalid(rd.why); return; }
  let removed = sweep(time, maxKeys);
  idempotency.sweepRecords(time, maxKeys);
  putU8(OUT_SWEEP);
  putI64(removed);
}

function applySetQuota(rd: Reader): void {
  let p = rd.bytes(<u32>TENANT_BYTES_MAX, 'tenant');
  let len = rd.lastLen;
  if (!rd.failed && len == 0) rd.fail('empty tenant');
  let q = readQuota(rd);
  if (!rd.failed && rd.pos != rd.end) rd.fail('trailing bytes');
  if (rd.failed) { emitInvalid(rd.why); return; }
  setTenantQuota(tenantId(String.UTF8.decodeUnsafe(p, len), true), q);
  putU8(OUT_ADMIN);
}

function applySetPaused(rd: Reader): void {
  let p = rd.u8();
  if (!rd.failed && p > 1) rd.fail('bad paused');
  if (!rd.failed && rd.pos != rd.end) rd.fail('trailing bytes');
  if (rd.failed) { emitInvalid(rd.why); return; }
  setPaused(p == 1);
  putU8(OUT_ADMIN);
}

/** Answers a read-only call (a CMD_CALL command) at max(now, last entry time). */
export function read(len: i32, nowLo: i32, nowHi: i32): i32 {
  resetOutput();
  let now = join(nowLo, nowHi);
  if (now < lastTimeMs) now = lastTimeMs;
  let rd = commandReader.reset(inputPtr, <usize>len);
  let kind = rd.u8();
  if (kind != CMD_CALL) emitInvalid(rd.failed ? rd.why : 'not a call');
  else runCall(rd, kind, now, false, true);
  return <i32>outputLen;
}

/**
 * Opens a snapshot of the state as it is now (at appliedIndex): the output holds its size in
 * bytes (i64). Entries may be applied between the slices that follow. One at a time.
 */
export function snapshotBegin(): i32 {
  let total = slices.beginSnapshot();
  resetOutput();
  putI64(total);
  return <i32>outputLen;
}

/** The next slice of the open snapshot (about maxBytes, at least one row); 0 once done. */
export function snapshotNext(maxBytes: i32): i32 {
  return slices.nextSlice(maxBytes);
}

/** Drops the open snapshot, if any, and the rows it was keeping alive. */
export function snapshotAbort(): void {
  slices.abortSnapshot();
}

/** Starts a restore fed by `restoreChunk`; one under way is dropped. */
export function restoreBegin(): i32 {
  chunks.beginRestore();
  return 0;
}

/** Feeds the next `len` bytes of a snapshot from the input region; 0, or a reason. */
export function restoreChunk(len: i32): i32 {
  assert(len >= 0 && <usize>len <= inputCap, 'restoreChunk: length beyond the input region');
  return reasonOrZero(chunks.restoreChunk(inputPtr, <usize>len));
}

/** Replaces the state with the one restored; 0, or a reason (nothing changed). */
export function restoreEnd(): i32 {
  let why = chunks.endRestore();
  if (why.length == 0) checkpoints.restart();
  return reasonOrZero(why);
}

/** Drops a restore under way (the state is untouched). */
export function restoreAbort(): void {
  chunks.abortRestore();
}

/** Replaces the state with an empty one at index 0, so its memory can be reused. */
export function clearState(): void {
  chunks.clearState();
  checkpoints.restart();
}

/** 0 for no reason; else the output holds OUT_INVALID and the reason. */
function reasonOrZero(why: string): i32 {
  if (why.length == 0) return 0;
  resetOutput();
  emitInvalid(why);
  return <i32>outputLen;
}

/** The state's byte total (i64; see state.ts), and what an open snapshot keeps alive. */
export function stateBytes(): i32 {
  resetOutput();
  memoryUse.writeMemoryUse();
  return <i32>outputLen;
}

/** A recount of the byte total from the rows and tenants (for tests): two i64. */
export function stateBytesRecount(): i32 {
  resetOutput();
  memoryUse.writeRecount();
  return <i32>outputLen;
}

/** The state digest (u64; docs/codec.md, "Digest"), from the sums the state keeps: O(1). */
export function digest(): i32 {
  resetOutput();
  writeDigest();
  return <i32>outputLen;
}

/** The digest recounted from every row and quota (for tests: must equal `digest`). */
export function digestRecount(): i32 {
  resetOutput();
  writeDigestRecount();
  return <i32>outputLen;
}

/** appliedIndex, lastTimeMs, lastVersion (i64 each), paused (u8). */
export function meta(): i32 {
  resetOutput();
  putI64(appliedIndex);
  putI64(lastTimeMs);
  putI64(lastVersion);
  putU8(paused ? 1 : 0);
  return <i32>outputLen;
}

/** Tenant named by the input bytes: u8 known, rows, bytes, u8 hasQuota [, quota]. */
export function queryTenant(len: i32): i32 {
  resetOutput();
  let tid = tenantId(String.UTF8.decodeUnsafe(inputPtr, <usize>max(len, 0)), false);
  if (tid < 0) {
    putU8(0);
    return <i32>outputLen;
  }
  let t = unchecked(tenants[tid]);
  putU8(1);
  putI64(t.rows);
  putI64(t.bytes);
  let q = t.quota;
  putU8(q == null ? 0 : 1);
  if (q != null) {
    putU8(q.enabled ? 1 : 0);
    putI64(q.maxRows);
    putI64(q.maxBytes);
    putI64(q.maxReadsPerSec);
    putI64(q.maxWritesPerSec);
  }
  return <i32>outputLen;
}

/** Up to maxTenants tenants in first-seen order: u32 count, then (name, rows, bytes). */
export function tenantsUsage(maxTenants: i32): i32 {
  resetOutput();
  let n = min(max(maxTenants, 0), tenants.length);
  putU32(<u32>n);
  for (let i = 0; i < n; i++) {
    let t = unchecked(tenants[i]);
    putBytes(changetype<usize>(t.nameBytes), <usize>t.nameBytes.byteLength);
    putI64(t.rows);
    putI64(t.bytes);
  }
  return <i32>outputLen;
}

/** Rows held (expired rows count until a sweep removes them). */
export function liveKeyCount(): i32 {
  return tree.count;
}

/**
 * The earliest time a sweep could remove a row, as an i64 in the output: an entry time
 * before it sweeps nothing, so the leader proposes no sweep until then. NEXT_EXPIRY_NONE
 * when no row expires. A lower bound (see state.ts `nextExpiry`).
 */
export function nextExpiryMs(): i32 {
  resetOutput();
  let e = nextExpiry();
  let r = idempotency.nextRecordExpiry();
  if (r >= 0 && r < e) e = r;
  putI64(e == EXPIRES_NEVER ? NEXT_EXPIRY_NONE : e);
  return <i32>outputLen;
}

/** Idempotency records held, their bytes, evictions and replays since start (i64 each). */
export function idempotencyStats(): i32 {
  resetOutput();
  putI64(idempotency.recordCount());
  putI64(idempotency.recordBytes());
  putI64(idempotency.evictionCount());
  putI64(idempotency.replayCount());
  return <i32>outputLen;
}

export function isPaused(): i32 {
  return paused ? 1 : 0;
}

/**
 * Bytes the state's own objects occupy in the heap (rows, tree nodes, key index, heap array,
 * tenants), counted from their sizes with the allocator's per-block overhead; for the
 * benchmark's bytes-per-key figure, which wasm memory size cannot give (memory grows by
 * doubling).
 */
export function structureBytes(): i32 {
  resetOutput();
  putI64(structureBytesWalk());
  return <i32>outputLen;
}

/**
 * The key index checked against the tree (for tests): four i64, rows, indexed rows, rows not
 * indexed, indexed rows whose recorded leaf is stale. Traps on a disagreement.
 */
export function keyIndexCheck(): i32 {
  resetOutput();
  let c = tree.checkIndex();
  for (let i = 0; i < c.length; i++) putI64(unchecked(c[i]));
  return <i32>outputLen;
}

/**
 * Sets the receiving node's request limits (QUEEN_KV_*), once at start; the read ceiling
 * comes as two i32 halves. Returns 0, or the 1-based position of the first limit out of the
 * range the machine accepts (nothing changes then).
 */
export function setRequestLimits(maxValueBytes: i32, maxKeyBytes: i32, maxOpsPerCall: i32,
  maxKeysPerCall: i32, prefixLimit: i32, maxReadBytesLo: i32, maxReadBytesHi: i32): i32 {
  return setLimits(maxValueBytes, maxKeyBytes, maxOpsPerCall, maxKeysPerCall, prefixLimit,
    join(maxReadBytesLo, maxReadBytesHi));
}

/**
 * The state's memory budget (host/machine/memory-budget.ts): below it a parse's growth
 * estimate is 0, with no lookup (request/growth.ts). Unset, every estimate is exact.
 */
export function setGrowthBudget(lo: i32, hi: i32): void {
  setBudget(join(lo, hi));
}

/**
 * Parses and validates the request frame in the input region (docs/codec.md, "Requests")
 * into a CMD_CALL command or a refusal; changes no state. Returns the output length.
 */
export function parseRequest(len: i32): i32 {
  return parseRequestFrame(len);
}
