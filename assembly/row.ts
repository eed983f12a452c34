/**
 * One stored row as a single ArrayBuffer, so a key costs one heap object:
 *   [0]  version   i64
 *   [8]  expiresAt i64 (EXPIRES_NEVER for `forever`)
 *   [16] updatedAt i64
 *   [24] keyLen    u32 (bytes of the store key)
 *   [28] flags     u32 (ROW_DEAD, ROW_SUCCEEDED, ROW_HEIR below; never in a snapshot)
 *   [32] store key, then the value's compact JSON
 * The store key is tenantId (u32 big-endian) ++ namespace ++ 0x00 ++ user key, so byte order
 * groups a tenant's namespace together and orders its keys by their UTF-8 bytes (keys and
 * namespaces carry no NUL). Rows are immutable apart from their flags: a write makes a new
 * row. The flags are bookkeeping of the expiry heap (state.ts), not state: the digest and
 * snapshots leave them out.
 */

/** The row has left the tree. */
const ROW_DEAD: u32 = 1;
/**
 * An incr replaced the row keeping its expiry, and the new row (its heir) took no heap entry
 * of its own: this row's entry stands for it (state.ts, "expiry heap").
 */
const ROW_SUCCEEDED: u32 = 2;
/** The row has no heap entry of its own: an entry of a row it succeeded stands for it. */
const ROW_HEIR: u32 = 4;

export const ROW_HEADER_BYTES: i32 = 32;
/** Offsets of the header's fields, for code that reads a row by its address (digest.ts). */
export const ROW_VERSION_AT: usize = 0;
export const ROW_EXPIRES_AT: usize = 8;
export const ROW_UPDATED_AT: usize = 16;
/** Internal expiresAt of a `forever` row: sorts after every real time. */
export const EXPIRES_NEVER: i64 = i64.MAX_VALUE;

export type Row = ArrayBuffer;

// @ts-ignore: decorator
@inline export function rowVersion(r: Row): i64 {
  return load<i64>(changetype<usize>(r), ROW_VERSION_AT);
}
// @ts-ignore: decorator
@inline export function rowExpiresAt(r: Row): i64 {
  return load<i64>(changetype<usize>(r), ROW_EXPIRES_AT);
}
// @ts-ignore: decorator
@inline export function rowUpdatedAt(r: Row): i64 {
  return load<i64>(changetype<usize>(r), ROW_UPDATED_AT);
}
// @ts-ignore: decorator
@inline export function rowKeyLen(r: Row): i32 { return load<i32>(changetype<usize>(r), 24); }
// @ts-ignore: decorator
@inline function rowFlags(r: Row): u32 { return load<u32>(changetype<usize>(r), 28); }
// @ts-ignore: decorator
@inline function setRowFlag(r: Row, flag: u32, on: bool): void {
  let w = rowFlags(r);
  store<u32>(changetype<usize>(r), on ? w | flag : w & ~flag, 28);
}
// @ts-ignore: decorator
@inline export function rowDead(r: Row): bool { return (rowFlags(r) & ROW_DEAD) != 0; }
// @ts-ignore: decorator
@inline export function setRowDead(r: Row, dead: bool): void { setRowFlag(r, ROW_DEAD, dead); }
// @ts-ignore: decorator
@inline export function rowSucceeded(r: Row): bool {
  return (rowFlags(r) & ROW_SUCCEEDED) != 0;
}
// @ts-ignore: decorator
@inline export function setRowSucceeded(r: Row): void { setRowFlag(r, ROW_SUCCEEDED, true); }
// @ts-ignore: decorator
@inline export function rowHeir(r: Row): bool { return (rowFlags(r) & ROW_HEIR) != 0; }
// @ts-ignore: decorator
@inline export function setRowHeir(r: Row, heir: bool): void { setRowFlag(r, ROW_HEIR, heir); }
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
 * Memory a row costs beyond its buffer's capacity: the allocator's block and object headers,
 * its B+tree slot and hint, and its expiry-heap entry (measured by `npm run bench:machine`).
 */
export const ROW_OVERHEAD_BYTES: i64 = 64;

/** The runtime's object header inside an allocator block (gcInfo, gcInfo2, rtId, rtSize). */
const OBJECT_HEADER_BYTES: usize = 16;
/** Below this block payload the allocator's size classes are exact (16-byte steps). */
const EXACT_CLASS_BYTES_MAX: usize = 256;

/**
 * Bytes a row buffer of `rowBytes` is allocated with. The allocator (TLSF) serves a request
 * of 256 bytes or more only from the size classes above its own, so a freed block exactly
 * the size of a request never serves the next request of that size: rows overwritten in
 * place would leak memory until neighbours happen to merge. A row therefore takes a block
 * the size of the start of its class (at most 1/16 more), which any later row of that class
 * reuses; its byteLength stays `rowBytes`.
 */
export function rowCapacity(rowBytes: usize): usize {
  let payload = (OBJECT_HEADER_BYTES + rowBytes + 15) & ~<usize>15;
  if (payload >= EXACT_CLASS_BYTES_MAX) {
    let step = <usize>1 << (<usize>(31 - clz<u32>(<u32>payload)) - 4);
    payload = (payload + step - 1) & ~(step - 1);
  }
  return payload - OBJECT_HEADER_BYTES;
}

/** A zeroed row buffer of `rowBytes`, allocated as `rowCapacity` says. */
export function allocRow(rowBytes: usize): Row {
  let p = __new(rowCapacity(rowBytes), idof<ArrayBuffer>());
  // The block is large enough: the runtime only records the length (no move, no copy).
  let same = __renew(p, rowBytes);
  assert(same == p, 'row capacity too small');
  return changetype<Row>(p);
}

/**
 * What a row of this store key and value takes in memory, as the state's byte budget counts
 * it: used both to keep the running total and to estimate a call's growth before the log.
 */
// @ts-ignore: decorator
@inline export function rowFootprint(storeKeyLen: i32, valueLen: i32): i64 {
  return <i64>rowCapacity(<usize>(ROW_HEADER_BYTES + storeKeyLen + valueLen)) +
    ROW_OVERHEAD_BYTES;
}

/** Builds a row from a store key and a value, both given as address and length. */
export function newRow(
  keyPtr: usize, keyLen: i32, valuePtr: usize, valueLen: i32,
  version: i64, expiresAt: i64, updatedAt: i64,
): Row {
  let r = allocRow(<usize>(ROW_HEADER_BYTES + keyLen + valueLen));
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
