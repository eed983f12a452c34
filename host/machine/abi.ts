/**
 * The host's mirror of assembly/abi.ts: the same UPPER_SNAKE constants with the same values
 * (test/unit/machine-abi.test.ts compares the two files). Layouts are in docs/codec.md.
 * Constants only: no code.
 */

/** Bumped whenever a command, result or snapshot layout changes. */
export const FORMAT_VERSION = 2;
/** The snapshot layout before the dedup section; such snapshots still restore. */
export const FORMAT_VERSION_NO_DEDUP = 1;

// Command kinds (first byte of a command).
export const CMD_CALL_V1 = 1;
export const CMD_SWEEP = 2;
export const CMD_SET_QUOTA = 3;
export const CMD_SET_PAUSED = 4;
export const CMD_NOOP = 5;
/** A call with its response shape (and transaction id); CMD_CALL_V1 is the same without. */
export const CMD_CALL = 6;

// Response shapes of a call (the byte after CMD_CALL): how its answer is wrapped.
/** `POST /api/v1/kv`: `{"results":[...]}`. */
export const SHAPE_BATCH = 1;
/** A path route: the single element itself (a found `get` also carries an ETag). */
export const SHAPE_SINGLE = 2;
/** `POST /api/v1/transaction`: the commit or rollback answer with its transaction id. */
export const SHAPE_TRANSACTION = 3;

// Op codes.
export const OP_GET = 1;
export const OP_GET_MANY = 2;
export const OP_GET_PREFIX = 3;
export const OP_CHECK = 4;
export const OP_PUT = 5;
export const OP_DELETE = 6;
export const OP_INCR = 7;

// Op flag bits (one byte after the op code).
export const FLAG_REQUIRED = 1;
export const FLAG_HAS_EXPECT = 2;
export const FLAG_FOREVER = 4;
export const FLAG_KEYS_ONLY = 8;
export const FLAG_PUT_IF_ABSENT = 16;
export const FLAG_HAS_MIN = 32;
export const FLAG_HAS_MAX = 64;

// Call flag bits.
export const CALL_REQUIRE_GRANT = 1;

// Apply outcome kinds (first byte of the output of apply).
export const OUT_CALL = 1;
export const OUT_SWEEP = 2;
export const OUT_ADMIN = 3;
export const OUT_NOOP = 4;
export const OUT_INVALID = 5;

// Call statuses.
export const STATUS_OK = 0;
export const STATUS_PRECONDITION = 1;
export const STATUS_PAUSED = 2;
export const STATUS_NOT_GRANTED = 3;
export const STATUS_QUOTA_EXCEEDED = 4;
export const STATUS_INVALID = 5;

// Result element kinds.
export const RES_GET_FOUND = 1;
export const RES_GET_MISSING = 2;
export const RES_GET_MANY = 3;
export const RES_GET_PREFIX = 4;
export const RES_WRITE = 5;

// Reasons (0 = none, the op applied).
export const REASON_NONE = 0;
export const REASON_EXISTS = 1;
export const REASON_ABSENT = 2;
export const REASON_VERSION = 3;
export const REASON_LIMIT = 4;
export const REASON_TYPE = 5;

/** expiresAt on the wire for a `forever` key (a real expiry is never negative). */
export const EXPIRES_NEVER_WIRE = -1;
/** Quota limit on the wire meaning "unlimited" (null). */
export const LIMIT_NONE_WIRE = -1;

// Bounds. A command over any of them is `invalid`; the host's own limits are far below.
export const OPS_PER_CALL_MAX = 4096;
export const KEYS_PER_CALL_MAX = 16384;
export const KEY_BYTES_MAX = 4096;
export const NS_BYTES_MAX = 255;
/** A transaction id (a UUID today) is at most this long. */
export const TRANSACTION_ID_BYTES_MAX = 64;
export const TENANT_BYTES_MAX = 255;
export const VALUE_BYTES_MAX = 1048576;
/** A stored number whose exponent is beyond this is refused by incr with `limit`. */
export const DECIMAL_EXPONENT_ABS_MAX = 1000;
/** Largest version, expiry or time the machine accepts or produces: 2^53 - 1. */
export const SAFE_INTEGER_MAX = 9007199254740991;

// Snapshot framing.
export const SNAPSHOT_MAGIC = 0x4b564948; // "HIVK" little-endian
