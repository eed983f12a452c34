/**
 * The binary layout shared by the machine and its host: command kinds, op codes, flag bits,
 * result kinds, statuses, reasons and bounds. Mirrored one-for-one, with the same UPPER_SNAKE
 * names, in host/machine/abi.ts; test/unit/machine-abi.test.ts checks that they match.
 * docs/codec.md describes every layout. Constants only: no code.
 */

/** Bumped whenever a command, result or snapshot layout changes. */
export const FORMAT_VERSION: i32 = 3;
/** The snapshot layout before the dedup section; such snapshots still restore. */
export const FORMAT_VERSION_NO_DEDUP: i32 = 1;
/** The snapshot layout before the idempotency section; such snapshots still restore. */
export const FORMAT_VERSION_NO_IDEMPOTENCY: i32 = 2;

// Command kinds (first byte of a command).
export const CMD_CALL_V1: i32 = 1;
export const CMD_SWEEP: i32 = 2;
export const CMD_SET_QUOTA: i32 = 3;
export const CMD_SET_PAUSED: i32 = 4;
export const CMD_NOOP: i32 = 5;
/** A call with its response shape (and transaction id); CMD_CALL_V1 is the same without. */
export const CMD_CALL: i32 = 6;
/** A CMD_CALL with an Idempotency-Key: string key, i64 record TTL seconds, the CMD_CALL. */
export const CMD_KEYED_CALL: i32 = 7;
/** A leader's digest at an index before this entry: i64 index, u64 digest (checkpoints.ts). */
export const CMD_CHECKPOINT: i32 = 8;

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
/** A checkpoint's verdict: u8 verdict, i64 index, u64 leader's digest, u64 own digest. */
export const OUT_CHECKPOINT: i32 = 6;

// Checkpoint verdicts (the byte after OUT_CHECKPOINT).
/** This replica's digest at the index equals the leader's. */
export const CHECKPOINT_PASSED: i32 = 1;
/** It differs: this replica's state is not the leader's. */
export const CHECKPOINT_DIVERGED: i32 = 2;
/** This replica no longer knows its digest at that index (restored past it, or too old). */
export const CHECKPOINT_UNVERIFIABLE: i32 = 3;
/** Applied indexes whose digest inputs the machine keeps (a power of two). */
export const CHECKPOINT_RING_ENTRIES: i32 = 4096;



// Reasons (0 = none, the op applied).
export const REASON_NONE: i32 = 0;
export const REASON_EXISTS: i32 = 1;
export const REASON_ABSENT: i32 = 2;
export const REASON_VERSION: i32 = 3;
export const REASON_LIMIT: i32 = 4;
export const REASON_TYPE: i32 = 5;

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

// Answers (docs/codec.md, "Answers"): u16 status, u8 flags, i64 etagVersion,
// u32 retryAfterSeconds, u32 bodyLen, body.
export const ANSWER_ETAG: i32 = 1;
export const ANSWER_RETRY_AFTER: i32 = 2;
export const ANSWER_HEADER_BYTES: i32 = 19;
/** The answer is a recorded one, replayed for a retry: `Idempotent-Replayed: true`. */
export const ANSWER_REPLAYED: i32 = 4;

// Idempotency records (docs/codec.md, "Idempotency records"), per tenant and in all.
/** An Idempotency-Key is 1..this many bytes of printable ASCII (0x20..0x7e). */
export const IDEMPOTENCY_KEY_BYTES_MAX: i32 = 255;
/** Longest record lifetime a keyed call may carry (HIVEKV_IDEMPOTENCY_TTL_SECONDS). */
export const IDEMPOTENCY_TTL_SECONDS_MAX: i64 = 2592000;
/** Records one tenant holds at most; past it the tenant's oldest record is evicted. */
export const IDEMPOTENCY_RECORDS_PER_TENANT_MAX: i32 = 250000;
/** Record bytes one tenant holds at most; past it the tenant's oldest record is evicted. */
export const IDEMPOTENCY_BYTES_PER_TENANT_MAX: i64 = 134217728;
/** Record bytes all tenants hold at most; past it the oldest record of any is evicted. */
export const IDEMPOTENCY_BYTES_MAX: i64 = 268435456;
/** Largest answer (header and body) a record keeps; a larger one is recorded without it. */
export const IDEMPOTENCY_ANSWER_BYTES_MAX: i32 = 1048576;
/** What a record costs beyond its key, tenant and answer bytes (objects, map slot). */
export const IDEMPOTENCY_RECORD_OVERHEAD_BYTES: i32 = 160;

// Log entries (docs/codec.md, "Entries"): their type, and the envelope of a normal entry.
export const ENTRY_NORMAL: i32 = 1;
export const ENTRY_EMPTY: i32 = 2;
/** First byte of an entry's envelope: u8 version, u8 idLen, id, u32 incarnation, u64 seq. */
export const ENVELOPE_FORMAT_VERSION: i32 = 1;
export const ORIGIN_ID_BYTES_MAX: i32 = 64;
/** Sequence numbers of one origin remembered below its highest one. */
export const DEDUP_WINDOW: i32 = 4096;
/** Origins (node incarnations) remembered; the least recently applied is forgotten first. */
export const DEDUP_ORIGINS_MAX: i32 = 64;

/** What `nextExpiryMs` answers when no row expires. */
export const NEXT_EXPIRY_NONE: i64 = -1;

// Snapshot framing.
export const SNAPSHOT_MAGIC: i32 = 0x4b564948; // "HIVK" little-endian

// ---- The request parser (docs/codec.md, "Requests") ----

/** Deepest nesting of arrays and objects a request body may have (the root counts as 1). */
export const JSON_DEPTH_MAX: i32 = 512;
/**
 * Most digits after the point an incr operand (`delta`, `min`, `max`) may have once written
 * exactly; a literal beyond it (`1e-2000`) is refused rather than rounded.
 */
export const OPERAND_FRACTION_DIGITS_MAX: i32 = 1000;
/** `getPrefix.limit` when the client names none (kv-routes.md). */
export const PREFIX_LIMIT_DEFAULT: i32 = 100;
/** The transaction wire holds at most this many KV operations (kv-concepts.md)... */
export const TRANSACTION_OPS_MAX: i32 = 64;
/** ... over at most this many keys. */
export const TRANSACTION_KEYS_MAX: i32 = 256;
/**
 * The longest TTL accepted. An entry stamped before year 3000 plus this many seconds is
 * still before year 10000, so `expiresAt` always has a four-digit ISO-8601 year.
 */
export const TTL_SECONDS_MAX: i64 = 220898620800;

// Routes of a request frame (its first byte).
/** `POST /api/v1/kv`. */
export const ROUTE_KV_BATCH: i32 = 1;
/** `GET|PUT|DELETE /api/v1/kv/:ns/*key`. */
export const ROUTE_KV_PATH: i32 = 2;
/** `POST /api/v1/transaction`. */
export const ROUTE_TRANSACTION: i32 = 3;

// Methods of a path route (0 on the other routes).
export const METHOD_GET: i32 = 1;
export const METHOD_PUT: i32 = 2;
export const METHOD_DELETE: i32 = 3;

// Request flag bits.
/** The path route's URL has a query string. */
export const REQ_HAS_QUERY: i32 = 1;
/** A body was sent (a path GET or DELETE usually has none). */
export const REQ_HAS_BODY: i32 = 2;
/** QUEEN_KV_REQUIRE_GRANT, copied into the command's call flags. */
export const REQ_REQUIRE_GRANT: i32 = 4;

// Output kinds of parseRequest.
/** The request is a call: the output holds its CMD_CALL command. */
export const PARSE_COMMAND: i32 = 1;
/** The request is refused with a 400 or 413 envelope. */
export const PARSE_REFUSED: i32 = 2;
/** The frame itself is malformed: a bug in the host, never the client's doing. */
export const PARSE_INVALID: i32 = 3;
