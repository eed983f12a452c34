/**
 * One operation: its object checked field by field in the order of validate.ts
 * (`validateOp`, `validateKeyedOp` and the per-op validators) and appended to the command
 * as an `op` of docs/codec.md. The first refusal wins; on success the op's key count, write
 * target and growth inputs are left in the exported fields for the call's checks.
 */
import {
  OP_GET, OP_GET_MANY, OP_GET_PREFIX, OP_CHECK, OP_PUT, OP_DELETE, OP_INCR, FLAG_REQUIRED,
  FLAG_HAS_EXPECT, FLAG_FOREVER, FLAG_KEYS_ONLY, FLAG_PUT_IF_ABSENT, FLAG_HAS_MIN,
  FLAG_HAS_MAX, PREFIX_LIMIT_DEFAULT,
} from '../abi';
import {
  field, walkObject, walkedValue, walkedValueLen, walkedValueOverflows, F_OP, F_NS, F_KEY,
  F_KEYS, F_PREFIX, F_AFTER, F_LIMIT, F_KEYS_ONLY, F_VALUE, F_EXPECT, F_DELTA, F_MIN, F_MAX,
  F_TENANT, F_TENANT_ID, F_UNDERSCORE_TENANT,
} from './fields';
import {
  bodyEnd, isObject, isArray, isNumber, isBoolean, isTrue, isNullish, isEmptyString,
  firstElement, nextElement, countFrom,
} from './body';
import {
  keyFromJson, nsFromJson, opNameOf, NAME_GET, NAME_GET_MANY, NAME_GET_PREFIX, NAME_PUT,
  NAME_PUT_IF_ABSENT, NAME_DELETE, NAME_INCR, NAME_CHECK,
} from './keys';
import { readNumber, numClamp } from './numbers';
import { strEnd } from './strings';
import {
  readExpiry, readExpect, readRequired, writeDecimal, expiryForever, ttlSeconds,
  expectPresent, expectValue, requiredValue, decimalOff, decimalLen,
} from './operands';
import {
  mark, writeU8, writeU32, writeI64, patchU8, openString, commitString, writeString,
} from './command';
import { maxValueBytes, prefixLimit } from './limits';
import {
  setAt, refuseAt, refuseNeedsValue, refuseTenantField, refuseValueTooLarge,
  refuseTooManyKeysInOp, WHAT_KEY, WHAT_KEYS, WHAT_PREFIX, WHAT_AFTER,
} from './refusal';

/** Keys the op names, for the call's key count (a getPrefix counts as its limit). */
export let opKeyCount: i32 = 0;
/** The op's code when it writes (put, delete, incr), else 0. */
export let opWriteCode: i32 = 0;
/** put: the value's length; incr: the delta's offset (its length in opAuxLen). */
export let opAux: i32 = 0;
export let opAuxLen: i32 = 0;
/** Position just after the op's object. */
export let opAfter: usize = 0;

const CODES: StaticArray<i32> = [
  OP_GET, OP_GET_MANY, OP_GET_PREFIX, OP_PUT, OP_PUT, OP_DELETE, OP_INCR, OP_CHECK,
];

/** `tenant`, `tenantId`, `_tenant` are refused in that order (validate.ts). */
export function noTenantFields(): bool {
  if (field(F_TENANT) != 0) return refuseTenantField('tenant');
  if (field(F_TENANT_ID) != 0) return refuseTenantField('tenantId');
  if (field(F_UNDERSCORE_TENANT) != 0) return refuseTenantField('_tenant');
  return true;
}

/** Validates the operation at p, the index-th of its list, and writes it. */
export function validateOp(p: usize, index: i32, inTransaction: bool, keysMax: i32): bool {
  setAt(index);
  opKeyCount = 1;
  opWriteCode = 0;
  if (!isObject(p)) return refuseAt('kv_bad_request', 'an operation is an object');
  opAfter = walkObject(p, bodyEnd);
  if (!noTenantFields()) return false;
  let name = opNameOf(field(F_OP));
  if (name == NAME_GET_PREFIX && inTransaction) {
    return refuseAt('kv_get_prefix_not_allowed_in_transaction',
      'getPrefix has no bound on its work inside a transaction');
  }
  if (name < 0) {
    return refuseAt('kv_unknown_op',
      'op must be one of get, getMany, getPrefix, put, putIfAbsent, delete, incr, check');
  }
  let flagsAt = startOp(name);
  if (!nsFromJson(field(F_NS))) return false;
  if (name == NAME_GET_MANY) return getMany(keysMax);
  if (name == NAME_GET_PREFIX) return getPrefix(flagsAt);
  if (!keyFromJson(field(F_KEY), WHAT_KEY, 0)) return false;
  return keyedOp(name, flagsAt);
}

/** Writes the op code and a flags byte to fill in later; returns the flags' offset. */
export function startOp(name: i32): i32 {
  writeU8(unchecked(CODES[name]));
  let flagsAt = mark();
  writeU8(0);
  return flagsAt;
}

/** The fields of an op on one key, whose namespace and key are written already. */
export function keyedOp(name: i32, flagsAt: i32): bool {
  opKeyCount = 1;
  opWriteCode = 0;
  if (name == NAME_GET) return true;
  if (name == NAME_PUT || name == NAME_PUT_IF_ABSENT) return put(name, flagsAt);
  if (name == NAME_DELETE) return del(flagsAt);
  if (name == NAME_INCR) return incr(flagsAt);
  assert(name == NAME_CHECK, 'keyed op name');
  return check(flagsAt);
}

function getMany(keysMax: i32): bool {
  let keys = field(F_KEYS);
  if (!isArray(keys)) return refuseAt('kv_bad_request', 'keys must be an array');
  let first = firstElement(keys);
  let count = countFrom(first, keysMax + 1);
  if (count == 0) return refuseAt('kv_bad_request', 'keys must not be empty');
  if (count > keysMax) return refuseTooManyKeysInOp(keysMax);
  writeU32(<u32>count);
  let q = first;
  for (let i = 0; i < count; i++) {
    if (!keyFromJson(q, WHAT_KEYS, i)) return false;
    q = nextElement(strEnd);
  }
  opKeyCount = count;
  return true;
}

function getPrefix(flagsAt: i32): bool {
  let prefix = field(F_PREFIX);
  if (isNullish(prefix) || isEmptyString(prefix)) {
    return refuseAt('kv_prefix_required', 'getPrefix needs a non-empty prefix');
  }
  if (!keyFromJson(prefix, WHAT_PREFIX, 0)) return false;
  let after = field(F_AFTER);
  if (isNullish(after) || isEmptyString(after)) writeString(0, 0);
  else if (!keyFromJson(after, WHAT_AFTER, 0)) return false;
  let limitAt = field(F_LIMIT);
  let limit = min(PREFIX_LIMIT_DEFAULT, prefixLimit);
  if (!isNullish(limitAt)) {
    if (!isNumber(limitAt)) return refuseAt('kv_bad_request', 'limit must be a number');
    readNumber(limitAt, bodyEnd);
    limit = numClamp(prefixLimit);
  }
  let keysOnly = field(F_KEYS_ONLY);
  if (!isNullish(keysOnly) && !isBoolean(keysOnly)) {
    return refuseAt('kv_bad_request', 'keysOnly must be true or false');
  }
  writeU32(<u32>limit);
  patchU8(flagsAt, isTrue(keysOnly) ? FLAG_KEYS_ONLY : 0);
  opKeyCount = limit;
  return true;
}

function expiryFlags(): i32 {
  return (expiryForever ? FLAG_FOREVER : 0) | (requiredValue ? FLAG_REQUIRED : 0);
}

function put(name: i32, flagsAt: i32): bool {
  let ifAbsent = name == NAME_PUT_IF_ABSENT;
  if (field(F_VALUE) == 0) return refuseNeedsValue(ifAbsent ? 'putIfAbsent' : 'put');
  if (!readExpiry()) return false;
  if (ifAbsent) {
    if (field(F_EXPECT) != 0) {
      return refuseAt('kv_bad_expect', 'putIfAbsent is expect 0; it takes no expect');
    }
  } else if (!readExpect()) return false;
  if (!readRequired()) return false;
  // The walk over the op's object compacted its value already (fields.ts).
  let cap = maxValueBytes;
  let len = walkedValueLen;
  if (walkedValueOverflows) {
    return refuseAt('kv_bad_request',
      'the value holds a number too large for a double (it would be stored as null)');
  }
  if (len > cap) return refuseValueTooLarge(cap);
  memory.copy(openString(len), walkedValue(), <usize>len);
  commitString(len);
  let hasExpect = ifAbsent || expectPresent;
  writeI64(ifAbsent ? 0 : expectValue);
  writeI64(ttlSeconds);
  patchU8(flagsAt, expiryFlags() | (hasExpect ? FLAG_HAS_EXPECT : 0) |
    (ifAbsent ? FLAG_PUT_IF_ABSENT : 0));
  opWriteCode = OP_PUT;
  opAux = len;
  return true;
}

function del(flagsAt: i32): bool {
  if (!readExpect()) return false;
  if (!readRequired()) return false;
  writeI64(expectValue);
  writeI64(0);
  patchU8(flagsAt, (expectPresent ? FLAG_HAS_EXPECT : 0) | (requiredValue ? FLAG_REQUIRED : 0));
  opWriteCode = OP_DELETE;
  return true;
}

function check(flagsAt: i32): bool {
  if (field(F_EXPECT) == 0) return refuseAt('kv_bad_expect', 'check needs an expect');
  if (!readExpect()) return false;
  if (!readRequired()) return false;
  writeI64(expectValue);
  writeI64(0);
  patchU8(flagsAt, FLAG_HAS_EXPECT | (requiredValue ? FLAG_REQUIRED : 0));
  return true;
}

function incr(flagsAt: i32): bool {
  if (field(F_EXPECT) != 0) {
    return refuseAt('kv_bad_expect', 'incr takes no expect; it replaces the CAS loop');
  }
  if (!readExpiry()) return false;
  if (!writeDecimal(field(F_DELTA), 'delta', true)) return false;
  let deltaOff = decimalOff, deltaLen = decimalLen;
  if (!writeDecimal(field(F_MIN), 'min', false)) return false;
  let flags = decimalLen > 0 ? FLAG_HAS_MIN : 0;
  if (!writeDecimal(field(F_MAX), 'max', false)) return false;
  flags |= decimalLen > 0 ? FLAG_HAS_MAX : 0;
  if (!readRequired()) return false;
  writeI64(0);
  writeI64(ttlSeconds);
  patchU8(flagsAt, flags | expiryFlags());
  opWriteCode = OP_INCR;
  opAux = deltaOff;
  opAuxLen = deltaLen;
  return true;
}
