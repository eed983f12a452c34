import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SeqTable } from '../../host/core/seq-table.js';

/** One step against the table: add the next key (after a gap), or take a waiting one. */
type Step =
  | { readonly kind: 'set'; readonly gap: number }
  | { readonly kind: 'take'; readonly pick: number }
  | { readonly kind: 'takeMissing'; readonly offset: number }
  | { readonly kind: 'drain' };

const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ kind: fc.constant('set' as const),
    gap: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 300 })) }) },
  { weight: 5, arbitrary: fc.record({ kind: fc.constant('take' as const),
    pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('takeMissing' as const),
    offset: fc.integer({ min: -5, max: 400 }) }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'drain' as const }) },
);

describe('SeqTable', () => {
  it('answers as a Map does over keys set in increasing order and taken in any order', () => {
    fc.assert(fc.property(fc.array(step, { maxLength: 400 }),
      fc.integer({ min: 0, max: 2 ** 40 }), (steps, start) => {
        const table = new SeqTable<{ key: number }>();
        const model = new Map<number, { key: number }>();
        let next = start;
        for (const s of steps) {
          if (s.kind === 'set') {
            next += s.gap;
            const value = { key: next };
            table.set(next, value);
            model.set(next, value);
            next++;
          } else if (s.kind === 'take') {
            const keys = [...model.keys()];
            if (keys.length === 0) continue;
            const key = keys[s.pick % keys.length]!;
            expect(table.take(key)).toBe(model.get(key));
            model.delete(key);
          } else if (s.kind === 'takeMissing') {
            const key = next - 1 - s.offset;
            expect(table.take(key)).toBe(model.get(key));
            model.delete(key);
          } else {
            expect(table.drain()).toEqual([...model.values()]);
            model.clear();
          }
          expect(table.size).toBe(model.size);
          expect([...table.entries()]).toEqual([...model.entries()]);
          for (const key of [next - 1, next, next - 300]) {
            expect(table.get(key)).toBe(model.get(key));
            expect(table.has(key)).toBe(model.has(key));
          }
        }
      }), { numRuns: 300 });
  });

  it('lets a caller take entries while it iterates them', () => {
    const table = new SeqTable<number>();
    for (let key = 10; key < 500; key++) table.set(key, key);
    const seen: number[] = [];
    for (const [key, value] of table.entries()) {
      seen.push(value);
      if (key % 3 !== 0) table.take(key);
    }
    expect(seen).toEqual(Array.from({ length: 490 }, (_, i) => i + 10));
    expect([...table.entries()].map(([key]) => key))
      .toEqual(seen.filter((key) => key % 3 === 0));
  });

  it('keeps one waiting key while many later ones come and go', () => {
    const table = new SeqTable<number>();
    table.set(1, 1);
    for (let key = 2; key < 100_000; key++) {
      table.set(key, key);
      expect(table.take(key)).toBe(key);
    }
    expect(table.size).toBe(1);
    expect(table.take(1)).toBe(1);
    expect(table.size).toBe(0);
    table.set(100_000, 7);
    expect([...table.entries()]).toEqual([[100_000, 7]]);
  });

  it('spans only the waiting keys, whatever order they leave in', () => {
    const table = new SeqTable<number>();
    const waiting: number[] = [];
    for (let key = 1; key <= 100_000; key++) {
      table.set(key, key);
      waiting.push(key);
      if (waiting.length === 10) {
        // The second oldest leaves before the oldest.
        const [oldest, second] = waiting.splice(0, 2) as [number, number];
        expect(table.take(second)).toBe(second);
        expect(table.take(oldest)).toBe(oldest);
      }
    }
    expect(table.capacity).toBe(64);
    table.set(200_000, 1);
    expect(table.capacity).toBeGreaterThanOrEqual(200_000 - 99_993);
    table.take(200_000);
    for (const key of waiting) table.take(key);
    expect(table.size).toBe(0);
    expect(table.capacity).toBe(64);
  });

  it('refuses a key that is not above every key set before', () => {
    const table = new SeqTable<number>();
    table.set(5, 5);
    table.take(5);
    expect(() => table.set(5, 5)).toThrow(/assertion failed/);
    expect(() => table.set(4, 4)).toThrow(/assertion failed/);
    expect(() => table.set(2 ** 53, 1)).toThrow(/assertion failed/);
    table.set(6, 6);
    expect(table.get(6)).toBe(6);
  });
});
