/**
 * One stored row as a single ArrayBuffer, so a key costs one heap object:
 *   [0]  version   i64
 *   [8]  expiresAt i64 (EXPIRES_NEVER for `forever`)
 *   [16] updatedAt i64
 *   [24] keyLen    u32 (bytes of the store key)
 *   [28] dead      u32 (1 once the row left the tree; a row is never changed otherwise)
 *   [32] store key, then the value's compact JSON
 * The store key is tenantId (u32 big-endian) ++ namespace ++ 0x00 ++ user key, so byte order
 * groups a tenant's namespace together and orders its keys by their UTF-8 bytes (keys and
 * namespaces carry no NUL). Rows are immutable apart from `dead`: a write makes a new row.
 */

export const ROW_HEADER_BYTES: i32 = 32;
/** Internal expiresAt of a `forever` row: sorts after every real time. */
export const EXPIRES_NEVER: i64 = i64.MAX_VALUE;

export type Row = ArrayBuffer;

// @ts-ignore: decorator
@inline export function rowVersion(r: Row): i64 { return load<i64>(changetype<usize>(r)); }
// @ts-ignore: decorator
@inline export function rowExpiresAt(r: Row): i64 { return load<i64>(changetype<usize>(r), 8); }
// @ts-ignore: decorator
@inline export function rowUpdatedAt(r: Row): i64 { return load<i64>(changetype<usize>(r), 16); }
// @ts-ignore: decorator
@inline export function rowKeyLen(r: Row): i32 { return load<i32>(changetype<usize>(r), 24); }
// @ts-ignore: decorator
@inline export function rowDead(r: Row): bool { return load<u32>(changetype<usize>(r), 28) != 0; }
// @ts-ignore: decorator
@inline export function setRowDead(r: Row, dead: bool): void {
  store<u32>(changetype<usize>(r), dead ? 1 : 0, 28);
}
// @ts-ignore: decorator
@inline export function rowKeyPtr(r: Row): usize {
  return changetype<usize>(r) + <usize>ROW_HEADER_BYTES;
}
// @ts-ignore: decorator
@inline export function rowValuePtr(r: Row): usize { return rowKeyPtr(r) + <usize>rowKeyLen(r); }
// @ts-ignore: decorator
@inline export function rowValueLen(r: Row): i32 {
  return r.byteLength - ROW_HEADER_BYTES - rowKeyLen(r);
}
/** The tenant id is the first four bytes of the store key, big-endian. */
// @ts-ignore: decorator
@inline export function rowTenant(r: Row): i32 { return <i32>bswap(load<u32>(rowKeyPtr(r))); }

/**
 * Memory a row costs beyond its own buffer: the allocator's block and object headers, its
 * B+tree slot and hint, and its expiry-heap entry (measured by `npm run bench:machine`).
 */
export const ROW_OVERHEAD_BYTES: i64 = 64;

/**
 * What a row of this store key and value takes in memory, as the state's byte budget counts
 * it: used both to keep the running total and to estimate a call's growth before the log.
 */
// @ts-ignore: decorator
@inline export function rowFootprint(storeKeyLen: i32, valueLen: i32): i64 {
  return <i64>ROW_HEADER_BYTES + <i64>storeKeyLen + <i64>valueLen + ROW_OVERHEAD_BYTES;
}

/** Builds a row from a store key and a value, both given as address and length. */
export function newRow(
  keyPtr: usize, keyLen: i32, valuePtr: usize, valueLen: i32,
  version: i64, expiresAt: i64, updatedAt: i64,
): Row {
  // Every byte is written below, so skip the zero fill `new ArrayBuffer` would do.
  let r = changetype<Row>(__new(<usize>(ROW_HEADER_BYTES + keyLen + valueLen),
    idof<ArrayBuffer>()));
  let p = changetype<usize>(r);
  store<i64>(p, version);
  store<i64>(p, expiresAt, 8);
  store<i64>(p, updatedAt, 16);
  store<i32>(p, keyLen, 24);
  store<u32>(p, 0, 28);
  memory.copy(p + <usize>ROW_HEADER_BYTES, keyPtr, <usize>keyLen);
  memory.copy(p + <usize>ROW_HEADER_BYTES + <usize>keyLen, valuePtr, <usize>valueLen);
  return r;
}

/** Byte-order comparison of two byte strings (shorter prefix sorts first). */
export function compareBytes(a: usize, aLen: i32, b: usize, bLen: i32): i32 {
  let n = aLen < bLen ? aLen : bLen;
  let c = memory.compare(a, b, <usize>n);
  if (c != 0) return c;
  return aLen - bLen;
}

/** Is the live-ness of a row at `timeMs`: expired means expiresAt <= time. */
// @ts-ignore: decorator
@inline export function rowLive(r: Row, timeMs: i64): bool { return rowExpiresAt(r) > timeMs; }
