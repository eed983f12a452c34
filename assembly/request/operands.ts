/**
 * The scalar fields of an op, read as validate.ts reads them and in its words: the declared
 * lifetime (`ttlSeconds` / `forever`), `expect`, `required`, and incr's decimal operands.
 * Numbers are read exactly as written (numbers.ts), never rounded through a double.
 */
import { SAFE_INTEGER_MAX, TTL_SECONDS_MAX } from '../abi';
import {
  field, F_TTL_SECONDS, F_FOREVER, F_EXPECT, F_REQUIRED,
} from './fields';
import { bodyEnd, isBoolean, isTrue, isNumber, isNullish } from './body';
import {
  readNumber, numNeg, numIsInteger, numMagnitude, numOverflows, numFitsOperand,
  writeCanonical, canonicalLength,
} from './numbers';
import { refuseAt, refuseBadTtl, refuseFractionDigits, refuseNotFinite } from './refusal';
import { openString, commitString, writeString } from './command';
import { OPERAND_FRACTION_DIGITS_MAX } from '../abi';

/** Set by readExpiry: `forever: true` was declared (else ttlSeconds holds the TTL). */
export let expiryForever = false;
export let ttlSeconds: i64 = 0;
/** Set by readExpect: whether `expect` was present, and its value. */
export let expectPresent = false;
export let expectValue: i64 = 0;
/** Set by readRequired. */
export let requiredValue = false;

/**
 * The integer value of the number at p when it is an exact integer of at most 16 digits
 * (negative as negative), else i64.MIN_VALUE.
 */
function exactInteger(p: usize): i64 {
  if (!isNumber(p)) return i64.MIN_VALUE;
  readNumber(p, bodyEnd);
  if (!numIsInteger()) return i64.MIN_VALUE;
  let m = numMagnitude();
  if (m < 0) return i64.MIN_VALUE;
  return numNeg ? -m : m;
}

/** Exactly one of `ttlSeconds` or `forever: true`; `forever: false` declares nothing. */
export function readExpiry(): bool {
  let ttl = field(F_TTL_SECONDS);
  let forever = field(F_FOREVER);
  if (forever != 0 && !isBoolean(forever)) {
    return refuseAt('kv_bad_request', 'forever must be true or false');
  }
  let hasTtl = ttl != 0;
  if (hasTtl == isTrue(forever)) {
    return refuseAt('kv_expiry_not_specified', 'name exactly one of ttlSeconds or forever:true');
  }
  expiryForever = !hasTtl;
  ttlSeconds = 0;
  if (!hasTtl) return true;
  let v = exactInteger(ttl);
  if (v < 1 || v > TTL_SECONDS_MAX) return refuseBadTtl();
  ttlSeconds = v;
  return true;
}

/** `expect` absent, or a non-negative integer (`null` included as wrong). */
export function readExpect(): bool {
  let p = field(F_EXPECT);
  expectPresent = p != 0;
  expectValue = 0;
  if (p == 0) return true;
  let v = exactInteger(p);
  if (v < 0 || v > SAFE_INTEGER_MAX) {
    return refuseAt('kv_bad_expect', 'expect must be an integer >= 0 (0 = absent)');
  }
  expectValue = v;
  return true;
}

/** `required ?? false` must be a boolean. */
export function readRequired(): bool {
  let p = field(F_REQUIRED);
  requiredValue = false;
  if (isNullish(p)) return true;
  if (!isBoolean(p)) return refuseAt('kv_bad_request', 'required must be true or false');
  requiredValue = isTrue(p);
  return true;
}

/** Offset and length in the output of the decimal written last ('' when absent). */
export let decimalOff: i32 = 0;
export let decimalLen: i32 = 0;

/**
 * Writes incr's `delta`, `min` or `max` (`name`) at p (0 = absent) as canonical decimal
 * text; absent and not `needed`, writes an empty string and returns true with
 * decimalLen 0. A number beyond a double is refused as not finite, as JSON.parse made it.
 */
export function writeDecimal(p: usize, name: string, needed: bool): bool {
  if (p == 0 && !needed) {
    decimalLen = 0;
    decimalOff = writeString(0, 0);
    return true;
  }
  let finite = isNumber(p);
  if (finite) {
    readNumber(p, bodyEnd);
    finite = !numOverflows();
  }
  // Refusals composed in the refusal's own buffer: this path allocates nothing.
  if (!finite) return refuseNotFinite(name);
  if (!numFitsOperand()) return refuseFractionDigits(name, OPERAND_FRACTION_DIGITS_MAX);
  let len = canonicalLength();
  let written = writeCanonical(openString(len));
  assert(written == len, 'canonical length');
  decimalLen = len;
  decimalOff = commitString(len);
  return true;
}

