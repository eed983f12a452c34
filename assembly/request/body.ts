/**
 * The request body being parsed, and type tests on its values. A value is named by the
 * position of its first byte in text the syntax pass accepted (0 = absent), so its JSON type
 * is that byte: `"` string, `{` object, `[` array, `t`/`f` boolean, `n` null, else a number.
 */
import { skipWs, valueEnd } from './scan';

export let bodyStart: usize = 0;
export let bodyEnd: usize = 0;

export function setBody(start: usize, end: usize): void {
  bodyStart = start;
  bodyEnd = end;
}

// @ts-ignore: decorator
@inline function first(p: usize): u32 { return <u32>load<u8>(p); }

export function isString(p: usize): bool { return p != 0 && first(p) == 0x22; }
export function isObject(p: usize): bool { return p != 0 && first(p) == 0x7b; }
export function isArray(p: usize): bool { return p != 0 && first(p) == 0x5b; }
export function isNull(p: usize): bool { return p != 0 && first(p) == 0x6e; }
export function isBoolean(p: usize): bool {
  return p != 0 && (first(p) == 0x74 || first(p) == 0x66);
}
export function isTrue(p: usize): bool { return p != 0 && first(p) == 0x74; }
export function isNumber(p: usize): bool {
  return p != 0 && (first(p) == 0x2d || first(p) - 0x30 < 10);
}
/** The string `""`. */
export function isEmptyString(p: usize): bool {
  return isString(p) && <u32>load<u8>(p + 1) == 0x22;
}
/** Absent or null: what `??` replaces with its default. */
export function isNullish(p: usize): bool { return p == 0 || first(p) == 0x6e; }

/** Position of the first element of the array at p, or 0 when it is empty. */
export function firstElement(p: usize): usize {
  let q = skipWs(p + 1, bodyEnd);
  return first(q) == 0x5d ? 0 : q;
}

/**
 * Position of the element after the one that ends just before `after` (the position after
 * an element), or 0 when that was the last.
 */
export function nextElement(after: usize): usize {
  let q = skipWs(after, bodyEnd);
  return first(q) == 0x5d ? 0 : skipWs(q + 1, bodyEnd);
}

/** Elements of the array at p, counting at most `stopAt`, from the element at `from`. */
export function countFrom(from: usize, stopAt: i32): i32 {
  let count = 0;
  let q = from;
  while (q != 0 && count < stopAt) {
    count++;
    q = nextElement(valueEnd(q, bodyEnd));
  }
  return count;
}
