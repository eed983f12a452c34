/**
 * What snapshots written in slices (snapshot-out.ts) and restores fed in chunks
 * (snapshot-in.ts) share: the header, the quota layout and the checks every restored row
 * must pass; and the digest of the whole state. A snapshot is the header, the tenant table
 * (with quotas), the dedup section and every row in key order, each row as its raw buffer
 * (docs/codec.md, "Snapshot"). The digest does not depend on tenant ids or tree shape, only
 * on the logical state, so a plain model can compute it too.
 */
import { SNAPSHOT_MAGIC, FORMAT_VERSION, SAFE_INTEGER_MAX } from './abi';
import {
  Reader, putU8, putU32, putI64, putBytes, reserveRaw, outputLen, outputPtr,
} from './buffers';
import {
  Row, ROW_HEADER_BYTES, rowKeyPtr, rowKeyLen, rowVersion, rowExpiresAt, rowUpdatedAt,
  rowTenant, rowDead, rowValuePtr, rowValueLen, compareBytes, EXPIRES_NEVER,
} from './row';
import {
  tree, tenants, Tenant, Quota, lastVersion, appliedIndex, lastTimeMs, paused, rowDigestSum,
  quotaDigestSum, tenantQuotaHash,
} from './state';
import { digestOf, rowHash } from './digest';
import { writeDedupSection } from './dedup';
import { writeIdempotencySection } from './idempotency';

/** Largest row buffer a snapshot may hold: key + value bounds + header, with room. */
export const SNAPSHOT_ROW_BYTES_MAX: u32 = 4 * 1024 * 1024;
/** Bytes of the fixed header: magic, format, appliedIndex, lastTimeMs, lastVersion, paused. */
export const SNAPSHOT_HEADER_BYTES: i32 = 33;

function putQuota(q: Quota | null): void {
  putU8(q == null ? 0 : 1);
  if (q == null) return;
  putU8(q.enabled ? 1 : 0);
  putI64(q.maxRows);
  putI64(q.maxBytes);
  putI64(q.maxReadsPerSec);
  putI64(q.maxWritesPerSec);
}

/**
 * Writes everything before the rows to the output region, as the state is now: the header,
 * the tenant table, the dedup section (u32 length, content) and the row count.
 */
export function writeSnapshotHead(): void {
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
  let lengthAt = outputLen;
  putU32(0);
  writeDedupSection();
  store<u32>(outputPtr + lengthAt, <u32>(outputLen - lengthAt - 4));
  lengthAt = outputLen;
  putU32(0);
  writeIdempotencySection();
  store<u32>(outputPtr + lengthAt, <u32>(outputLen - lengthAt - 4));
  putI64(<i64>tree.count);
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

/** Checks one row buffer of a snapshot against everything the state promises. */
export function rowOk(r: Row, tenantCount: i32, version: i64, time: i64, prev: Row | null): bool {
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

// ---- digest ----

/** The digest from the header fields and the two wrapping sums (docs/codec.md, "Digest"). */
function putDigest(rowSum: u64, quotaSum: u64): void {
  let h = digestOf(lastVersion, appliedIndex, lastTimeMs, paused, <i64>tree.count, rowSum,
    quotaSum);
  let at = reserveRaw(8);
  store<u64>(at, h);
}

/** The digest from the sums the state keeps as it changes: O(1). */
export function writeDigest(): void {
  putDigest(rowDigestSum, quotaDigestSum);
}

/** The digest recounted from every row and quota (tests check it against `writeDigest`). */
export function writeDigestRecount(): void {
  let rowSum: u64 = 0;
  tree.seekFirst();
  while (tree.curLeaf != null) {
    let r = tree.current();
    rowSum += rowHash(unchecked(tenants[rowTenant(r)]).digestSeed, r);
    tree.advance();
  }
  let quotaSum: u64 = 0;
  for (let i = 0; i < tenants.length; i++) {
    let t = unchecked(tenants[i]);
    if (t.quota != null) quotaSum += tenantQuotaHash(t, t.quota!);
  }
  putDigest(rowSum, quotaSum);
}
