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
  CALL_REQUIRE_GRANT, OUT_CALL, OUT_SWEEP, OUT_ADMIN, OUT_NOOP, OUT_INVALID, LIMIT_NONE_WIRE,
  SHAPE_BATCH, SHAPE_SINGLE, SHAPE_TRANSACTION, ANSWER_ETAG, ANSWER_RETRY_AFTER,
  ANSWER_REPLAYED, CMD_CHECKPOINT, OUT_CHECKPOINT, CHECKPOINT_PASSED, CHECKPOINT_DIVERGED,
  CHECKPOINT_UNVERIFIABLE,
} from './abi.js';
import { keyedHeadBytes, writeKeyedHead } from './idempotency.js';
import type {
  Answer, ApplyOutcome, CallFlags, CheckpointOutcome, Command, Expiry, KvCall, KvOp,
  QuotaSettings,
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
      if (command.idempotency !== undefined) {
        const head = keyedHeadBytes(command.idempotency.key.length);
        w.ensure(head);
        w.pos = writeKeyedHead(w.buf, w.pos, command.idempotency);
      }
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
    case 'checkpoint':
      w.u8(CMD_CHECKPOINT);
      w.i64(command.index);
      writeDigestWord(w, command.digest);
      return;
    default:
      assertNever(command, 'command');
  }
}

/** A digest's 16 hex digits as the u64 they spell, little-endian. */
function writeDigestWord(w: ByteWriter, digest: string): void {
  if (!/^[0-9a-f]{16}$/.test(digest)) throw new Error(`not a digest: ${JSON.stringify(digest)}`);
  w.u32(Number.parseInt(digest.slice(8), 16));
  w.u32(Number.parseInt(digest.slice(0, 8), 16));
}

/** Reads a u64 digest (little-endian) as 16 hex digits. */
export function readDigestWord(r: ByteReader): string {
  const lo = r.u32();
  const hi = r.u32();
  return hi.toString(16).padStart(8, '0') + lo.toString(16).padStart(8, '0');
}

const CHECKPOINT_VERDICTS = new Map<number, CheckpointOutcome['verdict']>([
  [CHECKPOINT_PASSED, 'passed'], [CHECKPOINT_DIVERGED, 'diverged'],
  [CHECKPOINT_UNVERIFIABLE, 'unverifiable'],
]);

function readCheckpointOutcome(r: ByteReader): CheckpointOutcome {
  const verdict = CHECKPOINT_VERDICTS.get(r.u8());
  if (verdict === undefined) throw new Error('machine output: unknown checkpoint verdict');
  const index = r.i64();
  const expected = readDigestWord(r);
  const own = readDigestWord(r);
  return { kind: 'checkpoint', verdict, index, expected,
    own: verdict === 'unverifiable' ? null : own };
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

/**
 * A buffer's three views, made once and shared by every reader of a span of it: a DataView
 * and a Buffer cost a call into C++ to make, which a reader per answer would pay each call.
 */
export interface ByteViews {
  readonly bytes: Uint8Array;
  readonly view: DataView;
  /** The same bytes as a Buffer: its utf8 slicing is the cheapest string decode in Node. */
  readonly text: Buffer;
}

export function byteViewsOf(bytes: Uint8Array): ByteViews {
  return {
    bytes,
    view: new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength),
    text: Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength),
  };
}

/**
 * Reads the machine's output: all of `buf`, or the span `start..end` of views shared with
 * other readers. Every read is bounds-checked against the span's end.
 */
export class ByteReader {
  private readonly buf: Uint8Array;
  private readonly view: DataView;
  private readonly text: Buffer;
  private readonly end: number;
  pos: number;

  constructor(buf: Uint8Array, views: ByteViews | null = null, start = 0,
    end = buf.length) {
    const shared = views ?? byteViewsOf(buf);
    if (shared.bytes !== buf || !(start >= 0 && start <= end && end <= buf.length)) {
      throw new Error(`assertion failed: a reader of ${start}..${end} over ${buf.length} bytes`);
    }
    this.buf = buf;
    this.view = shared.view;
    this.text = shared.text;
    this.pos = start;
    this.end = end;
  }

  /** A reader of `length` bytes at `start` of the views' buffer. */
  static span(views: ByteViews, start: number, length: number): ByteReader {
    return new ByteReader(views.bytes, views, start, start + length);
  }

  private advance(n: number): number {
    const at = this.pos;
    if (at + n > this.end) throw new Error('machine output: read past the end');
    this.pos = at + n;
    return at;
  }

  u8(): number {
    return this.view.getUint8(this.advance(1));
  }

  u16(): number {
    return this.view.getUint16(this.advance(2), true);
  }

  u32(): number {
    return this.view.getUint32(this.advance(4), true);
  }

  /** The next `n` bytes, copied. */
  bytesCopy(n: number): Uint8Array {
    const at = this.advance(n);
    return this.buf.slice(at, at + n);
  }

  /** The next `n` bytes as a view (valid until the machine's next call). */
  bytesView(n: number): Uint8Array {
    const at = this.advance(n);
    return this.buf.subarray(at, at + n);
  }

  i64(): number {
    const at = this.advance(8);
    const lo = this.view.getUint32(at, true);
    const hi = this.view.getInt32(at + 4, true);
    const v = hi * TWO_POW_32 + lo;
    if (!Number.isSafeInteger(v)) throw new Error(`machine output: unsafe integer at ${at}`);
    return v;
  }

  str(): string {
    const n = this.u32();
    const at = this.advance(n);
    return this.text.toString('utf8', at, at + n);
  }

  get done(): boolean {
    return this.pos === this.end;
  }
}

/** The fixed header before an answer's body (docs/codec.md, "Answers"). */
export interface AnswerHeader {
  readonly status: number;
  readonly etagVersion: number | null;
  readonly retryAfterSeconds: number | null;
  /** A recorded answer replayed for a retry: sent with `Idempotent-Replayed: true`. */
  readonly replayed?: boolean;
  readonly bodyLength: number;
}

/** Reads an answer header at the reader's position and steps past it (not the body). */
export function readAnswerHeader(r: ByteReader): AnswerHeader {
  const status = r.u16();
  const flags = r.u8();
  const etag = r.i64();
  const retryAfter = r.u32();
  const bodyLength = r.u32();
  return {
    status,
    etagVersion: (flags & ANSWER_ETAG) !== 0 ? etag : null,
    retryAfterSeconds: (flags & ANSWER_RETRY_AFTER) !== 0 ? retryAfter : null,
    replayed: (flags & ANSWER_REPLAYED) !== 0,
    bodyLength,
  };
}

/** An answer with a copy of its body, independent of wasm memory. */
export function readAnswer(r: ByteReader): Answer {
  const header = readAnswerHeader(r);
  const body = r.bytesCopy(header.bodyLength);
  const answer = { status: header.status, etagVersion: header.etagVersion,
    retryAfterSeconds: header.retryAfterSeconds, body };
  return header.replayed === true ? { ...answer, replayed: true } : answer;
}

/** Decodes the output of `apply`, answers copied out of wasm memory. */
export function decodeApplyOutput(bytes: Uint8Array): ApplyOutcome {
  const r = new ByteReader(bytes);
  const out = readApplyOutcome(r, true);
  if (!r.done) throw new Error('machine output: trailing bytes');
  return out;
}

/** One outcome as `apply` writes it; `answered` says whether a call carries its answer. */
export function readApplyOutcome(r: ByteReader, answered: boolean): ApplyOutcome {
  const kind = r.u8();
  if (kind === OUT_CALL) return { kind: 'call', answer: answered ? readAnswer(r) : null };
  if (kind === OUT_SWEEP) return { kind: 'sweep', removedKeys: r.i64() };
  if (kind === OUT_ADMIN) return { kind: 'admin' };
  if (kind === OUT_NOOP) return { kind: 'noop' };
  if (kind === OUT_INVALID) return { kind: 'invalid', detail: r.str() };
  if (kind === OUT_CHECKPOINT) return readCheckpointOutcome(r);
  throw new Error(`machine output: unknown outcome kind ${kind}`);
}
