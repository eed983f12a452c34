/**
 * The request parser never traps the machine: random frames, mutated frames and random
 * bodies give an outcome (or the documented throw for a malformed frame), never a
 * MachineTrapError, and the machine's state is untouched by parsing. Prints its seed;
 * replay with SEED=<n>.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { encodeCommand } from '../../host/machine/codec.js';
import { encodeRequestFrame } from '../../host/machine/request.js';
import { MachineTrapError, StateMachine } from '../../host/machine/state-machine.js';
import { commandArb } from '../model/arbitraries.js';
import { mutate, mutation, requestFrame } from '../model/request-arbitraries.js';
import { testSeed } from '../helpers/seed.js';

const SEED = testSeed();
const RUNS = Number(process.env.RUNS ?? 3000);

function parses(m: StateMachine, frame: Uint8Array): void {
  try {
    const out = m.parseRequestFrame(frame);
    expect(['command', 'refused']).toContain(out.kind);
  } catch (err) {
    if (err instanceof MachineTrapError) throw err;
    expect(String(err)).toMatch(/malformed request frame/);
  }
}

describe(`request parser: no trap on any input (seed ${SEED})`, () => {
  it('random frames, mutated frames, random bodies; the state stays as it was', () => {
    const m = StateMachine.create();
    const twin = StateMachine.create();
    let index = 0;
    fc.assert(fc.property(commandArb, (command) => {
      const bytes = encodeCommand(command);
      m.apply(++index, 1000 * index, bytes);
      twin.apply(index, 1000 * index, bytes);
    }), { seed: SEED, numRuns: 200 });
    fc.assert(fc.property(fc.uint8Array({ maxLength: 300 }), (bytes) => parses(m, bytes)),
      { seed: SEED + 1, numRuns: RUNS });
    fc.assert(fc.property(requestFrame(false), fc.array(mutation, { minLength: 1, maxLength: 4 }),
      (frame, ms) => parses(m, mutate(encodeRequestFrame(frame), ms))),
    { seed: SEED + 2, numRuns: RUNS });
    fc.assert(fc.property(requestFrame(false), fc.uint8Array({ maxLength: 300 }),
      (frame, body) => {
        const out = m.parseRequest({ ...frame, body });
        expect(['command', 'refused']).toContain(out.kind);
      }), { seed: SEED + 3, numRuns: RUNS });
    expect(m.digest()).toBe(twin.digest());
    expect(m.apply(++index, 1000 * index, encodeCommand({ kind: 'noop' }))).toEqual({
      kind: 'noop' });
  });
});
