// The in-memory Raft log's columns (host/core/raft/entry-columns.ts) against a plain array
// of entries: any sequence of appends, truncations and compactions leaves the same entries,
// field for field and byte for byte, whether an entry's bytes were copied into the columns'
// own slabs or kept in the buffer they came in, and whatever the size of its chunks of rows
// (small chunks put every boundary case within a short run).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { EntryColumns } from '../../host/core/raft/entry-columns.js';
import type { Entry, EntryType } from '../../host/core/raft/types.js';

type Op =
  | { kind: 'push'; term: number; timeMs: number; type: EntryType; bytes: number;
      shared: boolean; copy: boolean; fill: number }
  | { kind: 'truncate'; keepPercent: number }
  | { kind: 'drop'; dropPercent: number };

const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 8, arbitrary: fc.record({
    kind: fc.constant('push' as const),
    term: fc.integer({ min: 0, max: 2 ** 40 }),
    timeMs: fc.integer({ min: 0, max: 2 ** 45 }),
    type: fc.constantFrom<EntryType>('normal', 'empty', 'config'),
    bytes: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 300 }),
      fc.integer({ min: 8 * 1024 - 2, max: 9 * 1024 })),
    shared: fc.boolean(),
    copy: fc.boolean(),
    fill: fc.integer({ min: 0, max: 255 }),
  }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('truncate' as const),
    keepPercent: fc.integer({ min: 0, max: 100 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('drop' as const),
    dropPercent: fc.integer({ min: 0, max: 100 }) }) },
);

/** Bytes as a proposal's slab gives them (a view into a large shared buffer) or alone. */
let sharedSlab = new Uint8Array(64 * 1024);
let sharedAt = 0;
function bytesOf(n: number, shared: boolean, fill: number): Uint8Array {
  let out: Uint8Array;
  if (shared && n < 16 * 1024) {
    if (sharedAt + n > sharedSlab.length) {
      sharedSlab = new Uint8Array(64 * 1024);
      sharedAt = 0;
    }
    out = sharedSlab.subarray(sharedAt, sharedAt + n);
    sharedAt += n;
  } else {
    out = new Uint8Array(n);
  }
  for (let i = 0; i < n; i++) out[i] = (fill + i * 7) & 0xff;
  return out;
}

describe('the Raft log\'s entry columns', () => {
  it('hold what a plain array of entries holds, through appends, truncations and drops', () => {
    fc.assert(fc.property(fc.integer({ min: 1, max: 12 }), fc.array(op, { maxLength: 3000,
      size: 'max' }), (chunkShift, ops) => {
      const columns = new EntryColumns(chunkShift);
      const model: Array<{ entry: Entry; copy: Uint8Array }> = [];
      for (const o of ops) {
        if (o.kind === 'push') {
          const data = bytesOf(o.bytes, o.shared, o.fill);
          const entry = { term: o.term, index: 0, timeMs: o.timeMs, type: o.type, data };
          columns.push(entry, o.copy);
          model.push({ entry, copy: data.slice() });
        } else if (o.kind === 'truncate') {
          const keep = Math.floor(model.length * o.keepPercent / 100);
          columns.truncate(keep);
          model.length = keep;
        } else {
          const n = Math.floor(model.length * o.dropPercent / 100);
          columns.dropFirst(n);
          model.splice(0, n);
        }
        expect(columns.length).toBe(model.length);
      }
      model.forEach(({ entry, copy }, i) => {
        const got = columns.get(i, 1000 + i);
        expect(got.index).toBe(1000 + i);
        expect([got.term, got.timeMs, got.type]).toEqual([entry.term, entry.timeMs, entry.type]);
        expect(columns.term(i)).toBe(entry.term);
        expect(columns.timeMs(i)).toBe(entry.timeMs);
        expect(columns.type(i)).toBe(entry.type);
        expect(columns.dataBytes(i)).toBe(copy.length);
        expect(Buffer.from(got.data).equals(Buffer.from(copy))).toBe(true);
      });
    }), { numRuns: 60 });
  });

  it.each([[12], [4], [1]])('grows and drops in chunks of 2^%i rows, whole or in part',
    (shift) => {
    const columns = new EntryColumns(shift);
    const entryAt = (n: number): Entry => ({ term: n, index: n, timeMs: n * 2, type: 'normal',
      data: Uint8Array.of(n & 0xff, (n >> 8) & 0xff) });
    let first = 0;
    let next = 0;
    // Drops that end on a chunk's boundary, inside one, and take every entry held.
    for (const [push, drop] of [[5000, 3000], [3000, 4000], [2500, 0], [10, 3500],
      [4096, 1096], [2000, 4000], [1, 1011], [8192, 8192], [3, 1]]) {
      for (let i = 0; i < push!; i++) columns.push(entryAt(next++));
      columns.dropFirst(drop!);
      first += drop!;
      expect(columns.length).toBe(next - first);
      for (let i = 0; i < columns.length; i += 97) {
        const n = first + i;
        expect(columns.term(i)).toBe(n);
        expect([...columns.get(i, n).data]).toEqual([n & 0xff, (n >> 8) & 0xff]);
      }
    }
  });

  it('copies a small entry that came in a buffer of its own, and keeps a shared one', () => {
    const columns = new EntryColumns();
    const own = Uint8Array.of(1, 2, 3);
    const slab = new Uint8Array(64 * 1024);
    const shared = slab.subarray(100, 103);
    shared.set([4, 5, 6]);
    columns.push({ term: 1, index: 1, timeMs: 0, type: 'normal', data: own });
    columns.push({ term: 1, index: 2, timeMs: 0, type: 'normal', data: shared });
    own[0] = 9;
    shared[0] = 9;
    expect([...columns.get(0, 1).data]).toEqual([1, 2, 3]);
    expect(columns.get(1, 2).data.buffer).toBe(slab.buffer);
    expect(columns.get(1, 2).data.byteOffset).toBe(100);
  });

  // A peer's frame is a Buffer, whose `slice` is a view: the copy must not be one.
  it.each([['a Uint8Array', () => new Uint8Array(64 * 1024)],
    ['a Buffer', () => Buffer.alloc(64 * 1024)]])(
    'copies what it is told not to keep, however large its buffer, from %s', (_, make) => {
    const columns = new EntryColumns();
    const frame = make();
    const small = frame.subarray(10, 13);
    small.set([7, 8, 9]);
    const large = frame.subarray(100, 100 + 9000);
    large.fill(5);
    columns.push({ term: 1, index: 1, timeMs: 0, type: 'normal', data: small }, true);
    columns.push({ term: 1, index: 2, timeMs: 0, type: 'normal', data: large }, true);
    frame.fill(0);
    expect([...columns.get(0, 1).data]).toEqual([7, 8, 9]);
    expect(columns.get(1, 2).data.every((b) => b === 5)).toBe(true);
    expect(columns.get(0, 1).data.buffer).not.toBe(frame.buffer);
    expect(columns.get(1, 2).data.buffer).not.toBe(frame.buffer);
    expect(columns.get(1, 2).data.length).toBe(9000);
  });

  it('refuses to read, cut or drop outside what it holds', () => {
    const columns = new EntryColumns();
    columns.push({ term: 1, index: 1, timeMs: 0, type: 'empty', data: new Uint8Array(0) });
    expect(() => columns.get(1, 2)).toThrow(/entry 1 of 1/);
    expect(() => columns.term(-1)).toThrow(/assertion failed/);
    expect(() => columns.truncate(2)).toThrow(/truncate to 2 of 1/);
    expect(() => columns.dropFirst(2)).toThrow(/drop 2 of 1/);
    expect(columns.get(0, 1).data.length).toBe(0);
  });
});
