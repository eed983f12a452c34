/**
 * The request frame the host hands the machine's parser, and what the parser answers
 * (docs/codec.md, "Requests"). The frame is written straight into the machine's input
 * region: its strings encoded in place, the body copied once, no object per operation.
 * Pure: no I/O; the only memory touched is the `Uint8Array` it is given.
 */
import { putU32 } from '../core/little-endian.js';
import { Slabs } from '../core/slabs.js';
import {
  METHOD_DELETE, METHOD_GET, METHOD_PUT, PARSE_COMMAND, PARSE_INVALID, PARSE_REFUSED,
  REQ_HAS_BODY, REQ_HAS_QUERY, REQ_REQUIRE_GRANT, ROUTE_KV_BATCH, ROUTE_KV_PATH,
  ROUTE_TRANSACTION,
} from './abi.js';

/** The receiving node's limits the parser enforces (a subset of the node's KvLimits). */
export interface RequestLimits {
  /** QUEEN_KV_MAX_VALUE_BYTES: compact JSON bytes of one value, 1..VALUE_BYTES_MAX. */
  readonly maxValueBytes: number;
  /** QUEEN_KV_MAX_KEY_BYTES: UTF-8 bytes of one key, 1..KEY_BYTES_MAX. */
  readonly maxKeyBytes: number;
  /** QUEEN_KV_MAX_OPS_PER_CALL, 1..OPS_PER_CALL_MAX. */
  readonly maxOpsPerCall: number;
  /** QUEEN_KV_MAX_KEYS_PER_CALL, 1..KEYS_PER_CALL_MAX. */
  readonly maxKeysPerCall: number;
  /** QUEEN_KV_PREFIX_LIMIT: getPrefix `limit` is clamped to 1..this. */
  readonly prefixLimit: number;
  /** QUEEN_KV_MAX_READ_BYTES: the read ceiling every command carries, 0..2^53 - 1. */
  readonly maxReadBytes: number;
}

/** Which route a request came in on. */
export type RequestRoute = 'batch' | 'path' | 'transaction';
export type PathMethod = 'GET' | 'PUT' | 'DELETE';

/** One request, as the HTTP layer has it once the tenant is resolved. */
export interface RequestFrame {
  readonly route: RequestRoute;
  /** Path route only. */
  readonly method?: PathMethod;
  /** Path route only: the URL has a query string (any, even empty after `?`). */
  readonly hasQuery?: boolean;
  /** The body's bytes, or null when none was sent. */
  readonly body: Uint8Array | null;
  /** The resolved tenant (1..TENANT_BYTES_MAX UTF-8 bytes). */
  readonly tenant: string;
  /** Path route only: the namespace segment and everything after `<ns>/`, percent-encoded. */
  readonly rawNs?: string;
  readonly rawKey?: string;
  /** Transaction route only: the id drawn when the request arrived. */
  readonly transactionId?: string;
  /** QUEEN_KV_REQUIRE_GRANT, copied into the command. */
  readonly requireGrant: boolean;
}

/** What the parser made of a request. */
export type ParseOutcome =
  | {
      readonly kind: 'command';
      /** The call holds a put, delete or incr (it goes through the log). */
      readonly hasWrites: boolean;
      /** 0: an empty call, answered without the log. */
      readonly opCount: number;
      /**
       * Estimated change of the state's byte total if every write applied (may be < 0); 0
       * below the memory budget the machine was given, where no call is refused for memory.
       */
      readonly growthBytes: number;
      /** The CMD_CALL command: a copy, independent of wasm memory. */
      readonly command: Uint8Array;
    }
  | {
      readonly kind: 'refused';
      /** 400 (`kv_bad_request`) or 413 (`payload_too_large`). */
      readonly status: number;
      readonly reason: string;
      readonly detail: string;
    };

const ROUTES = { batch: ROUTE_KV_BATCH, path: ROUTE_KV_PATH,
  transaction: ROUTE_TRANSACTION } as const;
const METHODS = { GET: METHOD_GET, PUT: METHOD_PUT, DELETE: METHOD_DELETE } as const;
/** Fixed bytes of a frame: route, method, flags, four string lengths, the body length. */
const FRAME_FIXED_BYTES = 3 + 4 * 4 + 4;
/** Strings shorter than this are copied by hand when ASCII: cheaper than encodeInto. */
const SHORT_STRING_CHARS = 64;
/** Bytes of the PARSE_COMMAND header before the command. */
const COMMAND_HEADER_BYTES = 18;
const TWO_POW_32 = 4294967296;
const utf8Encoder = new TextEncoder();

/** The most bytes `frame` can take: a UTF-16 unit is at most 3 UTF-8 bytes. */
export function frameBytesMax(frame: RequestFrame): number {
  return FRAME_FIXED_BYTES + 3 * (frame.tenant.length + (frame.rawNs?.length ?? 0) +
    (frame.rawKey?.length ?? 0) + (frame.transactionId?.length ?? 0)) +
    (frame.body?.length ?? 0);
}

function putString(target: Uint8Array, pos: number, s: string): number {
  const n = s.length;
  if (n === 0) {
    putU32(target, pos, 0);
    return pos + 4;
  }
  const start = pos + 4;
  if (n < SHORT_STRING_CHARS) {
    let i = 0;
    for (; i < n; i++) {
      const c = s.charCodeAt(i);
      if (c > 0x7f) break;
      target[start + i] = c;
    }
    if (i === n) {
      putU32(target, pos, n);
      return start + n;
    }
  }
  const { written } = utf8Encoder.encodeInto(s, target.subarray(start));
  putU32(target, pos, written);
  return start + written;
}

/**
 * The tenant last written and its UTF-8 bytes: nearly every call names the tenant the call
 * before it did, and copying its bytes costs a tenth of encoding them again.
 */
let lastTenant = '';
let lastTenantBytes = new Uint8Array(0);

function putTenant(target: Uint8Array, pos: number, tenant: string): number {
  if (tenant !== lastTenant) {
    lastTenantBytes = utf8Encoder.encode(tenant);
    lastTenant = tenant;
  }
  const n = lastTenantBytes.length;
  putU32(target, pos, n);
  target.set(lastTenantBytes, pos + 4);
  return pos + 4 + n;
}

/**
 * Writes `frame` into `target` at `at` (with frameBytesMax(frame) bytes of room there);
 * returns the frame's length.
 */
export function writeRequestFrame(target: Uint8Array, at: number, frame: RequestFrame): number {
  const path = frame.route === 'path';
  target[at] = ROUTES[frame.route];
  target[at + 1] = path && frame.method !== undefined ? METHODS[frame.method] : 0;
  target[at + 2] = (path && frame.hasQuery === true ? REQ_HAS_QUERY : 0) |
    (frame.body !== null ? REQ_HAS_BODY : 0) | (frame.requireGrant ? REQ_REQUIRE_GRANT : 0);
  let pos = putTenant(target, at + 3, frame.tenant);
  pos = putString(target, pos, path ? frame.rawNs ?? '' : '');
  pos = putString(target, pos, path ? frame.rawKey ?? '' : '');
  pos = putString(target, pos, frame.route === 'transaction' ? frame.transactionId ?? '' : '');
  const body = frame.body;
  putU32(target, pos, body?.length ?? 0);
  pos += 4;
  if (body !== null) {
    target.set(body, pos);
    pos += body.length;
  }
  return pos - at;
}

/** A frame as standalone bytes (tests and tools; the hot path writes into wasm memory). */
export function encodeRequestFrame(frame: RequestFrame): Uint8Array {
  const target = new Uint8Array(frameBytesMax(frame));
  return target.subarray(0, writeRequestFrame(target, 0, frame));
}

function getU32(bytes: Uint8Array, pos: number): number {
  return (bytes[pos]! | (bytes[pos + 1]! << 8) | (bytes[pos + 2]! << 16)) +
    bytes[pos + 3]! * 0x1000000;
}

function readString(bytes: Uint8Array, pos: number, end: number): [string, number] {
  const n = getU32(bytes, pos);
  const start = pos + 4;
  if (start + n > end) throw new Error('parseRequest output: string past the end');
  return [Buffer.from(bytes.buffer, bytes.byteOffset + start, n).toString('utf8'), start + n];
}

/**
 * Parsed commands live for one call. They are cut from slabs of their own (slabs.ts) rather
 * than one fresh ArrayBuffer each (what `slice` makes: an allocation outside the heap and work
 * at every scavenge, per call).
 */
const commandSlabs = new Slabs();

/** A copy of `bytes[start, end)`, independent of wasm memory. */
function copyOut(bytes: Uint8Array, start: number, end: number): Uint8Array {
  const out = commandSlabs.take(end - start);
  out.set(bytes.subarray(start, end));
  return out;
}

/**
 * Decodes the parser's output, `len` bytes at `at` of `bytes`. A PARSE_INVALID output (a
 * malformed frame: a bug in the host) throws.
 */
export function decodeParseOutput(bytes: Uint8Array, at = 0,
  len = bytes.length - at): ParseOutcome {
  const kind = bytes[at];
  const end = at + len;
  if (kind === PARSE_COMMAND) {
    const lo = getU32(bytes, at + 6);
    const hi = getU32(bytes, at + 10) | 0;
    const commandLen = getU32(bytes, at + 14);
    if (COMMAND_HEADER_BYTES + commandLen !== len) {
      throw new Error('parseRequest output: bad length');
    }
    return {
      kind: 'command', hasWrites: bytes[at + 1] === 1, opCount: getU32(bytes, at + 2),
      growthBytes: hi * TWO_POW_32 + lo,
      command: copyOut(bytes, at + COMMAND_HEADER_BYTES, end),
    };
  }
  if (kind === PARSE_REFUSED) {
    const status = bytes[at + 1]! | (bytes[at + 2]! << 8);
    const [reason, next] = readString(bytes, at + 3, end);
    const [detail] = readString(bytes, next, end);
    return { kind: 'refused', status, reason, detail };
  }
  if (kind === PARSE_INVALID) {
    throw new Error(`parseRequest: malformed request frame: ${readString(bytes, at + 1, end)[0]}`);
  }
  throw new Error(`parseRequest output: unknown kind ${kind}`);
}
