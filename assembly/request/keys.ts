/**
 * Keys, namespaces and op names, checked as validate.ts checks them and written into the
 * command. A key (also a prefix or a cursor) is a non-empty string without NUL, without an
 * unpaired surrogate, of at most QUEEN_KV_MAX_KEY_BYTES UTF-8 bytes; a namespace matches
 * ^[a-z0-9][a-z0-9._-]{0,63}$. Keys are decoded straight into the command.
 */
import { decodeString, strHasNul, strLoneSurrogate } from './strings';
import { plainRunAscii } from './scan';
import { NameTable, readName, NAME_BYTES_MAX } from './names';
import { bodyEnd, isString } from './body';
import { openString, commitString, writeString } from './command';
import { maxKeyBytes } from './limits';
import {
  refuseKey, refuseKeyTooLarge, refuseAt,
} from './refusal';

/** Namespaces are at most this long. */
const NS_BYTES_MAX: i32 = 64;
/** Room for a decoded op name or namespace, one byte past the longest that can match. */
const scratch: usize = heap.alloc(<usize>NS_BYTES_MAX + 1);

/** Offset and length in the output of the key written last. */
export let keyOff: i32 = 0;
export let keyLen: i32 = 0;
/** Offset and length in the output of the namespace written last. */
export let nsOff: i32 = 0;
export let nsLen: i32 = 0;

/** Checks the key value at p (0 = absent) and writes it into the command. */
export function keyFromJson(p: usize, kind: i32, index: i32): bool {
  if (!isString(p)) return refuseKey(kind, index, 'must be a non-empty string');
  let cap = maxKeyBytes;
  let dst = openString(cap);
  let len = decodeString(p, bodyEnd, dst, cap);
  if (len == 0) return refuseKey(kind, index, 'must be a non-empty string');
  if (strHasNul) return refuseKey(kind, index, 'must not contain NUL');
  if (strLoneSurrogate) return refuseKey(kind, index, 'holds an unpaired surrogate');
  if (len > cap) return refuseKeyTooLarge(kind, index, cap);
  keyLen = len;
  keyOff = commitString(len);
  return true;
}

/** Checks a key given as UTF-8 bytes (a path route's decoded key) and writes it. */
export function keyFromBytes(p: usize, len: i32, kind: i32): bool {
  if (len == 0) return refuseKey(kind, 0, 'must be a non-empty string');
  for (let i = 0; i < len; i++) {
    if (load<u8>(p + <usize>i) == 0) return refuseKey(kind, 0, 'must not contain NUL');
  }
  if (len > maxKeyBytes) return refuseKeyTooLarge(kind, 0, maxKeyBytes);
  keyLen = len;
  keyOff = writeString(p, len);
  return true;
}

function isNsByte(c: u32, isFirst: bool): bool {
  if (c - 0x61 < 26 || c - 0x30 < 10) return true;
  return !isFirst && (c == 0x2e || c == 0x5f || c == 0x2d);
}

/** True when [p, p+len) matches ^[a-z0-9][a-z0-9._-]{0,63}$. */
export function isNamespace(p: usize, len: i32): bool {
  if (len < 1 || len > NS_BYTES_MAX) return false;
  for (let i = 0; i < len; i++) {
    if (!isNsByte(<u32>load<u8>(p + <usize>i), i == 0)) return false;
  }
  return true;
}

/** Writes a namespace already checked. */
export function writeNamespace(p: usize, len: i32): void {
  nsLen = len;
  nsOff = writeString(p, len);
}

/** Checks the `ns` value at p (0 = absent) and writes it into the command. */
export function nsFromJson(p: usize): bool {
  let len = isString(p) ? decodeString(p, bodyEnd, scratch, NS_BYTES_MAX + 1) : -1;
  if (len < 0 || !isNamespace(scratch, len)) {
    return refuseAt('kv_bad_namespace', 'ns must match ^[a-z0-9][a-z0-9._-]{0,63}$');
  }
  writeNamespace(scratch, len);
  return true;
}

// Op names as sent.
export const NAME_GET: i32 = 0;
export const NAME_GET_MANY: i32 = 1;
export const NAME_GET_PREFIX: i32 = 2;
export const NAME_PUT: i32 = 3;
export const NAME_PUT_IF_ABSENT: i32 = 4;
export const NAME_DELETE: i32 = 5;
export const NAME_INCR: i32 = 6;
export const NAME_CHECK: i32 = 7;
const OP_NAMES = new NameTable([
  'get', 'getMany', 'getPrefix', 'put', 'putIfAbsent', 'delete', 'incr', 'check',
]);

/** The NAME_* of the `op` value at p, or -1 when it names no op (or is not a string). */
export function opNameOf(p: usize): i32 {
  if (!isString(p)) return -1;
  let q = plainRunAscii(p + 1, bodyEnd);
  if (<u32>load<u8>(q) == 0x22) { // plain ASCII: compare in place
    let len = <i32>(q - p - 1);
    if (len > NAME_BYTES_MAX) return -1;
    readName(p + 1, len, bodyEnd);
    return OP_NAMES.find(len);
  }
  let len = decodeString(p, bodyEnd, scratch, NS_BYTES_MAX + 1);
  if (len > NAME_BYTES_MAX) return -1;
  readName(scratch, len, scratch + <usize>NS_BYTES_MAX + 1);
  return OP_NAMES.find(len);
}
