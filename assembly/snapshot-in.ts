/**
 * A restore fed in chunks of any size (an item, a row above all, may straddle chunks). Every
 * byte is checked as it arrives, exactly as a whole-snapshot restore would check it, and the
 * new state is built beside the live one, which only `endRestore` replaces: a bad, short or
 * abandoned snapshot leaves the state untouched. Reads format 3 (with the dedup and the
 * idempotency sections), format 2 (dedup only) and format 1 (neither). Pure: no clock, no I/O.
 */
import {
  SNAPSHOT_MAGIC, FORMAT_VERSION, FORMAT_VERSION_NO_DEDUP, FORMAT_VERSION_NO_IDEMPOTENCY,
  TENANT_BYTES_MAX, SAFE_INTEGER_MAX,
} from './abi';
import { Reader } from './buffers';
import { Row, ROW_HEADER_BYTES, allocRow } from './row';
import { Tenant, resetState } from './state';
import { Tree, TreeBuilder } from './tree';
import { readQuota, rowOk, SNAPSHOT_ROW_BYTES_MAX, SNAPSHOT_HEADER_BYTES } from './snapshot';
import {
  DEDUP_SECTION_BYTES_MAX, readDedupSection, installDedupSection, discardDedupSection,
} from './dedup';
import {
  IDEMPOTENCY_SECTION_BYTES_MAX, readIdempotencySection, installIdempotencySection,
  discardIdempotencySection,
} from './idempotency';
import { abortSnapshot } from './snapshot-out';
import { collectNow } from './memory-use';

// What the next bytes of the stream are.
const PHASE_IDLE = 0;
const PHASE_HEADER = 1;
const PHASE_TENANT_COUNT = 2;
const PHASE_TENANT = 3;
const PHASE_DEDUP = 4;
const PHASE_ROW_COUNT = 5;
const PHASE_ROWS = 6;
const PHASE_DONE = 7;
const PHASE_FAILED = 8;
const PHASE_IDEMPOTENCY = 9;

/** u8 enabled and four i64 limits. */
const QUOTA_BYTES: i64 = 33;

let phase = PHASE_IDLE;
/** Why the restore failed (PHASE_FAILED). */
let why = '';
let formatVersion: u32 = 0;
let index: i64 = 0;
let timeMs: i64 = 0;
let version: i64 = 0;
let pausedFlag = false;
let tenantsLeft: u32 = 0;
let staged = new Array<Tenant>();
let stagedNames = new Set<string>();
let rowsLeft: i64 = 0;
let builder = new TreeBuilder();
let prev: Row | null = null;
/** An item that straddles chunks, gathered here until it is whole. */
let carry: usize = 0;
let carryCap: usize = 0;
let carryLen: usize = 0;

function fail(reason: string): void {
  if (phase == PHASE_FAILED) return;
  phase = PHASE_FAILED;
  why = reason;
  release();
}

/** Lets go of everything staged (the collector reclaims it). */
function release(): void {
  staged = new Array<Tenant>();
  stagedNames = new Set<string>();
  builder = new TreeBuilder();
  prev = null;
  discardDedupSection();
  discardIdempotencySection();
  if (carry != 0) heap.free(carry);
  carry = 0;
  carryCap = 0;
  carryLen = 0;
}

/** Starts a restore; one that was under way is dropped. */
export function beginRestore(): void {
  release();
  phase = PHASE_HEADER;
  why = '';
}

/** A u32 length prefix and what follows; -1 after failing when the length is out of range. */
function prefixed(p: usize, avail: usize, maxLen: u32, what: string): i64 {
  if (avail < 4) return 4;
  let len = load<u32>(p);
  if (len > maxLen) {
    fail(what + ' too long');
    return -1;
  }
  return 4 + <i64>len;
}

/**
 * Bytes the next item takes, from what of it is at p (avail bytes). While the item's
 * lengths are not all visible yet, the bytes needed to see the next one. -1: invalid.
 */
function itemBytes(p: usize, avail: usize): i64 {
  if (phase == PHASE_HEADER) return SNAPSHOT_HEADER_BYTES;
  if (phase == PHASE_TENANT_COUNT) return 4;
  if (phase == PHASE_ROW_COUNT) return 8;
  if (phase == PHASE_DEDUP) return prefixed(p, avail, DEDUP_SECTION_BYTES_MAX, 'dedup section');
  if (phase == PHASE_IDEMPOTENCY) {
    return prefixed(p, avail, IDEMPOTENCY_SECTION_BYTES_MAX, 'idempotency section');
  }
  if (phase == PHASE_ROWS) return prefixed(p, avail, SNAPSHOT_ROW_BYTES_MAX, 'row');
  if (phase == PHASE_TENANT) {
    let name = prefixed(p, avail, <u32>TENANT_BYTES_MAX, 'tenant');
    if (name < 0 || <i64>avail < name + 1) return name < 0 ? name : name + 1;
    let hasQuota = load<u8>(p + <usize>name);
    return name + 1 + (hasQuota == 1 ? QUOTA_BYTES : 0);
  }
  fail('trailing bytes');
  return -1;
}

function readHeader(rd: Reader): void {
  if (rd.u32() != <u32>SNAPSHOT_MAGIC) return fail('not a snapshot');
  formatVersion = rd.u32();
  if (formatVersion != <u32>FORMAT_VERSION && formatVersion != <u32>FORMAT_VERSION_NO_DEDUP &&
    formatVersion != <u32>FORMAT_VERSION_NO_IDEMPOTENCY) {
    return fail('unknown snapshot format');
  }
  index = rd.i64();
  timeMs = rd.i64();
  version = rd.i64();
  let p = rd.u8();
  if (index < 0 || index > SAFE_INTEGER_MAX || timeMs < 0 || timeMs > SAFE_INTEGER_MAX ||
    version < 0 || version > SAFE_INTEGER_MAX || p > 1) {
    return fail('bad snapshot header');
  }
  pausedFlag = p == 1;
  phase = PHASE_TENANT_COUNT;
}

function afterTenants(): void {
  phase = formatVersion == <u32>FORMAT_VERSION_NO_DEDUP ? PHASE_ROW_COUNT : PHASE_DEDUP;
}

function readTenant(rd: Reader): void {
  let p = rd.bytes(<u32>TENANT_BYTES_MAX, 'tenant');
  let len = rd.lastLen;
  let hasQuota = rd.u8();
  if (hasQuota > 1) return fail('bad quota flag');
  let name = String.UTF8.decodeUnsafe(p, len);
  if (len == 0 || stagedNames.has(name)) return fail('bad tenant table');
  let t = new Tenant(name);
  if (hasQuota == 1) t.quota = readQuota(rd);
  if (rd.failed) return fail(rd.why);
  staged.push(t);
  stagedNames.add(name);
  tenantsLeft--;
  if (tenantsLeft == 0) afterTenants();
}

function readRowCount(rd: Reader): void {
  let count = rd.i64();
  if (count < 0 || count > <i64>i32.MAX_VALUE) return fail('bad row count');
  rowsLeft = count;
  phase = count == 0 ? PHASE_DONE : PHASE_ROWS;
}

function readRow(p: usize, len: usize): void {
  if (len < <usize>ROW_HEADER_BYTES) return fail('bad row');
  let r = allocRow(len);
  memory.copy(changetype<usize>(r), p, len);
  if (!rowOk(r, staged.length, version, timeMs, prev)) return fail('bad row');
  builder.add(r);
  prev = r;
  rowsLeft--;
  if (rowsLeft == 0) phase = PHASE_DONE;
}

/** Takes one whole item of n bytes at p. */
function takeItem(p: usize, n: usize): void {
  let rd = new Reader(p, n);
  if (phase == PHASE_HEADER) readHeader(rd);
  else if (phase == PHASE_TENANT_COUNT) {
    tenantsLeft = rd.u32();
    if (tenantsLeft == 0) afterTenants(); else phase = PHASE_TENANT;
  } else if (phase == PHASE_TENANT) readTenant(rd);
  else if (phase == PHASE_DEDUP) {
    let section = new Reader(p + 4, n - 4);
    let reason = readDedupSection(section);
    if (reason.length > 0) fail(reason);
    else if (section.pos != section.end) fail('bad dedup section');
    else phase = formatVersion == <u32>FORMAT_VERSION ? PHASE_IDEMPOTENCY : PHASE_ROW_COUNT;
  } else if (phase == PHASE_IDEMPOTENCY) {
    let reason = readIdempotencySection(new Reader(p + 4, n - 4));
    if (reason.length > 0) fail(reason);
    else phase = PHASE_ROW_COUNT;
  } else if (phase == PHASE_ROW_COUNT) readRowCount(rd);
  else if (phase == PHASE_ROWS) readRow(p + 4, n - 4);
}

function carryAppend(p: usize, n: usize): void {
  let need = carryLen + n;
  if (need > carryCap) {
    let cap = max(need, max(carryCap << 1, <usize>4096));
    carry = carry == 0 ? heap.alloc(cap) : heap.realloc(carry, cap);
    carryCap = cap;
  }
  memory.copy(carry + carryLen, p, n);
  carryLen = need;
}

/**
 * Completes the item gathered in `carry` from the chunk [p, end); returns how many chunk
 * bytes it used. The carry stays non-empty when the chunk ends before the item does.
 */
function finishCarried(p: usize, end: usize): usize {
  let used: usize = 0;
  while (phase != PHASE_FAILED) {
    let need = itemBytes(carry, carryLen);
    if (need < 0) break;
    if (<i64>carryLen >= need) {
      takeItem(carry, <usize>need);
      carryLen = 0;
      break;
    }
    let take = min(<usize>need - carryLen, end - (p + used));
    if (take == 0) break;
    carryAppend(p + used, take);
    used += take;
  }
  return used;
}

/** Feeds the next `len` bytes of the snapshot at `p`; returns '' or why it failed. */
export function restoreChunk(p: usize, len: usize): string {
  if (phase == PHASE_IDLE) return 'no restore under way';
  let end = p + len;
  if (carryLen > 0) p += finishCarried(p, end);
  while (p < end && phase != PHASE_FAILED) {
    if (carryLen > 0) break;
    let need = itemBytes(p, end - p);
    if (need < 0) break;
    if (need > <i64>(end - p)) {
      carryAppend(p, end - p);
      break;
    }
    takeItem(p, <usize>need);
    p += <usize>need;
  }
  return phase == PHASE_FAILED ? why : '';
}

/**
 * Swaps the restored state in, if everything arrived and checked out; returns '' or why not
 * (the live state is then untouched). An open snapshot of the old state is dropped.
 */
export function endRestore(): string {
  if (phase == PHASE_IDLE) return 'no restore under way';
  if (phase != PHASE_FAILED && (phase != PHASE_DONE || carryLen != 0)) fail('truncated snapshot');
  if (phase == PHASE_FAILED) {
    phase = PHASE_IDLE;
    return why;
  }
  abortSnapshot();
  let t: Tree = builder.finish();
  installDedupSection();
  installIdempotencySection();
  resetState(t, staged, version, index, timeMs, pausedFlag);
  release();
  phase = PHASE_IDLE;
  return '';
}

/** Drops a restore under way; the live state is untouched. */
export function abortRestore(): void {
  release();
  phase = PHASE_IDLE;
}

/**
 * Replaces the state with an empty one and collects the old one, so a large restore that
 * follows reuses its memory instead of needing as much again.
 */
export function clearState(): void {
  abortSnapshot();
  discardDedupSection();
  installDedupSection();
  discardIdempotencySection();
  installIdempotencySection();
  resetState(new Tree(), new Array<Tenant>(), 0, 0, 0, false);
  collectNow();
}
