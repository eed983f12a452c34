/**
 * Percent-decoding of a path route's namespace and key, with the semantics of JavaScript's
 * decodeURIComponent (ECMA-262, Decode): every `%XX` is decoded (`%2F` is a literal slash),
 * other bytes pass through, and a `%` without two hex digits, or `%`-escaped bytes that are
 * not one well-formed UTF-8 character each (overlong forms, surrogates, beyond U+10FFFF, a
 * sequence cut short or continued by a raw byte), make the whole text invalid.
 */
import { hexValue } from './scan';

/** The byte of the `%XX` at p, or -1 when p does not start one. */
function escapedByte(p: usize, end: usize): i32 {
  if (p + 3 > end || load<u8>(p) != 0x25) return -1;
  let hi = hexValue(<u32>load<u8>(p + 1));
  let lo = hexValue(<u32>load<u8>(p + 2));
  if (hi < 0 || lo < 0) return -1;
  return (hi << 4) | lo;
}

/**
 * The escaped character starting with the `%XX` at p (byte b0 >= 0x80): writes its bytes at
 * dst and returns how many input bytes it took, or -1 when it is not well-formed UTF-8.
 */
function escapedCharacter(p: usize, end: usize, b0: i32, dst: usize): i32 {
  let count = 0;
  let cp: u32 = 0;
  let least: u32 = 0;
  if ((b0 & 0xe0) == 0xc0) { count = 2; cp = b0 & 0x1f; least = 0x80; }
  else if ((b0 & 0xf0) == 0xe0) { count = 3; cp = b0 & 0x0f; least = 0x800; }
  else if ((b0 & 0xf8) == 0xf0) { count = 4; cp = b0 & 0x07; least = 0x10000; }
  else return -1;
  store<u8>(dst, <u8>b0);
  for (let i = 1; i < count; i++) {
    let b = escapedByte(p + <usize>(3 * i), end);
    if (b < 0 || (b & 0xc0) != 0x80) return -1;
    store<u8>(dst + <usize>i, <u8>b);
    cp = (cp << 6) | <u32>(b & 0x3f);
  }
  if (cp < least || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return -1;
  return 3 * count;
}

/**
 * Decodes [p, p+len) into dst (room for len bytes: decoding never grows the text); returns
 * the decoded length, or -1 when decodeURIComponent would throw.
 */
export function percentDecode(p: usize, len: i32, dst: usize): i32 {
  let end = p + <usize>len;
  let n: usize = 0;
  while (p < end) {
    let c = load<u8>(p);
    if (c != 0x25) {
      store<u8>(dst + n++, c);
      p++;
      continue;
    }
    let b0 = escapedByte(p, end);
    if (b0 < 0) return -1;
    if (b0 < 0x80) {
      store<u8>(dst + n++, <u8>b0);
      p += 3;
      continue;
    }
    let took = escapedCharacter(p, end, b0, dst + n);
    if (took < 0) return -1;
    n += <usize>(took / 3);
    p += <usize>took;
  }
  return <i32>n;
}
