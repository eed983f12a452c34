/**
 * The binary codec between host and machine (docs/codec.md): commands in, outcomes out.
 * Little-endian; strings are a u32 byte length then UTF-8; 64-bit integers are i64.
 * Encoding writes through a `ByteWriter` whose storage can be a plain growing buffer
 * (`encodeCommand`) or the machine's own input region (the read path), so keys and values
 * are encoded exactly once, straight where they are consumed. Values stay JSON text: this
 * file never parses or re-serialises a value. Pure: no I/O, no clock.
 */
import {
  CMD_CALL, CMD_SWEEP, CMD_SET_QUOTA, CMD_SET_PAUSED, CMD_NOOP, OP_GET, OP_GET_MANY,
  OP_GET_PREFIX, OP_CHECK, OP_PUT, OP_DELETE, OP_INCR, FLAG_REQUIRED, FLAG_HAS_EXPECT,
  FLAG_FOREVER, FLAG_KEYS_ONLY, FLAG_PUT_IF_ABSENT, FLAG_HAS_MIN, FLAG_HAS_MAX,
  CALL_REQUIRE_GRANT, OUT_CALL, OUT_SWEEP, OUT_ADMIN, OUT_NOOP, OUT_INVALID, STATUS_OK,
  STATUS_PRECONDITION, STATUS_PAUSED, STATUS_NOT_GRANTED, STATUS_QUOTA_EXCEEDED,
  STATUS_INVALID, RES_GET_FOUND, RES_GET_MISSING, RES_GET_MANY, RES_GET_PREFIX, RES_WRITE,
  REASON_EXISTS, REASON_ABSENT, REASON_VERSION, REASON_LIMIT, REASON_TYPE,
  EXPIRES_NEVER_WIRE, LIMIT_NONE_WIRE, SHAPE_BATCH, SHAPE_SINGLE, SHAPE_TRANSACTION,
} from './abi.js';
import type {
  ApplyOutcome, CallFlags, CallOutcome, Command, Expiry, KvCall, KvOp, KvReason, OpResult,
  QuotaSettings, Row,
} from './commands.js';
import { assertNever } from './commands.js';

const TWO_POW_32 = 4294967296;
/** Strings shorter than this are copied by hand when ASCII: cheaper than encodeInto. */
const SHORT_STRING_CHARS = 48;
/** First capacity of a standalone command buffer, in bytes. */
const COMMAND_BYTES_INITIAL = 1024;

const utf8Encoder = new TextEncoder();

/** Appends little-endian fields to a buffer that `grow` can enlarge (keeping its bytes). */
export class ByteWriter {
  buf: Uint8Array;
  view: DataView;
  pos = 0;

  constructor(
    initial: Uint8Array,
    private readonly grow: (current: Uint8Array, minBytes: number) => Uint8Array,
  ) {
    this.buf = initial;
    this.view = new DataView(initial.buffer, initial.byteOffset, initial.byteLength);
  }

  ensure(extra: number): void {
    const need = this.pos + extra;
    if (need <= this.buf.length) return;
    this.buf = this.grow(this.buf, Math.max(need, this.buf.length * 2));
    this.view = new DataView(this.buf.buffer, this.buf.byteOffset, this.buf.byteLength);
  }

  u8(v: number): void {
    this.ensure(1);
    this.buf[this.pos++] = v;
  }

  u32(v: number): void {
    this.ensure(4);
    this.view.setUint32(this.pos, v, true);
    this.pos += 4;
  }

  /** A safe integer (or -1) as i64. */
  i64(v: number): void {
    this.ensure(8);
    const hi = Math.floor(v / TWO_POW_32);
    this.view.setUint32(this.pos, v - hi * TWO_POW_32, true);
    this.view.setInt32(this.pos + 4, hi, true);
    this.pos += 8;
  }

  str(s: string): void {
    const n = s.length;
    this.ensure(4 + n * 3);
    const buf = this.buf;
    const start = this.pos + 4;
    if (n < SHORT_STRING_CHARS) {
      let i = 0;
      for (; i < n; i++) {
        const c = s.charCodeAt(i);
        if (c > 0x7f) break;
        buf[start + i] = c;
      }
      if (i === n) {
        this.view.setUint32(this.pos, n, true);
        this.pos = start + n;
        return;
      }
    }
    const { written } = utf8Encoder.encodeInto(s, buf.subarray(start));
    this.view.setUint32(this.pos, written, true);
    this.pos = start + written;
  }
}

function growCopy(current: Uint8Array, minBytes: number): Uint8Array {
  const next = new Uint8Array(minBytes);
  next.set(current);
  return next;
}

/** Encodes one command as the bytes a log entry carries. */
export function encodeCommand(command: Command): Uint8Array {
  const w = new ByteWriter(new Uint8Array(COMMAND_BYTES_INITIAL), growCopy);
  writeCommand(w, command);
  return w.buf.subarray(0, w.pos);
}

export function writeCommand(w: ByteWriter, command: Command): void {
  switch (command.kind) {
    case 'call':
      writeCall(w, command.call, command.flags);
      return;
    case 'sweep':
      w.u8(CMD_SWEEP);
      w.i64(command.maxKeys);
      return;
    case 'setQuota':
      w.u8(CMD_SET_QUOTA);
      w.str(command.tenant);
      writeQuota(w, command.quota);
      return;
    case 'setPaused':
      w.u8(CMD_SET_PAUSED);
      w.u8(command.paused ? 1 : 0);
      return;
    case 'noop':
      w.u8(CMD_NOOP);
      return;
    default:
      assertNever(command, 'command');
  }
}

function writeQuota(w: ByteWriter, q: QuotaSettings): void {
  w.u8(q.enabled ? 1 : 0);
  w.i64(q.maxRows ?? LIMIT_NONE_WIRE);
  w.i64(q.maxBytes ?? LIMIT_NONE_WIRE);
  w.i64(q.maxReadsPerSec ?? LIMIT_NONE_WIRE);
  w.i64(q.maxWritesPerSec ?? LIMIT_NONE_WIRE);
}

const SHAPE_CODES = { batch: SHAPE_BATCH, single: SHAPE_SINGLE,
  transaction: SHAPE_TRANSACTION } as const;

/** A call: kind, shape, transaction id, call flags, read ceiling, tenant, ops. */
export function writeCall(w: ByteWriter, call: KvCall, flags: CallFlags): void {
  w.u8(CMD_CALL);
  w.u8(SHAPE_CODES[call.shape ?? 'batch']);
  w.str(call.transactionId ?? '');
  w.u8(flags.requireGrant ? CALL_REQUIRE_GRANT : 0);
  w.i64(call.readBytesCeiling);
  w.str(call.tenant);
  w.u32(call.ops.length);
  for (const op of call.ops) writeOp(w, op);
}

function expiryFlags(e: Expiry): number {
  return e.kind === 'forever' ? FLAG_FOREVER : 0;
}

function ttlOf(e: Expiry): number {
  return e.kind === 'ttl' ? e.ttlSeconds : 0;
}

function writeOp(w: ByteWriter, op: KvOp): void {
  switch (op.op) {
    case 'get':
      w.u8(OP_GET); w.u8(0); w.str(op.ns); w.str(op.key);
      return;
    case 'getMany':
      w.u8(OP_GET_MANY); w.u8(0); w.str(op.ns); w.u32(op.keys.length);
      for (const k of op.keys) w.str(k);
      return;
    case 'getPrefix':
      w.u8(OP_GET_PREFIX); w.u8(op.keysOnly ? FLAG_KEYS_ONLY : 0); w.str(op.ns);
      w.str(op.prefix); w.str(op.after); w.u32(op.limit);
      return;
    case 'check':
      w.u8(OP_CHECK); w.u8(FLAG_HAS_EXPECT | (op.required ? FLAG_REQUIRED : 0));
      w.str(op.ns); w.str(op.key); w.i64(op.expect); w.i64(0);
      return;
    case 'put': {
      const f = (op.required ? FLAG_REQUIRED : 0) | (op.expect !== null ? FLAG_HAS_EXPECT : 0) |
        expiryFlags(op.expiry) | (op.sentAs === 'putIfAbsent' ? FLAG_PUT_IF_ABSENT : 0);
      w.u8(OP_PUT); w.u8(f); w.str(op.ns); w.str(op.key); w.str(op.valueJson);
      w.i64(op.expect ?? 0); w.i64(ttlOf(op.expiry));
      return;
    }
    case 'delete':
      w.u8(OP_DELETE);
      w.u8((op.required ? FLAG_REQUIRED : 0) | (op.expect !== null ? FLAG_HAS_EXPECT : 0));
      w.str(op.ns); w.str(op.key); w.i64(op.expect ?? 0); w.i64(0);
      return;
    case 'incr': {
      const f = (op.required ? FLAG_REQUIRED : 0) | expiryFlags(op.expiry) |
        (op.min !== null ? FLAG_HAS_MIN : 0) | (op.max !== null ? FLAG_HAS_MAX : 0);
      w.u8(OP_INCR); w.u8(f); w.str(op.ns); w.str(op.key); w.str(op.delta);
      w.str(op.min ?? ''); w.str(op.max ?? ''); w.i64(0); w.i64(ttlOf(op.expiry));
      return;
    }
    default:
      assertNever(op, 'op');
  }
}

// ---- decoding the machine's output ----

const REASONS: readonly (KvReason | null)[] = [null, 'exists', 'absent', 'version', 'limit',
  'type'];
if (REASONS[REASON_EXISTS] !== 'exists' || REASONS[REASON_ABSENT] !== 'absent' ||
  REASONS[REASON_VERSION] !== 'version' || REASONS[REASON_LIMIT] !== 'limit' ||
  REASONS[REASON_TYPE] !== 'type') {
  throw new Error('reason table out of step with abi.ts');
}

/** Reads the machine's output; every read is bounds-checked by the typed array itself. */
export class ByteReader {
  private readonly view: DataView;
  /** The same bytes as a Buffer: its utf8 slicing is the cheapest string decode in Node. */
  private readonly text: Buffer;
  pos = 0;

  constructor(private readonly buf: Uint8Array) {
    this.view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
    this.text = Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
  }

  u8(): number {
    return this.view.getUint8(this.pos++);
  }

  u32(): number {
    const v = this.view.getUint32(this.pos, true);
    this.pos += 4;
    return v;
  }

  i64(): number {
    const lo = this.view.getUint32(this.pos, true);
    const hi = this.view.getInt32(this.pos + 4, true);
    this.pos += 8;
    const v = hi * TWO_POW_32 + lo;
    if (!Number.isSafeInteger(v)) throw new Error(`machine output: unsafe integer at ${this.pos}`);
    return v;
  }

  str(): string {
    const n = this.u32();
    const start = this.pos;
    const end = start + n;
    if (end > this.buf.length) throw new Error('machine output: string past the end');
    this.pos = end;
    return this.text.toString('utf8', start, end);
  }

  get done(): boolean {
    return this.pos === this.buf.length;
  }
}

function reasonOf(code: number): KvReason | null {
  const r = REASONS[code];
  if (r === undefined) throw new Error(`machine output: unknown reason ${code}`);
  return r;
}

function expiresOf(v: number): number | null {
  return v === EXPIRES_NEVER_WIRE ? null : v;
}

function readRow(r: ByteReader): Row {
  const key = r.str();
  const valueJson = r.u8() === 1 ? r.str() : null;
  const version = r.i64();
  const expiresAtMs = expiresOf(r.i64());
  const updatedAtMs = r.i64();
  return { key, valueJson, version, expiresAtMs, updatedAtMs };
}

function readResult(r: ByteReader): OpResult {
  const kind = r.u8();
  switch (kind) {
    case RES_GET_FOUND: {
      const key = r.str();
      const valueJson = r.str();
      const version = r.i64();
      const expiresAtMs = expiresOf(r.i64());
      const updatedAtMs = r.i64();
      return { kind: 'get', found: true, key, valueJson, version, expiresAtMs, updatedAtMs };
    }
    case RES_GET_MISSING:
      return { kind: 'get', found: false, key: r.str() };
    case RES_GET_MANY: {
      const rows: Row[] = [];
      for (let n = r.u32(); n > 0; n--) rows.push(readRow(r));
      const missing: string[] = [];
      for (let n = r.u32(); n > 0; n--) missing.push(r.str());
      return { kind: 'getMany', rows, missing, truncated: r.u8() === 1 };
    }
    case RES_GET_PREFIX: {
      const rows: Row[] = [];
      for (let n = r.u32(); n > 0; n--) rows.push(readRow(r));
      const truncated = r.u8() === 1;
      const nextAfter = r.u8() === 1 ? r.str() : null;
      return { kind: 'getPrefix', rows, truncated, nextAfter };
    }
    case RES_WRITE: {
      const applied = r.u8() === 1;
      const reason = reasonOf(r.u8());
      const key = r.str();
      const valueJson = r.str();
      const version = r.i64();
      return { kind: 'write', applied, reason, key, valueJson, version };
    }
    default:
      throw new Error(`machine output: unknown result kind ${kind}`);
  }
}

/** Decodes a call outcome (after the OUT_CALL byte). */
export function readCallOutcome(r: ByteReader): CallOutcome {
  const status = r.u8();
  switch (status) {
    case STATUS_OK: {
      const results: OpResult[] = [];
      for (let n = r.u32(); n > 0; n--) results.push(readResult(r));
      return { status: 'ok', results };
    }
    case STATUS_PRECONDITION: {
      const failedIndex = r.u32();
      const kvReason = reasonOf(r.u8());
      if (kvReason === null) throw new Error('machine output: precondition without reason');
      const valueJson = r.str();
      const version = r.i64();
      return { status: 'precondition', failedIndex, kvReason, version, valueJson };
    }
    case STATUS_PAUSED: return { status: 'paused' };
    case STATUS_NOT_GRANTED: return { status: 'notGranted' };
    case STATUS_QUOTA_EXCEEDED: return { status: 'quotaExceeded' };
    case STATUS_INVALID: return { status: 'invalid', detail: r.str() };
    default:
      throw new Error(`machine output: unknown status ${status}`);
  }
}

/** Decodes the whole output of `apply`. */
export function decodeApplyOutput(bytes: Uint8Array): ApplyOutcome {
  const r = new ByteReader(bytes);
  const kind = r.u8();
  let out: ApplyOutcome;
  if (kind === OUT_CALL) out = { kind: 'call', outcome: readCallOutcome(r) };
  else if (kind === OUT_SWEEP) out = { kind: 'sweep', removedKeys: r.i64() };
  else if (kind === OUT_ADMIN) out = { kind: 'admin' };
  else if (kind === OUT_NOOP) out = { kind: 'noop' };
  else if (kind === OUT_INVALID) out = { kind: 'invalid', detail: r.str() };
  else throw new Error(`machine output: unknown outcome kind ${kind}`);
  if (!r.done) throw new Error('machine output: trailing bytes');
  return out;
}

/** Decodes the output of `read`: a call outcome, or `invalid`. */
export function decodeReadOutput(bytes: Uint8Array): CallOutcome {
  const out = decodeApplyOutput(bytes);
  if (out.kind === 'call') return out.outcome;
  if (out.kind === 'invalid') return { status: 'invalid', detail: out.detail };
  throw new Error(`machine output: unexpected ${out.kind} from read`);
}
