/**
 * The puts `bench:digest` applies, shared by its timed parts (digest-cost.bench.ts) and the
 * run it counts under callgrind (digest-instructions-child.ts): 100-byte values under
 * `user:NNNNNNNN` keys, in the envelope a node's leader proposes, applied with fresh
 * indexes and proposal numbers (a reused seq would be skipped as a duplicate).
 */
import type { Entry } from '../host/core/raft/types.js';
import { encodeCommand } from '../host/machine/codec.js';
import { DEFAULT_TENANT, type KvOp } from '../host/machine/commands.js';
import type { AppliedEntrySink, StateMachine } from '../host/machine/state-machine.js';
import { encodeEnvelope, type Origin } from '../host/node/envelope.js';

export const ORIGIN: Origin = { nodeId: 'bench', incarnation: 1 };
const VALUE = `"${'x'.repeat(98)}"`;

export const keyOf = (i: number): string => `user:${i.toString().padStart(8, '0')}`;

function putOp(key: string): KvOp {
  return { op: 'put', sentAs: 'put', ns: 'bench', key, valueJson: VALUE,
    expiry: { kind: 'forever' }, expect: null, required: false };
}

/** `count` envelopes of `opsPerEntry` puts each, the i-th put to key `keyAt(i)`. */
export function envelopesOf(opsPerEntry: number, count: number, keyAt: (i: number) => number):
  Uint8Array[] {
  return Array.from({ length: count }, (_, e) => encodeEnvelope(ORIGIN, 1, encodeCommand({
    kind: 'call', flags: { requireGrant: false }, call: { tenant: DEFAULT_TENANT,
      shape: 'batch', readBytesCeiling: 4 << 20,
      ops: Array.from({ length: opsPerEntry }, (_, j) => putOp(keyOf(keyAt(e * opsPerEntry + j)))),
    } })));
}

const SINK: AppliedEntrySink = {
  answer: () => undefined, done: () => undefined, admin: () => undefined,
  swept: () => undefined,
  checkpoint: () => undefined,
  invalid: (index, detail) => {
    throw new Error(`entry ${index} refused: ${detail}`);
  },
};

/** Applies envelopes as entries, one crossing per call. */
export class Feeder {
  index = 0;
  constructor(private readonly machine: StateMachine) {
    machine.setOrigin(ORIGIN.nodeId, ORIGIN.incarnation);
  }

  apply(envelopes: readonly Uint8Array[]): void {
    const entries: Entry[] = envelopes.map((data) => {
      this.index++;
      // The envelope's seq: after u8 version, u8 id length, the id, u32 incarnation.
      new DataView(data.buffer, data.byteOffset).setBigUint64(2 + ORIGIN.nodeId.length + 4,
        BigInt(this.index), true);
      return { term: 1, index: this.index, timeMs: this.index, type: 'normal', data };
    });
    this.machine.applyEntries(entries, SINK);
  }
}
