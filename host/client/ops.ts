/**
 * Builders of the operations of `POST /api/v1/kv`, shared by `kv.*`, `kv.batch()` and the
 * transaction rider, so the three cannot drift apart.
 *
 * An operation is built when the caller names it and materialised (expiry sugar resolved)
 * when the call is sent. The checks here are only the ones the node cannot make because the
 * mistake never reaches the wire: an `undefined` that `JSON.stringify` would drop (an
 * `expect: undefined` would silently turn a compare-and-swap into an upsert), two spellings
 * of one lifetime, a TTL string the parser does not know. Every other rule is the node's,
 * and comes back as its refusal. Pure; browser-safe.
 */
import { resolveExpiry } from './expiry.js';
import type {
  CheckOptions, DeleteOptions, ExpiryOptions, GetPrefixOptions, IncrOptions, PutIfAbsentOptions,
  PutOptions, WireOp,
} from './types.js';

/** An operation as named by the caller, expiry unresolved. */
export interface PendingOp {
  readonly base: Readonly<Record<string, unknown>> & { readonly op: string };
  /** The caller's expiry options, resolved at send time; null for ops without a lifetime. */
  readonly expiry: ExpiryOptions | null;
  /** True for put, putIfAbsent, delete and incr: the call then carries an Idempotency-Key. */
  readonly write: boolean;
}

/** The ops that change state. `check` asserts and writes nothing, so it is a read. */
export const WRITE_OPS: ReadonlySet<string> = new Set(['put', 'putIfAbsent', 'delete', 'incr']);

function name(value: unknown, what: string): string {
  if (typeof value !== 'string' || value.length === 0) {
    throw new TypeError(`kv: ${what} must be a non-empty string, got ${describe(value)}`);
  }
  return value;
}

function describe(value: unknown): string {
  if (value === undefined) return 'undefined';
  if (typeof value === 'string') return JSON.stringify(value);
  return value === null ? 'null' : typeof value;
}

/** `expect` written but without a value is a caller's bug, never an upsert. */
function withExpect(base: Record<string, unknown>, options: { expect?: number }): void {
  if (!('expect' in options)) return;
  if (options.expect === undefined || options.expect === null) {
    throw new TypeError('kv: expect is written but has no value; leave it out for an ' +
      'unconditional write, or pass 0 for "must not exist"');
  }
  base['expect'] = options.expect;
}

function withRequired(base: Record<string, unknown>, options: { required?: boolean }): void {
  if (options.required !== undefined) base['required'] = options.required;
}

function value(raw: unknown): unknown {
  if (raw === undefined) {
    throw new TypeError('kv: value is undefined, which JSON cannot carry; to store null, ' +
      'pass null');
  }
  return raw;
}

export const kvOp = {
  get(ns: string, key: string): PendingOp {
    return { base: { op: 'get', ns: name(ns, 'ns'), key: name(key, 'key') }, expiry: null,
      write: false };
  },

  getMany(ns: string, keys: readonly string[]): PendingOp {
    if (!Array.isArray(keys) || keys.length === 0) {
      throw new TypeError('kv: getMany needs a non-empty array of keys');
    }
    keys.forEach((key, i) => name(key, `keys[${i}]`));
    return { base: { op: 'getMany', ns: name(ns, 'ns'), keys: [...keys] }, expiry: null,
      write: false };
  },

  getPrefix(ns: string, prefix: string, options: GetPrefixOptions = {}): PendingOp {
    const base: Record<string, unknown> & { op: string } = {
      op: 'getPrefix', ns: name(ns, 'ns'), prefix: name(prefix, 'prefix'),
    };
    if (options.limit !== undefined) base['limit'] = options.limit;
    if (options.after !== undefined && options.after !== null) base['after'] = options.after;
    if (options.keysOnly !== undefined) base['keysOnly'] = options.keysOnly;
    return { base, expiry: null, write: false };
  },

  put(ns: string, key: string, raw: unknown, options: PutOptions = {}): PendingOp {
    const base: Record<string, unknown> & { op: string } = {
      op: 'put', ns: name(ns, 'ns'), key: name(key, 'key'), value: value(raw),
    };
    withExpect(base, options);
    withRequired(base, options);
    return { base, expiry: options, write: true };
  },

  putIfAbsent(ns: string, key: string, raw: unknown, options: PutIfAbsentOptions = {}): PendingOp {
    if ('expect' in options) {
      throw new TypeError('kv: putIfAbsent is expect 0 already; it takes no expect');
    }
    const base: Record<string, unknown> & { op: string } = {
      op: 'putIfAbsent', ns: name(ns, 'ns'), key: name(key, 'key'), value: value(raw),
    };
    withRequired(base, options);
    return { base, expiry: options, write: true };
  },

  delete(ns: string, key: string, options: DeleteOptions = {}): PendingOp {
    const base: Record<string, unknown> & { op: string } = {
      op: 'delete', ns: name(ns, 'ns'), key: name(key, 'key'),
    };
    withExpect(base, options);
    withRequired(base, options);
    return { base, expiry: null, write: true };
  },

  incr(ns: string, key: string, delta: number = 1, options: IncrOptions = {}): PendingOp {
    if ('expect' in options) {
      throw new TypeError('kv: incr takes no expect; it is the way out of the compare-and-swap ' +
        'loop (bound it with min and max instead)');
    }
    if (typeof delta !== 'number' || !Number.isFinite(delta)) {
      throw new TypeError(`kv: incr needs a finite number as delta, got ${describe(delta)}`);
    }
    const base: Record<string, unknown> & { op: string } = {
      op: 'incr', ns: name(ns, 'ns'), key: name(key, 'key'), delta,
    };
    if (options.min !== undefined) base['min'] = options.min;
    if (options.max !== undefined) base['max'] = options.max;
    withRequired(base, options);
    return { base, expiry: options, write: true };
  },

  check(ns: string, key: string, expect: number, options: CheckOptions = {}): PendingOp {
    if (expect === undefined || expect === null) {
      throw new TypeError('kv: check needs the version to expect (0 asserts absence)');
    }
    const base: Record<string, unknown> & { op: string } = {
      op: 'check', ns: name(ns, 'ns'), key: name(key, 'key'), expect,
    };
    withRequired(base, options);
    return { base, expiry: null, write: false };
  },

  /**
   * An operation already in the wire's shape (`{op, ns, key, ...}`), as a batch file holds
   * it. `ttl` and `until` are resolved like the builders' options; everything else is sent
   * as is, for the node to judge.
   */
  raw(op: WireOp): PendingOp {
    if (typeof op !== 'object' || op === null || Array.isArray(op) || typeof op.op !== 'string') {
      throw new TypeError('kv: an operation is an object with an op field, such as ' +
        '{"op":"get","ns":"orders","key":"9137"}');
    }
    const { ttl, until, ...rest } = op as Record<string, unknown>;
    const hasSugar = ttl !== undefined || until !== undefined;
    const expiry = hasSugar ? { ttl, until, ttlSeconds: rest['ttlSeconds'] } as ExpiryOptions
      : null;
    if (hasSugar) delete rest['ttlSeconds'];
    return { base: rest as PendingOp['base'], expiry, write: WRITE_OPS.has(op.op) };
  },
};

/** The wire form of `op` at `nowMs`: its fields plus the resolved lifetime. */
export function materialize(op: PendingOp, nowMs: number): Record<string, unknown> {
  if (op.expiry === null) return { ...op.base };
  return { ...op.base, ...resolveExpiry(op.expiry, nowMs) };
}
