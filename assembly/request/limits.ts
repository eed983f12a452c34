/**
 * The receiving node's request limits (QUEEN_KV_*), set once at start by
 * `setRequestLimits`. Until then they hold the defaults of spec/WIRE.md, "Configuration".
 * Every limit must stay within what the machine's command decoder accepts (abi.ts bounds),
 * so that a command the parser writes is never refused as `invalid` when applied.
 */
import { KEY_BYTES_MAX, OPS_PER_CALL_MAX, KEYS_PER_CALL_MAX, VALUE_BYTES_MAX } from '../abi';

/** QUEEN_KV_MAX_VALUE_BYTES: compact JSON bytes of one value. */
export let maxValueBytes: i32 = 65536;
/** QUEEN_KV_MAX_KEY_BYTES: UTF-8 bytes of one key. */
export let maxKeyBytes: i32 = 512;
/** QUEEN_KV_MAX_OPS_PER_CALL. */
export let maxOpsPerCall: i32 = 256;
/** QUEEN_KV_MAX_KEYS_PER_CALL; a getPrefix counts as its clamped limit. */
export let maxKeysPerCall: i32 = 1024;
/** QUEEN_KV_PREFIX_LIMIT: getPrefix `limit` is clamped to 1..this. */
export let prefixLimit: i32 = 1000;
/** QUEEN_KV_MAX_READ_BYTES: value bytes one call may read (the command's read ceiling). */
export let maxReadBytes: i64 = 4194304;

/**
 * Sets every limit at once. Returns 0, or the 1-based position of the first argument out of
 * its range (nothing changes then): values and keys up to the machine's own bounds, ops and
 * keys per call up to its bounds, a prefix limit of at least 1 (clamped against the keys per
 * call anyway), a read ceiling of 0 up to 2^53 - 1.
 */
export function setLimits(
  valueBytes: i32, keyBytes: i32, opsPerCall: i32, keysPerCall: i32, prefix: i32,
  readBytes: i64,
): i32 {
  if (valueBytes < 1 || valueBytes > VALUE_BYTES_MAX) return 1;
  if (keyBytes < 1 || keyBytes > KEY_BYTES_MAX) return 2;
  if (opsPerCall < 1 || opsPerCall > OPS_PER_CALL_MAX) return 3;
  if (keysPerCall < 1 || keysPerCall > KEYS_PER_CALL_MAX) return 4;
  if (prefix < 1) return 5;
  if (readBytes < 0 || readBytes > 9007199254740991) return 6;
  maxValueBytes = valueBytes;
  maxKeyBytes = keyBytes;
  maxOpsPerCall = opsPerCall;
  maxKeysPerCall = keysPerCall;
  prefixLimit = prefix;
  maxReadBytes = readBytes;
  return 0;
}
