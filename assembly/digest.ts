/**
 * The hashes the state digest is made of (docs/codec.md, "Digest"): one per row and one per
 * quota row, each FNV-1a 64 then the splitmix64 finalizer. The state keeps their wrapping
 * sums as rows and quotas come and go (state.ts), so the digest is order-independent, does
 * not depend on tenant ids or tree shape, and costs O(1) to read. Pure: no state here.
 */
import {
  Row, rowKeyLen, rowValueLen, EXPIRES_NEVER, ROW_HEADER_BYTES, ROW_VERSION_AT, ROW_EXPIRES_AT,
  ROW_UPDATED_AT,
} from './row';

export const FNV_OFFSET: u64 = 0xcbf29ce484222325;
const FNV_PRIME: u64 = 0x100000001b3;

function fnvBytes(h: u64, p: usize, len: i32): u64 {
  for (let i = 0; i < len; i++) h = (h ^ <u64>load<u8>(p + i)) * FNV_PRIME;
  return h;
}

/**
 * FNV-1a over 8-byte little-endian words, then the tail byte by byte: a row's bytes cost an
 * eighth of the multiplies (the digest is kept on every write). Each step is a bijection of
 * the state, and `mix` spreads the high bits at the end.
 */
function fnvWords(h: u64, p: usize, len: i32): u64 {
  let i = 0;
  for (; i + 8 <= len; i += 8) h = (h ^ load<u64>(p + <usize>i)) * FNV_PRIME;
  for (; i < len; i++) h = (h ^ <u64>load<u8>(p + <usize>i)) * FNV_PRIME;
  return h;
}

export function fnvU64(h: u64, v: u64): u64 {
  for (let i = 0; i < 8; i++) h = (h ^ ((v >> (<u64>i * 8)) & 0xff)) * FNV_PRIME;
  return h;
}

function mix(z: u64): u64 {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9;
  z = (z ^ (z >> 27)) * 0x94d049bb133111eb;
  return z ^ (z >> 31);
}

/**
 * FNV-1a over 8-byte little-endian words, then the 1 to 7 bytes left as one more word (the
 * bytes little-endian, their count in the top byte, so "a" and "a\0" differ): a row's key
 * and value cost one multiply per 8 bytes and at most one more.
 */
function fnvPacked(h: u64, p: usize, len: i32): u64 {
  let i = 0;
  // Four words a turn, then one: the same chain of multiplies, with a quarter of the loop's
  // own compares, branches and interrupt checks (a 100-byte value is twelve words).
  for (; i + 32 <= len; i += 32) {
    let q = p + <usize>i;
    h = (h ^ load<u64>(q)) * FNV_PRIME;
    h = (h ^ load<u64>(q, 8)) * FNV_PRIME;
    h = (h ^ load<u64>(q, 16)) * FNV_PRIME;
    h = (h ^ load<u64>(q, 24)) * FNV_PRIME;
  }
  for (; i + 8 <= len; i += 8) h = (h ^ load<u64>(p + <usize>i)) * FNV_PRIME;
  let tail = len - i;
  if (tail == 0) return h;
  let w: u64;
  if (len >= 8) {
    // The last 8 bytes of the range hold the tail in their top `tail` bytes: one load and a
    // shift give the word the byte loop below builds (a row's key and value are hashed on
    // every write, and the loop was a sixth of a hash's instructions).
    w = load<u64>(p + <usize>(len - 8)) >> (<u64>(8 - tail) * 8);
  } else {
    w = 0;
    for (let j = 0; j < tail; j++) w |= <u64>load<u8>(p + <usize>(i + j)) << (<u64>j * 8);
  }
  return (h ^ (w | (<u64>tail << 56))) * FNV_PRIME;
}

/**
 * The start of every row hash of one tenant: its name as UTF-8, then the separator. Kept
 * in the tenant (state.ts), so a row's hash never hashes the name again.
 */
export function rowHashSeed(tenantName: ArrayBuffer): u64 {
  let h = fnvWords(FNV_OFFSET, changetype<usize>(tenantName), tenantName.byteLength);
  return (h ^ 0xff) * FNV_PRIME;
}

/** A row's share of the digest; `seed` is its tenant's `rowHashSeed`. */
// @ts-ignore: decorator
@inline export function rowHash(seed: u64, r: Row): u64 {
  return rowHashAt(seed, changetype<usize>(r), rowKeyLen(r), rowValueLen(r));
}

/**
 * `rowHash` of the row at `p` (its header, then `keyLen` bytes of store key, then `valueLen`
 * of value). Plain integers rather than the row object: a function given a managed reference
 * keeps it in a shadow-stack frame it zeroes and stores to around every use, which was a
 * third of a row hash's instructions, and the digest hashes two rows a put.
 */
function rowHashAt(seed: u64, p: usize, keyLen: i32, valueLen: i32): u64 {
  let key = p + <usize>ROW_HEADER_BYTES;
  let h = fnvPacked(seed, key + 4, keyLen - 4);
  h = (h ^ 0xff) * FNV_PRIME;
  h = fnvPacked(h, key + <usize>keyLen, valueLen);
  h = (h ^ <u64>load<i64>(p, ROW_VERSION_AT)) * FNV_PRIME;
  let e = load<i64>(p, ROW_EXPIRES_AT);
  h = (h ^ (e == EXPIRES_NEVER ? <u64>-1 : <u64>e)) * FNV_PRIME;
  h = (h ^ <u64>load<i64>(p, ROW_UPDATED_AT)) * FNV_PRIME;
  return mix(h);
}

/** A quota row's share of the digest. */
export function quotaHash(tenantName: ArrayBuffer, enabled: bool, maxRows: i64, maxBytes: i64,
  maxReadsPerSec: i64, maxWritesPerSec: i64): u64 {
  let h = fnvBytes(FNV_OFFSET, changetype<usize>(tenantName), tenantName.byteLength);
  h = (h ^ 0xff) * FNV_PRIME;
  h = (h ^ (enabled ? 1 : 0)) * FNV_PRIME;
  h = fnvU64(h, <u64>maxRows);
  h = fnvU64(h, <u64>maxBytes);
  h = fnvU64(h, <u64>maxReadsPerSec);
  h = fnvU64(h, <u64>maxWritesPerSec);
  return mix(h);
}

/** The digest of a state from its counters and the two wrapping sums (docs/codec.md). */
export function digestOf(lastVersion: i64, appliedIndex: i64, lastTimeMs: i64, paused: bool,
  rowCount: i64, rowSum: u64, quotaSum: u64): u64 {
  let h = fnvU64(FNV_OFFSET, <u64>lastVersion);
  h = fnvU64(h, <u64>appliedIndex);
  h = fnvU64(h, <u64>lastTimeMs);
  h = fnvU64(h, paused ? 1 : 0);
  h = fnvU64(h, <u64>rowCount);
  h = fnvU64(h, rowSum);
  return fnvU64(h, quotaSum);
}
