/**
 * Snapshots taken in slices while entries apply between the slices (assembly/snapshot-out.ts):
 * over a loaded state, random entries (puts, deletes, incrs, sweeps, quota changes, calls
 * undone by a lost `required`) interleave with slices of random sizes. The joined slices must
 * be byte-identical to a snapshot taken at once of a copy restored at begin, and restoring
 * them, in chunks of random sizes, must give the copy's digest. Prints its seed; replay with
 * SEED=<n>.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { StateMachine } from '../../host/machine/state-machine.js';
import { encodeCommand } from '../../host/machine/codec.js';
import type { Command, KvOp } from '../../host/machine/commands.js';
import { restoreFromBytes, snapshotToBytes } from '../../host/machine/snapshot-bytes.js';
import { TENANTS, commandArb } from './arbitraries.js';

const SEED = process.env.SEED !== undefined ? Number(process.env.SEED) : Date.now() % 2 ** 31;
const RUNS = Number(process.env.RUNS ?? 300);
const START_MS = 1_700_000_000_000;

/** A key of the loaded state: sorts among the generators' key pool ('k', 'k1', 'ka', ...). */
const loadKey = (i: number): string => `k${i}`;

const loadArb = fc.array(fc.record({
  key: fc.integer({ min: 0, max: 400 }),
  ns: fc.constantFrom('a', 'b.c'),
  tenant: fc.constantFrom(...TENANTS),
  valueBytes: fc.oneof({ weight: 6, arbitrary: fc.integer({ min: 0, max: 40 }) },
    { weight: 1, arbitrary: fc.integer({ min: 41, max: 3000 }) }),
  ttlSeconds: fc.option(fc.integer({ min: 1, max: 6 }), { nil: null }),
}), { maxLength: 300 });

/** Deletes and overwrites of loaded keys, so preimages are kept on both sides of the cursor. */
const touchArb: fc.Arbitrary<Command> = fc.record({
  keys: fc.uniqueArray(fc.integer({ min: 0, max: 400 }), { minLength: 1, maxLength: 6 }),
  ns: fc.constantFrom('a', 'b.c'),
  tenant: fc.constantFrom(...TENANTS),
  del: fc.boolean(),
  lostRequired: fc.boolean(),
}).map(({ keys, ns, tenant, del, lostRequired }) => {
  const ops: KvOp[] = keys.map((k) => del
    ? { op: 'delete' as const, ns, key: loadKey(k), expect: null, required: false }
    : { op: 'put' as const, sentAs: 'put' as const, ns, key: loadKey(k), valueJson: `"${k}"`,
      expiry: { kind: 'forever' as const }, expect: null, required: false });
  // A lost `required` check undoes the whole call: rows go out of the tree and back in.
  if (lostRequired) ops.push({ op: 'check', ns, key: 'never-there', expect: 7, required: true });
  return { kind: 'call' as const, call: { tenant, ops, readBytesCeiling: 4096 },
    flags: { requireGrant: false } };
});

type Action = { readonly t: 'apply'; readonly command: Command; readonly dtMs: number }
  | { readonly t: 'slice'; readonly maxBytes: number };

const actionArb: fc.Arbitrary<Action> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ t: fc.constant('apply' as const),
    command: fc.oneof(commandArb, touchArb), dtMs: fc.integer({ min: 0, max: 3000 }) }) },
  { weight: 2, arbitrary: fc.record({ t: fc.constant('slice' as const),
    maxBytes: fc.oneof(fc.integer({ min: 1, max: 200 }), fc.integer({ min: 201, max: 20000 })) }) },
);

interface LoadEntry { readonly key: number; readonly ns: string; readonly tenant: string;
  readonly valueBytes: number; readonly ttlSeconds: number | null }

function load(m: StateMachine, entries: readonly LoadEntry[], now: number): number {
  let index = 0;
  for (const e of entries) {
    const command: Command = { kind: 'call', flags: { requireGrant: false }, call: {
      tenant: e.tenant, readBytesCeiling: 0, ops: [{ op: 'put', sentAs: 'put', ns: e.ns,
        key: loadKey(e.key), valueJson: `"${'v'.repeat(e.valueBytes)}"`, expect: null,
        required: false, expiry: e.ttlSeconds === null ? { kind: 'forever' }
          : { kind: 'ttl', ttlSeconds: e.ttlSeconds } }] } };
    m.apply(++index, now, encodeCommand(command));
  }
  return index;
}

describe(`snapshots in slices while entries apply (seed ${SEED})`, () => {
  it('are byte-identical to a snapshot at once of a copy at begin, and restore to it', () => {
    console.log(`machine-snapshot seed: ${SEED} (replay with SEED=${SEED})`);
    fc.assert(fc.property(loadArb, fc.array(actionArb, { maxLength: 60 }),
      fc.integer({ min: 1, max: 5000 }), (entries, actions, chunkBytes) => {
        const m = StateMachine.create();
        let now = START_MS;
        let index = load(m, entries, now);
        const copy = StateMachine.create();
        restoreFromBytes(copy, snapshotToBytes(m));
        const total = m.snapshotBegin();
        const parts: Uint8Array[] = [];
        for (const a of actions) {
          if (a.t === 'slice') {
            parts.push(m.snapshotNext(a.maxBytes));
            continue;
          }
          now += a.dtMs;
          m.apply(++index, now, encodeCommand(a.command));
        }
        for (let part = m.snapshotNext(1000); part.length > 0; part = m.snapshotNext(1000)) {
          parts.push(part);
        }
        expect(m.memoryUse().preimageBytes).toBe(0);
        const bytes = Buffer.concat(parts);
        expect(bytes.length).toBe(total);
        if (!bytes.equals(Buffer.from(snapshotToBytes(copy)))) {
          expect(bytes.toString('hex')).toBe(Buffer.from(snapshotToBytes(copy)).toString('hex'));
        }
        const restored = StateMachine.create();
        restoreFromBytes(restored, bytes, chunkBytes);
        expect(restored.digest()).toBe(copy.digest());
        expect(restored.memoryUse().stateBytes).toBe(copy.memoryUse().stateBytes);
      }), { seed: SEED, numRuns: RUNS });
  });
});
