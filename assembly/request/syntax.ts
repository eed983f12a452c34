/**
 * Pass one over a request body: is it JSON at all (RFC 8259, as JSON.parse reads it after
 * Node decoded the bytes as UTF-8), and how deep does it nest. Iterative, with an explicit
 * stack of one bit per open container (object or array), so no body can exhaust the wasm
 * stack; the stack grows with the body, at most one bit per body byte.
 *
 * A syntax error anywhere wins over depth: JSON.parse fails on the whole text before any
 * bound is looked at. Invalid UTF-8 is never a syntax error inside a string (it decodes to
 * U+FFFD) and always one outside (U+FFFD is not JSON), and neither a quote nor a backslash
 * nor a control byte is ever part of a multi-byte sequence, so bytes show the same structure
 * as the decoded text.
 */
import { JSON_DEPTH_MAX } from '../abi';
import { skipWs, plainRunStrict, hexValue, QUOTE, BACKSLASH } from './scan';
import { resetSpans, noteSpan } from './spans';

export const SYNTAX_OK: i32 = 0;
export const SYNTAX_ERROR: i32 = 1;
/** Well-formed, but nested deeper than JSON_DEPTH_MAX. */
export const SYNTAX_TOO_DEEP: i32 = 2;

/** Stack bits available before the first growth (depths beyond it are rare). */
const STACK_BITS_INITIAL: usize = 4096;
let stackBits: usize = heap.alloc(STACK_BITS_INITIAL >> 3);
let stackCap: usize = STACK_BITS_INITIAL;

/** Failure marker for positions: the input region never sits at address 0. */
const FAIL: usize = 0;

/** Records the container opened at `depth` (1-based): object or array. */
function push(depth: usize, isObject: bool): void {
  if (depth >= stackCap) {
    let cap = stackCap << 1;
    stackBits = heap.realloc(stackBits, cap >> 3);
    stackCap = cap;
  }
  let at = stackBits + (depth >> 3);
  let bit = <u8>(1 << <u8>(depth & 7));
  let b = load<u8>(at);
  store<u8>(at, isObject ? b | bit : b & ~bit);
}

function isObjectAt(depth: usize): bool {
  return (load<u8>(stackBits + (depth >> 3)) & <u8>(1 << <u8>(depth & 7))) != 0;
}

/** After the opening quote at p: just past the closing quote, or FAIL. */
function stringAfter(p: usize, end: usize): usize {
  p++;
  while (true) {
    p = plainRunStrict(p, end);
    if (p >= end) return FAIL;
    let c = <u32>load<u8>(p);
    if (c == QUOTE) return p + 1;
    if (c != BACKSLASH) return FAIL; // a raw control byte
    if (p + 1 >= end) return FAIL;
    let e = <u32>load<u8>(p + 1);
    if (e == 0x75) { // \uXXXX
      if (p + 6 > end) return FAIL;
      for (let i: usize = 2; i < 6; i++) if (hexValue(<u32>load<u8>(p + i)) < 0) return FAIL;
      p += 6;
    } else if (e == QUOTE || e == BACKSLASH || e == 0x2f || e == 0x62 || e == 0x66 ||
      e == 0x6e || e == 0x72 || e == 0x74) {
      p += 2;
    } else return FAIL;
  }
}

function digitsAfter(p: usize, end: usize): usize {
  while (p < end && <u32>load<u8>(p) - 0x30 < 10) p++;
  return p;
}

/** -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? at p: the position after it, or FAIL. */
function numberAfter(p: usize, end: usize): usize {
  if (<u32>load<u8>(p) == 0x2d) p++;
  if (p >= end) return FAIL;
  let c = <u32>load<u8>(p);
  if (c == 0x30) p++;
  else if (c - 0x31 < 9) p = digitsAfter(p + 1, end);
  else return FAIL;
  if (p < end && <u32>load<u8>(p) == 0x2e) {
    let q = digitsAfter(p + 1, end);
    if (q == p + 1) return FAIL;
    p = q;
  }
  if (p < end && (<u32>load<u8>(p) | 0x20) == 0x65) {
    p++;
    if (p < end && (<u32>load<u8>(p) == 0x2b || <u32>load<u8>(p) == 0x2d)) p++;
    let q = digitsAfter(p, end);
    if (q == p) return FAIL;
    p = q;
  }
  return p;
}

/** `true`, `null`, `fals` as little-endian u32 words. */
const TRUE_WORD: u32 = 0x65757274;
const NULL_WORD: u32 = 0x6c6c756e;
const FALS_WORD: u32 = 0x736c6166;

/** The literal whose first four bytes are `word` (and then `tail`, if not 0) at p. */
function literalAfter(p: usize, end: usize, word: u32, tail: u32): usize {
  let n: usize = tail != 0 ? 5 : 4;
  if (end - p < n || load<u32>(p) != word) return FAIL;
  if (tail != 0 && <u32>load<u8>(p + 4) != tail) return FAIL;
  return p + n;
}

/** A string, number or literal at p: the position after it, or FAIL. */
function scalarAfter(p: usize, end: usize): usize {
  let c = <u32>load<u8>(p);
  if (c == QUOTE) return stringAfter(p, end);
  if (c == 0x74) return literalAfter(p, end, TRUE_WORD, 0);
  if (c == 0x66) return literalAfter(p, end, FALS_WORD, 0x65);
  if (c == 0x6e) return literalAfter(p, end, NULL_WORD, 0);
  return numberAfter(p, end);
}

/** At p (whitespace skipped): a member name, a colon, and whitespace; or FAIL. */
function memberHead(p: usize, end: usize): usize {
  if (p >= end || <u32>load<u8>(p) != QUOTE) return FAIL;
  p = stringAfter(p, end);
  if (p == FAIL) return FAIL;
  p = skipWs(p, end);
  if (p >= end || <u32>load<u8>(p) != 0x3a) return FAIL;
  return skipWs(p + 1, end);
}

/** Depth reached by the current pass and whether it ever passed JSON_DEPTH_MAX. */
let depth: usize = 0;
let tooDeep = false;
/** Where the open container at depth 2 (a member or element of the root) starts. */
let openAtDepth2: usize = 0;

/**
 * A value starts at p. Opens containers (and their first member's head) until a scalar or
 * an empty container completes a value; returns the position after it, or FAIL.
 */
function valueAfter(p: usize, end: usize): usize {
  while (true) {
    if (p >= end) return FAIL;
    let c = <u32>load<u8>(p);
    if (c != 0x7b && c != 0x5b) return scalarAfter(p, end);
    depth++;
    if (depth > <usize>JSON_DEPTH_MAX) tooDeep = true;
    if (depth == 2) openAtDepth2 = p;
    push(depth, c == 0x7b);
    let open = p;
    p = skipWs(p + 1, end);
    if (p < end && <u32>load<u8>(p) == c + 2) { // `}` is `{` + 2, `]` is `[` + 2
      if (depth == 2) noteSpan(open, p + 1);
      depth--;
      return p + 1;
    }
    if (c == 0x7b) {
      p = memberHead(p, end);
      if (p == FAIL) return FAIL;
    }
  }
}

/** Checks the whole text [start, end): SYNTAX_OK, SYNTAX_ERROR or SYNTAX_TOO_DEEP. */
export function checkSyntax(start: usize, end: usize): i32 {
  depth = 0;
  tooDeep = false;
  resetSpans(start, end);
  let p = valueAfter(skipWs(start, end), end);
  while (p != FAIL) {
    p = skipWs(p, end);
    if (depth == 0) {
      if (p != end) return SYNTAX_ERROR;
      return tooDeep ? SYNTAX_TOO_DEEP : SYNTAX_OK;
    }
    if (p >= end) return SYNTAX_ERROR;
    let c = <u32>load<u8>(p);
    let inObject = isObjectAt(depth);
    if (c == 0x2c) {
      p = skipWs(p + 1, end);
      if (inObject) p = memberHead(p, end);
      if (p != FAIL) p = valueAfter(p, end);
    } else if (c == (inObject ? <u32>0x7d : <u32>0x5d)) {
      if (depth == 2) noteSpan(openAtDepth2, p + 1);
      depth--;
      p++;
    } else return SYNTAX_ERROR;
  }
  return SYNTAX_ERROR;
}
