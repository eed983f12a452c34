/**
 * Per tenant, per node token buckets for KV read calls and write calls (WIRE.md, "Refusals":
 * 429 `rate_limited` with `Retry-After`). Deterministic: time comes only from the injected
 * clock, and the bucket arithmetic is integer (micro-tokens, whole milliseconds), so a long
 * run never drifts and a test replays exactly. No I/O.
 *
 * One call spends one token, whatever the number of operations in it. A bucket starts full.
 * The number of tenants tracked is bounded: past `maxTenants` the least recently seen tenant
 * is forgotten, and when it comes back it starts again with a full bucket. That can let an
 * evicted tenant burst once more than its share; the bound on memory is worth it.
 */

import type { RateDecision, RateLimiter, RateOverride } from './guards.js';

/** Default bound on the tenants whose buckets are remembered. */
export const RATE_TENANTS_MAX_DEFAULT = 10_000;
/** Fixed point: one token is this many micro-tokens, so refill per ms stays an integer. */
const MICRO_TOKENS_PER_TOKEN = 1_000_000;
const MS_PER_SECOND = 1000;
/** An override's burst is this many seconds of its rate (WIRE.md quotas; at least 1 token). */
const OVERRIDE_BURST_SECONDS = 2;
/** Rates above this (calls/s) are a configuration bug; keeps every product a safe integer. */
const RATE_PER_SECOND_MAX = 1e9;

const ALLOWED: RateDecision = Object.freeze({ ok: true });

export interface TokenBucketRateLimiterOptions {
  /** QUEEN_KV_READ_RATE, calls per second; 0 turns the read limit off. */
  readonly readRate: number;
  /** QUEEN_KV_READ_BURST, the bucket size in calls (at least 1 is used when rate > 0). */
  readonly readBurst: number;
  /** QUEEN_KV_WRITE_RATE, calls per second; 0 turns the write limit off. */
  readonly writeRate: number;
  /** QUEEN_KV_WRITE_BURST, the bucket size in calls (at least 1 is used when rate > 0). */
  readonly writeBurst: number;
  /** Tenants remembered at once; default RATE_TENANTS_MAX_DEFAULT. */
  readonly maxTenants?: number;
  /** A monotonic clock in milliseconds; `performance.now` unless a test injects one. */
  readonly now?: () => number;
}

/** The effective limit of one bucket, in fixed point. */
interface Limit {
  /** Micro-tokens added per whole millisecond; >= 1. */
  readonly refillPerMs: number;
  /** Micro-tokens the bucket holds when full; >= MICRO_TOKENS_PER_TOKEN. */
  readonly capacity: number;
}

interface Bucket {
  /** Micro-tokens available; 0 <= tokens <= the capacity of the limit last applied. */
  tokens: number;
  /** Clock time (ms) up to which refill has been credited. */
  creditedUntilMs: number;
}

interface TenantBuckets {
  read: Bucket | null;
  write: Bucket | null;
}

/** Token buckets per tenant and kind, with quota-row overrides. */
export class TokenBucketRateLimiter implements RateLimiter {
  private readonly readLimit: Limit | null;
  private readonly writeLimit: Limit | null;
  private readonly maxTenants: number;
  private readonly now: () => number;
  /** Insertion order is recency order: the first key is the least recently seen tenant. */
  private readonly tenants = new Map<string, TenantBuckets>();

  /** @throws Error on a negative, non-finite or absurd rate or bound (a startup bug). */
  constructor(options: TokenBucketRateLimiterOptions) {
    this.readLimit = limitOf(options.readRate, options.readBurst, 'read');
    this.writeLimit = limitOf(options.writeRate, options.writeBurst, 'write');
    this.maxTenants = options.maxTenants ?? RATE_TENANTS_MAX_DEFAULT;
    if (!Number.isSafeInteger(this.maxTenants) || this.maxTenants < 1) {
      throw new Error(`TokenBucketRateLimiter: maxTenants ${this.maxTenants} must be >= 1`);
    }
    this.now = options.now ?? (() => performance.now());
  }

  /**
   * Spends one token of `kind` for `tenant`. A non-null override rate from the tenant's quota
   * row replaces the node's rate for that kind, with a burst of twice the rate; 0 turns it off.
   * Refused -> the whole seconds until one token is back, at least 1.
   */
  take(tenant: string, kind: 'read' | 'write', override: RateOverride | null): RateDecision {
    const limit = this.limitFor(kind, override);
    if (limit === null) return ALLOWED;
    const nowMs = this.now();
    const buckets = this.touch(tenant);
    let bucket = buckets[kind];
    if (bucket === null) {
      bucket = { tokens: limit.capacity, creditedUntilMs: nowMs };
      buckets[kind] = bucket;
    }
    refill(bucket, limit, nowMs);
    if (bucket.tokens >= MICRO_TOKENS_PER_TOKEN) {
      bucket.tokens -= MICRO_TOKENS_PER_TOKEN;
      return ALLOWED;
    }
    return { ok: false, retryAfterSeconds: retryAfterSeconds(bucket, limit, nowMs) };
  }

  /** Tenants currently remembered (never above maxTenants). */
  get trackedTenantCount(): number {
    return this.tenants.size;
  }

  private limitFor(kind: 'read' | 'write', override: RateOverride | null): Limit | null {
    const rate = kind === 'read' ? override?.readsPerSec : override?.writesPerSec;
    if (rate === null || rate === undefined) {
      return kind === 'read' ? this.readLimit : this.writeLimit;
    }
    return limitOf(rate, rate * OVERRIDE_BURST_SECONDS, kind);
  }

  /** The tenant's buckets, now the most recently seen; evicts the least recent past the bound. */
  private touch(tenant: string): TenantBuckets {
    let buckets = this.tenants.get(tenant);
    if (buckets !== undefined) {
      this.tenants.delete(tenant);
    } else {
      buckets = { read: null, write: null };
    }
    this.tenants.set(tenant, buckets);
    if (this.tenants.size > this.maxTenants) {
      const oldest = this.tenants.keys().next();
      if (oldest.done !== true) this.tenants.delete(oldest.value);
    }
    return buckets;
  }
}

/** A limit in fixed point, or null when `rate` is 0 (off). */
function limitOf(rate: number, burst: number, kind: string): Limit | null {
  if (!Number.isFinite(rate) || rate < 0 || rate > RATE_PER_SECOND_MAX) {
    throw new Error(`rate limit: ${kind} rate ${rate} must be from 0 to ${RATE_PER_SECOND_MAX}`);
  }
  if (!Number.isFinite(burst) || burst < 0 || burst > RATE_PER_SECOND_MAX) {
    throw new Error(`rate limit: ${kind} burst ${burst} must be from 0 to ${RATE_PER_SECOND_MAX}`);
  }
  if (rate === 0) return null;
  // A bucket smaller than one call would refuse every call forever: a 429 must mean that a
  // retry later works (kv-routes.md, "Status codes").
  const burstCalls = Math.max(1, burst);
  const perMs = Math.round((rate * MICRO_TOKENS_PER_TOKEN) / MS_PER_SECOND);
  return {
    refillPerMs: Math.max(1, perMs),
    capacity: Math.round(burstCalls * MICRO_TOKENS_PER_TOKEN),
  };
}

/** Credits whole elapsed milliseconds; the fraction stays uncredited, so nothing drifts. */
function refill(bucket: Bucket, limit: Limit, nowMs: number): void {
  if (nowMs < bucket.creditedUntilMs) bucket.creditedUntilMs = nowMs; // clock stepped back
  if (bucket.tokens > limit.capacity) bucket.tokens = limit.capacity; // an override shrank it
  const elapsedMs = Math.floor(nowMs - bucket.creditedUntilMs);
  if (elapsedMs <= 0) return;
  bucket.creditedUntilMs += elapsedMs;
  const missing = limit.capacity - bucket.tokens;
  if (missing <= 0) return;
  // Compare in milliseconds first so a long idle never multiplies past a safe integer.
  const fillMs = Math.ceil(missing / limit.refillPerMs);
  bucket.tokens =
    elapsedMs >= fillMs ? limit.capacity : bucket.tokens + elapsedMs * limit.refillPerMs;
  if (!Number.isSafeInteger(bucket.tokens) || bucket.tokens > limit.capacity) {
    throw new Error(`rate limit: bucket holds ${bucket.tokens} of ${limit.capacity}`);
  }
}

/** Whole seconds until the bucket holds one token again, at least 1 (WIRE.md, Retry-After). */
function retryAfterSeconds(bucket: Bucket, limit: Limit, nowMs: number): number {
  const deficit = MICRO_TOKENS_PER_TOKEN - bucket.tokens;
  const creditMs = Math.ceil(deficit / limit.refillPerMs);
  const waitMs = creditMs - (nowMs - bucket.creditedUntilMs);
  return Math.max(1, Math.ceil(waitMs / MS_PER_SECOND));
}
