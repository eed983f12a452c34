// The node's own request ids (host/http/request-ids.ts): the bytes a direct call writes are
// the text a log line shows, at every count, and one buffer per length is rewritten.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { RequestIds } from '../../host/http/request-ids.js';

const decoder = new TextDecoder();

describe('request ids', () => {
  it('numbers calls from 1 and spells each the same as text and as bytes', () => {
    const ids = new RequestIds('0badcafe-');
    expect(ids.next()).toBe(1);
    expect(ids.next()).toBe(2);
    expect(ids.text(2)).toBe('0badcafe-2');
    for (const n of [1, 35, 36, 37, 1295, 1296, 46655, 46656, 2 ** 31, 2 ** 32 + 7,
      Number.MAX_SAFE_INTEGER]) {
      expect(decoder.decode(ids.bytes(n)), `n=${n}`).toBe(ids.text(n));
    }
    fc.assert(fc.property(fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }), (n) => {
      expect(decoder.decode(ids.bytes(n))).toBe(ids.text(n));
    }), { numRuns: 2000 });
  });

  it('rewrites one buffer per length: bytes are valid only until the next call', () => {
    const ids = new RequestIds('00000000-');
    const first = ids.bytes(40);
    const kept = decoder.decode(first);
    const second = ids.bytes(41);
    expect(second).toBe(first);
    expect(decoder.decode(first)).not.toBe(kept);
    expect(ids.bytes(36 ** 3)).not.toBe(first);
  });

  it('refuses what is no id', () => {
    expect(() => new RequestIds('nothex!!-')).toThrow(/prefix/);
    const ids = new RequestIds('01234567-');
    expect(() => ids.bytes(0)).toThrow(/request id/);
    expect(() => ids.bytes(1.5)).toThrow(/request id/);
  });
});
