/**
 * Model-based test: random sequences of entries and reads run through the WebAssembly
 * machine and through the TypeScript reference model; every result and the final digest
 * must agree, and the state's byte total must equal a recount (and the model's count) after
 * every step. Replay must give the same digest; so must a snapshot taken in slices of random
 * sizes from a random step on, while the following entries apply between its slices: its
 * bytes equal those of a snapshot of a replayed copy at that step, and restoring them (in
 * chunks of random sizes) then applying the rest of the log gives the final digest.
 * Prints its seed; replay with SEED=<n>.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { StateMachine } from '../../host/machine/state-machine.js';
import { encodeCommand } from '../../host/machine/codec.js';
import { restoreFromBytes, snapshotToBytes } from '../../host/machine/snapshot-bytes.js';
import { ReferenceModel } from './reference-model.js';
import { checkpointFor, stepArb, type Step } from './arbitraries.js';
import { answerFor, answerText } from './answers.js';
import type { ApplyOutcome } from '../../host/machine/commands.js';
import type { ModelApplyOutcome } from './reference-model.js';

/** Both sides of one apply in one comparable form: a call's answer as text. */
function comparable(step: Step, out: ApplyOutcome | ModelApplyOutcome): unknown {
  if (out.kind !== 'call' || step.t !== 'apply' || step.command.kind !== 'call') return out;
  const call = step.command.call;
  if ('outcome' in out) return answerFor(call, out.outcome);
  return out.answer === null ? null : answerText(out.answer);
}

const SEED = process.env.SEED !== undefined ? Number(process.env.SEED) : Date.now() % 2 ** 31;
const RUNS = Number(process.env.RUNS ?? 2000);
const START_MS = 1_700_000_000_000;

interface LoggedEntry { readonly index: number; readonly time: number; readonly bytes: Uint8Array }

/** When the sliced snapshot begins (a step number, modulo the steps) and its slice sizes. */
interface SlicePlan { readonly beginAt: number; readonly sliceBytes: readonly number[];
  readonly chunkBytes: number }

const planArb: fc.Arbitrary<SlicePlan> = fc.record({
  beginAt: fc.nat(),
  sliceBytes: fc.array(fc.integer({ min: 1, max: 300 }), { minLength: 1, maxLength: 8 }),
  chunkBytes: fc.oneof({ weight: 1, arbitrary: fc.integer({ min: 1, max: 16 }) },
    { weight: 4, arbitrary: fc.integer({ min: 17, max: 4096 }) }),
});

/** A snapshot being taken in slices while the run goes on. */
class SlicedSnapshot {
  readonly parts: Uint8Array[] = [];
  private taken = 0;
  done = false;

  constructor(readonly m: StateMachine, readonly total: number, readonly plan: SlicePlan,
    readonly index: number, readonly digest: string) {}

  slice(): void {
    if (this.done) return;
    const size = this.plan.sliceBytes[this.taken++ % this.plan.sliceBytes.length]!;
    const part = this.m.snapshotNext(size);
    if (part.length === 0) this.done = true;
    else this.parts.push(part);
  }

  bytes(): Uint8Array {
    while (!this.done) this.slice();
    return Buffer.concat(this.parts);
  }
}

/** Checked after every step, so `expect` (slow) runs only on a mismatch. */
function checkByteTotal(m: StateMachine, model: ReferenceModel, at: string): void {
  const total = m.memoryUse().stateBytes;
  const recount = m.recountStateBytes();
  const rowBytes = model.rowBytes();
  if (total !== recount.rowBytes + recount.tenantBytes) {
    expect(total, `${at}: byte total vs recount`).toBe(recount.rowBytes + recount.tenantBytes);
  }
  if (recount.rowBytes !== rowBytes) {
    expect(recount.rowBytes, `${at}: row bytes vs model`).toBe(rowBytes);
  }
}

/**
 * The digest the machine keeps incrementally must equal one recounted from scratch, and the
 * model's, after every step (so a write that forgets its digest share fails where it happens).
 */
function checkDigest(m: StateMachine, model: ReferenceModel, at: string): void {
  const kept = m.digest();
  const recount = m.recountDigest();
  if (kept !== recount) expect(kept, `${at}: incremental digest vs recount`).toBe(recount);
  const want = model.digest();
  if (kept !== want) expect(kept, `${at}: digest vs model`).toBe(want);
}

function replay(log: readonly LoggedEntry[], upTo: number, from?: StateMachine): StateMachine {
  const m = from ?? StateMachine.create();
  for (const e of log) {
    if (e.index > m.appliedIndex && e.index <= upTo) m.apply(e.index, e.time, e.bytes);
  }
  return m;
}

function run(steps: readonly Step[], plan: SlicePlan): void {
  const m = StateMachine.create();
  const model = new ReferenceModel();
  let now = START_MS;
  let index = 0;
  const log: LoggedEntry[] = [];
  const digests = new Map<number, string>();
  let sliced: SlicedSnapshot | null = null;
  const beginAt = plan.beginAt % steps.length;
  steps.forEach((s, i) => {
    if (i === beginAt) {
      sliced = new SlicedSnapshot(m, m.snapshotBegin(), plan, index, m.digest());
    }
    now += s.dtMs;
    if (s.t === 'apply') {
      const command = checkpointFor(s.command, index, (at) => digests.get(at));
      index++;
      const bytes = encodeCommand(command);
      log.push({ index, time: now, bytes });
      const got = m.apply(index, now, bytes);
      const want = model.apply(index, now, command);
      expect(comparable(s, got), `step ${i} apply`).toEqual(comparable(s, want));
      digests.set(index, m.digest());
    } else {
      const got = answerText(m.read(s.call, now));
      const want = answerFor(s.call, model.read(s.call, now));
      expect(got, `step ${i} read`).toEqual(want);
    }
    checkByteTotal(m, model, `step ${i}`);
    checkDigest(m, model, `step ${i}`);
    (sliced as SlicedSnapshot | null)?.slice();
  });
  expect(m.digest()).toBe(model.digest());
  for (const t of ['00000000-0000-0000-0000-000000000001', 'tenant-é']) {
    expect(m.usage(t)).toEqual(model.usage(t));
  }
  expect(replay(log, index).digest()).toBe(m.digest());
  const snap = sliced as SlicedSnapshot | null;
  const bytes = snap?.bytes() ?? null;
  const restored = StateMachine.create();
  restoreFromBytes(restored, snapshotToBytes(m), plan.chunkBytes);
  expect(restored.digest()).toBe(m.digest());
  expect(restored.recountDigest()).toBe(m.digest());
  if (snap === null || bytes === null) return;
  // The sliced snapshot is exactly the state at its begin: byte for byte, then by digest.
  expect(bytes.length).toBe(snap.total);
  const copy = replay(log, snap.index);
  expect(Buffer.from(bytes).equals(Buffer.from(snapshotToBytes(copy))), 'sliced bytes').toBe(true);
  const fromSliced = StateMachine.create();
  restoreFromBytes(fromSliced, bytes, plan.chunkBytes);
  expect(fromSliced.digest()).toBe(snap.digest);
  expect(replay(log, index, fromSliced).digest()).toBe(m.digest());
}

describe('machine vs reference model', () => {
  it(`agrees on every result, byte total and digest, snapshots in slices (seed ${SEED})`, () => {
    console.log(`machine-model seed: ${SEED} (replay with SEED=${SEED})`);
    fc.assert(fc.property(fc.array(stepArb, { minLength: 1, maxLength: 40 }), planArb,
      (steps, plan) => {
        run(steps, plan);
      }), { seed: SEED, numRuns: RUNS });
  });
});
