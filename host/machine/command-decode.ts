/**
 * Command bytes (a log entry's command, docs/codec.md "Commands") back into the `Command`
 * of commands.ts: every command kind, both call layouts (CMD_CALL with its shape and
 * transaction id, and CMD_CALL_V1 without), and a CMD_KEYED_CALL as a call with its key.
 * For tests, and for tools that print a log.
 *
 * Structural: it reads what the bytes say and refuses only what has no reading (short or
 * trailing bytes, unknown kinds, codes or flags, an integer beyond 2^53, invalid UTF-8); the
 * machine's own rules (empty keys, bounds) stay the machine's. It never throws: garbage
 * gives `{ ok: false, reason }`. Pure: no I/O.
 */
import {
  CMD_CALL, CMD_CALL_V1, CMD_CHECKPOINT, CMD_KEYED_CALL, CMD_NOOP, CMD_SET_PAUSED,
  CMD_SET_QUOTA, CMD_SWEEP,
  FLAG_FOREVER, IDEMPOTENCY_TTL_SECONDS_MAX,
  FLAG_HAS_EXPECT, FLAG_HAS_MAX, FLAG_HAS_MIN, FLAG_KEYS_ONLY, FLAG_PUT_IF_ABSENT,
  FLAG_REQUIRED, CALL_REQUIRE_GRANT, LIMIT_NONE_WIRE, OP_CHECK, OP_DELETE, OP_GET,
  OP_GET_MANY, OP_GET_PREFIX, OP_INCR, OP_PUT, SHAPE_BATCH, SHAPE_SINGLE, SHAPE_TRANSACTION,
} from './abi.js';
import { idempotencyKeyProblem } from './idempotency.js';
import type { CallShape, Command, Expiry, KvCall, KvOp, QuotaSettings } from './commands.js';

export type DecodedCommand =
  | { readonly ok: true; readonly command: Command }
  | { readonly ok: false; readonly reason: string };

const TWO_POW_32 = 4294967296;
const ALL_OP_FLAGS = FLAG_REQUIRED | FLAG_HAS_EXPECT | FLAG_FOREVER | FLAG_KEYS_ONLY |
  FLAG_PUT_IF_ABSENT | FLAG_HAS_MIN | FLAG_HAS_MAX;
const SHAPES: Record<number, CallShape> = {
  [SHAPE_BATCH]: 'batch', [SHAPE_SINGLE]: 'single', [SHAPE_TRANSACTION]: 'transaction',
};
const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/** Thrown inside this file only, and always caught by `decodeCommand`. */
class Malformed extends Error {}

class Cursor {
  private readonly view: DataView;
  pos = 0;

  constructor(private readonly bytes: Uint8Array) {
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  private need(n: number, what: string): void {
    if (this.pos + n > this.bytes.length) throw new Malformed(`truncated at ${what}`);
  }

  u8(what: string): number {
    this.need(1, what);
    return this.view.getUint8(this.pos++);
  }

  u32(what: string): number {
    this.need(4, what);
    const v = this.view.getUint32(this.pos, true);
    this.pos += 4;
    return v;
  }

  /** An i64 that must be a safe integer. */
  i64(what: string): number {
    this.need(8, what);
    const lo = this.view.getUint32(this.pos, true);
    const hi = this.view.getInt32(this.pos + 4, true);
    this.pos += 8;
    const v = hi * TWO_POW_32 + lo;
    if (!Number.isSafeInteger(v)) throw new Malformed(`${what} is beyond 2^53`);
    return v;
  }

  str(what: string): string {
    const n = this.u32(what);
    this.need(n, what);
    const start = this.pos;
    this.pos += n;
    try {
      return strictUtf8.decode(this.bytes.subarray(start, start + n));
    } catch {
      throw new Malformed(`${what} is not UTF-8`);
    }
  }

  end(): void {
    if (this.pos !== this.bytes.length) throw new Malformed('trailing bytes');
  }
}

/** Decodes one command; never throws. */
export function decodeCommand(bytes: Uint8Array): DecodedCommand {
  try {
    const c = new Cursor(bytes);
    const command = readCommand(c);
    c.end();
    return { ok: true, command };
  } catch (err) {
    if (err instanceof Malformed) return { ok: false, reason: err.message };
    return { ok: false, reason: `unreadable: ${String(err)}` };
  }
}

function readCommand(c: Cursor): Command {
  const kind = c.u8('kind');
  switch (kind) {
    case CMD_CALL:
    case CMD_CALL_V1:
      return readCall(c, kind);
    case CMD_KEYED_CALL:
      return readKeyedCall(c);
    case CMD_SWEEP:
      return { kind: 'sweep', maxKeys: c.i64('maxKeys') };
    case CMD_SET_QUOTA:
      return { kind: 'setQuota', tenant: c.str('tenant'), quota: readQuota(c) };
    case CMD_SET_PAUSED: {
      const paused = c.u8('paused');
      if (paused > 1) throw new Malformed('paused is not 0 or 1');
      return { kind: 'setPaused', paused: paused === 1 };
    }
    case CMD_NOOP:
      return { kind: 'noop' };
    case CMD_CHECKPOINT: {
      const index = c.i64('checkpoint index');
      const lo = c.u32('checkpoint digest');
      const hi = c.u32('checkpoint digest');
      const digest = hi.toString(16).padStart(8, '0') + lo.toString(16).padStart(8, '0');
      return { kind: 'checkpoint', index, digest };
    }
    default:
      throw new Malformed(`unknown command kind ${kind}`);
  }
}

/** A CMD_KEYED_CALL: the key and record lifetime, then a CMD_CALL. */
function readKeyedCall(c: Cursor): Command {
  const key = c.str('idempotency key');
  if (idempotencyKeyProblem(key) !== null) throw new Malformed('bad idempotency key');
  const ttlSeconds = c.i64('idempotency ttlSeconds');
  if (ttlSeconds < 1 || ttlSeconds > IDEMPOTENCY_TTL_SECONDS_MAX) {
    throw new Malformed('idempotency ttlSeconds out of range');
  }
  const kind = c.u8('kind');
  if (kind !== CMD_CALL) throw new Malformed('a keyed command that is not a call');
  const call = readCall(c, kind);
  return call.kind === 'call' ? { ...call, idempotency: { key, ttlSeconds } } : call;
}

function readQuota(c: Cursor): QuotaSettings {
  const enabled = c.u8('enabled');
  if (enabled > 1) throw new Malformed('enabled is not 0 or 1');
  const limit = (what: string): number | null => {
    const v = c.i64(what);
    if (v === LIMIT_NONE_WIRE) return null;
    if (v < 0) throw new Malformed(`${what} is negative`);
    return v;
  };
  return {
    enabled: enabled === 1, maxRows: limit('maxRows'), maxBytes: limit('maxBytes'),
    maxReadsPerSec: limit('maxReadsPerSec'), maxWritesPerSec: limit('maxWritesPerSec'),
  };
}

function readCall(c: Cursor, kind: number): Command {
  let shape: CallShape | undefined;
  let transactionId = '';
  if (kind === CMD_CALL) {
    const code = c.u8('shape');
    shape = SHAPES[code];
    if (shape === undefined) throw new Malformed(`unknown shape ${code}`);
    transactionId = c.str('transaction id');
  }
  const callFlags = c.u8('call flags');
  if ((callFlags & ~CALL_REQUIRE_GRANT) !== 0) throw new Malformed('unknown call flags');
  const readBytesCeiling = c.i64('read ceiling');
  const tenant = c.str('tenant');
  const ops: KvOp[] = [];
  for (let n = c.u32('op count'); n > 0; n--) ops.push(readOp(c));
  const call: KvCall = {
    tenant,
    ...(shape !== undefined ? { shape } : {}),
    ...(transactionId !== '' ? { transactionId } : {}),
    ops,
    readBytesCeiling,
  };
  return { kind: 'call', call, flags: { requireGrant: (callFlags & CALL_REQUIRE_GRANT) !== 0 } };
}

function expiryOf(flags: number, ttlSeconds: number): Expiry {
  return (flags & FLAG_FOREVER) !== 0 ? { kind: 'forever' } : { kind: 'ttl', ttlSeconds };
}

function readOp(c: Cursor): KvOp {
  const code = c.u8('op code');
  const flags = c.u8('op flags');
  if ((flags & ~ALL_OP_FLAGS) !== 0) throw new Malformed('unknown op flags');
  const ns = c.str('namespace');
  const required = (flags & FLAG_REQUIRED) !== 0;
  const hasExpect = (flags & FLAG_HAS_EXPECT) !== 0;
  switch (code) {
    case OP_GET:
      return { op: 'get', ns, key: c.str('key') };
    case OP_GET_MANY: {
      const keys: string[] = [];
      for (let n = c.u32('key count'); n > 0; n--) keys.push(c.str('key'));
      return { op: 'getMany', ns, keys };
    }
    case OP_GET_PREFIX: {
      const prefix = c.str('prefix');
      const after = c.str('after');
      const limit = c.u32('limit');
      return { op: 'getPrefix', ns, prefix, after, limit,
        keysOnly: (flags & FLAG_KEYS_ONLY) !== 0 };
    }
    case OP_CHECK: {
      const key = c.str('key');
      const expect = c.i64('expect');
      c.i64('unused');
      return { op: 'check', ns, key, expect, required };
    }
    case OP_PUT:
      return readPut(c, ns, flags);
    case OP_DELETE: {
      const key = c.str('key');
      const expect = c.i64('expect');
      c.i64('unused');
      return { op: 'delete', ns, key, expect: hasExpect ? expect : null, required };
    }
    case OP_INCR:
      return readIncr(c, ns, flags);
    default:
      throw new Malformed(`unknown op code ${code}`);
  }
}

function readPut(c: Cursor, ns: string, flags: number): KvOp {
  const key = c.str('key');
  const valueJson = c.str('value');
  const expect = c.i64('expect');
  const ttlSeconds = c.i64('ttlSeconds');
  return {
    op: 'put', sentAs: (flags & FLAG_PUT_IF_ABSENT) !== 0 ? 'putIfAbsent' : 'put', ns, key,
    valueJson, expiry: expiryOf(flags, ttlSeconds),
    expect: (flags & FLAG_HAS_EXPECT) !== 0 ? expect : null,
    required: (flags & FLAG_REQUIRED) !== 0,
  };
}

function readIncr(c: Cursor, ns: string, flags: number): KvOp {
  const key = c.str('key');
  const delta = c.str('delta');
  const min = c.str('min');
  const max = c.str('max');
  c.i64('unused');
  const ttlSeconds = c.i64('ttlSeconds');
  return {
    op: 'incr', ns, key, delta,
    min: (flags & FLAG_HAS_MIN) !== 0 ? min : null,
    max: (flags & FLAG_HAS_MAX) !== 0 ? max : null,
    expiry: expiryOf(flags, ttlSeconds), required: (flags & FLAG_REQUIRED) !== 0,
  };
}
