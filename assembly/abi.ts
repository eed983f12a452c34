/**
 * The binary layout shared by the machine and its host: command kinds, op codes, flag bits,
 * result kinds, statuses, reasons and bounds. Mirrored one-for-one, with the same UPPER_SNAKE
 * names, in host/machine/abi.ts; test/unit/machine-abi.test.ts checks that they match.
 * docs/codec.md describes every layout. Constants only: no code.
 */

/** Bumped whenever a command, result or snapshot layout changes. */
export const FORMAT_VERSION: i32 = 2;
/** The snapshot layout before the dedup section; such snapshots still restore. */
export const FORMAT_VERSION_NO_DEDUP: i32 = 1;

// Command kinds (first byte of a command).
export const CMD_CALL_V1: i32 = 1;
export const CMD_SWEEP: i32 = 2;
export const CMD_SET_QUOTA: i32 = 3;
export const CMD_SET_PAUSED: i32 = 4;
export const CMD_NOOP: i32 = 5;
/** A call with its response shape (and transaction id); CMD_CALL_V1 is the same without. */
export const CMD_CALL: i32 = 6;

// Response shapes of a call (the byte after CMD_CALL): how its answer is wrapped.
/** `POST /api/v1/kv`: `{"results":[...]}`. */
export const SHAPE_BATCH: i32 = 1;
/** A path route: the single element itself (a found `get` also carries an ETag). */
export const SHAPE_SINGLE: i32 = 2;
/** `POST /api/v1/transaction`: the commit or rollback answer with its transaction id. */
export const SHAPE_TRANSACTION: i32 = 3;

// Op codes.
export const OP_GET: i32 = 1;
export const OP_GET_MANY: i32 = 2;
export const OP_GET_PREFIX: i32 = 3;
export const OP_CHECK: i32 = 4;
export const OP_PUT: i32 = 5;
export const OP_DELETE: i32 = 6;
export const OP_INCR: i32 = 7;

// Op flag bits (one byte after the op code).
export const FLAG_REQUIRED: i32 = 1;
export const FLAG_HAS_EXPECT: i32 = 2;
export const FLAG_FOREVER: i32 = 4;
export const FLAG_KEYS_ONLY: i32 = 8;
export const FLAG_PUT_IF_ABSENT: i32 = 16;
export const FLAG_HAS_MIN: i32 = 32;
export const FLAG_HAS_MAX: i32 = 64;

// Call flag bits.
export const CALL_REQUIRE_GRANT: i32 = 1;

// Apply outcome kinds (first byte of the output of apply).
export const OUT_CALL: i32 = 1;
export const OUT_SWEEP: i32 = 2;
export const OUT_ADMIN: i32 = 3;
export const OUT_NOOP: i32 = 4;
export const OUT_INVALID: i32 = 5;

// Call statuses.
export const STATUS_OK: i32 = 0;
export const STATUS_PRECONDITION: i32 = 1;
export const STATUS_PAUSED: i32 = 2;
export const STATUS_NOT_GRANTED: i32 = 3;
export const STATUS_QUOTA_EXCEEDED: i32 = 4;
export const STATUS_INVALID: i32 = 5;

// Result element kinds.
export const RES_GET_FOUND: i32 = 1;
export const RES_GET_MISSING: i32 = 2;
export const RES_GET_MANY: i32 = 3;
export const RES_GET_PREFIX: i32 = 4;
export const RES_WRITE: i32 = 5;

// Reasons (0 = none, the op applied).
export const REASON_NONE: i32 = 0;
export const REASON_EXISTS: i32 = 1;
export const REASON_ABSENT: i32 = 2;
export const REASON_VERSION: i32 = 3;
export const REASON_LIMIT: i32 = 4;
export const REASON_TYPE: i32 = 5;

/** expiresAt on the wire for a `forever` key (a real expiry is never negative). */
export const EXPIRES_NEVER_WIRE: i64 = -1;
/** Quota limit on the wire meaning "unlimited" (null). */
export const LIMIT_NONE_WIRE: i64 = -1;

// Bounds. A command over any of them is `invalid`; the host's own limits are far below.
export const OPS_PER_CALL_MAX: i32 = 4096;
export const KEYS_PER_CALL_MAX: i32 = 16384;
export const KEY_BYTES_MAX: i32 = 4096;
export const NS_BYTES_MAX: i32 = 255;
/** A transaction id (a UUID today) is at most this long. */
export const TRANSACTION_ID_BYTES_MAX: i32 = 64;
export const TENANT_BYTES_MAX: i32 = 255;
export const VALUE_BYTES_MAX: i32 = 1048576;
/** A stored number whose exponent is beyond this is refused by incr with `limit`. */
export const DECIMAL_EXPONENT_ABS_MAX: i32 = 1000;
/** Largest version, expiry or time the machine accepts or produces: 2^53 - 1. */
export const SAFE_INTEGER_MAX: i64 = 9007199254740991;

// Snapshot framing.
export const SNAPSHOT_MAGIC: i32 = 0x4b564948; // "HIVK" little-endian
