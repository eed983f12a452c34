/**
 * Every refusal the parser can give, with its status, reason and detail text: the words of
 * host/http/validate.ts and transaction.ts, so a client sees the same envelope from either.
 * The first refusal of a request is kept (the one validation order reaches first); its
 * detail is composed here, in a scratch buffer of its own, since the command being written
 * in the output region is dropped when the refusal is written there.
 * Each `refuse*` function returns false, so a validator can `return refuseX(...)`.
 */
import { putU8, putBytes, resetOutput, reserveRaw } from '../buffers';
import { PARSE_REFUSED, JSON_DEPTH_MAX, TTL_SECONDS_MAX } from '../abi';

export const STATUS_BAD_REQUEST: i32 = 400;
export const STATUS_TOO_LARGE: i32 = 413;

/** Index of the operation being validated, or -1 on a path route (its `at` is `body`). */
export let atIndex: i32 = -1;
export function setAt(index: i32): void { atIndex = index; }

let status: i32 = 0;
let reason: string = '';
let detail: usize = heap.alloc(256);
let detailCap: usize = 256;
let detailLen: usize = 0;

/** True once a refusal is recorded for the current request. */
export function isRefused(): bool { return status != 0; }
export function resetRefusal(): void { status = 0; }

function room(extra: usize): void {
  if (detailLen + extra <= detailCap) return;
  detailCap = max(detailCap << 1, detailLen + extra);
  detail = heap.realloc(detail, detailCap);
}

function text(s: string): void {
  let n = s.length;
  room(<usize>n * 3);
  for (let i = 0; i < n; i++) {
    let c = <u32>s.charCodeAt(i); // detail literals are ASCII
    store<u8>(detail + detailLen++, <u8>c);
  }
}

function bytes(p: usize, len: i32): void {
  room(<usize>len);
  memory.copy(detail + detailLen, p, <usize>len);
  detailLen += <usize>len;
}

/** `v` in decimal, as `v.toString()` writes it, without allocating a string. */
function int(v: i64): void {
  room(20);
  let u: u64 = v < 0 ? <u64>0 - <u64>v : <u64>v;
  if (v < 0) store<u8>(detail + detailLen++, 0x2d);
  let digits = 1;
  for (let rest = u / 10; rest != 0; rest /= 10) digits++;
  for (let i = digits - 1; i >= 0; i--) {
    store<u8>(detail + detailLen + <usize>i, <u8>(0x30 + <u32>(u % 10)));
    u /= 10;
  }
  detailLen += <usize>digits;
}

const HEX = '0123456789abcdef';

/** The UTF-8 bytes [p, p+len) as JSON.stringify writes the string they spell. */
function jsonString(p: usize, len: i32): void {
  room(<usize>len * 6 + 2);
  store<u8>(detail + detailLen++, 0x22);
  for (let i = 0; i < len; i++) {
    let c = <u32>load<u8>(p + <usize>i);
    let esc: u32 = 0;
    if (c == 0x22 || c == 0x5c) esc = c;
    else if (c == 0x08) esc = 0x62;
    else if (c == 0x0c) esc = 0x66;
    else if (c == 0x0a) esc = 0x6e;
    else if (c == 0x0d) esc = 0x72;
    else if (c == 0x09) esc = 0x74;
    if (esc != 0) {
      store<u8>(detail + detailLen++, 0x5c);
      store<u8>(detail + detailLen++, <u8>esc);
    } else if (c < 0x20) {
      text('\\u00');
      store<u8>(detail + detailLen++, <u8>HEX.charCodeAt(<i32>(c >> 4)));
      store<u8>(detail + detailLen++, <u8>HEX.charCodeAt(<i32>(c & 15)));
    } else {
      store<u8>(detail + detailLen++, <u8>c);
    }
  }
  store<u8>(detail + detailLen++, 0x22);
}

/** Starts the refusal unless one is already recorded; false when it was. */
function begin(s: i32, r: string): bool {
  if (status != 0) return false;
  status = s;
  reason = r;
  detailLen = 0;
  return true;
}

/** `operations[i]` or `body`. */
function at(): void {
  if (atIndex < 0) { text('body'); return; }
  text('operations[');
  int(atIndex);
  text(']');
}

/** Writes the recorded refusal as the whole output: PARSE_REFUSED, status, reason, detail. */
export function emitRefusal(): void {
  resetOutput();
  putU8(PARSE_REFUSED);
  store<u16>(reserveRaw(2), <u16>status);
  let r = String.UTF8.encode(reason);
  putBytes(changetype<usize>(r), <usize>r.byteLength);
  putBytes(detail, detailLen);
}

// ---- the refusals ----

/** 400 kv_bad_body with a fixed detail. */
export function refuseBody(d: string): bool {
  if (begin(STATUS_BAD_REQUEST, 'kv_bad_body')) text(d);
  return false;
}

export function refuseNotJson(): bool { return refuseBody('the body is not JSON'); }

export function refuseTooDeep(): bool {
  if (begin(STATUS_BAD_REQUEST, 'kv_bad_body')) {
    text('the body nests arrays and objects deeper than ');
    int(JSON_DEPTH_MAX);
    text(' levels');
  }
  return false;
}

/** 400 `reason` with the detail `<at>: <d>`. */
export function refuseAt(r: string, d: string): bool {
  if (begin(STATUS_BAD_REQUEST, r)) { at(); text(': '); text(d); }
  return false;
}

/** 400 kv_bad_request `<at>: <name> must be a finite number`. */
export function refuseNotFinite(name: string): bool {
  if (begin(STATUS_BAD_REQUEST, 'kv_bad_request')) {
    at(); text(': '); text(name); text(' must be a finite number');
  }
  return false;
}

/** 400 kv_bad_request `<at>: <name> has more than <digits> digits after the point`. */
export function refuseFractionDigits(name: string, digits: i32): bool {
  if (begin(STATUS_BAD_REQUEST, 'kv_bad_request')) {
    at(); text(': '); text(name); text(' has more than '); int(digits);
    text(' digits after the point');
  }
  return false;
}

/** 400 `reason` with a fixed detail (no `at`). */
export function refusePlain(r: string, d: string): bool {
  if (begin(STATUS_BAD_REQUEST, r)) text(d);
  return false;
}

/** 400 kv_bad_request `<at>: <name> needs a value`. */
export function refuseNeedsValue(name: string): bool {
  if (begin(STATUS_BAD_REQUEST, 'kv_bad_request')) {
    at(); text(': '); text(name); text(' needs a value');
  }
  return false;
}

export function refuseTenantField(name: string): bool {
  if (begin(STATUS_BAD_REQUEST, 'kv_tenant_not_an_input')) {
    at(); text(': '); text(name); text(' is not an input; the server resolves the tenant');
  }
  return false;
}

export function refuseFieldInPath(name: string): bool {
  if (begin(STATUS_BAD_REQUEST, 'kv_field_in_path')) {
    text(name); text(' comes from the URL, not the body');
  }
  return false;
}

export function refuseTooManyOps(count: i32, opsMax: i32): bool {
  if (begin(STATUS_BAD_REQUEST, 'kv_too_many_ops')) {
    int(count); text(' operations; one call carries at most '); int(opsMax);
  }
  return false;
}

export function refuseTooManyKeysInCall(keysMax: i32): bool {
  if (begin(STATUS_BAD_REQUEST, 'kv_too_many_keys')) {
    at(); text(': the call names more than '); int(keysMax);
    text(' keys (a getPrefix counts as its limit)');
  }
  return false;
}

export function refuseTooManyKeysInOp(keysMax: i32): bool {
  if (begin(STATUS_BAD_REQUEST, 'kv_too_many_keys')) {
    at(); text(': more than '); int(keysMax); text(' keys');
  }
  return false;
}

export function refuseDuplicateWrite(keyPtr: usize, keyLen: i32, nsPtr: usize,
  nsLen: i32): bool {
  if (begin(STATUS_BAD_REQUEST, 'kv_duplicate_key_in_call')) {
    at(); text(': a second write to key '); jsonString(keyPtr, keyLen);
    text(' of '); bytes(nsPtr, nsLen);
  }
  return false;
}

export function refuseBadTtl(): bool {
  if (begin(STATUS_BAD_REQUEST, 'kv_bad_ttl')) {
    at(); text(': ttlSeconds must be an integer from 1 to '); int(TTL_SECONDS_MAX);
  }
  return false;
}

export function refuseValueTooLarge(maxValueBytes: i32): bool {
  if (begin(STATUS_TOO_LARGE, 'kv_value_too_large')) {
    at(); text(': the value is over '); int(maxValueBytes); text(' bytes of compact JSON');
  }
  return false;
}

// What a key check names: `<at>: key`, `<at>: keys[i]`, `<at>: prefix`, `<at>: after`, `key`.
export const WHAT_KEY: i32 = 0;
export const WHAT_KEYS: i32 = 1;
export const WHAT_PREFIX: i32 = 2;
export const WHAT_AFTER: i32 = 3;
export const WHAT_PATH_KEY: i32 = 4;

function what(kind: i32, index: i32): void {
  if (kind == WHAT_PATH_KEY) { text('key'); return; }
  at();
  if (kind == WHAT_KEY) text(': key');
  else if (kind == WHAT_PREFIX) text(': prefix');
  else if (kind == WHAT_AFTER) text(': after');
  else { text(': keys['); int(index); text(']'); }
}

/** 400 kv_bad_key `<what> <d>`. */
export function refuseKey(kind: i32, index: i32, d: string): bool {
  if (begin(STATUS_BAD_REQUEST, 'kv_bad_key')) { what(kind, index); text(' '); text(d); }
  return false;
}

export function refuseKeyTooLarge(kind: i32, index: i32, maxKeyBytes: i32): bool {
  if (begin(STATUS_TOO_LARGE, 'kv_key_too_large')) {
    what(kind, index); text(' is over '); int(maxKeyBytes); text(' UTF-8 bytes');
  }
  return false;
}
