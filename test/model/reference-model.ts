/**
 * A plain TypeScript reference model of the KV state machine: the same rules as assembly/,
 * written the obvious way (a Map of rows, copy-on-write calls, filters and sorts, BigInt
 * decimals), so model-based tests can compare every result and the final digest with the
 * WebAssembly machine. It is slow on purpose: clarity over speed. Pure: no I/O, no clock.
 */
import type {
  ApplyOutcome, CallOutcome, Command, KvCall, KvOp, KvReason, OpResult, QuotaSettings, Row,
  TenantUsage,
} from '../../host/machine/commands.js';
import { CHECKPOINT_RING_ENTRIES } from '../../host/machine/abi.js';

/** What the model decided about an entry: a call's outcome rather than its rendered answer. */
export type ModelApplyOutcome =
  | Exclude<ApplyOutcome, { readonly kind: 'call' }>
  | { readonly kind: 'call'; readonly outcome: CallOutcome };

const SAFE = Number.MAX_SAFE_INTEGER;
const EXPONENT_ABS_MAX = 1000;

export interface ModelRow {
  readonly tenant: string;
  readonly ns: string;
  readonly key: string;
  readonly valueJson: string;
  readonly version: number;
  readonly expiresAtMs: number | null;
  readonly updatedAtMs: number;
}

const utf8 = (s: string): Buffer => Buffer.from(s, 'utf8');

/**
 * The buffer capacity the machine gives a row of `rowBytes` (assembly/row.ts): a 16-byte
 * object header plus the row, 16-aligned; from 256 bytes on, rounded up to the start of the
 * allocator's size class (classes of a power of two split in 16).
 */
export function rowCapacity(rowBytes: number): number {
  let payload = Math.ceil((16 + rowBytes) / 16) * 16;
  if (payload >= 256) {
    const step = 2 ** (Math.floor(Math.log2(payload)) - 4);
    payload = Math.ceil(payload / step) * step;
  }
  return payload - 16;
}
export const byteCompare = (a: string, b: string): number => Buffer.compare(utf8(a), utf8(b));
const idOf = (tenant: string, ns: string, key: string): string =>
  JSON.stringify([tenant, ns, key]);

// ---- exact decimals: value = coef / 10^scale ----
interface Dec { coef: bigint; scale: number }
const NUMBER_RE = /^(-?)(0|[1-9][0-9]*)(?:\.([0-9]+))?(?:[eE]([+-]?)([0-9]+))?$/;

/** 'nan' when not a JSON number, 'range' when its exponent is beyond the bound. */
export function parseDecimal(text: string): Dec | 'nan' | 'range' {
  const m = NUMBER_RE.exec(text);
  if (m === null) return 'nan';
  const [, sign, int, frac = '', expSign = '', expDigits] = m;
  let exp = 0;
  if (expDigits !== undefined) {
    const e = Number(expDigits.replace(/^0+(?=.)/, '').slice(0, 6));
    if (expDigits.replace(/^0+(?=.)/, '').length > 6 || e > EXPONENT_ABS_MAX) return 'range';
    exp = expSign === '-' ? -e : e;
  }
  let coef = BigInt(int! + frac);
  let scale = frac.length - exp;
  if (scale < 0) { coef *= 10n ** BigInt(-scale); scale = 0; }
  return { coef: sign === '-' ? -coef : coef, scale };
}

function align(a: Dec, b: Dec): [bigint, bigint, number] {
  const s = Math.max(a.scale, b.scale);
  return [a.coef * 10n ** BigInt(s - a.scale), b.coef * 10n ** BigInt(s - b.scale), s];
}

function cmp(a: Dec, b: Dec): number {
  const [x, y] = align(a, b);
  return x < y ? -1 : x > y ? 1 : 0;
}

export function formatDecimal(d: Dec): string {
  let { coef, scale } = d;
  while (scale > 0 && coef % 10n === 0n) { coef /= 10n; scale--; }
  const neg = coef < 0n;
  let digits = (neg ? -coef : coef).toString();
  if (scale > 0) {
    digits = digits.padStart(scale + 1, '0');
    digits = digits.slice(0, digits.length - scale) + '.' + digits.slice(digits.length - scale);
  }
  return (neg ? '-' : '') + digits;
}

type IncrVerdict = { reason: KvReason } | { text: string };

export function incrDecide(cur: string | null, delta: string, min: string | null,
  max: string | null): IncrVerdict {
  let c: Dec = { coef: 0n, scale: 0 };
  if (cur !== null) {
    const p = parseDecimal(cur);
    if (p === 'nan') return { reason: 'type' };
    if (p === 'range') return { reason: 'limit' };
    c = p;
  }
  const d = parseDecimal(delta);
  const lo = min === null ? null : parseDecimal(min);
  const hi = max === null ? null : parseDecimal(max);
  if (typeof d === 'string' || typeof lo === 'string' || typeof hi === 'string') {
    return { reason: 'limit' };
  }
  if ((lo && cmp(d, lo) < 0) || (hi && cmp(d, hi) > 0)) return { reason: 'limit' };
  const [x, y, s] = align(c, d);
  const r: Dec = { coef: x + y, scale: s };
  const safe: Dec = { coef: BigInt(SAFE), scale: 0 };
  const abs: Dec = { coef: r.coef < 0n ? -r.coef : r.coef, scale: s };
  if ((lo && cmp(r, lo) < 0) || (hi && cmp(r, hi) > 0) || cmp(abs, safe) > 0) {
    return { reason: 'limit' };
  }
  return { text: formatDecimal(r) };
}

// ---- the model ----

interface WriteVerdict {
  applied: boolean;
  reason: KvReason | null;
  valueJson: string;
  version: number;
}

export class ReferenceModel {
  rows = new Map<string, ModelRow>();
  quotas = new Map<string, QuotaSettings>();
  lastVersion = 0;
  appliedIndex = 0;
  lastTimeMs = 0;
  paused = false;
  /** The digest after each applied index: what a checkpoint is compared with. */
  private readonly digests = new Map<number, string>();

  apply(index: number, timeMs: number, command: Command): ModelApplyOutcome {
    if (index <= this.appliedIndex) throw new Error('model: index not after applied');
    const t = Math.min(Math.max(timeMs, this.lastTimeMs), SAFE);
    let out: ModelApplyOutcome;
    switch (command.kind) {
      case 'call': out = { kind: 'call', outcome: this.runCall(command.call, t, true,
        command.flags.requireGrant) }; break;
      case 'sweep': out = { kind: 'sweep', removedKeys: this.sweep(t, command.maxKeys) }; break;
      case 'setQuota': this.quotas.set(command.tenant, command.quota); out = { kind: 'admin' };
        break;
      case 'setPaused': this.paused = command.paused; out = { kind: 'admin' }; break;
      case 'noop': out = { kind: 'noop' }; break;
      case 'checkpoint': out = this.checkpoint(command.index, command.digest); break;
    }
    this.appliedIndex = index;
    this.lastTimeMs = t;
    this.digests.set(index, this.digest());
    return out;
  }

  /** The machine keeps the digests of its last CHECKPOINT_RING_ENTRIES applied indexes. */
  private checkpoint(index: number, expected: string): ModelApplyOutcome {
    if (index < 1 || index > this.appliedIndex) {
      return { kind: 'invalid', detail: 'checkpoint index not applied' };
    }
    const own = this.appliedIndex - index < CHECKPOINT_RING_ENTRIES
      ? this.digests.get(index) ?? null : null;
    if (own === null) return { kind: 'checkpoint', verdict: 'unverifiable', index, expected, own };
    return { kind: 'checkpoint', verdict: own === expected ? 'passed' : 'diverged', index,
      expected, own };
  }

  read(call: KvCall, nowMs: number): CallOutcome {
    return this.runCall(call, Math.max(nowMs, this.lastTimeMs), false, false);
  }

  usage(tenant: string): TenantUsage {
    let rows = 0, bytes = 0;
    for (const r of this.rows.values()) {
      if (r.tenant !== tenant) continue;
      rows++;
      bytes += utf8(r.key).length + utf8(r.valueJson).length;
    }
    return { rows, bytes };
  }

  private sweep(t: number, maxKeys: number): number {
    const expired = [...this.rows.entries()]
      .filter(([, r]) => r.expiresAtMs !== null && r.expiresAtMs <= t)
      .sort(([, a], [, b]) => (a.expiresAtMs! - b.expiresAtMs!) || (a.version - b.version))
      .slice(0, maxKeys);
    for (const [id] of expired) this.rows.delete(id);
    return expired.length;
  }

  private live(rows: Map<string, ModelRow>, tenant: string, ns: string, key: string,
    t: number): ModelRow | null {
    const r = rows.get(idOf(tenant, ns, key));
    return r && (r.expiresAtMs === null || r.expiresAtMs > t) ? r : null;
  }

  private runCall(call: KvCall, t: number, logged: boolean, requireGrant: boolean):
    CallOutcome {
    const writes = call.ops.some((o) => o.op === 'put' || o.op === 'delete' || o.op === 'incr');
    if (writes && !logged) return { status: 'invalid', detail: 'writes in a read call' };
    if (this.paused) return { status: 'paused' };
    const q = this.quotas.get(call.tenant);
    if (writes && requireGrant && !(q && q.enabled)) return { status: 'notGranted' };
    const before = this.usage(call.tenant);
    const saved = this.rows;
    const rows = new Map(saved);
    this.rows = rows;
    const verdicts = new Map<number, WriteVerdict>();
    let failed = -1;
    for (let i = 0; i < call.ops.length && failed < 0; i++) {
      const op = call.ops[i]!;
      if (op.op !== 'put' && op.op !== 'delete' && op.op !== 'incr') continue;
      const v = this.write(rows, call.tenant, op, t);
      verdicts.set(i, v);
      if (!v.applied && op.required) failed = i;
    }
    const end = failed >= 0 ? failed : call.ops.length;
    for (let i = 0; i < end; i++) {
      const op = call.ops[i]!;
      if (op.op !== 'check' || !op.required) continue;
      const v = this.check(rows, call.tenant, op.ns, op.key, op.expect, t);
      if (!v.applied) { failed = i; verdicts.set(i, v); break; }
    }
    if (failed >= 0) {
      this.rows = saved;
      const v = verdicts.get(failed)!;
      return { status: 'precondition', failedIndex: failed, kvReason: v.reason!,
        version: v.version, valueJson: v.valueJson };
    }
    if (writes && q) {
      const after = this.usage(call.tenant);
      const over = (q.maxRows !== null && after.rows > q.maxRows) ||
        (q.maxBytes !== null && after.bytes > q.maxBytes);
      const grew = after.rows > before.rows || after.bytes > before.bytes;
      if (over && grew) { this.rows = saved; return { status: 'quotaExceeded' }; }
    }
    return { status: 'ok', results: this.results(call, t, verdicts) };
  }

  private verdict(applied: boolean, reason: KvReason | null, row: ModelRow | null,
    absentJson = 'null'): WriteVerdict {
    return { applied, reason, valueJson: row ? row.valueJson : absentJson,
      version: row ? row.version : 0 };
  }

  private check(rows: Map<string, ModelRow>, tenant: string, ns: string, key: string,
    expect: number, t: number): WriteVerdict {
    const live = this.live(rows, tenant, ns, key, t);
    if (expect === 0) return live ? this.verdict(false, 'exists', live) :
      this.verdict(true, null, null);
    if (!live) return this.verdict(false, 'absent', null);
    if (live.version !== expect) return this.verdict(false, 'version', live);
    return this.verdict(true, null, live);
  }

  private write(rows: Map<string, ModelRow>, tenant: string, op: KvOp, t: number):
    WriteVerdict {
    if (op.op !== 'put' && op.op !== 'delete' && op.op !== 'incr') throw new Error('not a write');
    const id = idOf(tenant, op.ns, op.key);
    const live = this.live(rows, tenant, op.ns, op.key, t);
    const place = (valueJson: string, expiresAtMs: number | null): WriteVerdict => {
      const row: ModelRow = { tenant, ns: op.ns, key: op.key, valueJson,
        version: ++this.lastVersion, expiresAtMs, updatedAtMs: t };
      rows.set(id, row);
      return this.verdict(true, null, row);
    };
    if (op.op === 'put') {
      if (op.expect === 0 && live) return this.verdict(false, 'exists', live);
      if (op.expect !== null && op.expect > 0) {
        if (!live) return this.verdict(false, 'absent', null);
        if (live.version !== op.expect) return this.verdict(false, 'version', live);
      }
      return place(op.valueJson, this.expiresAt(op.expiry, t));
    }
    if (op.op === 'delete') {
      if (op.expect === 0) return live ? this.verdict(false, 'exists', live) :
        this.verdict(true, null, null);
      if (!live) return this.verdict(false, 'absent', null);
      if (op.expect !== null && live.version !== op.expect) {
        return this.verdict(false, 'version', live);
      }
      rows.delete(id);
      return this.verdict(true, null, live);
    }
    const d = incrDecide(live ? live.valueJson : null, op.delta, op.min, op.max);
    if ('reason' in d) return this.verdict(false, d.reason, live, '0');
    return place(d.text, live ? live.expiresAtMs : this.expiresAt(op.expiry, t));
  }

  private expiresAt(e: { kind: 'ttl'; ttlSeconds: number } | { kind: 'forever' }, t: number):
    number | null {
    return e.kind === 'forever' ? null : Math.min(t + e.ttlSeconds * 1000, SAFE);
  }

  private results(call: KvCall, t: number, verdicts: Map<number, WriteVerdict>): OpResult[] {
    const ceiling = { read: 0, stopped: false, max: call.readBytesCeiling };
    const count = (json: string): void => {
      ceiling.read += utf8(json).length;
      if (ceiling.read > ceiling.max) ceiling.stopped = true;
    };
    return call.ops.map((op, i): OpResult => {
      switch (op.op) {
        case 'get': {
          const r = this.live(this.rows, call.tenant, op.ns, op.key, t);
          if (!r) return { kind: 'get', found: false, key: op.key };
          count(r.valueJson);
          return { kind: 'get', found: true, key: op.key, valueJson: r.valueJson,
            version: r.version, expiresAtMs: r.expiresAtMs, updatedAtMs: r.updatedAtMs };
        }
        case 'getMany': {
          const order = op.keys.map((k, j) => ({ k, j }))
            .sort((a, b) => byteCompare(a.k, b.k) || a.j - b.j);
          const fate = op.keys.map(() => 0);
          const rows: Row[] = [];
          let truncated = false;
          for (const { k, j } of order) {
            if (ceiling.stopped) { truncated = true; continue; }
            const r = this.live(this.rows, call.tenant, op.ns, k, t);
            if (!r) { fate[j] = 2; continue; }
            rows.push(toRow(r, true));
            count(r.valueJson);
          }
          const missing = op.keys.filter((_, j) => fate[j] === 2);
          return { kind: 'getMany', rows, missing, truncated };
        }
        case 'getPrefix': {
          const candidates = [...this.rows.values()]
            .filter((r) => r.tenant === call.tenant && r.ns === op.ns &&
              utf8(r.key).subarray(0, utf8(op.prefix).length).equals(utf8(op.prefix)) &&
              (r.expiresAtMs === null || r.expiresAtMs > t) &&
              (op.after === '' || byteCompare(r.key, op.after) > 0))
            .sort((a, b) => byteCompare(a.key, b.key));
          const rows: Row[] = [];
          let truncated = false;
          for (const r of candidates) {
            if (rows.length >= op.limit || ceiling.stopped) { truncated = true; break; }
            rows.push(toRow(r, !op.keysOnly));
            if (!op.keysOnly) count(r.valueJson);
          }
          const last = rows[rows.length - 1];
          const nextAfter = !truncated ? null : last ? last.key :
            op.after !== '' ? op.after : null;
          return { kind: 'getPrefix', rows, truncated, nextAfter };
        }
        case 'check': {
          const v = this.check(this.rows, call.tenant, op.ns, op.key, op.expect, t);
          return { kind: 'write', key: op.key, ...v };
        }
        default:
          return { kind: 'write', key: op.key, ...verdicts.get(i)! };
      }
    });
  }

  /**
   * What the rows cost as the machine's byte total counts them (assembly/row.ts
   * `rowFootprint`): the capacity of a buffer for a 32-byte row header, the store key
   * (tenant id, namespace, NUL, key) and the value, plus 64 bytes of overhead; expired rows
   * count until swept.
   */
  rowBytes(): number {
    let total = 0;
    for (const r of this.rows.values()) {
      const rowBytes = 32 + 4 + utf8(r.ns).length + 1 + utf8(r.key).length +
        utf8(r.valueJson).length;
      total += rowCapacity(rowBytes) + 64;
    }
    return total;
  }

  /** The same digest as the machine's (docs/codec.md, "Digest"). */
  digest(): string {
    let rowSum = 0n;
    for (const r of this.rows.values()) {
      const h = new Fnv().words(utf8(r.tenant)).byte(0xff)
        .packed(Buffer.concat([utf8(r.ns), Uint8Array.of(0), utf8(r.key)])).byte(0xff)
        .packed(utf8(r.valueJson)).word(r.version)
        .word(r.expiresAtMs ?? -1).word(r.updatedAtMs);
      rowSum = (rowSum + mix(h.value())) & MASK64;
    }
    let quotaSum = 0n;
    for (const [tenant, q] of this.quotas) {
      const h = new Fnv().bytes(utf8(tenant)).byte(0xff).byte(q.enabled ? 1 : 0)
        .u64(q.maxRows ?? -1).u64(q.maxBytes ?? -1).u64(q.maxReadsPerSec ?? -1)
        .u64(q.maxWritesPerSec ?? -1);
      quotaSum = (quotaSum + mix(h.value())) & MASK64;
    }
    const h = new Fnv().u64(this.lastVersion).u64(this.appliedIndex).u64(this.lastTimeMs)
      .u64(this.paused ? 1 : 0).u64(this.rows.size).u64Big(rowSum).u64Big(quotaSum);
    return h.value().toString(16).padStart(16, '0');
  }
}

function toRow(r: ModelRow, withValue: boolean): Row {
  return { key: r.key, valueJson: withValue ? r.valueJson : null, version: r.version,
    expiresAtMs: r.expiresAtMs, updatedAtMs: r.updatedAtMs };
}

const MASK64 = (1n << 64n) - 1n;
const FNV_PRIME_BIG = 0x100000001b3n;

function mix(z: bigint): bigint {
  z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & MASK64;
  z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & MASK64;
  return z ^ (z >> 31n);
}

/** FNV-1a 64 over bytes, kept as two exact 32-bit halves (prime = 2^40 + 0x1b3). */
class Fnv {
  private hi = 0xcbf29ce4;
  private lo = 0x84222325;

  byte(b: number): this {
    const lo = (this.lo ^ b) >>> 0;
    const a = lo * 0x1b3;
    const carry = Math.floor(a / 4294967296);
    this.lo = a >>> 0;
    this.hi = (Math.imul(this.hi, 0x1b3) + carry + ((lo << 8) >>> 0)) >>> 0;
    return this;
  }

  bytes(buf: Uint8Array): this {
    for (const b of buf) this.byte(b);
    return this;
  }

  /** FNV-1a over 8-byte little-endian words, then the tail byte by byte. */
  words(buf: Uint8Array): this {
    const whole = buf.length - (buf.length % 8);
    if (whole > 0) {
      const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
      let h = this.value();
      for (let i = 0; i < whole; i += 8) {
        h = ((h ^ view.getBigUint64(i, true)) * FNV_PRIME_BIG) & MASK64;
      }
      this.hi = Number(h >> 32n);
      this.lo = Number(h & 0xffffffffn);
    }
    for (let i = whole; i < buf.length; i++) this.byte(buf[i]!);
    return this;
  }

  /**
   * Whole 8-byte little-endian words, then the 1 to 7 bytes left as one word: the bytes
   * little-endian with their count in the top byte.
   */
  packed(buf: Uint8Array): this {
    const whole = buf.length - (buf.length % 8);
    this.words(buf.subarray(0, whole));
    const tail = buf.length - whole;
    if (tail === 0) return this;
    let w = BigInt(tail) << 56n;
    for (let j = 0; j < tail; j++) w |= BigInt(buf[whole + j]!) << BigInt(j * 8);
    return this.wordBig(w);
  }

  /** A safe integer or -1 as one word step: h = (h ^ v) * prime. */
  word(v: number): this {
    return this.wordBig(BigInt(v) & MASK64);
  }

  private wordBig(v: bigint): this {
    const h = ((this.value() ^ v) * FNV_PRIME_BIG) & MASK64;
    this.hi = Number(h >> 32n);
    this.lo = Number(h & 0xffffffffn);
    return this;
  }

  /** A safe integer or -1, as 8 little-endian bytes of its two's complement. */
  u64(v: number): this {
    return this.u64Big(BigInt(v) & MASK64);
  }

  u64Big(v: bigint): this {
    for (let i = 0n; i < 8n; i++) this.byte(Number((v >> (i * 8n)) & 0xffn));
    return this;
  }

  value(): bigint {
    return (BigInt(this.hi) << 32n) | BigInt(this.lo);
  }
}
