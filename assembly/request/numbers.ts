/**
 * JSON number literals read exactly as written, never through a double: a literal (text the
 * syntax pass accepted) is viewed as sign, significant digits d1..dn (no leading or trailing
 * zeros) and an exponent E, its value being 0.d1..dn x 10^E. From that view: whether
 * JSON.parse would overflow it to Infinity (the only place a double still matters), its exact
 * integer value, and its canonical decimal text for incr. Reads the literal in place; holds
 * no memory of its own.
 */
import { OPERAND_FRACTION_DIGITS_MAX } from '../abi';

/**
 * 2^1024 - 2^970, the least value JSON.parse rounds to Infinity (halfway between the largest
 * double and 2^1024, where round-half-to-even goes up): 309 digits.
 */
const OVERFLOW_DIGITS = '17976931348623158079372897140530341507993413271003782693617377898' +
  '04449682927647509466490179775872070963302864166928879109465555478519404026306574886715058' +
  '20681908902000708383676273854845817711531764475730270069855571366959622842914819860834936' +
  '475292719074168444365510704342711559699508093042880177904174497792';
const OVERFLOW_EXPONENT: i64 = 309;
/** An exponent past this is saturated: no digit count can bring it back into any range. */
const EXPONENT_SATURATED: i64 = 1_000_000_000_000;
/** 10^16 > 2^53: an integer of more than 16 digits is beyond every bound read here. */
const INTEGER_DIGITS_MAX: i64 = 16;

/** The literal's sign. */
export let numNeg = false;
/** Count of significant digits; 0 for a zero. */
export let numDigits: i32 = 0;
/** The exponent E of 0.d1..dn x 10^E. */
export let numExp: i64 = 0;
/** Position of d1, and of the literal's `.` when d1 comes before it (else 0). */
let firstAt: usize = 0;
let dotAt: usize = 0;

function isDigit(c: u32): bool { return c - 0x30 < 10; }

/** The j-th significant digit (0-based). */
// @ts-ignore: decorator
@inline export function digitAt(j: i32): u32 {
  let q = firstAt + <usize>j;
  if (dotAt != 0 && q >= dotAt) q++;
  return <u32>load<u8>(q) - 0x30;
}

/** The exponent part at p (just after `e`/`E`), saturated. */
function exponentAt(p: usize, end: usize): i64 {
  let neg = false;
  let c = <u32>load<u8>(p);
  if (c == 0x2b || c == 0x2d) { neg = c == 0x2d; p++; }
  let v: i64 = 0;
  while (p < end && isDigit(<u32>load<u8>(p))) {
    if (v < EXPONENT_SATURATED) v = v * 10 + <i64>(<u32>load<u8>(p) - 0x30);
    p++;
  }
  return neg ? -v : v;
}

/** Reads the literal at p (ending by `end` at the latest) into the view above. */
export function readNumber(p: usize, end: usize): void {
  numNeg = <u32>load<u8>(p) == 0x2d;
  if (numNeg) p++;
  let intStart = p;
  while (p < end && isDigit(<u32>load<u8>(p))) p++;
  let intEnd = p;
  let fracStart = p, fracEnd = p;
  if (p < end && <u32>load<u8>(p) == 0x2e) {
    fracStart = p + 1;
    p = fracStart;
    while (p < end && isDigit(<u32>load<u8>(p))) p++;
    fracEnd = p;
  }
  let exp: i64 = 0;
  if (p < end && (<u32>load<u8>(p) | 0x20) == 0x65) exp = exponentAt(p + 1, end);
  // The first significant digit: in the integer part, else in the fraction.
  let first = intStart;
  while (first < intEnd && load<u8>(first) == 0x30) first++;
  dotAt = 0;
  if (first < intEnd) {
    numExp = <i64>(intEnd - first) + exp;
    if (fracEnd > fracStart) dotAt = intEnd;
  } else {
    first = fracStart;
    while (first < fracEnd && load<u8>(first) == 0x30) first++;
    if (first == fracEnd) { numDigits = 0; numExp = 0; firstAt = first; return; }
    numExp = exp - <i64>(first - fracStart);
  }
  firstAt = first;
  // The last significant digit: trailing zeros of the whole digit string do not count.
  let last = fracEnd > fracStart ? fracEnd : intEnd;
  while (true) {
    let c = load<u8>(last - 1);
    if (c != 0x30 && c != 0x2e) break;
    last--;
  }
  let count = <i32>(last - first);
  if (dotAt != 0 && last > dotAt) count--;
  numDigits = count;
}

/** True when JSON.parse would turn the literal just read into +-Infinity. */
export function numOverflows(): bool {
  if (numDigits == 0 || numExp < OVERFLOW_EXPONENT) return false;
  if (numExp > OVERFLOW_EXPONENT) return true;
  let n = max(numDigits, OVERFLOW_DIGITS.length);
  for (let j = 0; j < n; j++) {
    let a: u32 = j < numDigits ? digitAt(j) : 0;
    let b: u32 = j < OVERFLOW_DIGITS.length ? <u32>OVERFLOW_DIGITS.charCodeAt(j) - 0x30 : 0;
    if (a != b) return a > b;
  }
  return true; // exactly the threshold rounds (half to even) to Infinity
}

/** True when the literal just read is an integer (a zero included). */
export function numIsInteger(): bool {
  return numDigits == 0 || <i64>numDigits <= numExp;
}

/**
 * |value| of an integer literal just read when it has at most 16 digits, else -1 (beyond
 * 2^53 and every bound). Precondition: numIsInteger().
 */
export function numMagnitude(): i64 {
  if (numDigits == 0) return 0;
  if (numExp > INTEGER_DIGITS_MAX) return -1;
  let v: i64 = 0;
  for (let j = 0; j < <i32>numExp; j++) v = v * 10 + <i64>(j < numDigits ? digitAt(j) : 0);
  return v;
}

/**
 * floor(value) of the literal just read, clamped to 1..ceiling (getPrefix `limit`: never
 * refused, kv-routes.md).
 */
export function numClamp(ceiling: i32): i32 {
  if (numDigits == 0 || numNeg || numExp <= 0) return 1; // value < 1
  if (numExp > INTEGER_DIGITS_MAX) return ceiling;
  let v: i64 = 0;
  for (let j = 0; j < <i32>numExp; j++) v = v * 10 + <i64>(j < numDigits ? digitAt(j) : 0);
  return v > <i64>ceiling ? ceiling : <i32>v;
}

/** Digits after the point of the literal's canonical decimal text. */
export function numFractionDigits(): i64 {
  let f = <i64>numDigits - numExp;
  return f > 0 ? f : 0;
}

/** True when the canonical text of the literal just read is within the operand bound. */
export function numFitsOperand(): bool {
  return numFractionDigits() <= <i64>OPERAND_FRACTION_DIGITS_MAX;
}

/**
 * Writes the canonical decimal text (an optional `-`, integer digits, an optional fraction,
 * no exponent, no superfluous zeros, `0` for any zero) of the literal just read at dst;
 * returns its length. Preconditions: !numOverflows() and numFitsOperand().
 */
export function writeCanonical(dst: usize): i32 {
  let n: usize = 0;
  if (numDigits == 0) { store<u8>(dst, 0x30); return 1; }
  if (numNeg) store<u8>(dst + n++, 0x2d);
  let e = <i32>numExp;
  if (e <= 0) {
    store<u8>(dst + n++, 0x30);
    store<u8>(dst + n++, 0x2e);
    for (let j = 0; j < -e; j++) store<u8>(dst + n++, 0x30);
    for (let j = 0; j < numDigits; j++) store<u8>(dst + n++, <u8>(0x30 + digitAt(j)));
    return <i32>n;
  }
  for (let j = 0; j < e; j++) {
    store<u8>(dst + n++, <u8>(0x30 + (j < numDigits ? digitAt(j) : 0)));
  }
  if (numDigits > e) {
    store<u8>(dst + n++, 0x2e);
    for (let j = e; j < numDigits; j++) store<u8>(dst + n++, <u8>(0x30 + digitAt(j)));
  }
  return <i32>n;
}

/** Length writeCanonical would write. */
export function canonicalLength(): i32 {
  if (numDigits == 0) return 1;
  let e = <i32>numExp;
  let len = numNeg ? 1 : 0;
  if (e <= 0) return len + 2 - e + numDigits;
  return len + max(e, numDigits) + (numDigits > e ? 1 : 0);
}
