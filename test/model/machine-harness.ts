/**
 * Small builders for machine tests: ops, calls, and a harness that applies entries with
 * increasing indexes at chosen times.
 */
import { StateMachine } from '../../host/machine/state-machine.js';
import { encodeCommand } from '../../host/machine/codec.js';
import type {
  ApplyOutcome, CallOutcome, Command, Expiry, KvCall, KvOp, OpResult, QuotaSettings,
} from '../../host/machine/commands.js';
import { outcomeOf } from './answers.js';
import { DEFAULT_TENANT } from '../../host/machine/commands.js';

export const NS = 'orders';
export const FOREVER: Expiry = { kind: 'forever' };
export const ttl = (ttlSeconds: number): Expiry => ({ kind: 'ttl', ttlSeconds });
export const MiB4 = 4 * 1024 * 1024;

export const put = (key: string, valueJson: string, o: { expect?: number | null;
  required?: boolean; expiry?: Expiry; ns?: string } = {}): KvOp => ({
  op: 'put', sentAs: 'put', ns: o.ns ?? NS, key, valueJson, expiry: o.expiry ?? FOREVER,
  expect: o.expect ?? null, required: o.required ?? false });
export const putIfAbsent = (key: string, valueJson: string, o: { required?: boolean;
  expiry?: Expiry } = {}): KvOp => ({ op: 'put', sentAs: 'putIfAbsent', ns: NS, key, valueJson,
  expiry: o.expiry ?? FOREVER, expect: 0, required: o.required ?? false });
export const del = (key: string, o: { expect?: number | null; required?: boolean } = {}):
  KvOp => ({ op: 'delete', ns: NS, key, expect: o.expect ?? null, required: o.required ?? false });
export const incr = (key: string, delta: string, o: { min?: string; max?: string;
  expiry?: Expiry; required?: boolean } = {}): KvOp => ({ op: 'incr', ns: NS, key, delta,
  min: o.min ?? null, max: o.max ?? null, expiry: o.expiry ?? FOREVER,
  required: o.required ?? false });
export const get = (key: string): KvOp => ({ op: 'get', ns: NS, key });
export const getMany = (...keys: string[]): KvOp => ({ op: 'getMany', ns: NS, keys });
export const getPrefix = (prefix: string, o: { after?: string; limit?: number;
  keysOnly?: boolean } = {}): KvOp => ({ op: 'getPrefix', ns: NS, prefix, after: o.after ?? '',
  limit: o.limit ?? 100, keysOnly: o.keysOnly ?? false });
export const check = (key: string, expect: number, required = false): KvOp =>
  ({ op: 'check', ns: NS, key, expect, required });

export const quotaOf = (q: Partial<QuotaSettings>): QuotaSettings => ({ enabled: true,
  maxRows: null, maxBytes: null, maxReadsPerSec: null, maxWritesPerSec: null, ...q });

/** Applies entries with consecutive indexes; `at` sets the next entry's time. */
export class Harness {
  readonly m = StateMachine.create();
  index = 0;
  now = 1_000_000;

  entry(command: Command): ApplyOutcome {
    return this.m.apply(++this.index, this.now, encodeCommand(command));
  }

  call(ops: KvOp[], o: { tenant?: string; ceiling?: number; requireGrant?: boolean } = {}):
    CallOutcome {
    const call: KvCall = { tenant: o.tenant ?? DEFAULT_TENANT, ops,
      readBytesCeiling: o.ceiling ?? MiB4 };
    const out = this.entry({ kind: 'call', call,
      flags: { requireGrant: o.requireGrant ?? false } });
    if (out.kind !== 'call' || out.answer === null) {
      throw new Error(`not a call outcome: ${JSON.stringify(out)}`);
    }
    return outcomeOf(call, out.answer);
  }

  /** The results of an ok call (fails the test otherwise). */
  ok(ops: KvOp[], o: { tenant?: string; ceiling?: number } = {}): OpResult[] {
    const out = this.call(ops, o);
    if (out.status !== 'ok') throw new Error(`call not ok: ${JSON.stringify(out)}`);
    return [...out.results];
  }

  read(ops: KvOp[], o: { tenant?: string; ceiling?: number; now?: number } = {}): OpResult[] {
    const call: KvCall = { tenant: o.tenant ?? DEFAULT_TENANT, ops,
      readBytesCeiling: o.ceiling ?? MiB4 };
    const out = outcomeOf(call, this.m.read(call, o.now ?? this.now));
    if (out.status !== 'ok') throw new Error(`read not ok: ${JSON.stringify(out)}`);
    return [...out.results];
  }

  one(op: KvOp): OpResult {
    return this.ok([op])[0]!;
  }
}

export const w = (applied: boolean, reason: string | null, key: string, valueJson: string,
  version: number): OpResult => ({ kind: 'write', applied, reason, key, valueJson, version } as
  OpResult);
