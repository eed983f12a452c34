/** The memory budget's admission rule (host/machine/memory-budget.ts). */
import { describe, expect, it } from 'vitest';
import { memoryFull } from '../../host/machine/memory-budget.js';

describe('memoryFull', () => {
  it.each([
    // state, preimages, budget, growth: refused?
    [999, 0, 1000, 1, false],
    [1000, 0, 1000, 1, true],
    [2000, 0, 1000, 0, false],
    [2000, 0, 1000, -500, false],
    [600, 400, 1000, 1, true],
    [600, 399, 1000, 64_000, false],
  ])('state %d + preimages %d against %d, growth %d: refused %s',
    (stateBytes, preimageBytes, budget, growth, refused) => {
      expect(memoryFull({ stateBytes, preimageBytes }, budget, growth)).toBe(refused);
    });
});
