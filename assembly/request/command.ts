/**
 * Writes the parser's output in place: the PARSE_COMMAND header, then the CMD_CALL command
 * (docs/codec.md) straight into the output region, one field at a time as validation
 * accepts it. Positions are kept as offsets from the region's start, since the region moves
 * when it grows. A refusal simply overwrites the whole output.
 */
import { outputPtr, outputLen, reserveOutput, reserveRaw, resetOutput, putU8 } from '../buffers';
import { PARSE_COMMAND } from '../abi';

/** Bytes of the PARSE_COMMAND header: kind, hasWrites, opCount, growthBytes, commandLen. */
export const HEADER_BYTES: i32 = 18;

/** Starts the output: the header (filled in by `finishCommand`), then the command. */
export function startCommand(): void {
  resetOutput();
  putU8(PARSE_COMMAND);
  reserveRaw(<usize>(HEADER_BYTES - 1));
}

/** Fills in the header once the command is complete. */
export function finishCommand(hasWrites: bool, opCount: i32, growthBytes: i64): void {
  let h = outputPtr;
  store<u8>(h, PARSE_COMMAND);
  store<u8>(h, hasWrites ? 1 : 0, 1);
  store<u32>(h, <u32>opCount, 2);
  store<i64>(h, growthBytes, 6);
  store<u32>(h, <u32>(outputLen - <usize>HEADER_BYTES), 14);
}

/** Current write offset. */
// @ts-ignore: decorator
@inline export function mark(): i32 { return <i32>outputLen; }

/** Address of the byte at offset `off` (valid until the region next grows). */
// @ts-ignore: decorator
@inline export function addressOf(off: i32): usize { return outputPtr + <usize>off; }

/**
 * Makes room for a string of up to `cap` bytes and returns where its bytes go; the caller
 * writes them there and then calls `commitString` with their count (at most cap).
 */
export function openString(cap: i32): usize {
  reserveOutput(<usize>cap + 4);
  return outputPtr + outputLen + 4;
}

/** Closes the string opened last: its length, then its bytes. Returns its bytes' offset. */
export function commitString(len: i32): i32 {
  store<u32>(outputPtr + outputLen, <u32>len);
  let off = <i32>outputLen + 4;
  reserveRaw(<usize>len + 4);
  return off;
}

/** A whole string from memory outside the output region. */
export function writeString(p: usize, len: i32): i32 {
  let dst = openString(len);
  memory.copy(dst, p, <usize>len);
  return commitString(len);
}

export function writeU8(v: i32): void { store<u8>(reserveRaw(1), <u8>v); }
export function writeU32(v: u32): void { store<u32>(reserveRaw(4), v); }
export function writeI64(v: i64): void { store<i64>(reserveRaw(8), v); }
export function patchU8(off: i32, v: i32): void { store<u8>(outputPtr + <usize>off, <u8>v); }
