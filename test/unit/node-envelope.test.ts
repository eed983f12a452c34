import { describe, expect, it } from 'vitest';
import {
  encodeEnvelope, LegacySnapshotSkipper, machineSnapshotOf,
} from '../../host/node/envelope.js';

const origin = { nodeId: 'n2', incarnation: 0xdeadbeef };

describe('entry envelope', () => {
  it('lays out version, origin, sequence number and command (docs/codec.md, "Entries")', () => {
    const bytes = encodeEnvelope(origin, 42, new Uint8Array([9, 8, 7]));
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    expect([bytes[0], bytes[1]]).toEqual([1, 2]);
    expect(new TextDecoder().decode(bytes.subarray(2, 4))).toBe('n2');
    expect(view.getUint32(4, true)).toBe(0xdeadbeef);
    expect(view.getBigUint64(8, true)).toBe(42n);
    expect([...bytes.subarray(16)]).toEqual([9, 8, 7]);
  });

  it('writes a sequence number past 2^32 whole, and each envelope into bytes of its own', () => {
    const seq = 2 ** 40 + 5;
    const first = encodeEnvelope(origin, seq, new Uint8Array([1]));
    const second = encodeEnvelope(origin, Number.MAX_SAFE_INTEGER, new Uint8Array([2]));
    const view = new DataView(first.buffer, first.byteOffset, first.byteLength);
    expect(view.getBigUint64(8, true)).toBe(BigInt(seq));
    const secondView = new DataView(second.buffer, second.byteOffset, second.byteLength);
    expect(secondView.getBigUint64(8, true)).toBe(BigInt(Number.MAX_SAFE_INTEGER));
    expect([first[16], second[16]]).toEqual([1, 2]);
  });

  it('writes each origin\'s own head when origins take turns', () => {
    const other = { nodeId: 'node-three', incarnation: 7 };
    for (const [from, id, incarnation] of [[origin, 'n2', 0xdeadbeef], [other, 'node-three', 7],
      [other, 'node-three', 7], [origin, 'n2', 0xdeadbeef]] as const) {
      const bytes = encodeEnvelope(from, 1, new Uint8Array([5]));
      const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      expect(bytes[1]).toBe(id.length);
      expect(new TextDecoder().decode(bytes.subarray(2, 2 + id.length))).toBe(id);
      expect(view.getUint32(2 + id.length, true)).toBe(incarnation);
      expect(bytes[bytes.length - 1]).toBe(5);
    }
  });

  it('refuses an id over 64 bytes and a sequence number that is not positive', () => {
    expect(() => encodeEnvelope({ nodeId: 'x'.repeat(65), incarnation: 1 }, 1,
      new Uint8Array())).toThrow(/64 bytes/);
    expect(() => encodeEnvelope(origin, 0, new Uint8Array())).toThrow(/sequence/);
  });
});

describe('stored snapshots', () => {
  it('passes a machine snapshot through', () => {
    const data = new Uint8Array([0x48, 0x49, 0x56, 0x4b, 2, 0, 0, 0]);
    expect(machineSnapshotOf(data)).toBe(data);
  });

  it('unwraps the machine snapshot of an earlier release, dropping its dedup table', () => {
    const table = new TextEncoder().encode('[]');
    const data = new Uint8Array(8 + table.length + 3);
    const view = new DataView(data.buffer);
    view.setUint32(0, 0x48_4b_53_31, true);
    view.setUint32(4, table.length, true);
    data.set(table, 8);
    data.set([1, 2, 3], 8 + table.length);
    expect([...machineSnapshotOf(data)]).toEqual([1, 2, 3]);
  });

  it('refuses an earlier release\'s snapshot whose table overruns it', () => {
    const data = new Uint8Array(8);
    const view = new DataView(data.buffer);
    view.setUint32(0, 0x48_4b_53_31, true);
    view.setUint32(4, 100, true);
    expect(() => machineSnapshotOf(data)).toThrow(/overruns/);
  });

  it('skips an earlier release\'s table in a stream split anywhere', () => {
    const table = new TextEncoder().encode('[["n1",1,2]]');
    const legacy = new Uint8Array(8 + table.length + 3);
    const view = new DataView(legacy.buffer);
    view.setUint32(0, 0x48_4b_53_31, true);
    view.setUint32(4, table.length, true);
    legacy.set(table, 8);
    legacy.set([1, 2, 3], 8 + table.length);
    const current = new Uint8Array([0x48, 0x49, 0x56, 0x4b, 2, 0, 0, 0, 9]);
    for (const [whole, machine] of [[legacy, [1, 2, 3]], [current, [...current]]] as const) {
      for (const size of [1, 2, 5, 9, whole.length]) {
        const skipper = new LegacySnapshotSkipper();
        const out: number[] = [];
        for (let at = 0; at < whole.length; at += size) {
          out.push(...skipper.take(whole.subarray(at, at + size)));
        }
        expect(out).toEqual(machine);
        expect(skipper.done).toBe(true);
      }
    }
  });
});
