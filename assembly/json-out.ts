/**
 * Writes JSON text into the output region: the answers the machine renders for the host to
 * send as they are (docs/codec.md, "Answers"). Keys are escaped exactly as JavaScript's
 * `JSON.stringify` escapes a string; stored values are compact JSON already and are copied
 * as they are; times are ISO-8601 UTC with milliseconds, as `Date.prototype.toISOString`
 * writes them. Pure: no clock; the times come from the caller.
 */
import { reserveRaw, outputLen, truncateOutput } from './buffers';

const HEX = '0123456789abcdef';

/** Copies `len` bytes as they are. */
export function putRaw(ptr: usize, len: usize): void {
  let at = reserveRaw(len);
  memory.copy(at, ptr, len);
}

/** Copies a constant's UTF-8 bytes (see `text`). */
// @ts-ignore: decorator
@inline export function putText(bytes: ArrayBuffer): void {
  putRaw(changetype<usize>(bytes), <usize>bytes.byteLength);
}

/** The UTF-8 bytes of a constant piece of JSON, encoded once at start. */
export function text(s: string): ArrayBuffer {
  return String.UTF8.encode(s);
}

// @ts-ignore: decorator
@inline export function putByte(b: i32): void {
  store<u8>(reserveRaw(1), <u8>b);
}

/** `true` or `false`. */
const TRUE_TEXT = text('true');
const FALSE_TEXT = text('false');
const NULL_TEXT = text('null');

export function putBool(v: bool): void {
  putText(v ? TRUE_TEXT : FALSE_TEXT);
}

export function putNull(): void {
  putText(NULL_TEXT);
}

/** A non-negative integer in decimal (versions, indexes, counts; never above 2^53). */
export function putDecimal(v: i64): void {
  if (v < 0) {
    putByte(0x2d);
    v = -v;
  }
  // Most are far below 2^32, where a division by ten is a multiplication: a 64-bit division
  // is not, and there are two per digit.
  if (v <= <i64>u32.MAX_VALUE) {
    putSmallDecimal(<u32>v);
    return;
  }
  let digits = 1;
  for (let t = v; t >= 10; t /= 10) digits++;
  let at = reserveRaw(<usize>digits);
  for (let i = digits - 1; i >= 0; i--) {
    store<u8>(at + <usize>i, <u8>(0x30 + <i32>(v % 10)));
    v /= 10;
  }
}

function putSmallDecimal(v: u32): void {
  let digits = 1;
  for (let t = v; t >= 10; t /= 10) digits++;
  let at = reserveRaw(<usize>digits);
  for (let i = digits - 1; i >= 0; i--) {
    store<u8>(at + <usize>i, <u8>(0x30 + v % 10));
    v /= 10;
  }
}

/** How many bytes the escaped form of byte `b` takes inside a JSON string. */
// @ts-ignore: decorator
@inline function escapedBytes(b: i32): i32 {
  if (b == 0x22 || b == 0x5c) return 2;
  if (b >= 0x20) return 1;
  if (b == 0x08 || b == 0x09 || b == 0x0a || b == 0x0c || b == 0x0d) return 2;
  return 6;
}

/**
 * `ptr[0..len)` (UTF-8) as a JSON string, quotes included, escaped as `JSON.stringify` does:
 * `"` and `\`, the short forms \b \t \n \f \r, other control characters as \u00xx; every
 * other byte as it is.
 */
export function putJsonString(ptr: usize, len: i32): void {
  // Most keys need no escape: copy while checking, and start over escaping at the first byte
  // that needs it.
  let start = outputLen;
  let at = reserveRaw(<usize>len + 2);
  store<u8>(at, 0x22);
  let i = 0;
  for (; i < len; i++) {
    let b = load<u8>(ptr + <usize>i);
    if (b < 0x20 || b == 0x22 || b == 0x5c) break;
    store<u8>(at + 1 + <usize>i, b);
  }
  if (i == len) {
    store<u8>(at + 1 + <usize>len, 0x22);
    return;
  }
  truncateOutput(start);
  putEscapedJsonString(ptr, len);
}

function putEscapedJsonString(ptr: usize, len: i32): void {
  let size = 2;
  for (let i = 0; i < len; i++) size += escapedBytes(<i32>load<u8>(ptr + <usize>i));
  let at = reserveRaw(<usize>size);
  store<u8>(at, 0x22);
  let o: usize = at + 1;
  for (let i = 0; i < len; i++) {
    let b = <i32>load<u8>(ptr + <usize>i);
    let n = escapedBytes(b);
    if (n == 1) {
      store<u8>(o, <u8>b);
    } else if (n == 2) {
      store<u8>(o, 0x5c);
      store<u8>(o + 1, <u8>shortEscape(b));
    } else {
      store<u8>(o, 0x5c);
      store<u8>(o + 1, 0x75);
      store<u8>(o + 2, 0x30);
      store<u8>(o + 3, 0x30);
      store<u8>(o + 4, <u8>HEX.charCodeAt(b >> 4));
      store<u8>(o + 5, <u8>HEX.charCodeAt(b & 15));
    }
    o += <usize>n;
  }
  store<u8>(o, 0x22);
}

function shortEscape(b: i32): i32 {
  if (b == 0x08) return 0x62; // b
  if (b == 0x09) return 0x74; // t
  if (b == 0x0a) return 0x6e; // n
  if (b == 0x0c) return 0x66; // f
  if (b == 0x0d) return 0x72; // r
  return b; // " and \ escape as themselves
}

const MS_PER_DAY: i64 = 86_400_000;

function putDigits(at: usize, v: i32, width: i32): void {
  for (let i = width - 1; i >= 0; i--) {
    store<u8>(at + <usize>i, <u8>(0x30 + v % 10));
    v /= 10;
  }
}

/**
 * `"YYYY-MM-DDTHH:MM:SS.mmmZ"` (quotes included) for `ms` since the epoch, as
 * `new Date(ms).toISOString()` writes it: years past 9999 take the expanded form `+YYYYYY`.
 * The civil-from-days arithmetic is H. Hinnant's ("chrono-compatible low-level date
 * algorithms"); `ms` is never negative here (entry times are).
 */
export function putIsoTime(ms: i64): void {
  let days = ms / MS_PER_DAY;
  let rest = <i32>(ms - days * MS_PER_DAY);
  let z = days + 719_468;
  let era = z / 146_097;
  let dayOfEra = <i32>(z - era * 146_097);
  let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365;
  let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100);
  let mp = (5 * dayOfYear + 2) / 153;
  let day = dayOfYear - (153 * mp + 2) / 5 + 1;
  let month = mp < 10 ? mp + 3 : mp - 9;
  let year = <i32>(<i64>yearOfEra + era * 400) + (month <= 2 ? 1 : 0);
  let expanded = year > 9999;
  let at = reserveRaw(expanded ? 29 : 26);
  store<u8>(at, 0x22);
  let o: usize = at + 1;
  if (expanded) {
    store<u8>(o, 0x2b);
    putDigits(o + 1, year, 6);
    o += 7;
  } else {
    putDigits(o, year, 4);
    o += 4;
  }
  store<u8>(o, 0x2d);
  putDigits(o + 1, month, 2);
  store<u8>(o + 3, 0x2d);
  putDigits(o + 4, day, 2);
  store<u8>(o + 6, 0x54);
  putDigits(o + 7, rest / 3_600_000, 2);
  store<u8>(o + 9, 0x3a);
  putDigits(o + 10, rest / 60_000 % 60, 2);
  store<u8>(o + 12, 0x3a);
  putDigits(o + 13, rest / 1000 % 60, 2);
  store<u8>(o + 15, 0x2e);
  putDigits(o + 16, rest % 1000, 3);
  store<u8>(o + 19, 0x5a);
  store<u8>(o + 20, 0x22);
}
