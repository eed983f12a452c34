/**
 * Short ASCII names (member names, op names) compared as two little-endian u64 words of
 * their bytes, zero-padded, plus a length: a name test is three integer compares, never a
 * loop over characters. Names here are at most NAME_BYTES_MAX bytes.
 */

export const NAME_BYTES_MAX: i32 = 16;

/** Words of the last name read by `readName`. */
export let nameLo: u64 = 0;
export let nameHi: u64 = 0;

// @ts-ignore: decorator
@inline function lowBytes(n: i32): u64 {
  return n >= 8 ? u64.MAX_VALUE : (<u64>1 << (<u64>n << 3)) - 1;
}

/**
 * Reads the `len` (<= NAME_BYTES_MAX) bytes at p into nameLo/nameHi. `end` bounds what may
 * be read: with 16 bytes of room the words are loaded whole and masked.
 */
export function readName(p: usize, len: i32, end: usize): void {
  if (p + 16 <= end) {
    if (len <= 8) {
      nameLo = load<u64>(p) & lowBytes(len);
      nameHi = 0;
    } else {
      nameLo = load<u64>(p);
      nameHi = load<u64>(p, 8) & lowBytes(len - 8);
    }
    return;
  }
  let lo: u64 = 0, hi: u64 = 0;
  for (let i = 0; i < len; i++) {
    let b = <u64>load<u8>(p + <usize>i);
    if (i < 8) lo |= b << (<u64>i << 3);
    else hi |= b << (<u64>(i - 8) << 3);
  }
  nameLo = lo;
  nameHi = hi;
}

/** A table of known names: words and lengths by id. */
export class NameTable {
  lo: StaticArray<u64>;
  hi: StaticArray<u64>;
  len: StaticArray<i32>;

  constructor(names: StaticArray<string>) {
    let n = names.length;
    this.lo = new StaticArray<u64>(n);
    this.hi = new StaticArray<u64>(n);
    this.len = new StaticArray<i32>(n);
    for (let id = 0; id < n; id++) {
      let name = names[id];
      assert(name.length <= NAME_BYTES_MAX, 'name too long for a NameTable');
      let lo: u64 = 0, hi: u64 = 0;
      for (let i = 0; i < name.length; i++) {
        let b = <u64>name.charCodeAt(i);
        if (i < 8) lo |= b << (<u64>i << 3);
        else hi |= b << (<u64>(i - 8) << 3);
      }
      this.lo[id] = lo;
      this.hi[id] = hi;
      this.len[id] = name.length;
    }
  }

  /** True when the name last read (of length len) is name `id`. */
  // @ts-ignore: decorator
  @inline is(id: i32, len: i32): bool {
    return unchecked(this.len[id]) == len && unchecked(this.lo[id]) == nameLo &&
      unchecked(this.hi[id]) == nameHi;
  }

  /** The id of the name last read (of length len), or -1. */
  find(len: i32): i32 {
    let n = this.len.length;
    for (let id = 0; id < n; id++) if (this.is(id, len)) return id;
    return -1;
  }
}
