/**
 * The members of one JSON object, looked up the way JavaScript sees the object JSON.parse
 * builds: by decoded name (`"\u006fp"` is `op`), the last of duplicate members winning.
 * One walk over the object fills a table of every field name the KV wire knows with the
 * position of its value (0 = absent); unknown members are skipped. The table is static:
 * a caller reads what it needs before the next object is walked.
 */
import { skipWs, valueEnd, plainRunAscii, QUOTE } from './scan';
import { decodeString, strEnd } from './strings';
import { NameTable, readName, NAME_BYTES_MAX } from './names';
import { compactValue, valueOverflows, valueAfter } from './value';
import { maxValueBytes } from './limits';

// Field ids (index into the table).
export const F_OP: i32 = 0;
export const F_NS: i32 = 1;
export const F_KEY: i32 = 2;
export const F_KEYS: i32 = 3;
export const F_PREFIX: i32 = 4;
export const F_AFTER: i32 = 5;
export const F_LIMIT: i32 = 6;
export const F_KEYS_ONLY: i32 = 7;
export const F_VALUE: i32 = 8;
export const F_TTL_SECONDS: i32 = 9;
export const F_FOREVER: i32 = 10;
export const F_EXPECT: i32 = 11;
export const F_REQUIRED: i32 = 12;
export const F_DELTA: i32 = 13;
export const F_MIN: i32 = 14;
export const F_MAX: i32 = 15;
export const F_TENANT: i32 = 16;
export const F_TENANT_ID: i32 = 17;
export const F_UNDERSCORE_TENANT: i32 = 18;
export const F_NAMESPACE: i32 = 19;
export const F_OPERATIONS: i32 = 20;
export const F_REQUIRED_LEASES: i32 = 21;
export const F_KV: i32 = 22;
const FIELD_COUNT: i32 = 23;

/** Field names by id; the longest is 14 bytes. */
const NAMES = new NameTable([
  'op', 'ns', 'key', 'keys', 'prefix', 'after', 'limit', 'keysOnly', 'value', 'ttlSeconds',
  'forever', 'expect', 'required', 'delta', 'min', 'max', 'tenant', 'tenantId', '_tenant',
  'namespace', 'operations', 'requiredLeases', 'kv',
]);

/** Value position of each field in the object walked last; 0 = absent. */
const table: usize = heap.alloc(<usize>FIELD_COUNT << alignof<usize>());
/** Decoded names of escaped members land here (with room for a whole-word read). */
const nameScratch: usize = heap.alloc(<usize>NAME_BYTES_MAX + 16);

/** Position of the field's value in the last object walked, or 0 when absent. */
// @ts-ignore: decorator
@inline export function field(id: i32): usize {
  return load<usize>(table + (<usize>id << alignof<usize>()));
}

/** The id of the field named by the bytes [p, p+len) (`end` bounds reads), or -1. */
function fieldId(p: usize, len: i32, end: usize): i32 {
  if (len < 2 || len > 14) return -1;
  readName(p, len, end);
  let c = <u32>load<u8>(p);
  // Candidates by first byte, so a name is compared with at most four known ones.
  let a = -1, b = -1, d = -1, e = -1;
  if (c == 0x6f) { a = F_OP; b = F_OPERATIONS; }
  else if (c == 0x6e) { a = F_NS; b = F_NAMESPACE; }
  else if (c == 0x6b) { a = F_KEY; b = F_KEYS; d = F_KEYS_ONLY; e = F_KV; }
  else if (c == 0x70) a = F_PREFIX;
  else if (c == 0x61) a = F_AFTER;
  else if (c == 0x6c) a = F_LIMIT;
  else if (c == 0x76) a = F_VALUE;
  else if (c == 0x74) { a = F_TTL_SECONDS; b = F_TENANT; d = F_TENANT_ID; }
  else if (c == 0x66) a = F_FOREVER;
  else if (c == 0x65) a = F_EXPECT;
  else if (c == 0x72) { a = F_REQUIRED; b = F_REQUIRED_LEASES; }
  else if (c == 0x64) a = F_DELTA;
  else if (c == 0x6d) { a = F_MIN; b = F_MAX; }
  else if (c == 0x5f) a = F_UNDERSCORE_TENANT;
  if (a >= 0 && NAMES.is(a, len)) return a;
  if (b >= 0 && NAMES.is(b, len)) return b;
  if (d >= 0 && NAMES.is(d, len)) return d;
  if (e >= 0 && NAMES.is(e, len)) return e;
  return -1;
}

/** The id of the member name (a string) at p; sets `nameEnd` just after it. */
function memberId(p: usize, end: usize): i32 {
  let q = plainRunAscii(p + 1, end);
  if (<u32>load<u8>(q) == QUOTE) { // plain ASCII name: compare in place
    nameEnd = q + 1;
    return fieldId(p + 1, <i32>(q - p - 1), end);
  }
  let len = decodeString(p, end, nameScratch, NAME_BYTES_MAX + 1);
  nameEnd = strEnd;
  return len <= NAME_BYTES_MAX ? fieldId(nameScratch, len, nameScratch + 32) : -1;
}

let nameEnd: usize = 0;

/**
 * The compact text of the object's `value` member (the last one), made while walking past
 * it, so a put's value is read once here instead of skipped, then read again. Holds up to
 * maxValueBytes bytes; walkedValueLen is the full length, which may be more.
 */
let valueScratch: usize = 0;
let valueScratchCap: i32 = 0;
export let walkedValueLen: i32 = 0;
export let walkedValueOverflows = false;

export function walkedValue(): usize { return valueScratch; }

function compactMember(p: usize, end: usize): usize {
  let cap = maxValueBytes;
  if (cap > valueScratchCap) {
    valueScratch = valueScratch == 0 ? heap.alloc(<usize>cap) : heap.realloc(valueScratch,
      <usize>cap);
    valueScratchCap = cap;
  }
  walkedValueLen = compactValue(p, end, valueScratch, cap);
  walkedValueOverflows = valueOverflows;
  return valueAfter;
}

/**
 * Walks the object whose `{` is at p (accepted text), filling the table. Returns the
 * position just after the object.
 */
export function walkObject(p: usize, end: usize): usize {
  memory.fill(table, 0, <usize>FIELD_COUNT << alignof<usize>());
  p = skipWs(p + 1, end);
  if (<u32>load<u8>(p) == 0x7d) return p + 1;
  while (true) {
    let id = memberId(p, end);
    p = skipWs(skipWs(nameEnd, end) + 1, end); // past the colon
    if (id >= 0) store<usize>(table + (<usize>id << alignof<usize>()), p);
    p = skipWs(id == F_VALUE ? compactMember(p, end) : valueEnd(p, end), end);
    if (<u32>load<u8>(p) == 0x7d) return p + 1;
    p = skipWs(p + 1, end); // past the comma
  }
}

/** Empties the table: an absent body has no fields. */
export function clearFields(): void {
  memory.fill(table, 0, <usize>FIELD_COUNT << alignof<usize>());
}
