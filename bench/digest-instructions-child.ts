/**
 * One run of `bench:digest`'s instructions part, meant to run under callgrind:
 * `node dist/bench/digest-instructions-child.js WASM KEYS OPS SHAPE MEASURE`. Loads KEYS keys
 * of 100-byte values into a machine of the module WASM (entries of 256), builds OPS random
 * puts in entries of SHAPE operations, and applies them only when MEASURE is 1: so the
 * difference between a run with MEASURE 1 and one with 0 is the apply of those puts and
 * nothing else. Deterministic: the keys come from a fixed generator, entry times from indexes.
 */
import type { Entry } from '../host/core/raft/types.js';
import { encodeCommand } from '../host/machine/codec.js';
import { DEFAULT_TENANT, type KvOp } from '../host/machine/commands.js';
import type { AppliedEntrySink } from '../host/machine/state-machine.js';
import { encodeEnvelope, type Origin } from '../host/node/envelope.js';

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
const ORIGIN: Origin = { nodeId: 'bench', incarnation: 1 };
const VALUE = `"${'x'.repeat(98)}"`;
const keyOf = (i: number): string => `user:${i.toString().padStart(8, '0')}`;

function putOp(key: string): KvOp {
  return { op: 'put', sentAs: 'put', ns: 'bench', key, valueJson: VALUE,
    expiry: { kind: 'forever' }, expect: null, required: false };
}

function envelopeOf(ops: KvOp[]): Uint8Array {
  return encodeEnvelope(ORIGIN, 1, encodeCommand({ kind: 'call', flags: { requireGrant: false },
    call: { tenant: DEFAULT_TENANT, shape: 'batch', ops, readBytesCeiling: 4 << 20 } }));
}

const SINK: AppliedEntrySink = {
  answer: () => undefined, done: () => undefined, admin: () => undefined,
  swept: () => undefined, checkpoint: () => undefined,
  invalid: (index, detail) => {
    throw new Error(`entry ${index} refused: ${detail}`);
  },
};

const machine = StateMachine.create();
machine.setOrigin(ORIGIN.nodeId, ORIGIN.incarnation);
let index = 0;

function apply(envelopes: readonly Uint8Array[]): void {
  for (let i = 0; i < envelopes.length; i += ENTRIES_PER_CROSSING) {
    const entries: Entry[] = envelopes.slice(i, i + ENTRIES_PER_CROSSING).map((data) => {
      index++;
      // The envelope's seq: after u8 version, u8 id length, the id, u32 incarnation.
      new DataView(data.buffer, data.byteOffset).setBigUint64(2 + ORIGIN.nodeId.length + 4,
        BigInt(index), true);
      return { term: 1, index, timeMs: index, type: 'normal', data };
    });
    machine.applyEntries(entries, SINK);
  }
}

for (let start = 0; start < KEYS; start += LOAD_SHAPE * ENTRIES_PER_CROSSING) {
  const envelopes: Uint8Array[] = [];
  for (let e = start; e < Math.min(start + LOAD_SHAPE * ENTRIES_PER_CROSSING, KEYS);
    e += LOAD_SHAPE) {
    const ops: KvOp[] = [];
    for (let k = e; k < Math.min(e + LOAD_SHAPE, KEYS); k++) ops.push(putOp(keyOf(k)));
    envelopes.push(envelopeOf(ops));
  }
  apply(envelopes);
}

// Built in both runs, so that the difference between them is the apply alone.
let seed = 12345;
const measured: Uint8Array[] = [];
for (let done = 0; done < OPS; done += SHAPE) {
  const ops: KvOp[] = [];
  for (let j = 0; j < SHAPE; j++) {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
    ops.push(putOp(keyOf(seed % KEYS)));
  }
  measured.push(envelopeOf(ops));
}
if (measureArg === '1') apply(measured);
process.stdout.write(`${JSON.stringify({ keys: machine.liveKeyCount(), index })}\n`);
