/**
 * Exact decimal arithmetic for incr, without floats: a number is a sign, a coefficient as
 * decimal digits and a scale (digits after the point). Parses any JSON number form (sign,
 * fraction, exponent); writes the canonical form (no exponent, no superfluous zeros, no -0).
 * A number whose exponent is beyond DECIMAL_EXPONENT_ABS_MAX is refused (the caller reports
 * `limit`), which bounds the digits any one operation touches.
 */
import { DECIMAL_EXPONENT_ABS_MAX } from './abi';

export class Dec {
  neg: bool = false;
  /** Coefficient digits, least significant first, no leading (high) zeros; empty = zero. */
  d: Array<u8> = new Array<u8>();
  /** Digits after the decimal point. */
  scale: i32 = 0;
}

function isDigit(c: i32): bool { return c >= 48 && c <= 57; }

export const PARSE_OK: i32 = 0;
export const PARSE_NOT_NUMBER: i32 = 1;
export const PARSE_OUT_OF_RANGE: i32 = 2;

/** Runs of digits starting at i; returns the index after them. */
function digitsFrom(p: usize, len: i32, i: i32): i32 {
  while (i < len && isDigit(load<u8>(p + <usize>i))) i++;
  return i;
}

/** True when [p, p+len) is a JSON number (the grammar parseDec accepts), without parsing. */
export function isJsonNumber(p: usize, len: i32): bool {
  let i = len > 0 && load<u8>(p) == 45 ? 1 : 0;
  let intEnd = digitsFrom(p, len, i);
  if (intEnd == i || (intEnd - i > 1 && load<u8>(p + <usize>i) == 48)) return false;
  i = intEnd;
  if (i < len && load<u8>(p + <usize>i) == 46) {
    let end = digitsFrom(p, len, i + 1);
    if (end == i + 1) return false;
    i = end;
  }
  if (i < len && (load<u8>(p + <usize>i) | 32) == 101) {
    i++;
    if (i < len && (load<u8>(p + <usize>i) == 43 || load<u8>(p + <usize>i) == 45)) i++;
    let end = digitsFrom(p, len, i);
    if (end == i) return false;
    i = end;
  }
  return i == len;
}

/** Parses JSON number text at [p, p+len) into out; returns a PARSE_* code. */
export function parseDec(p: usize, len: i32, out: Dec): i32 {
  let i = 0;
  out.neg = false;
  out.d.length = 0;
  out.scale = 0;
  if (len == 0) return PARSE_NOT_NUMBER;
  if (load<u8>(p) == 45) { out.neg = true; i = 1; }
  let intStart = i;
  while (i < len && isDigit(load<u8>(p + i))) i++;
  let intEnd = i;
  if (intEnd == intStart) return PARSE_NOT_NUMBER;
  if (intEnd - intStart > 1 && load<u8>(p + intStart) == 48) return PARSE_NOT_NUMBER;
  let fracStart = intEnd, fracEnd = intEnd;
  if (i < len && load<u8>(p + i) == 46) {
    i++;
    fracStart = i;
    while (i < len && isDigit(load<u8>(p + i))) i++;
    fracEnd = i;
    if (fracEnd == fracStart) return PARSE_NOT_NUMBER;
  }
  let exp: i32 = 0;
  if (i < len && (load<u8>(p + i) == 101 || load<u8>(p + i) == 69)) {
    i++;
    let expNeg = false;
    if (i < len && (load<u8>(p + i) == 43 || load<u8>(p + i) == 45)) {
      expNeg = load<u8>(p + i) == 45;
      i++;
    }
    let expStart = i;
    let big = false;
    while (i < len && isDigit(load<u8>(p + i))) {
      if (exp > DECIMAL_EXPONENT_ABS_MAX) big = true;
      else exp = exp * 10 + (<i32>load<u8>(p + i) - 48);
      i++;
    }
    if (i == expStart) return PARSE_NOT_NUMBER;
    if (i != len) return PARSE_NOT_NUMBER;
    if (big || exp > DECIMAL_EXPONENT_ABS_MAX) return PARSE_OUT_OF_RANGE;
    if (expNeg) exp = -exp;
  }
  if (i != len) return PARSE_NOT_NUMBER;
  // Digits, least significant first: fraction (from its end), then the integer part.
  for (let j = fracEnd - 1; j >= fracStart; j--) out.d.push(<u8>(load<u8>(p + j) - 48));
  for (let j = intEnd - 1; j >= intStart; j--) out.d.push(<u8>(load<u8>(p + j) - 48));
  let scale = (fracEnd - fracStart) - exp;
  if (scale < 0) {
    for (let j = 0; j < -scale; j++) out.d.unshift(0);
    scale = 0;
  }
  out.scale = scale;
  normalize(out);
  return PARSE_OK;
}

/** Drops high zeros and low fraction zeros; zero becomes non-negative with scale 0. */
function normalize(x: Dec): void {
  let d = x.d;
  let lowZeros = 0;
  while (lowZeros < x.scale && lowZeros < d.length && d[lowZeros] == 0) lowZeros++;
  if (lowZeros > 0) {
    x.d = d.slice(lowZeros);
    x.scale -= lowZeros;
    d = x.d;
  }
  while (d.length > 0 && d[d.length - 1] == 0) d.pop();
  if (d.length == 0) { x.neg = false; x.scale = 0; }
  // A scale larger than the digits means leading fraction zeros: keep them implicit.
}

/** Digit of x at decimal position pos, where position 0 is 10^-scaleAll. */
// @ts-ignore: decorator
@inline function digitAt(x: Dec, pos: i32, scaleAll: i32): i32 {
  let i = pos - (scaleAll - x.scale);
  return i >= 0 && i < x.d.length ? <i32>unchecked(x.d[i]) : 0;
}

function span(x: Dec, scaleAll: i32): i32 { return x.d.length + (scaleAll - x.scale); }

/** Compares |a| and |b|. */
function cmpMag(a: Dec, b: Dec): i32 {
  let s = max(a.scale, b.scale);
  let n = max(span(a, s), span(b, s));
  for (let pos = n - 1; pos >= 0; pos--) {
    let x = digitAt(a, pos, s), y = digitAt(b, pos, s);
    if (x != y) return x < y ? -1 : 1;
  }
  return 0;
}

export function cmpDec(a: Dec, b: Dec): i32 {
  if (a.neg != b.neg) {
    if (a.d.length == 0 && b.d.length == 0) return 0;
    return a.neg ? -1 : 1;
  }
  let m = cmpMag(a, b);
  return a.neg ? -m : m;
}

/** a + b, exactly. */
export function addDec(a: Dec, b: Dec): Dec {
  let s = max(a.scale, b.scale);
  let n = max(span(a, s), span(b, s)) + 1;
  let out = new Dec();
  out.scale = s;
  if (a.neg == b.neg) {
    out.neg = a.neg;
    let carry = 0;
    for (let pos = 0; pos < n; pos++) {
      let v = digitAt(a, pos, s) + digitAt(b, pos, s) + carry;
      carry = v >= 10 ? 1 : 0;
      out.d.push(<u8>(v - carry * 10));
    }
  } else {
    let big = cmpMag(a, b) >= 0 ? a : b;
    let small = big === a ? b : a;
    out.neg = big.neg;
    let borrow = 0;
    for (let pos = 0; pos < n; pos++) {
      let v = digitAt(big, pos, s) - digitAt(small, pos, s) - borrow;
      borrow = v < 0 ? 1 : 0;
      out.d.push(<u8>(v + borrow * 10));
    }
  }
  normalize(out);
  return out;
}

/** 2^53 - 1 as digits, least significant first. */
const SAFE_MAX_TEXT = '9007199254740991';

/** True when |x| > 2^53 - 1. */
export function beyondSafe(x: Dec): bool {
  let limit = new Dec();
  for (let j = SAFE_MAX_TEXT.length - 1; j >= 0; j--) {
    limit.d.push(<u8>(SAFE_MAX_TEXT.charCodeAt(j) - 48));
  }
  return cmpMag(x, limit) > 0;
}

/** Canonical text: "-"? integer digits ("0" if none), then "." and fraction digits if any. */
export function formatDec(x: Dec): string {
  let parts = new Array<string>();
  if (x.neg && x.d.length > 0) parts.push('-');
  let intDigits = x.d.length - x.scale;
  if (intDigits <= 0) parts.push('0');
  let chars = new Array<i32>();
  for (let pos = x.d.length - 1; pos >= x.scale; pos--) chars.push(48 + <i32>x.d[pos]);
  if (x.scale > 0) {
    chars.push(46);
    for (let pos = x.scale - 1; pos >= 0; pos--) {
      chars.push(pos < x.d.length ? 48 + <i32>x.d[pos] : 48);
    }
  }
  parts.push(String.fromCharCodes(chars));
  return parts.join('');
}
