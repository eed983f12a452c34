/**
 * incr's arithmetic: current value (a stored JSON number, or 0 when absent or expired) plus
 * delta, admitted only within min/max (and only when delta itself is within them) and within
 * +-(2^53 - 1). Exact: small integers take an i64 fast path, anything else goes through the
 * decimal digits of decimal.ts, and both give the same canonical text.
 */
import { REASON_NONE, REASON_LIMIT, REASON_TYPE } from './abi';
import {
  Dec, parseDec, PARSE_OK, PARSE_NOT_NUMBER, cmpDec, addDec, beyondSafe, formatDec,
} from './decimal';

/** Integers of at most this many digits cannot overflow the fast path or pass 2^53 - 1. */
const FAST_DIGITS_MAX: i32 = 15;

export class IncrResult {
  reason: i32 = REASON_NONE;
  /** Canonical text of the new value when applied by the decimal path. */
  text: string = '';
  /** When >= 0: the fast path wrote the new value's text at `fastText`, this many bytes. */
  fastLen: i32 = -1;
}

/** Scratch for the fast path's digits: sign + 16 digits of |r| < 2^53 fit with room. */
const FAST_TEXT_BYTES: usize = 32;
export const fastText: usize = heap.alloc(FAST_TEXT_BYTES);

/** Writes v in decimal at fastText; returns the length. */
function writeInt(v: i64): i32 {
  let neg = v < 0;
  let u = neg ? -v : v;
  let len = 0;
  let t = u;
  do { len++; t /= 10; } while (t != 0);
  let total = len + (neg ? 1 : 0);
  let p = fastText + <usize>total;
  do {
    p--;
    store<u8>(p, <u8>(48 + <i32>(u % 10)));
    u /= 10;
  } while (u != 0);
  if (neg) store<u8>(fastText, 45);
  return total;
}

const NOT_SMALL: i64 = i64.MIN_VALUE;

/** The value of a plain small integer text, or NOT_SMALL. len < 0 means absent (0). */
function smallInt(p: usize, len: i32): i64 {
  if (len < 0) return 0;
  let i = 0;
  let neg = false;
  if (len > 0 && load<u8>(p) == 45) { neg = true; i = 1; }
  let digits = len - i;
  if (digits < 1 || digits > FAST_DIGITS_MAX) return NOT_SMALL;
  if (digits > 1 && load<u8>(p + i) == 48) return NOT_SMALL;
  let v: i64 = 0;
  for (; i < len; i++) {
    let c = <i32>load<u8>(p + i);
    if (c < 48 || c > 57) return NOT_SMALL;
    v = v * 10 + <i64>(c - 48);
  }
  return neg ? -v : v;
}

const scratchResult = new IncrResult();

/**
 * Decides one incr. cur/min/max with len < 0 are absent (cur absent counts as 0).
 * The returned object is reused by the next call.
 */
export function incrValue(
  curPtr: usize, curLen: i32, dPtr: usize, dLen: i32,
  minPtr: usize, minLen: i32, maxPtr: usize, maxLen: i32,
): IncrResult {
  let out = scratchResult;
  out.reason = REASON_NONE;
  out.text = '';
  out.fastLen = -1;
  let c = smallInt(curPtr, curLen), d = smallInt(dPtr, dLen);
  let lo = minLen < 0 ? 0 : smallInt(minPtr, minLen);
  let hi = maxLen < 0 ? 0 : smallInt(maxPtr, maxLen);
  if (c != NOT_SMALL && d != NOT_SMALL && lo != NOT_SMALL && hi != NOT_SMALL) {
    let r = c + d;
    let hasLo = minLen >= 0, hasHi = maxLen >= 0;
    if ((hasLo && (d < lo || r < lo)) || (hasHi && (d > hi || r > hi))) {
      out.reason = REASON_LIMIT;
    } else {
      out.fastLen = writeInt(r);
    }
    return out;
  }
  return incrSlow(out, curPtr, curLen, dPtr, dLen, minPtr, minLen, maxPtr, maxLen);
}

function incrSlow(
  out: IncrResult, curPtr: usize, curLen: i32, dPtr: usize, dLen: i32,
  minPtr: usize, minLen: i32, maxPtr: usize, maxLen: i32,
): IncrResult {
  let cur = new Dec();
  if (curLen >= 0) {
    let code = parseDec(curPtr, curLen, cur);
    if (code == PARSE_NOT_NUMBER) { out.reason = REASON_TYPE; return out; }
    if (code != PARSE_OK) { out.reason = REASON_LIMIT; return out; }
  }
  let delta = new Dec();
  if (parseDec(dPtr, dLen, delta) != PARSE_OK) { out.reason = REASON_LIMIT; return out; }
  let lo: Dec | null = null, hi: Dec | null = null;
  if (minLen >= 0) {
    lo = new Dec();
    if (parseDec(minPtr, minLen, lo) != PARSE_OK) { out.reason = REASON_LIMIT; return out; }
  }
  if (maxLen >= 0) {
    hi = new Dec();
    if (parseDec(maxPtr, maxLen, hi) != PARSE_OK) { out.reason = REASON_LIMIT; return out; }
  }
  if ((lo != null && cmpDec(delta, lo) < 0) || (hi != null && cmpDec(delta, hi) > 0)) {
    out.reason = REASON_LIMIT;
    return out;
  }
  let r = addDec(cur, delta);
  if ((lo != null && cmpDec(r, lo) < 0) || (hi != null && cmpDec(r, hi) > 0) || beyondSafe(r)) {
    out.reason = REASON_LIMIT;
    return out;
  }
  out.text = formatDec(r);
  return out;
}
