import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Slabs } from '../../host/core/slabs.js';

describe('Slabs', () => {
  it('hands out buffers of the asked size that never overlap, 8-byte aligned in a slab', () => {
    fc.assert(fc.property(fc.array(fc.integer({ min: 0, max: 300 }), { maxLength: 200 }),
      (sizes) => {
        const slabs = new Slabs(1024, 512);
        const taken = sizes.map((size, i) => {
          const buffer = slabs.take(size);
          buffer.fill(i & 0xff);
          return { buffer, fill: i & 0xff };
        });
        taken.forEach(({ buffer, fill }, i) => {
          expect(buffer.length).toBe(sizes[i]);
          expect(buffer.byteOffset % 8).toBe(0);
          // A later take that overlapped would have overwritten these bytes.
          expect(buffer.every((byte) => byte === fill)).toBe(true);
        });
      }));
  });

  it('starts a new slab when the current one is full, and gives big buffers their own', () => {
    const slabs = new Slabs(1024, 512);
    const first = slabs.take(400);
    const second = slabs.take(400);
    expect(second.buffer).toBe(first.buffer);
    expect(second.byteOffset).toBe(first.byteOffset + 400);
    const third = slabs.take(400);
    expect(third.buffer).not.toBe(first.buffer);
    expect(slabs.take(8).buffer).toBe(third.buffer);
    const big = slabs.take(512);
    expect(big.buffer).not.toBe(third.buffer);
    expect(big.buffer.byteLength).toBe(512);
    expect(slabs.take(8).buffer).toBe(third.buffer);
  });

  it('refuses a slab size it cannot serve', () => {
    expect(() => new Slabs(16)).toThrow(/assertion failed/);
    expect(() => new Slabs(1024, 2048)).toThrow(/assertion failed/);
  });
});
