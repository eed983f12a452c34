/**
 * Byte primitives over JSON text in linear memory: whitespace, string ends, value ends and
 * UTF-8 sequences. Strings are scanned eight bytes at a time (SWAR: a u64 load and a few
 * arithmetic tests find the first byte that needs a look), sixteen at a time with wasm SIMD
 * where sixteen bytes remain. Everything here reads between a
 * position and an `end` it is given, never past it; nothing allocates.
 */
import { spanEnd } from './spans';

const ONES: u64 = 0x0101010101010101;
const HIGHS: u64 = 0x8080808080808080;
const QUOTES: u64 = 0x2222222222222222;
const BACKSLASHES: u64 = 0x5c5c5c5c5c5c5c5c;
const SPACES: u64 = 0x2020202020202020;
/** Bit c set for the JSON whitespace bytes c: tab, LF, CR, space. */
const WS_BITS: u64 = (<u64>1 << 0x20) | (<u64>1 << 0x09) | (<u64>1 << 0x0a) | (<u64>1 << 0x0d);

/** Bytes of one SIMD step. */
const LANES: usize = 16;

export const QUOTE: u32 = 0x22;
export const BACKSLASH: u32 = 0x5c;

/**
 * High bit set in each byte of v that is zero. The lowest set bit is exact; bits above it may
 * be false (a borrow), which is all a search for the first such byte needs.
 */
// @ts-ignore: decorator
@inline function zeroBytes(v: u64): u64 { return (v - ONES) & ~v & HIGHS; }

/** High bit set in each byte of v below 0x20 (lowest set bit exact, as above). */
// @ts-ignore: decorator
@inline function controlBytes(v: u64): u64 { return (v - SPACES) & ~v & HIGHS; }

// @ts-ignore: decorator
@inline export function isWs(c: u32): bool { return c <= 0x20 && ((WS_BITS >> c) & 1) != 0; }

/** The first non-whitespace position at or after p (end if none). */
// @ts-ignore: decorator
@inline export function skipWs(p: usize, end: usize): usize {
  // Compact JSON is the usual case: the next byte is already significant.
  if (p < end && <u32>load<u8>(p) > 0x20) return p;
  return skipWsFrom(p, end);
}

function skipWsFrom(p: usize, end: usize): usize {
  while (p < end && isWs(<u32>load<u8>(p))) p++;
  return p;
}

/**
 * The first position at or after p holding a quote, a backslash or a control byte (end if
 * none): the run before it is plain string text. Used by the syntax pass.
 */
export function plainRunStrict(p: usize, end: usize): usize {
  while (p + LANES <= end) {
    let v = v128.load(p);
    let m = i8x16.bitmask(v128.or(v128.or(i8x16.eq(v, i8x16.splat(0x22)),
      i8x16.eq(v, i8x16.splat(0x5c))), i8x16.lt_u(v, i8x16.splat(0x20))));
    if (m != 0) return p + <usize>ctz(m);
    p += LANES;
  }
  while (p + 8 <= end) {
    let v = load<u64>(p);
    let m = zeroBytes(v ^ QUOTES) | zeroBytes(v ^ BACKSLASHES) | controlBytes(v);
    if (m != 0) return p + <usize>(ctz(m) >> 3);
    p += 8;
  }
  while (p < end) {
    let c = <u32>load<u8>(p);
    if (c == QUOTE || c == BACKSLASH || c < 0x20) return p;
    p++;
  }
  return end;
}

/**
 * The first position at or after p holding a quote, a backslash or a byte >= 0x80 (end if
 * none): a run of plain ASCII that copies as it is. Used on text the syntax pass accepted.
 */
export function plainRunAscii(p: usize, end: usize): usize {
  while (p + LANES <= end) {
    let v = v128.load(p);
    let m = i8x16.bitmask(v128.or(v128.or(i8x16.eq(v, i8x16.splat(0x22)),
      i8x16.eq(v, i8x16.splat(0x5c))), v));
    if (m != 0) return p + <usize>ctz(m);
    p += LANES;
  }
  while (p + 8 <= end) {
    let v = load<u64>(p);
    let m = zeroBytes(v ^ QUOTES) | zeroBytes(v ^ BACKSLASHES) | (v & HIGHS);
    if (m != 0) return p + <usize>(ctz(m) >> 3);
    p += 8;
  }
  while (p < end) {
    let c = <u32>load<u8>(p);
    if (c == QUOTE || c == BACKSLASH || c >= 0x80) return p;
    p++;
  }
  return end;
}

/** Like plainRunAscii but stops only at a quote or a backslash. */
function plainRun(p: usize, end: usize): usize {
  while (p + LANES <= end) {
    let v = v128.load(p);
    let m = i8x16.bitmask(v128.or(i8x16.eq(v, i8x16.splat(0x22)),
      i8x16.eq(v, i8x16.splat(0x5c))));
    if (m != 0) return p + <usize>ctz(m);
    p += LANES;
  }
  while (p + 8 <= end) {
    let v = load<u64>(p);
    let m = zeroBytes(v ^ QUOTES) | zeroBytes(v ^ BACKSLASHES);
    if (m != 0) return p + <usize>(ctz(m) >> 3);
    p += 8;
  }
  while (p < end) {
    let c = <u32>load<u8>(p);
    if (c == QUOTE || c == BACKSLASH) return p;
    p++;
  }
  return end;
}

/**
 * Position just after the string whose opening quote is at p, in text the syntax pass
 * accepted (every escape is complete, the closing quote exists).
 */
export function stringEnd(p: usize, end: usize): usize {
  p++;
  while (true) {
    p = plainRun(p, end);
    if (p >= end) return end;
    if (<u32>load<u8>(p) == QUOTE) return p + 1;
    p += 2; // a backslash and the byte it escapes (\u's hex digits are plain text)
  }
}

/** Position just after the number or literal starting at p (accepted text). */
export function scalarEnd(p: usize, end: usize): usize {
  while (p < end) {
    let c = <u32>load<u8>(p);
    if (c == 0x2c || c == 0x5d || c == 0x7d || c == 0x3a || isWs(c)) return p;
    p++;
  }
  return end;
}

/** Position just after the value starting at p (accepted text): strings, scalars, nests. */
export function valueEnd(p: usize, end: usize): usize {
  let c = <u32>load<u8>(p);
  if (c == QUOTE) return stringEnd(p, end);
  if (c != 0x7b && c != 0x5b) return scalarEnd(p, end);
  let known = spanEnd(p);
  if (known != 0) return known;
  let depth = 0;
  while (p < end) {
    c = <u32>load<u8>(p);
    if (c == QUOTE) { p = stringEnd(p, end); continue; }
    if (c == 0x7b || c == 0x5b) depth++;
    else if (c == 0x7d || c == 0x5d) {
      depth--;
      if (depth == 0) return p + 1;
    }
    p++;
  }
  return end;
}

/**
 * The UTF-8 sequence at p (whose first byte is >= 0x80), as the WHATWG decoder reads it:
 * n > 0 when bytes [p, p+n) are one valid character; -k when they are not, and the first k
 * bytes (the maximal subpart) become one U+FFFD, as Node's Buffer#toString('utf8') does.
 */
export function utf8Sequence(p: usize, end: usize): i32 {
  let b0 = <u32>load<u8>(p);
  let need = 0;
  let lo: u32 = 0x80, hi: u32 = 0xbf;
  if (b0 >= 0xc2 && b0 <= 0xdf) need = 1;
  else if (b0 >= 0xe0 && b0 <= 0xef) {
    need = 2;
    if (b0 == 0xe0) lo = 0xa0;
    else if (b0 == 0xed) hi = 0x9f;
  } else if (b0 >= 0xf0 && b0 <= 0xf4) {
    need = 3;
    if (b0 == 0xf0) lo = 0x90;
    else if (b0 == 0xf4) hi = 0x8f;
  } else return -1;
  for (let i = 1; i <= need; i++) {
    if (p + <usize>i >= end) return -i;
    let b = <u32>load<u8>(p + <usize>i);
    if (b < lo || b > hi) return -i;
    lo = 0x80;
    hi = 0xbf;
  }
  return need + 1;
}

/** True when [p, p+len) is well-formed UTF-8. */
export function isUtf8(p: usize, len: i32): bool {
  let end = p + <usize>len;
  while (p < end) {
    // Names are mostly ASCII: eight bytes at a time while no byte has its high bit set.
    if (p + 8 <= end && (load<u64>(p) & HIGHS) == 0) { p += 8; continue; }
    if (load<u8>(p) < 0x80) { p++; continue; }
    let n = utf8Sequence(p, end);
    if (n < 0) return false;
    p += <usize>n;
  }
  return true;
}

/** The value of a hex digit, or -1. */
export function hexValue(c: u32): i32 {
  if (c >= 0x30 && c <= 0x39) return <i32>(c - 0x30);
  let l = c | 0x20;
  if (l >= 0x61 && l <= 0x66) return <i32>(l - 0x61 + 10);
  return -1;
}

/** The four hex digits at p as a number (accepted text: they are hex digits). */
export function hex4(p: usize): u32 {
  return (<u32>hexValue(<u32>load<u8>(p)) << 12) | (<u32>hexValue(<u32>load<u8>(p + 1)) << 8) |
    (<u32>hexValue(<u32>load<u8>(p + 2)) << 4) | <u32>hexValue(<u32>load<u8>(p + 3));
}
