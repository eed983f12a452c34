/**
 * Snapshot, restore and digest of the whole state. A snapshot is the header, the tenant table
 * (with quotas) and every row in key order, each row as its raw buffer; restore validates all
 * of it before replacing anything, so bad bytes leave the state untouched. The digest does
 * not depend on tenant ids or tree shape (see docs/codec.md, "Digest"), only on the logical
 * state, so a plain model can compute it too.
 */
import { SNAPSHOT_MAGIC, FORMAT_VERSION, TENANT_BYTES_MAX, SAFE_INTEGER_MAX } from './abi';
import {
  Reader, putU8, putU32, putI64, putBytes, reserveRaw, reserveOutput, outputPtr, outputLen,
} from './buffers';
import {
  Row, ROW_HEADER_BYTES, rowKeyPtr, rowKeyLen, rowVersion, rowExpiresAt, rowUpdatedAt,
  rowTenant, rowDead, rowValuePtr, rowValueLen, compareBytes, EXPIRES_NEVER,
} from './row';
import { Tree } from './tree';
import { writeDedup, readDedup, installDedup, DedupTable } from './dedup';
import {
  tree, tenants, Tenant, Quota, lastVersion, appliedIndex, lastTimeMs, paused, resetState,
} from './state';

/** Largest row buffer a snapshot may hold: key + value bounds + header, with room. */
const SNAPSHOT_ROW_BYTES_MAX: u32 = 4 * 1024 * 1024;

function putQuota(q: Quota | null): void {
  putU8(q == null ? 0 : 1);
  if (q == null) return;
  putU8(q.enabled ? 1 : 0);
  putI64(q.maxRows);
  putI64(q.maxBytes);
  putI64(q.maxReadsPerSec);
  putI64(q.maxWritesPerSec);
}

export function writeSnapshot(): void {
  putU32(<u32>SNAPSHOT_MAGIC);
  putU32(<u32>FORMAT_VERSION);
  putI64(appliedIndex);
  putI64(lastTimeMs);
  putI64(lastVersion);
  putU8(paused ? 1 : 0);
  putU32(<u32>tenants.length);
  for (let i = 0; i < tenants.length; i++) {
    let t = unchecked(tenants[i]);
    putBytes(changetype<usize>(t.nameBytes), <usize>t.nameBytes.byteLength);
    putQuota(t.quota);
  }
  writeDedupSection();
  putI64(<i64>tree.count);
  let rowBytes: usize = 0;
  tree.seekFirst();
  while (tree.curLeaf != null) {
    rowBytes += 4 + <usize>tree.current().byteLength;
    tree.advance();
  }
  reserveOutput(rowBytes);
  tree.seekFirst();
  while (tree.curLeaf != null) {
    let r = tree.current();
    putBytes(changetype<usize>(r), <usize>r.byteLength);
    tree.advance();
  }
}

/** The dedup table (dedup.ts) as `u32 sectionBytes, table`; since format version 2. */
function writeDedupSection(): void {
  let lenAt = reserveRaw(4) - outputPtr;
  let start = outputLen;
  writeDedup();
  store<u32>(outputPtr + lenAt, <u32>(outputLen - start));
}

/** Reads the section `writeDedupSection` wrote (a version 1 snapshot has none: empty). */
function readDedupSection(rd: Reader, formatVersion: u32): DedupTable | null {
  if (formatVersion == 1) return new DedupTable();
  let p = rd.bytes(<u32>i32.MAX_VALUE, 'dedup section');
  if (rd.failed) return null;
  let section = new Reader(p, <usize>rd.lastLen);
  let table = readDedup(section);
  return table != null && section.pos == section.end ? table : null;
}

/** -1 (unlimited) or a safe non-negative integer. */
function readLimit(rd: Reader): i64 {
  let v = rd.i64();
  if (v < -1 || v > SAFE_INTEGER_MAX) rd.fail('bad quota limit');
  return v;
}

export function readQuota(rd: Reader): Quota {
  let q = new Quota();
  let enabled = rd.u8();
  if (enabled > 1) rd.fail('bad enabled');
  q.enabled = enabled == 1;
  q.maxRows = readLimit(rd);
  q.maxBytes = readLimit(rd);
  q.maxReadsPerSec = readLimit(rd);
  q.maxWritesPerSec = readLimit(rd);
  return q;
}

function readTenants(rd: Reader): Array<Tenant> {
  let out = new Array<Tenant>();
  let count = rd.u32();
  for (let i: u32 = 0; i < count && !rd.failed; i++) {
    let p = rd.bytes(<u32>TENANT_BYTES_MAX, 'tenant');
    if (rd.failed) break;
    let t = new Tenant(String.UTF8.decodeUnsafe(p, rd.lastLen));
    let has = rd.u8();
    if (has > 1) rd.fail('bad quota flag');
    if (has == 1) t.quota = readQuota(rd);
    out.push(t);
  }
  return out;
}

/** Checks one row buffer of a snapshot against everything the state promises. */
function rowOk(r: Row, tenantCount: i32, version: i64, time: i64, prev: Row | null): bool {
  if (r.byteLength < ROW_HEADER_BYTES) return false;
  let kLen = rowKeyLen(r);
  if (kLen < 6 || kLen > r.byteLength - ROW_HEADER_BYTES || rowValueLen(r) < 1) return false;
  if (rowDead(r)) return false;
  let v = rowVersion(r);
  if (v < 1 || v > version) return false;
  let e = rowExpiresAt(r);
  if (e != EXPIRES_NEVER && (e < 0 || e > SAFE_INTEGER_MAX)) return false;
  // Every write is stamped with an entry time, and entry times never pass lastTimeMs.
  if (rowUpdatedAt(r) < 0 || rowUpdatedAt(r) > time) return false;
  let tid = rowTenant(r);
  if (tid < 0 || tid >= tenantCount) return false;
  let k = rowKeyPtr(r);
  let i = 4;
  while (i < kLen && load<u8>(k + i) != 0) i++;
  if (i == 4 || i >= kLen - 1) return false;
  return prev == null || compareBytes(rowKeyPtr(prev), rowKeyLen(prev), k, kLen) < 0;
}

/** Replaces the whole state from snapshot bytes; returns an empty string or why not. */
export function readSnapshot(rd: Reader): string {
  if (rd.u32() != <u32>SNAPSHOT_MAGIC) return 'not a snapshot';
  let formatVersion = rd.u32();
  if (formatVersion != 1 && formatVersion != <u32>FORMAT_VERSION) {
    return 'unknown snapshot format';
  }
  let index = rd.i64(), time = rd.i64(), version = rd.i64();
  let p = rd.u8();
  if (index < 0 || index > SAFE_INTEGER_MAX || time < 0 || time > SAFE_INTEGER_MAX ||
    version < 0 || version > SAFE_INTEGER_MAX || p > 1) {
    return 'bad snapshot header';
  }
  let ts = readTenants(rd);
  let dedup = readDedupSection(rd, formatVersion);
  if (dedup == null) return rd.failed ? rd.why : 'bad dedup section';
  let count = rd.i64();
  if (rd.failed) return rd.why;
  if (count < 0 || count > <i64>(rd.end - rd.pos)) return 'bad row count';
  // Every row takes at least 4 + ROW_HEADER_BYTES bytes, which bounds count before sizing.
  if (count > <i64>((rd.end - rd.pos) / (4 + <usize>ROW_HEADER_BYTES))) return 'bad row count';
  let rows = new Array<Row>(<i32>count);
  let prev: Row | null = null;
  for (let i: i32 = 0; i < <i32>count; i++) {
    let at = rd.bytes(SNAPSHOT_ROW_BYTES_MAX, 'row');
    if (rd.failed) return rd.why;
    let r = changetype<Row>(__new(<usize>rd.lastLen, idof<ArrayBuffer>()));
    memory.copy(changetype<usize>(r), at, <usize>rd.lastLen);
    if (!rowOk(r, ts.length, version, time, prev)) return 'bad row';
    unchecked(rows[i] = r);
    prev = r;
  }
  if (rd.pos != rd.end) return 'trailing bytes';
  let t = new Tree();
  t.build(rows);
  resetState(t, ts, version, index, time, p == 1);
  installDedup(dedup);
  return '';
}

// ---- digest ----

const FNV_OFFSET: u64 = 0xcbf29ce484222325;
const FNV_PRIME: u64 = 0x100000001b3;

function fnvBytes(h: u64, p: usize, len: i32): u64 {
  for (let i = 0; i < len; i++) h = (h ^ <u64>load<u8>(p + i)) * FNV_PRIME;
  return h;
}

function fnvU64(h: u64, v: u64): u64 {
  for (let i = 0; i < 8; i++) h = (h ^ ((v >> (<u64>i * 8)) & 0xff)) * FNV_PRIME;
  return h;
}

function mix(z: u64): u64 {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9;
  z = (z ^ (z >> 27)) * 0x94d049bb133111eb;
  return z ^ (z >> 31);
}

function rowHash(r: Row): u64 {
  let t = unchecked(tenants[rowTenant(r)]);
  let h = fnvBytes(FNV_OFFSET, changetype<usize>(t.nameBytes), t.nameBytes.byteLength);
  h = (h ^ 0xff) * FNV_PRIME;
  h = fnvBytes(h, rowKeyPtr(r) + 4, rowKeyLen(r) - 4);
  h = (h ^ 0xff) * FNV_PRIME;
  h = fnvBytes(h, rowValuePtr(r), rowValueLen(r));
  h = fnvU64(h, <u64>rowVersion(r));
  let e = rowExpiresAt(r);
  h = fnvU64(h, e == EXPIRES_NEVER ? <u64>-1 : <u64>e);
  h = fnvU64(h, <u64>rowUpdatedAt(r));
  return mix(h);
}

function quotaHash(t: Tenant, q: Quota): u64 {
  let h = fnvBytes(FNV_OFFSET, changetype<usize>(t.nameBytes), t.nameBytes.byteLength);
  h = (h ^ 0xff) * FNV_PRIME;
  h = (h ^ (q.enabled ? 1 : 0)) * FNV_PRIME;
  h = fnvU64(h, <u64>q.maxRows);
  h = fnvU64(h, <u64>q.maxBytes);
  h = fnvU64(h, <u64>q.maxReadsPerSec);
  h = fnvU64(h, <u64>q.maxWritesPerSec);
  return mix(h);
}

export function writeDigest(): void {
  let rowSum: u64 = 0;
  tree.seekFirst();
  while (tree.curLeaf != null) {
    rowSum += rowHash(tree.current());
    tree.advance();
  }
  let quotaSum: u64 = 0;
  for (let i = 0; i < tenants.length; i++) {
    let t = unchecked(tenants[i]);
    if (t.quota != null) quotaSum += quotaHash(t, t.quota!);
  }
  let h = fnvU64(FNV_OFFSET, <u64>lastVersion);
  h = fnvU64(h, <u64>appliedIndex);
  h = fnvU64(h, <u64>lastTimeMs);
  h = fnvU64(h, paused ? 1 : 0);
  h = fnvU64(h, <u64>tree.count);
  h = fnvU64(h, rowSum);
  h = fnvU64(h, quotaSum);
  let at = reserveRaw(8);
  store<u64>(at, h);
}
