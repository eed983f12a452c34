/**
 * A put's value as it is stored: the client's JSON text with insignificant whitespace
 * removed and everything else kept as written (number spellings, string escapes, member
 * order, duplicate members), except that invalid UTF-8 inside strings becomes U+FFFD, as the
 * host's decoding of the body always did. One linear pass with a depth counter, no recursion.
 * The text is measured in full (the 64 KiB ceiling applies to it) but written only up to a
 * cap, so a 60 MB value costs a scan, not a copy.
 */
import { skipWs, plainRunAscii, scalarEnd, utf8Sequence, QUOTE, BACKSLASH } from './scan';
import { readNumber, numOverflows } from './numbers';

/** Set by compactValue: a number in the value would be Infinity for JSON.parse. */
export let valueOverflows = false;

let n: i32 = 0;
let limit: i32 = 0;
let out: usize = 0;

function emitRun(p: usize, len: usize): void {
  let room = n < limit ? <usize>(limit - n) : 0;
  memory.copy(out + <usize>n, p, len < room ? len : room);
  n += <i32>len;
}

// @ts-ignore: decorator
@inline function emit(b: u32): void {
  if (n < limit) store<u8>(out + <usize>n, <u8>b);
  n++;
}

/** Copies the string at p (escapes kept, invalid UTF-8 replaced); returns the position after. */
function copyString(p: usize, end: usize): usize {
  emit(QUOTE);
  p++;
  while (true) {
    let q = plainRunAscii(p, end);
    if (q > p) emitRun(p, q - p);
    p = q;
    let c = <u32>load<u8>(p);
    if (c == QUOTE) { emit(QUOTE); return p + 1; }
    if (c == BACKSLASH) { emitRun(p, 2); p += 2; continue; }
    let len = utf8Sequence(p, end);
    if (len > 0) {
      emitRun(p, <usize>len);
      p += <usize>len;
    } else {
      emit(0xef); emit(0xbf); emit(0xbd);
      p += <usize>(-len);
    }
  }
}

/** Copies the number or literal at p, checking a number for overflow; returns its end. */
function copyScalar(p: usize, end: usize): usize {
  let q = scalarEnd(p, end);
  let c = <u32>load<u8>(p);
  // A double holds up to ~1.8e308: a literal needs an exponent or 309 digits to reach it.
  if ((c == 0x2d || c - 0x30 < 10) && (q - p >= 309 || hasExponent(p, q))) {
    readNumber(p, q);
    if (numOverflows()) valueOverflows = true;
  }
  emitRun(p, q - p);
  return q;
}

function hasExponent(p: usize, q: usize): bool {
  for (; p < q; p++) if ((<u32>load<u8>(p) | 0x20) == 0x65) return true;
  return false;
}

/**
 * Writes the compact text of the value at p (accepted text) to dst, at most `cap` bytes;
 * returns its full length and sets valueOverflows and valueAfter.
 */
export function compactValue(p: usize, end: usize, dst: usize, cap: i32): i32 {
  n = 0;
  limit = cap;
  out = dst;
  valueOverflows = false;
  let depth = 0;
  do {
    let c = <u32>load<u8>(p);
    if (c == QUOTE) {
      p = copyString(p, end);
    } else if (c == 0x7b || c == 0x5b) {
      emit(c);
      depth++;
      p++;
    } else if (c == 0x7d || c == 0x5d) {
      emit(c);
      depth--;
      p++;
    } else if (c == 0x2c || c == 0x3a) {
      emit(c);
      p++;
    } else {
      p = copyScalar(p, end);
    }
    if (depth > 0) p = skipWs(p, end);
  } while (depth > 0);
  valueAfter = p;
  return n;
}

/** Set by compactValue: the position just after the value. */
export let valueAfter: usize = 0;
