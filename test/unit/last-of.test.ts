/** `lastOf`: the last item without reading the key -1 of an empty array. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { lastOf } from '../../host/core/last-of.js';

describe('lastOf', () => {
  it('is undefined for an empty array', () => {
    expect(lastOf([])).toBeUndefined();
  });

  it('is the item at the end of any other array, as `at(-1)` says', () => {
    fc.assert(fc.property(fc.array(fc.integer(), { minLength: 1 }), (items) => {
      expect(lastOf(items)).toBe(items.at(-1));
    }));
  });
});
