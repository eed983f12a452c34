/**
 * The client's pure parts: TTL strings, expiry sugar, the operation builders' own checks
 * (the mistakes that never reach the wire), idempotency keys and node URLs.
 */
import { describe, expect, it } from 'vitest';
import {
  parseTtl, resolveExpiry, secondsUntil, TTL_SECONDS_MAX,
} from '../../host/client/expiry.js';
import { kvOp, materialize } from '../../host/client/ops.js';
import {
  checkIdempotencyKey, newIdempotencyKey, normaliseUrls,
} from '../../host/client/transport.js';

describe('parseTtl', () => {
  it.each([
    ['90s', 90], ['2m', 120], ['1h', 3600], ['30d', 2_592_000], ['1s', 1], ['24h', 86_400],
    ['7d', 604_800],
  ])('%s is %i seconds', (text, seconds) => {
    expect(parseTtl(text)).toBe(seconds);
  });

  it.each([
    '', '30', 'd', '0s', '030d', '1h30m', '1.5h', '-1h', '250ms', '1w', '1H', ' 1h', '1h ',
    '1 h', '30days',
  ])('refuses %j with the accepted forms in the message', (text) => {
    expect(() => parseTtl(text)).toThrow(RangeError);
    expect(() => parseTtl(text)).toThrow(/'90s', '2m', '1h', '30d'/);
  });

  it('refuses a number, which would be ambiguous about its unit', () => {
    expect(() => parseTtl(3600)).toThrow(/must be a string/);
  });

  it('refuses a lifetime past the node\'s longest', () => {
    expect(parseTtl(`${Math.floor(TTL_SECONDS_MAX / 86_400)}d`)).toBeLessThanOrEqual(
      TTL_SECONDS_MAX);
    expect(() => parseTtl('999999999999999d')).toThrow(/longest lifetime/);
  });
});

describe('resolveExpiry', () => {
  const now = Date.parse('2026-08-17T14:00:00.000Z');

  it('turns ttl, ttlSeconds and forever into wire fields', () => {
    expect(resolveExpiry({ ttl: '30d' }, now)).toEqual({ ttlSeconds: 2_592_000 });
    expect(resolveExpiry({ ttlSeconds: 5 }, now)).toEqual({ ttlSeconds: 5 });
    expect(resolveExpiry({ forever: true }, now)).toEqual({ forever: true });
    expect(resolveExpiry({}, now)).toEqual({});
  });

  it('rounds until up to whole seconds, from a Date, a string or epoch ms', () => {
    expect(resolveExpiry({ until: new Date(now + 1) }, now)).toEqual({ ttlSeconds: 1 });
    expect(resolveExpiry({ until: new Date(now + 90_001) }, now)).toEqual({ ttlSeconds: 91 });
    expect(resolveExpiry({ until: '2026-08-17T15:00:00Z' }, now)).toEqual({ ttlSeconds: 3600 });
    expect(resolveExpiry({ until: now + 2000 }, now)).toEqual({ ttlSeconds: 2 });
  });

  it('refuses an until that is not in the future', () => {
    expect(() => secondsUntil(new Date(now), now)).toThrow(/not in the future/);
    expect(() => secondsUntil(new Date(now - 5000), now)).toThrow(RangeError);
    expect(() => secondsUntil(new Date('nope'), now)).toThrow(/not a valid instant/);
    expect(() => secondsUntil('yesterday-ish', now)).toThrow(/not a valid instant/);
    expect(() => secondsUntil({}, now)).toThrow(TypeError);
  });

  it('refuses two spellings of a lifetime, and a forever that is not true', () => {
    expect(() => resolveExpiry({ ttl: '1h', ttlSeconds: 3600 }, now)).toThrow(/given twice/);
    expect(() => resolveExpiry({ ttl: '1h', until: new Date(now + 1000) }, now))
      .toThrow(/ttl and until/);
    expect(() => resolveExpiry({ forever: false as unknown as true }, now))
      .toThrow(/exactly true/);
  });

  it('sends a duration beside forever as is, for the node to refuse', () => {
    expect(resolveExpiry({ ttl: '1h', forever: true }, now))
      .toEqual({ ttlSeconds: 3600, forever: true });
  });
});

describe('operation builders', () => {
  const now = Date.now();

  it('materialise into the wire shape, resolving the lifetime at send time', () => {
    const op = kvOp.put('orders', '9137', { status: 'paid' }, { ttl: '30d', expect: 4,
      required: true, idempotencyKey: 'k-1' });
    expect(materialize(op, now)).toEqual({ op: 'put', ns: 'orders', key: '9137',
      value: { status: 'paid' }, expect: 4, required: true, ttlSeconds: 2_592_000 });
    expect(op.write).toBe(true);
    expect(materialize(kvOp.incr('quota', 'acme', undefined, { max: 10, forever: true }), now))
      .toEqual({ op: 'incr', ns: 'quota', key: 'acme', delta: 1, max: 10, forever: true });
    expect(kvOp.check('orders', '9137', 0).write).toBe(false);
    expect(kvOp.getPrefix('orders', '91', { after: null, limit: 5 }).base)
      .toEqual({ op: 'getPrefix', ns: 'orders', prefix: '91', limit: 5 });
  });

  it('refuse an expect written without a value instead of sending an upsert', () => {
    expect(() => kvOp.put('orders', 'k', 1, { ttl: '1h', expect: undefined }))
      .toThrow(/expect is written but has no value/);
    expect(() => kvOp.delete('orders', 'k', { expect: null as unknown as number }))
      .toThrow(TypeError);
    expect(() => kvOp.check('orders', 'k', undefined as unknown as number)).toThrow(TypeError);
  });

  it('refuse what JSON cannot carry and what the op cannot take', () => {
    expect(() => kvOp.put('orders', 'k', undefined, { ttl: '1h' })).toThrow(/pass null/);
    expect(() => kvOp.putIfAbsent('orders', 'k', 1, { expect: 0 } as never))
      .toThrow(/takes no expect/);
    expect(() => kvOp.incr('q', 'k', 1, { expect: 1 } as never)).toThrow(/takes no expect/);
    expect(() => kvOp.incr('q', 'k', Number.NaN)).toThrow(/finite number/);
    expect(() => kvOp.get('', 'k')).toThrow(/ns must be a non-empty string/);
    expect(() => kvOp.getMany('q', [])).toThrow(/non-empty array/);
  });

  it('take a raw operation, resolving ttl and until like the options', () => {
    const op = kvOp.raw({ op: 'incr', ns: 'q', key: 'k', delta: 1, ttl: '2m' });
    expect(materialize(op, now)).toEqual({ op: 'incr', ns: 'q', key: 'k', delta: 1,
      ttlSeconds: 120 });
    expect(op.write).toBe(true);
    expect(kvOp.raw({ op: 'get', ns: 'q', key: 'k' }).write).toBe(false);
    expect(() => kvOp.raw('get' as never)).toThrow(/an object with an op field/);
  });
});

describe('idempotency keys and URLs', () => {
  it('makes a fresh random UUID per call', () => {
    const keys = new Set(Array.from({ length: 1000 }, () => newIdempotencyKey()));
    expect(keys.size).toBe(1000);
    for (const key of keys) {
      expect(key).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    }
  });

  it('takes 1 to 255 printable ASCII characters, no space at either end', () => {
    expect(checkIdempotencyKey('a')).toBe('a');
    expect(checkIdempotencyKey('order 8812/charge~1')).toBe('order 8812/charge~1');
    expect(checkIdempotencyKey('x'.repeat(255))).toHaveLength(255);
    for (const bad of ['', 'x'.repeat(256), ' a', 'a ', 'caf\u00e9', 'a\nb', 'tab\there', 7]) {
      expect(() => checkIdempotencyKey(bad)).toThrow(TypeError);
    }
  });

  it('normalises node URLs and refuses what is not one', () => {
    expect(normaliseUrls(['http://127.0.0.1:6632/', 'https://kv.example:443'])).toEqual([
      'http://127.0.0.1:6632', 'https://kv.example']);
    expect(normaliseUrls('http://h:1/base/')).toEqual(['http://h:1/base']);
    expect(() => normaliseUrls([])).toThrow(/at least one/);
    expect(() => normaliseUrls(['127.0.0.1:6632'])).toThrow(TypeError);
    expect(() => normaliseUrls(['ftp://h'])).toThrow(/http:\/\/ or https:\/\//);
    expect(() => normaliseUrls(['http://h:1/?x=1'])).toThrow(/query/);
  });
});
