/**
 * Validation of the KV surface: a parsed request body (and, for the path routes, the
 * namespace, key and query string of the URL) into a typed `KvCall`, or a `KvError`.
 *
 * Pure and synchronous: no I/O, no clock. The whole call is validated before anything is
 * written (WIRE.md, "Calls with writes"); the first refusal in operation order wins. Every
 * reason here is one row of WIRE.md's validation table, so a client can `switch` on it.
 */
import type { DecimalText, Expiry, KvCall, KvOp, QuotaSettings } from '../machine/commands.js';
import { isWriteOp } from '../machine/commands.js';
import type { KvLimits } from '../node/config.js';
import {
  JSON_DEPTH_MAX, PREFIX_LIMIT_DEFAULT, TRANSACTION_KEYS_MAX, TRANSACTION_OPS_MAX,
  TTL_SECONDS_MAX,
} from '../machine/abi.js';
import { toDecimalText } from './decimal-text.js';
import { badRequest, isKvError, KvError, tooLarge } from './errors.js';

/** kv-concepts.md, "Limits". */
const NAMESPACE_PATTERN = /^[a-z0-9][a-z0-9._-]{0,63}$/;
/** A UTF-16 surrogate without its pair: such a key has no UTF-8 spelling. */
const LONE_SURROGATE_PATTERN = /\p{Cs}/u;
// The bounds below are shared with the machine's request parser (assembly/request/), which
// must decide exactly what this file decides: one definition, in the ABI.
export {
  JSON_DEPTH_MAX, PREFIX_LIMIT_DEFAULT, TRANSACTION_KEYS_MAX, TRANSACTION_OPS_MAX,
  TTL_SECONDS_MAX,
};
/** Fields that name the tenant, which only the server resolves (kv-routes.md). */
const TENANT_FIELDS = ['tenant', 'tenantId', '_tenant'] as const;
/** Fields a path route takes from its URL and refuses in its body. */
const PATH_FIELDS = ['op', 'ns', 'namespace', 'key'] as const;

type Json = Record<string, unknown>;

/** Which wire a list of operations arrived on, with its bounds. */
interface Bounds {
  readonly inTransaction: boolean;
  readonly opsMax: number;
  readonly keysMax: number;
}

/** True when a parsed JSON value holds ±Infinity anywhere. Iterative: no recursion limit. */
function holdsNonFiniteNumber(value: unknown): boolean {
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const item = stack.pop();
    if (typeof item === 'number' && !Number.isFinite(item)) return true;
    if (typeof item === 'object' && item !== null) {
      for (const child of Object.values(item)) stack.push(child);
    }
  }
  return false;
}

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Parses a request body; anything but JSON is `kv_bad_body`, and so is a body whose text
 * nests arrays and objects deeper than JSON_DEPTH_MAX levels (the root is level 1, and
 * members a later duplicate shadows count too): every value accepted can then be serialised
 * without exhausting the stack.
 */
export function parseJsonBody(text: string): unknown {
  let body: unknown;
  try {
    body = JSON.parse(text) as unknown;
  } catch {
    return badRequest('kv_bad_body', 'the body is not JSON');
  }
  if (nestsDeeperThan(text, JSON_DEPTH_MAX)) {
    return badRequest('kv_bad_body',
      `the body nests arrays and objects deeper than ${JSON_DEPTH_MAX} levels`);
  }
  return body;
}

/** True when the JSON text (already parsed, so well-formed) nests more than `levels` deep. */
function nestsDeeperThan(text: string, levels: number): boolean {
  // Each level takes an opening and a closing character.
  if (text.length <= 2 * levels) return false;
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      i = closingQuote(text, i);
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > levels) return true;
    } else if (c === 0x5d || c === 0x7d) {
      depth--;
    }
  }
  return false;
}

/** Index of the quote closing the string that opens at `open` (in well-formed JSON). */
function closingQuote(text: string, open: number): number {
  let at = text.indexOf('"', open + 1);
  for (;;) {
    let backslashes = 0;
    while (text.charCodeAt(at - 1 - backslashes) === 0x5c) backslashes++;
    if (backslashes % 2 === 0) return at;
    at = text.indexOf('"', at + 1);
  }
}

/**
 * `POST /api/v1/kv`: `{"operations":[...]}` or a bare array. An empty list is a valid call
 * with no operations (the server answers `{"results":[]}`).
 */
export function validateKvBody(body: unknown, tenant: string, limits: KvLimits): KvCall | KvError {
  if (isKvError(body)) return body;
  let list: unknown = body;
  if (isObject(body)) {
    const tenantError = refuseTenantFields(body, 'body');
    if (tenantError !== null) return tenantError;
    list = body['operations'];
  }
  if (!Array.isArray(list)) {
    return badRequest('kv_bad_body', 'the body must be {"operations":[...]} or an array');
  }
  const bounds: Bounds = {
    inTransaction: false,
    opsMax: limits.maxOpsPerCall,
    keysMax: limits.maxKeysPerCall,
  };
  return validateOps(list, tenant, limits, bounds);
}

/** The `kv` array of `POST /api/v1/transaction`: at most 64 ops over 256 keys, no getPrefix. */
export function validateTransactionKv(
  list: readonly unknown[],
  tenant: string,
  limits: KvLimits,
): KvCall | KvError {
  const bounds: Bounds = {
    inTransaction: true,
    opsMax: Math.min(TRANSACTION_OPS_MAX, limits.maxOpsPerCall),
    keysMax: Math.min(TRANSACTION_KEYS_MAX, limits.maxKeysPerCall),
  };
  return validateOps(list, tenant, limits, bounds);
}

function validateOps(
  list: readonly unknown[],
  tenant: string,
  limits: KvLimits,
  bounds: Bounds,
): KvCall | KvError {
  if (list.length > bounds.opsMax) {
    return badRequest('kv_too_many_ops',
      `${list.length} operations; one call carries at most ${bounds.opsMax}`);
  }
  const ops: KvOp[] = new Array<KvOp>(list.length);
  let keyCount = 0;
  let firstWrite: string | null = null;
  let writes: Set<string> | null = null;
  for (let index = 0; index < list.length; index++) {
    const op = validateOp(list[index], index, limits, bounds);
    if (isKvError(op)) return op;
    keyCount += keyCountOf(op);
    if (keyCount > bounds.keysMax) {
      return badRequest('kv_too_many_keys', `operations[${index}]: the call names more than ` +
        `${bounds.keysMax} keys (a getPrefix counts as its limit)`);
    }
    if (isWriteOp(op)) {
      // NUL never occurs in a namespace or a key, so it separates them unambiguously.
      const id = op.ns + '\u0000' + op.key;
      if (firstWrite === null) {
        firstWrite = id;
      } else {
        writes ??= new Set([firstWrite]);
        if (writes.has(id)) {
          return badRequest('kv_duplicate_key_in_call',
            `operations[${index}]: a second write to key ${JSON.stringify(op.key)} of ${op.ns}`);
        }
        writes.add(id);
      }
    }
    ops[index] = op;
  }
  return { tenant, ops, readBytesCeiling: limits.maxReadBytes };
}

function keyCountOf(op: KvOp): number {
  if (op.op === 'getMany') return op.keys.length;
  if (op.op === 'getPrefix') return op.limit;
  return 1;
}

function validateOp(raw: unknown, index: number, limits: KvLimits, bounds: Bounds): KvOp | KvError {
  const at = `operations[${index}]`;
  if (!isObject(raw)) return badRequest('kv_bad_request', `${at}: an operation is an object`);
  const tenantError = refuseTenantFields(raw, at);
  if (tenantError !== null) return tenantError;
  const name = raw['op'];
  if (name === 'getPrefix' && bounds.inTransaction) {
    return badRequest('kv_get_prefix_not_allowed_in_transaction',
      `${at}: getPrefix has no bound on its work inside a transaction`);
  }
  if (!isOpName(name)) {
    return badRequest('kv_unknown_op', `${at}: op must be one of ${OP_NAMES.join(', ')}`);
  }
  const ns = raw['ns'];
  if (typeof ns !== 'string' || !NAMESPACE_PATTERN.test(ns)) {
    return badRequest('kv_bad_namespace', `${at}: ns must match ${NAMESPACE_PATTERN.source}`);
  }
  switch (name) {
    case 'getMany':
      return validateGetMany(raw, ns, at, limits, bounds);
    case 'getPrefix':
      return validateGetPrefix(raw, ns, at, limits);
    default: {
      const key = raw['key'];
      const keyError = checkKey(key, `${at}: key`, limits);
      if (keyError !== null) return keyError;
      return validateKeyedOp(name, raw, ns, key as string, at, limits);
    }
  }
}

const OP_NAMES = [
  'get', 'getMany', 'getPrefix', 'put', 'putIfAbsent', 'delete', 'incr', 'check',
] as const;
type SentName = (typeof OP_NAMES)[number];

function isOpName(name: unknown): name is SentName {
  return typeof name === 'string' && (OP_NAMES as readonly string[]).includes(name);
}

/** Validates the fields of an op on one key, whose namespace and key are already valid. */
function validateKeyedOp(
  name: Exclude<SentName, 'getMany' | 'getPrefix'>,
  raw: Json,
  ns: string,
  key: string,
  at: string,
  limits: KvLimits,
): KvOp | KvError {
  switch (name) {
    case 'get':
      return { op: 'get', ns, key };
    case 'put':
    case 'putIfAbsent':
      return validatePut(name, raw, ns, key, at, limits);
    case 'delete':
      return validateDelete(raw, ns, key, at);
    case 'incr':
      return validateIncr(raw, ns, key, at);
    case 'check':
      return validateCheck(raw, ns, key, at);
  }
}

function refuseTenantFields(raw: Json, at: string): KvError | null {
  for (const field of TENANT_FIELDS) {
    if (field in raw) {
      return badRequest('kv_tenant_not_an_input',
        `${at}: ${field} is not an input; the server resolves the tenant`);
    }
  }
  return null;
}

/**
 * A key (or a prefix, or a cursor) is a non-empty string without NUL, well-formed UTF-16, of
 * at most `maxKeyBytes` UTF-8 bytes (WIRE.md, "Finer points": the key's own bytes only).
 */
function checkKey(key: unknown, what: string, limits: KvLimits): KvError | null {
  if (typeof key !== 'string' || key.length === 0) {
    return badRequest('kv_bad_key', `${what} must be a non-empty string`);
  }
  if (key.includes('\u0000')) return badRequest('kv_bad_key', `${what} must not contain NUL`);
  if (LONE_SURROGATE_PATTERN.test(key)) {
    return badRequest('kv_bad_key', `${what} holds an unpaired surrogate`);
  }
  // A UTF-16 unit is at most 3 UTF-8 bytes: short keys need no count.
  if (key.length * 3 > limits.maxKeyBytes && Buffer.byteLength(key, 'utf8') > limits.maxKeyBytes) {
    return tooLarge('kv_key_too_large', `${what} is over ${limits.maxKeyBytes} UTF-8 bytes`);
  }
  return null;
}

function validateGetMany(
  raw: Json,
  ns: string,
  at: string,
  limits: KvLimits,
  bounds: Bounds,
): KvOp | KvError {
  const keys = raw['keys'];
  if (!Array.isArray(keys)) return badRequest('kv_bad_request', `${at}: keys must be an array`);
  if (keys.length === 0) return badRequest('kv_bad_request', `${at}: keys must not be empty`);
  if (keys.length > bounds.keysMax) {
    return badRequest('kv_too_many_keys', `${at}: more than ${bounds.keysMax} keys`);
  }
  for (let i = 0; i < keys.length; i++) {
    const keyError = checkKey(keys[i], `${at}: keys[${i}]`, limits);
    if (keyError !== null) return keyError;
  }
  return { op: 'getMany', ns, keys: keys as string[] };
}

function validateGetPrefix(raw: Json, ns: string, at: string, limits: KvLimits): KvOp | KvError {
  const prefix = raw['prefix'];
  if (prefix === undefined || prefix === null || prefix === '') {
    return badRequest('kv_prefix_required', `${at}: getPrefix needs a non-empty prefix`);
  }
  const prefixError = checkKey(prefix, `${at}: prefix`, limits);
  if (prefixError !== null) return prefixError;
  let after = '';
  const rawAfter = raw['after'];
  if (rawAfter !== undefined && rawAfter !== null && rawAfter !== '') {
    const afterError = checkKey(rawAfter, `${at}: after`, limits);
    if (afterError !== null) return afterError;
    after = rawAfter as string;
  }
  const limit = clampLimit(raw['limit'], limits.prefixLimit);
  if (limit === null) return badRequest('kv_bad_request', `${at}: limit must be a number`);
  const keysOnly = raw['keysOnly'] ?? false;
  if (typeof keysOnly !== 'boolean') {
    return badRequest('kv_bad_request', `${at}: keysOnly must be true or false`);
  }
  return { op: 'getPrefix', ns, prefix: prefix as string, after, limit, keysOnly };
}

/** Clamps `limit` to 1..prefixLimit, never refusing a number (kv-routes.md). */
function clampLimit(raw: unknown, prefixLimit: number): number | null {
  if (raw === undefined || raw === null) return Math.min(PREFIX_LIMIT_DEFAULT, prefixLimit);
  if (typeof raw !== 'number' || Number.isNaN(raw)) return null;
  const whole = Math.floor(raw);
  if (!(whole >= 1)) return 1;
  return whole > prefixLimit ? prefixLimit : whole;
}

function validatePut(
  name: 'put' | 'putIfAbsent',
  raw: Json,
  ns: string,
  key: string,
  at: string,
  limits: KvLimits,
): KvOp | KvError {
  if (!('value' in raw)) return badRequest('kv_bad_request', `${at}: ${name} needs a value`);
  const expiry = readExpiry(raw, at);
  if (isKvError(expiry)) return expiry;
  let expect: number | null = 0;
  if (name === 'putIfAbsent') {
    if ('expect' in raw) {
      return badRequest('kv_bad_expect', `${at}: putIfAbsent is expect 0; it takes no expect`);
    }
  } else {
    const read = readExpect(raw, at);
    if (isKvError(read)) return read;
    expect = read;
  }
  const required = readRequired(raw, at);
  if (isKvError(required)) return required;
  const valueJson = JSON.stringify(raw['value']);
  // JSON.parse turns a number literal too large for a double (1e400) into Infinity, which
  // JSON.stringify writes as null: refuse rather than store a different value.
  if (valueJson.includes('null') && holdsNonFiniteNumber(raw['value'])) {
    return badRequest('kv_bad_request',
      `${at}: the value holds a number too large for a double (it would be stored as null)`);
  }
  if (valueJson.length * 3 > limits.maxValueBytes &&
      Buffer.byteLength(valueJson, 'utf8') > limits.maxValueBytes) {
    return tooLarge('kv_value_too_large',
      `${at}: the value is over ${limits.maxValueBytes} bytes of compact JSON`);
  }
  return { op: 'put', sentAs: name, ns, key, valueJson, expiry, expect, required };
}

function validateDelete(raw: Json, ns: string, key: string, at: string): KvOp | KvError {
  const expect = readExpect(raw, at);
  if (isKvError(expect)) return expect;
  const required = readRequired(raw, at);
  if (isKvError(required)) return required;
  return { op: 'delete', ns, key, expect, required };
}

function validateCheck(raw: Json, ns: string, key: string, at: string): KvOp | KvError {
  if (!('expect' in raw)) return badRequest('kv_bad_expect', `${at}: check needs an expect`);
  const expect = readExpect(raw, at);
  if (isKvError(expect)) return expect;
  const required = readRequired(raw, at);
  if (isKvError(required)) return required;
  return { op: 'check', ns, key, expect: expect ?? 0, required };
}

function validateIncr(raw: Json, ns: string, key: string, at: string): KvOp | KvError {
  if ('expect' in raw) {
    return badRequest('kv_bad_expect', `${at}: incr takes no expect; it replaces the CAS loop`);
  }
  const expiry = readExpiry(raw, at);
  if (isKvError(expiry)) return expiry;
  const delta = readDecimal(raw, 'delta', at, true);
  if (isKvError(delta)) return delta;
  const min = readDecimal(raw, 'min', at, false);
  if (isKvError(min)) return min;
  const max = readDecimal(raw, 'max', at, false);
  if (isKvError(max)) return max;
  const required = readRequired(raw, at);
  if (isKvError(required)) return required;
  return { op: 'incr', ns, key, delta: delta ?? '0', min, max, expiry, required };
}

function readDecimal(
  raw: Json,
  field: 'delta' | 'min' | 'max',
  at: string,
  needed: boolean,
): DecimalText | null | KvError {
  const value = raw[field];
  if (value === undefined && !needed) return null;
  const text = typeof value === 'number' ? toDecimalText(value) : null;
  if (text === null) return badRequest('kv_bad_request', `${at}: ${field} must be a finite number`);
  return text;
}

/** Exactly one of `ttlSeconds` or `forever: true`; `forever: false` declares nothing. */
function readExpiry(raw: Json, at: string): Expiry | KvError {
  const ttl = raw['ttlSeconds'];
  const forever = raw['forever'];
  if (forever !== undefined && typeof forever !== 'boolean') {
    return badRequest('kv_bad_request', `${at}: forever must be true or false`);
  }
  const hasTtl = ttl !== undefined;
  if (hasTtl === (forever === true)) {
    return badRequest('kv_expiry_not_specified',
      `${at}: name exactly one of ttlSeconds or forever:true`);
  }
  if (!hasTtl) return FOREVER;
  if (typeof ttl !== 'number' || !Number.isSafeInteger(ttl) || ttl <= 0 || ttl > TTL_SECONDS_MAX) {
    return badRequest('kv_bad_ttl',
      `${at}: ttlSeconds must be an integer from 1 to ${TTL_SECONDS_MAX}`);
  }
  return { kind: 'ttl', ttlSeconds: ttl };
}

const FOREVER: Expiry = { kind: 'forever' };

/** `expect` absent is null; present, it is a non-negative integer, `null` included as wrong. */
function readExpect(raw: Json, at: string): number | null | KvError {
  if (!('expect' in raw)) return null;
  const expect = raw['expect'];
  if (typeof expect !== 'number' || !Number.isSafeInteger(expect) || expect < 0) {
    return badRequest('kv_bad_expect', `${at}: expect must be an integer >= 0 (0 = absent)`);
  }
  return expect;
}

function readRequired(raw: Json, at: string): boolean | KvError {
  const required = raw['required'] ?? false;
  if (typeof required !== 'boolean') {
    return badRequest('kv_bad_request', `${at}: required must be true or false`);
  }
  return required;
}

/** The URL part of a path route, already split by the router: raw, percent-encoded. */
export interface PathTarget {
  readonly rawNs: string;
  readonly rawKey: string;
  /** The query string, or undefined when the URL has none. */
  readonly query: string | undefined;
}

export type PathMethod = 'GET' | 'PUT' | 'DELETE';

/**
 * `GET/PUT/DELETE /api/v1/kv/:ns/*key`: one op on one key. The key is percent-decoded once,
 * so `%2F` is a literal slash. `body` is the parsed body, or undefined when there was none.
 */
export function validatePathCall(
  method: PathMethod,
  target: PathTarget,
  body: unknown,
  tenant: string,
  limits: KvLimits,
): KvCall | KvError {
  if (target.query !== undefined) {
    return badRequest('kv_no_query_string',
      'the path routes refuse any query string; prefix reads live in the POST body');
  }
  if (isKvError(body)) return body;
  const fields: Json = body === undefined ? EMPTY : (body as Json);
  if (body !== undefined && !isObject(body)) {
    return badRequest('kv_bad_body', 'a path route body is a JSON object');
  }
  for (const field of PATH_FIELDS) {
    if (field in fields) {
      return badRequest('kv_field_in_path', `${field} comes from the URL, not the body`);
    }
  }
  const tenantError = refuseTenantFields(fields, 'body');
  if (tenantError !== null) return tenantError;
  const ns = decodeOnce(target.rawNs);
  if (ns === null || !NAMESPACE_PATTERN.test(ns)) {
    return badRequest('kv_bad_namespace', `the namespace must match ${NAMESPACE_PATTERN.source}`);
  }
  const key = decodeOnce(target.rawKey);
  if (key === null) return badRequest('kv_bad_key', 'the key is not valid percent-encoding');
  const keyError = checkKey(key, 'key', limits);
  if (keyError !== null) return keyError;
  const name = method === 'GET' ? 'get' : method === 'PUT' ? 'put' : 'delete';
  const op = validateKeyedOp(name, fields, ns, key, 'body', limits);
  if (isKvError(op)) return op;
  return { tenant, shape: 'single', ops: [op], readBytesCeiling: limits.maxReadBytes };
}

const EMPTY: Json = Object.freeze({});

function decodeOnce(text: string): string | null {
  if (!text.includes('%')) return text;
  try {
    return decodeURIComponent(text);
  } catch {
    return null;
  }
}

const QUOTA_LIMIT_FIELDS = ['maxRows', 'maxBytes', 'maxReadsPerSec', 'maxWritesPerSec'] as const;
const TENANT_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** The `:tenant` of `/api/v1/system/kv-quota/:tenant`: a UUID, lowercased (WIRE.md). */
export function validateTenantSegment(raw: string): string | KvError {
  const tenant = decodeOnce(raw)?.toLowerCase() ?? '';
  if (!TENANT_PATTERN.test(tenant)) return badRequest('kv_bad_tenant', 'the tenant is a UUID');
  return tenant;
}

/**
 * `PUT /api/v1/system/kv-quota/:tenant {enabled, maxRows, maxBytes, maxReadsPerSec,
 * maxWritesPerSec}`: `enabled` defaults to true; an absent or null limit is unlimited.
 */
export function validateQuotaSettings(body: unknown): QuotaSettings | KvError {
  if (isKvError(body)) return body;
  if (!isObject(body)) return badRequest('kv_bad_body', 'the body is a JSON object');
  const enabled = body['enabled'] ?? true;
  if (typeof enabled !== 'boolean') {
    return badRequest('kv_bad_request', 'enabled must be true or false');
  }
  const limits: Record<string, number | null> = {};
  for (const field of QUOTA_LIMIT_FIELDS) {
    const value = body[field] ?? null;
    if (value !== null && (typeof value !== 'number' || !Number.isSafeInteger(value) ||
        value < 0)) {
      return badRequest('kv_bad_request', `${field} must be an integer >= 0, or null`);
    }
    limits[field] = value;
  }
  return {
    enabled,
    maxRows: limits['maxRows'] ?? null,
    maxBytes: limits['maxBytes'] ?? null,
    maxReadsPerSec: limits['maxReadsPerSec'] ?? null,
    maxWritesPerSec: limits['maxWritesPerSec'] ?? null,
  };
}

/** `POST /api/v1/system/kv-timers {"kv": bool}`: true runs KV, false pauses it. */
export function validateTimersBody(body: unknown): boolean | KvError {
  if (isKvError(body)) return body;
  if (!isObject(body) || typeof body['kv'] !== 'boolean') {
    return badRequest('kv_bad_request', 'the body is {"kv": true|false}');
  }
  return body['kv'];
}
