/**
 * Decodes a JSON string (text the syntax pass accepted) into the UTF-8 bytes of the string
 * JSON.parse would produce from Node's decoding of the body: escapes resolved, a `\uD83D\uDE00`
 * pair joined into one character, invalid UTF-8 replaced by U+FFFD per maximal subpart (the
 * WHATWG decoder, as Buffer#toString('utf8')). A lone surrogate escape has no UTF-8 spelling:
 * it is written as its three-byte (WTF-8) form and flagged, so a caller can refuse it.
 */
import { plainRunAscii, utf8Sequence, hex4, QUOTE, BACKSLASH } from './scan';

/** Set by decodeString: the string held a `\u0000` (NUL). */
export let strHasNul = false;
/** Set by decodeString: the string held an unpaired surrogate escape. */
export let strLoneSurrogate = false;
/** Set by decodeString: the position just after the closing quote. */
export let strEnd: usize = 0;

/** Bytes written so far and the write limit of the current decode. */
let n: i32 = 0;
let limit: i32 = 0;
let out: usize = 0;

// @ts-ignore: decorator
@inline function emit(b: u32): void {
  if (n < limit) store<u8>(out + <usize>n, <u8>b);
  n++;
}

function emitCodePoint(cp: u32): void {
  if (cp < 0x80) { emit(cp); return; }
  if (cp < 0x800) {
    emit(0xc0 | (cp >> 6));
  } else if (cp < 0x10000) {
    emit(0xe0 | (cp >> 12));
    emit(0x80 | ((cp >> 6) & 0x3f));
  } else {
    emit(0xf0 | (cp >> 18));
    emit(0x80 | ((cp >> 12) & 0x3f));
    emit(0x80 | ((cp >> 6) & 0x3f));
  }
  emit(0x80 | (cp & 0x3f));
}

function emitRun(p: usize, len: usize): void {
  let room = n < limit ? <usize>(limit - n) : 0;
  memory.copy(out + <usize>n, p, len < room ? len : room);
  n += <i32>len;
}

/** The escape at p (a backslash); returns the position after it. */
function decodeEscape(p: usize, end: usize): usize {
  let e = <u32>load<u8>(p + 1);
  if (e != 0x75) {
    let b: u32 = e; // \" \\ \/ stand for themselves
    if (e == 0x62) b = 0x08;
    else if (e == 0x66) b = 0x0c;
    else if (e == 0x6e) b = 0x0a;
    else if (e == 0x72) b = 0x0d;
    else if (e == 0x74) b = 0x09;
    emit(b);
    return p + 2;
  }
  let unit = hex4(p + 2);
  if (unit == 0) strHasNul = true;
  if (unit - 0xd800 >= 0x800) { emitCodePoint(unit); return p + 6; }
  if (unit < 0xdc00 && p + 12 <= end && <u32>load<u8>(p + 6) == BACKSLASH &&
      <u32>load<u8>(p + 7) == 0x75) {
    let low = hex4(p + 8);
    if (low - 0xdc00 < 0x400) {
      emitCodePoint(0x10000 + ((unit - 0xd800) << 10) + (low - 0xdc00));
      return p + 12;
    }
  }
  strLoneSurrogate = true;
  emitCodePoint(unit);
  return p + 6;
}

/**
 * Decodes the string whose opening quote is at p, writing at most `cap` bytes at `dst`.
 * Returns the full decoded length (which may exceed cap); sets strEnd and the flags.
 */
export function decodeString(p: usize, end: usize, dst: usize, cap: i32): i32 {
  n = 0;
  limit = cap;
  out = dst;
  strHasNul = false;
  strLoneSurrogate = false;
  p++;
  while (true) {
    let q = plainRunAscii(p, end);
    if (q > p) emitRun(p, q - p);
    p = q;
    if (p >= end) break;
    let c = <u32>load<u8>(p);
    if (c == QUOTE) { p++; break; }
    if (c == BACKSLASH) { p = decodeEscape(p, end); continue; }
    let len = utf8Sequence(p, end);
    if (len > 0) {
      emitRun(p, <usize>len);
      p += <usize>len;
    } else {
      emitCodePoint(0xfffd);
      p += <usize>(-len);
    }
  }
  strEnd = p;
  return n;
}

/**
 * True when the string at p decodes to exactly the ASCII bytes of `word`. Plain strings (the
 * usual case) compare in place; anything with an escape or a non-ASCII byte is decoded first.
 */
export function stringEquals(p: usize, end: usize, word: string, scratch: usize): bool {
  let len = word.length;
  let q = plainRunAscii(p + 1, end);
  if (q < end && <u32>load<u8>(q) == QUOTE) {
    if (<i32>(q - p - 1) != len) return false;
    for (let i = 0; i < len; i++) {
      if (<u32>load<u8>(p + 1 + <usize>i) != <u32>word.charCodeAt(i)) return false;
    }
    return true;
  }
  let got = decodeString(p, end, scratch, len + 1);
  if (got != len) return false;
  for (let i = 0; i < len; i++) {
    if (<u32>load<u8>(scratch + <usize>i) != <u32>word.charCodeAt(i)) return false;
  }
  return true;
}
