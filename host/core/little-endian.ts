/**
 * Little-endian integers written into a `Uint8Array` by hand: plain indexed stores, which
 * the compiler inlines, where a DataView costs a call into C++ to make and a Buffer's
 * `writeUInt32LE` needs a Buffer. Pure.
 */

const U32_RANGE = 0x1_0000_0000;

/** `value` (0 to 2^32 - 1) as four bytes at `at`. */
export function putU32(bytes: Uint8Array, at: number, value: number): void {
  bytes[at] = value & 0xff;
  bytes[at + 1] = (value >>> 8) & 0xff;
  bytes[at + 2] = (value >>> 16) & 0xff;
  bytes[at + 3] = (value >>> 24) & 0xff;
}

/** A safe non-negative integer as eight bytes at `at` (the caller checked the range). */
export function putU64(bytes: Uint8Array, at: number, value: number): void {
  putU32(bytes, at, value % U32_RANGE);
  putU32(bytes, at + 4, Math.floor(value / U32_RANGE));
}
