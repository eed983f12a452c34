/**
 * The machine never traps: random bytes and mutations of valid commands and snapshots yield
 * `invalid` outcomes or refused restores, never a MachineTrapError. Prints its seed; replay
 * with SEED=<n>.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { MachineTrapError, StateMachine } from '../../host/machine/state-machine.js';
import { encodeCommand } from '../../host/machine/codec.js';
import { commandArb } from '../model/arbitraries.js';
import { restoreFromBytes, snapshotToBytes } from '../../host/machine/snapshot-bytes.js';

const SEED = process.env.SEED !== undefined ? Number(process.env.SEED) : Date.now() % 2 ** 31;
const RUNS = Number(process.env.RUNS ?? 3000);

const mutation = fc.record({
  at: fc.nat(), byte: fc.integer({ min: 0, max: 255 }),
  kind: fc.constantFrom('flip', 'cut', 'insert', 'set'),
});

function mutate(bytes: Uint8Array, ms: ReadonlyArray<{ at: number; byte: number; kind: string }>):
  Uint8Array {
  let b = Uint8Array.from(bytes);
  for (const m of ms) {
    const at = b.length === 0 ? 0 : m.at % b.length;
    if (m.kind === 'flip' && b.length > 0) b[at] = b[at]! ^ (1 << (m.byte & 7));
    else if (m.kind === 'set' && b.length > 0) b[at] = m.byte;
    else if (m.kind === 'cut') b = b.subarray(0, at);
    else b = Uint8Array.from([...b.subarray(0, at), m.byte, ...b.subarray(at)]);
  }
  return b;
}

function noTrap(fn: () => unknown): void {
  try {
    fn();
  } catch (err) {
    if (err instanceof MachineTrapError) throw err;
    // Other errors are refusals the wrapper documents (restore of bad bytes).
    expect(String(err)).toMatch(/invalid snapshot/);
  }
}

describe(`no trap on any input (seed ${SEED})`, () => {
  it('random bytes to apply and restore', () => {
    console.log(`machine-fuzz seed: ${SEED} (replay with SEED=${SEED})`);
    const m = StateMachine.create();
    let index = 0;
    fc.assert(fc.property(fc.uint8Array({ maxLength: 200 }), (bytes) => {
      const out = m.apply(++index, 1000 + index, bytes);
      expect(['invalid', 'noop', 'admin', 'sweep', 'call']).toContain(out.kind);
      noTrap(() => restoreFromBytes(m, bytes));
    }), { seed: SEED, numRuns: RUNS });
  });

  it('mutations of valid commands and of snapshots', () => {
    const m = StateMachine.create();
    let index = 0;
    fc.assert(fc.property(commandArb, fc.array(mutation, { minLength: 1, maxLength: 4 }),
      (command, ms) => {
        const good = encodeCommand(command);
        m.apply(++index, 1000 + index * 100, good);
        m.apply(++index, 1000 + index * 100, mutate(good, ms));
        if (index % 50 === 0) {
          const snap = snapshotToBytes(m);
          const probe = StateMachine.create();
          const empty = probe.digest();
          // In chunks of any size; a refused snapshot leaves the state as it was.
          let restored = false;
          noTrap(() => {
            restoreFromBytes(probe, mutate(snap, ms), 1 + (index % 61));
            restored = true;
          });
          if (!restored) expect(probe.digest()).toBe(empty);
        }
      }), { seed: SEED + 1, numRuns: RUNS });
  });
});
