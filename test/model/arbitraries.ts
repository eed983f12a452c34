/**
 * fast-check generators for model-based tests of the state machine: valid commands only
 * (as the host's validation would produce them), drawn from small pools so that keys
 * collide, versions race, expiries land exactly on entry times and ceilings bite.
 */
import fc from 'fast-check';
import type { Command, Expiry, KvCall, KvOp, QuotaSettings } from '../../host/machine/commands.js';

export const TENANTS = ['00000000-0000-0000-0000-000000000001', 'tenant-é'];
const NAMESPACES = ['a', 'b.c'];
const KEY_POOL = ['k', 'k1', 'k2', 'ka', 'kb', 'é', 'éa', '日本', 'k\u{1F600}', 'a/b', ' ', 'kk',
  'K', 'k\u007f'];
const PREFIXES = ['k', 'é', '日', 'k1', 'a', 'kk', ' '];
const SMALL_VALUES = ['null', '1', '"x"', '{"a":1}', '1e2', '-0', '0.1', '2.5E-3', 'true',
  '[1,2]', '"日本"', '9007199254740991', '-12.50', '1e1001', '0e-5', '{}'];
const DECIMALS = ['1', '-1', '0.1', '0.2', '5', '-3', '100', '0.001', '9007199254740991',
  '-9007199254740991', '2.5', '0', '3', '-0.5'];

const HOT_KEYS = ['k', 'k1', 'é', 'kk'];
const key = fc.oneof({ weight: 8, arbitrary: fc.constantFrom(...HOT_KEYS) },
  { weight: 3, arbitrary: fc.constantFrom(...KEY_POOL) },
  { weight: 1, arbitrary: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 4 })
    .filter((s) => !s.includes('\u0000')) });
const ns = fc.oneof({ weight: 6, arbitrary: fc.constant(NAMESPACES[0]!) },
  { weight: 1, arbitrary: fc.constantFrom(...NAMESPACES) });
const value = fc.oneof({ weight: 12, arbitrary: fc.constantFrom(...SMALL_VALUES) },
  { weight: 1, arbitrary: fc.integer({ min: 0, max: 65534 }).map((n) => `"${'v'.repeat(n)}"`) });
const expiry: fc.Arbitrary<Expiry> = fc.oneof(
  { weight: 2, arbitrary: fc.integer({ min: 1, max: 6 })
    .map((ttlSeconds) => ({ kind: 'ttl' as const, ttlSeconds })) },
  { weight: 1, arbitrary: fc.constant({ kind: 'forever' as const }) });
const version = fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 12 }));
const required = fc.oneof({ weight: 4, arbitrary: fc.constant(false) },
  { weight: 1, arbitrary: fc.constant(true) });
const decimal = fc.oneof({ weight: 4, arbitrary: fc.constantFrom(...DECIMALS) },
  { weight: 1, arbitrary: fc.integer({ min: -20, max: 20 }).map(String) });

const w = <T>(weight: number, arbitrary: fc.Arbitrary<T>) => ({ weight, arbitrary });
const opArb: fc.Arbitrary<KvOp> = fc.oneof(
  w(2, fc.record({ op: fc.constant('get' as const), ns, key })),
  w(1, fc.record({ op: fc.constant('getMany' as const), ns,
    keys: fc.uniqueArray(key, { minLength: 1, maxLength: 5 }) })),
  w(2, fc.record({ op: fc.constant('getPrefix' as const), ns,
    prefix: fc.constantFrom(...PREFIXES), after: fc.oneof(fc.constant(''), key),
    limit: fc.integer({ min: 1, max: 4 }), keysOnly: fc.boolean() })),
  w(1, fc.record({ op: fc.constant('check' as const), ns, key, expect: version, required })),
  w(5, fc.record({ op: fc.constant('put' as const), sentAs: fc.constantFrom('put' as const,
    'putIfAbsent' as const), ns, key, valueJson: value, expiry,
  expect: fc.option(version, { nil: null, freq: 2 }), required })
    .map((o) => (o.sentAs === 'putIfAbsent' ? { ...o, expect: 0 } : o))),
  w(1, fc.record({ op: fc.constant('delete' as const), ns, key,
    expect: fc.option(version, { nil: null, freq: 2 }), required })),
  w(2, fc.record({ op: fc.constant('incr' as const), ns, key, delta: decimal,
    min: fc.option(decimal, { nil: null, freq: 2 }),
    max: fc.option(decimal, { nil: null, freq: 2 }), expiry, required })),
);

/** One write per key per call, as validation guarantees. */
function oneWritePerKey(ops: KvOp[]): KvOp[] {
  const seen = new Set<string>();
  return ops.filter((o) => {
    if (o.op !== 'put' && o.op !== 'delete' && o.op !== 'incr') return true;
    const id = `${o.ns}\u0000${o.key}`;
    if (seen.has(id)) return false;
    seen.add(id);
    return true;
  });
}

const ceiling = fc.oneof(fc.integer({ min: 0, max: 40 }), fc.constant(4 * 1024 * 1024));

export const callArb: fc.Arbitrary<KvCall> = fc.record({
  tenant: fc.oneof({ weight: 5, arbitrary: fc.constant(TENANTS[0]!) },
    { weight: 1, arbitrary: fc.constantFrom(...TENANTS) }),
  ops: fc.array(opArb, { minLength: 1, maxLength: 6 }).map(oneWritePerKey),
  readBytesCeiling: ceiling,
});

const limit = fc.option(fc.integer({ min: 0, max: 40 }), { nil: null });
const quota: fc.Arbitrary<QuotaSettings> = fc.record({ enabled: fc.boolean(), maxRows: limit,
  maxBytes: fc.option(fc.integer({ min: 0, max: 200 }), { nil: null }),
  maxReadsPerSec: limit, maxWritesPerSec: limit });

export const commandArb: fc.Arbitrary<Command> = fc.oneof(
  { weight: 14, arbitrary: fc.record({ kind: fc.constant('call' as const), call: callArb,
    flags: fc.record({ requireGrant: fc.oneof({ weight: 1, arbitrary: fc.constant(true) },
      { weight: 5, arbitrary: fc.constant(false) }) }) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('sweep' as const),
    maxKeys: fc.integer({ min: 0, max: 3 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('setQuota' as const),
    tenant: fc.constantFrom(...TENANTS), quota }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('setPaused' as const),
    paused: fc.oneof({ weight: 1, arbitrary: fc.constant(true) },
      { weight: 2, arbitrary: fc.constant(false) }) }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'noop' as const }) },
  // The model test reads `index` as a distance back and mostly puts the true digest there:
  // see `checkpointFor`. Elsewhere it is a checkpoint as drawn (often of an unapplied index).
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('checkpoint' as const),
    index: fc.integer({ min: 0, max: 45 }),
    digest: fc.bigInt({ min: 0n, max: 2n ** 64n - 1n })
      .map((v) => v.toString(16).padStart(16, '0')) }) },
);

/**
 * A drawn checkpoint made concrete for a run at `appliedIndex`: the index `command.index`
 * entries back (0 and below are refused by both sides), and three times in four the true
 * digest there (the drawn one's last hex digit decides), else the drawn one.
 */
export function checkpointFor(command: Command, appliedIndex: number,
  digestAt: (index: number) => string | undefined): Command {
  if (command.kind !== 'checkpoint') return command;
  const index = appliedIndex - command.index;
  const own = Number.parseInt(command.digest.slice(-1), 16) % 4 !== 0;
  const digest = own ? digestAt(index) ?? command.digest : command.digest;
  return { kind: 'checkpoint', index, digest };
}

/** A read call: only reads and checks. */
export const readCallArb: fc.Arbitrary<KvCall> = callArb.map((c) => ({
  ...c, ops: c.ops.filter((o) => o.op !== 'put' && o.op !== 'delete' && o.op !== 'incr'),
}));

export type Step =
  | { readonly t: 'apply'; readonly dtMs: number; readonly command: Command }
  | { readonly t: 'read'; readonly dtMs: number; readonly call: KvCall };

/** Time steps are multiples of 500 ms, so TTLs of whole seconds often expire exactly. */
const dtMs = fc.integer({ min: 0, max: 4 }).map((n) => n * 500);

export const stepArb: fc.Arbitrary<Step> = fc.oneof(
  { weight: 4,
    arbitrary: fc.record({ t: fc.constant('apply' as const), dtMs, command: commandArb }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('read' as const), dtMs, call: readCallArb }) },
);
