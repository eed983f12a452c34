/**
 * The suite's honesty checks must fail when the target did not do what the generator was
 * told: a lost write, a counter that counted differently, a non-2xx answer, a target whose
 * own write counter disagrees.
 */
import { describe, expect, it } from 'vitest';

import { checkPoint } from '../../bench/suite/checks.js';
import type { PointRun } from '../../bench/suite/generator.js';
import type { Counts } from '../../bench/suite/generator-worker.js';
import type { Store } from '../../bench/suite/store.js';
import { makeValue, workloadNamed } from '../../bench/suite/workloads.js';

function counts(over: Partial<Counts> = {}): Counts {
  return { logical: 10, requests: 10, failed: 0, statuses: { 200: 10 }, notFound: 0,
    applied: 0, refused: 0, conflicts: 0, retries: 0, gaveUp: 0, ...over };
}

function run(over: Partial<PointRun> & { all?: Partial<Counts> } = {}): PointRun {
  const latency = { p50Ms: 1, p99Ms: 2, p999Ms: 3, maxMs: 4, meanMs: 1 };
  return {
    figures: { opsPerSecond: 10, callsPerSecond: 10, requestsPerSecond: 10, latency,
      sendLag: null, window: counts(), all: counts(over.all), saturated: false, unsent: 0,
      stuck: 0, windowSeconds: 1, generatorCores: 0.1, generatorMicrosPerRequest: 10,
      generatorBound: false,
      serverCores: null },
    checkRequests: {}, checkKeyWrites: 0, checkWriteRequests: 0, checkAppliedByKey: {},
    writtenKeys: [], ...over,
  };
}

function store(values: Record<string, string>): Store {
  return {
    kind: 'hivekv',
    preload: async () => undefined,
    read: async (keys) => new Map(keys.map((k) => [k, values[k] ?? null])),
    counters: async () => ({}),
    close: () => undefined,
  };
}

const okAll = (checks: readonly { ok: boolean }[]) => checks.every((c) => c.ok);

describe('honesty checks', () => {
  const put = workloadNamed('put');
  const incr = workloadNamed('incr');

  it('pass when every write is there and the target counted them', async () => {
    const checks = await checkPoint(store({ k1: makeValue('r1', 1, 98) }),
      run({ writtenKeys: ['k1'], checkKeyWrites: 10 }), put, 'r1', { version: 5 },
      { version: 16 });
    expect(checks.map((c) => c.name)).toEqual(['answered', 'read back', "target's count"]);
    expect(okAll(checks)).toBe(true);
  });

  it('fail when a written key holds an older value', async () => {
    const checks = await checkPoint(store({ k1: makeValue('pre', 1, 98) }),
      run({ writtenKeys: ['k1'], checkKeyWrites: 10 }), put, 'r1', { version: 5 },
      { version: 16 });
    expect(checks.find((c) => c.name === 'read back')?.ok).toBe(false);
  });

  it('fail when the target wrote fewer times than it acknowledged', async () => {
    const checks = await checkPoint(store({ k1: makeValue('r1', 1, 98) }),
      run({ writtenKeys: ['k1'], checkKeyWrites: 10 }), put, 'r1', { version: 5 },
      { version: 12 });
    expect(checks.find((c) => c.name === "target's count")?.ok).toBe(false);
  });

  it('fail on any answer that was not 2xx', async () => {
    const checks = await checkPoint(store({ k1: makeValue('r1', 1, 98) }),
      run({ writtenKeys: ['k1'], all: { statuses: { 200: 9, 503: 1 } } }), put, 'r1',
      { version: 0 }, { version: 1 });
    expect(checks.find((c) => c.name === 'answered')?.ok).toBe(false);
  });

  it('fail when a counter holds more than the increments acknowledged', async () => {
    const good = await checkPoint(store({ c1: '3', c2: '4' }),
      run({ checkAppliedByKey: { c1: 3, c2: 4 }, checkKeyWrites: 7 }), incr, 'r1',
      { version: 0 }, { version: 8 });
    expect(okAll(good)).toBe(true);
    const bad = await checkPoint(store({ c1: '3', c2: '5' }),
      run({ checkAppliedByKey: { c1: 3, c2: 4 }, checkKeyWrites: 7 }), incr, 'r1',
      { version: 0 }, { version: 8 });
    expect(bad.find((c) => c.name === 'per-key counts')?.ok).toBe(false);
  });
});
