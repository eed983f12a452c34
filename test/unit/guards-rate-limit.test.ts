/**
 * Per tenant token buckets (WIRE.md, "Refusals": 429 with Retry-After in whole seconds, >= 1).
 * The clock is injected; nothing sleeps. The randomized property prints its seed and replays
 * from env SEED.
 */

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { RateOverride } from '../../host/http/guards.js';
import {
  RATE_TENANTS_MAX_DEFAULT,
  TokenBucketRateLimiter,
  type TokenBucketRateLimiterOptions,
} from '../../host/http/rate-limit.js';

const T = 'tenant-a';

function setup(options: Partial<TokenBucketRateLimiterOptions> = {}): {
  limiter: TokenBucketRateLimiter;
  advance: (ms: number) => void;
} {
  let nowMs = 1_000_000;
  const limiter = new TokenBucketRateLimiter({
    readRate: 10,
    readBurst: 20,
    writeRate: 5,
    writeBurst: 5,
    now: () => nowMs,
    ...options,
  });
  return { limiter, advance: (ms) => (nowMs += ms) };
}

/** Takes until refused (bounded); returns how many passed. */
function drain(limiter: TokenBucketRateLimiter, kind: 'read' | 'write', tenant = T,
  override: RateOverride | null = null): number {
  for (let passed = 0; passed < 100_000; passed++) {
    if (!limiter.take(tenant, kind, override).ok) return passed;
  }
  throw new Error('bucket never ran dry');
}

function retryAfter(limiter: TokenBucketRateLimiter, kind: 'read' | 'write',
  override: RateOverride | null = null): number | null {
  const decision = limiter.take(T, kind, override);
  return decision.ok ? null : decision.retryAfterSeconds;
}

describe('TokenBucketRateLimiter', () => {
  it('starts full: exactly `burst` calls pass at once', () => {
    const { limiter } = setup();
    expect(drain(limiter, 'read')).toBe(20);
    expect(drain(limiter, 'write')).toBe(5);
  });

  it('refills continuously at `rate` per second', () => {
    const { limiter, advance } = setup();
    drain(limiter, 'read');
    advance(99);
    expect(limiter.take(T, 'read', null).ok).toBe(false);
    advance(1);
    expect(drain(limiter, 'read')).toBe(1);
    advance(1000);
    expect(drain(limiter, 'read')).toBe(10);
    advance(60_000);
    expect(drain(limiter, 'read')).toBe(20);
  });

  it('keeps reads and writes, and tenants, apart', () => {
    const { limiter } = setup();
    drain(limiter, 'write');
    expect(limiter.take(T, 'read', null).ok).toBe(true);
    expect(limiter.take('tenant-b', 'write', null).ok).toBe(true);
  });

  it('answers Retry-After as whole seconds until one token, rounded up, at least 1', () => {
    const { limiter, advance } = setup({ writeRate: 1000, writeBurst: 1 });
    limiter.take(T, 'write', null);
    expect(retryAfter(limiter, 'write')).toBe(1); // 1 ms away, still 1 s
    const slow = { readsPerSec: 0.4, writesPerSec: null }; // a token every 2.5 s
    limiter.take(T, 'read', slow);
    expect(retryAfter(limiter, 'read', slow)).toBe(3);
    advance(1000);
    expect(retryAfter(limiter, 'read', slow)).toBe(2);
    advance(1499);
    expect(retryAfter(limiter, 'read', slow)).toBe(1);
    advance(1);
    expect(retryAfter(limiter, 'read', slow)).toBe(null);
  });

  it('rate 0 turns a limit off and tracks nothing', () => {
    const { limiter } = setup({ readRate: 0, readBurst: 0 });
    for (let i = 0; i < 10_000; i++) expect(limiter.take(T, 'read', null).ok).toBe(true);
    expect(limiter.trackedTenantCount).toBe(0);
    expect(drain(limiter, 'write')).toBe(5);
  });

  it('a quota override replaces the rate, with a burst of twice the rate', () => {
    const { limiter, advance } = setup({ writeRate: 100, writeBurst: 200 });
    const override = { readsPerSec: null, writesPerSec: 3 };
    expect(drain(limiter, 'write', T, override)).toBe(6);
    advance(1000);
    expect(drain(limiter, 'write', T, override)).toBe(3);
    expect(drain(limiter, 'read', T, override)).toBe(20); // null keeps the node's read rate
  });

  it('an override of 0 turns that limit off', () => {
    const { limiter } = setup();
    const off = { readsPerSec: 0, writesPerSec: 0 };
    for (let i = 0; i < 1000; i++) expect(limiter.take(T, 'write', off).ok).toBe(true);
  });

  it('clamps saved tokens when an override shrinks the bucket', () => {
    const { limiter } = setup({ readRate: 100, readBurst: 200 });
    limiter.take(T, 'read', null);
    expect(drain(limiter, 'read', T, { readsPerSec: 2, writesPerSec: null })).toBe(4);
  });

  it('uses a bucket of at least one call when burst < 1', () => {
    const { limiter } = setup({ readRate: 10, readBurst: 0 });
    expect(drain(limiter, 'read')).toBe(1);
  });

  it('refuses bad settings at construction', () => {
    expect(() => setup({ readRate: -1 })).toThrow(/read rate/);
    expect(() => setup({ writeBurst: Number.NaN })).toThrow(/write burst/);
    expect(() => setup({ maxTenants: 0 })).toThrow(/maxTenants/);
    const { limiter } = setup();
    expect(() => limiter.take(T, 'read', { readsPerSec: -5, writesPerSec: null })).toThrow();
  });

  it(`bounds tenants (default ${RATE_TENANTS_MAX_DEFAULT}); an evicted tenant starts full`, () => {
    const { limiter } = setup({ maxTenants: 3 });
    for (const tenant of ['a', 'b', 'c']) drain(limiter, 'write', tenant);
    expect(limiter.take('a', 'write', null).ok).toBe(false); // a is now the most recent
    drain(limiter, 'write', 'd'); // evicts b, the least recently seen
    expect(limiter.trackedTenantCount).toBe(3);
    expect(limiter.take('a', 'write', null).ok).toBe(false);
    expect(drain(limiter, 'write', 'b')).toBe(5); // forgotten, so full again; evicts c
    expect(drain(limiter, 'write', 'c')).toBe(5);
    expect(limiter.trackedTenantCount).toBe(3);
  });

  it('does not drift: 3/s over 60 s in 1, 0.25 and 0.75 ms steps passes exactly 182', () => {
    // Burst 2 so a greedy client never lets the bucket overflow: every credit is spent.
    for (const stepMs of [1, 0.25, 0.75]) {
      const { limiter, advance } = setup({ readRate: 3, readBurst: 2 });
      let passed = 0;
      for (let elapsed = 0; elapsed <= 60_000; elapsed += stepMs) {
        if (limiter.take(T, 'read', null).ok) passed++;
        advance(stepMs);
      }
      expect(passed).toBe(2 + 180);
    }
  });

  it('survives the clock stepping back without refilling', () => {
    const { limiter, advance } = setup();
    drain(limiter, 'read');
    advance(-5000);
    expect(limiter.take(T, 'read', null).ok).toBe(false);
    advance(100);
    expect(drain(limiter, 'read')).toBe(1);
  });

  it('never passes more than burst + rate * elapsed, and a waiting client always passes', () => {
    const seed = Number(process.env['SEED'] ?? Date.now() % 2 ** 31);
    console.log(`guards-rate-limit property seed=${seed} (replay with SEED=${seed})`);
    const scenario = fc.record({
      rate: fc.integer({ min: 1, max: 2000 }),
      burst: fc.integer({ min: 1, max: 500 }),
      steps: fc.array(fc.integer({ min: 0, max: 700 }), { minLength: 1, maxLength: 300 }),
    });
    fc.assert(
      fc.property(scenario, ({ rate, burst, steps }) => {
        const { limiter, advance } = setup({ readRate: rate, readBurst: burst });
        let passed = 0;
        let elapsedMs = 0;
        for (const stepMs of steps) {
          advance(stepMs);
          elapsedMs += stepMs;
          const decision = limiter.take(T, 'read', null);
          if (decision.ok) passed++;
          else {
            advance(decision.retryAfterSeconds * 1000);
            elapsedMs += decision.retryAfterSeconds * 1000;
            if (!limiter.take(T, 'read', null).ok) return false;
            passed++;
          }
          if (passed > burst + Math.floor((rate * elapsedMs) / 1000)) return false;
        }
        return true;
      }),
      { seed, numRuns: 200 },
    );
  });
});
