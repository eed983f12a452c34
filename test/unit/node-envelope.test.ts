import { describe, expect, it } from 'vitest';
import {
  DEDUP_ORIGINS_MAX, DEDUP_WINDOW, DedupTable, decodeEnvelope, encodeEnvelope,
  encodeSnapshotPrefix, SnapshotPrefixReader,
} from '../../host/node/envelope.js';

const origin = { nodeId: 'n2', incarnation: 0xdeadbeef };

describe('entry envelope', () => {
  it('round-trips origin, sequence number and command bytes', () => {
    const command = new Uint8Array([9, 8, 7]);
    const decoded = decodeEnvelope(encodeEnvelope(origin, 42, command));
    expect(decoded?.origin).toEqual(origin);
    expect(decoded?.seq).toBe(42);
    expect([...(decoded?.command ?? [])]).toEqual([9, 8, 7]);
  });

  it.each([
    ['empty', []],
    ['wrong format version', [2, 0]],
    ['truncated after the id', [1, 5, 110]],
    ['invalid utf-8 id', [1, 1, 0xff, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0]],
    ['sequence number zero', [1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]],
  ])('refuses %s without throwing', (_name, bytes) => {
    expect(decodeEnvelope(new Uint8Array(bytes))).toBeNull();
  });
});

describe('dedup table', () => {
  const envelope = (seq: number, incarnation = 1) =>
    ({ origin: { nodeId: 'n1', incarnation }, seq, command: new Uint8Array() });

  it('admits a proposal once and refuses its duplicate', () => {
    const table = new DedupTable();
    expect(table.admit(envelope(1), 1)).toBe(true);
    expect(table.admit(envelope(2), 2)).toBe(true);
    expect(table.admit(envelope(1), 3)).toBe(false);
  });

  it('admits out-of-order sequence numbers inside the window', () => {
    const table = new DedupTable();
    expect(table.admit(envelope(10), 1)).toBe(true);
    expect(table.admit(envelope(5), 2)).toBe(true);
    expect(table.admit(envelope(5), 3)).toBe(false);
  });

  it('refuses a sequence number too old to tell apart', () => {
    const table = new DedupTable();
    table.admit(envelope(DEDUP_WINDOW + 10), 1);
    expect(table.admit(envelope(10), 2)).toBe(false);
  });

  it('keeps incarnations apart: a restarted node may reuse sequence numbers', () => {
    const table = new DedupTable();
    expect(table.admit(envelope(1, 1), 1)).toBe(true);
    expect(table.admit(envelope(1, 2), 2)).toBe(true);
  });

  it('bounds the origins it remembers', () => {
    const table = new DedupTable();
    for (let i = 0; i < DEDUP_ORIGINS_MAX + 5; i++) table.admit(envelope(1, i), i + 1);
    const rows = JSON.parse(new TextDecoder().decode(table.serialize())) as unknown[];
    expect(rows).toHaveLength(DEDUP_ORIGINS_MAX);
  });

  it('serializes canonically and survives a snapshot round trip, split anywhere', () => {
    const a = new DedupTable();
    a.admit(envelope(3), 1);
    a.admit(envelope(1, 7), 2);
    const whole = Buffer.concat([encodeSnapshotPrefix(a), Buffer.from([1, 2, 3])]);
    for (const size of [1, 2, 5, 9, whole.length]) {
      const reader = new SnapshotPrefixReader();
      const machine: number[] = [];
      for (let at = 0; at < whole.length; at += size) {
        machine.push(...reader.take(whole.subarray(at, at + size)));
      }
      expect(machine).toEqual([1, 2, 3]);
      expect(reader.dedup?.serialize()).toEqual(a.serialize());
      expect(reader.dedup?.admit(envelope(3), 3)).toBe(false);
    }
  });

  it('refuses snapshot bytes without the driver magic', () => {
    expect(() => new SnapshotPrefixReader().take(new Uint8Array(16))).toThrow(/magic/);
  });
});
