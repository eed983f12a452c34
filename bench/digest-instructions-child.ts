/**
 * One run of `bench:digest`'s instructions part, meant to run under callgrind:
 * `node dist/bench/digest-instructions-child.js WASM KEYS OPS SHAPE MEASURE`. Loads KEYS keys
 * of 100-byte values into a machine of the module WASM (entries of 256), builds OPS random
 * puts in entries of SHAPE operations, and applies them only when MEASURE is 1: so the
 * difference between a run with MEASURE 1 and one with 0 is the apply of those puts and
 * nothing else.
 * Deterministic: the keys come from a fixed generator, entry times from indexes.
 */
import { Feeder, envelopesOf } from './digest-workload.js';

const [wasm, keysArg, opsArg, shapeArg, measureArg] = process.argv.slice(2);
const KEYS = Number(keysArg);
const OPS = Number(opsArg);
const SHAPE = Number(shapeArg);
if (wasm === undefined || !(KEYS > 0 && OPS >= 0 && SHAPE > 0 && SHAPE <= 256)) {
  throw new Error('usage: digest-instructions-child.js WASM KEYS OPS SHAPE MEASURE');
}
process.env['HIVEKV_WASM_PATH'] = wasm;
const { StateMachine } = await import('../host/machine/state-machine.js');

const LOAD_SHAPE = 256;
const ENTRIES_PER_CROSSING = 16;

const feeder = new Feeder(StateMachine.create());
function apply(envelopes: readonly Uint8Array[]): void {
  for (let i = 0; i < envelopes.length; i += ENTRIES_PER_CROSSING) {
    feeder.apply(envelopes.slice(i, i + ENTRIES_PER_CROSSING));
  }
}

apply(envelopesOf(LOAD_SHAPE, Math.ceil(KEYS / LOAD_SHAPE), (i) => i % KEYS));
// Built in both runs, so that the difference between them is the apply alone.
let seed = 12345;
const measured = envelopesOf(SHAPE, Math.ceil(OPS / SHAPE), () => {
  seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
  return seed % KEYS;
});
if (measureArg === '1') apply(measured);
process.stdout.write(`${JSON.stringify({ index: feeder.index })}\n`);
