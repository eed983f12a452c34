/**
 * The console's Live view arithmetic, which runs in the browser: the Prometheus text parser,
 * quantiles from histogram buckets (as `histogram_quantile` computes them), and the points
 * between two scrapes, including a node restart between them.
 */
import { describe, expect, it } from 'vitest';
import { memberMarks, stateText } from '../../console/src/format.js';
import { parseLine, parsePrometheus, SAMPLES_MAX } from '../../console/src/prometheus.js';
import {
  History, HISTORY_POINTS_MAX, pointBetween, quantile, REASON_SERIES_MAX, summarize,
} from '../../console/src/series.js';
import { NodeMetrics } from '../../host/node/metrics.js';

describe('Prometheus text parser', () => {
  it('reads names, labels with escapes, special values and timestamps', () => {
    expect(parseLine('up 1')).toEqual({ name: 'up', labels: {}, value: 1 });
    expect(parseLine('a_total{route="/api/v1/kv",method="POST"} 12 1700000000000')).toEqual(
      { name: 'a_total', labels: { route: '/api/v1/kv', method: 'POST' }, value: 12 });
    expect(parseLine('b{x="q\\"uote\\\\n\\n",} +Inf')).toEqual(
      { name: 'b', labels: { x: 'q"uote\\n\n' }, value: Infinity });
    expect(parseLine('c -Inf')?.value).toBe(-Infinity);
    expect(parseLine('d NaN')?.value).toBeNaN();
    expect(parseLine('e 1.5e-3')?.value).toBe(0.0015);
  });

  it('skips comments, blanks and lines it cannot read, without throwing', () => {
    for (const line of ['# HELP x y', '# TYPE x counter', '', '   ', '{a="b"} 1', 'x{a=b} 1',
      'x{a="b" 1', 'x', 'x abc', '9x 1', 'x{="v"} 1']) {
      expect(parseLine(line), line).toBeNull();
    }
  });

  it('reads what the node exposes, and at most SAMPLES_MAX samples', async () => {
    const metrics = new NodeMetrics({ defaultMetrics: false });
    metrics.observeRequest('/api/v1/kv', 'POST', 200, 0.003);
    metrics.refusal('rate_limited');
    metrics.observeFsync(0.0004);
    const samples = parsePrometheus(await metrics.render());
    const scrape = summarize(samples, 1000);
    expect(scrape.kvCalls).toBe(1);
    expect(scrape.refusals.get('rate_limited')).toBe(1);
    expect(scrape.latency.at(-1)).toEqual({ le: Infinity, count: 1 });
    expect(scrape.fsync.find((b) => b.le === 0.0005)?.count).toBe(1);
    const huge = 'x 1\n'.repeat(SAMPLES_MAX + 10);
    expect(parsePrometheus(huge)).toHaveLength(SAMPLES_MAX);
  });
});

describe('quantiles and points', () => {
  const buckets = (counts: Array<[number, number]>) => counts.map(([le, count]) => ({ le, count }));

  it('interpolates inside the bucket holding the rank, as histogram_quantile does', () => {
    const b = buckets([[0.001, 0], [0.002, 50], [0.004, 100], [Infinity, 100]]);
    expect(quantile(0.5, b)).toBeCloseTo(0.002);
    expect(quantile(0.75, b)).toBeCloseTo(0.003);
    expect(quantile(0.99, b)).toBeCloseTo(0.00396);
    expect(quantile(0.99, buckets([[0.001, 1], [Infinity, 100]]))).toBe(0.001);
    expect(quantile(0.5, buckets([[0.001, 0], [Infinity, 0]]))).toBeNull();
    expect(quantile(0.5, [])).toBeNull();
  });

  it('turns two scrapes into rates and quantiles of that second only', () => {
    const before = { atMs: 10_000, kvCalls: 100, refusals: new Map([['rate_limited', 5]]),
      latency: buckets([[0.001, 90], [0.01, 100], [Infinity, 100]]), fsync: [] };
    const after = { atMs: 12_000, kvCalls: 140, refusals: new Map([['rate_limited', 9],
      ['forbidden', 2]]), latency: buckets([[0.001, 90], [0.01, 140], [Infinity, 140]]),
      fsync: [] };
    const point = pointBetween(before, after)!;
    expect(point.at).toBe(12);
    expect(point.callsPerSec).toBe(20);
    expect(point.latencyP50Ms).toBeCloseTo(5.5);
    expect(point.fsyncP50Ms).toBeNull();
    expect([...point.refusalsPerSec]).toEqual([['rate_limited', 2], ['forbidden', 1]]);
    expect(pointBetween(after, before)).toBeNull();
  });

  it('draws no rate across a restart, where counters went down', () => {
    const before = { atMs: 0, kvCalls: 500, refusals: new Map([['x', 10]]),
      latency: buckets([[0.01, 500], [Infinity, 500]]), fsync: [] };
    const after = { atMs: 1000, kvCalls: 3, refusals: new Map([['x', 1]]),
      latency: buckets([[0.01, 3], [Infinity, 3]]), fsync: [] };
    const point = pointBetween(before, after)!;
    expect(point.callsPerSec).toBeNull();
    expect(point.latencyP99Ms).toBeNull();
    expect(point.refusalsPerSec.size).toBe(0);
  });

  it('keeps five minutes of points and a bounded set of refusal lines', () => {
    const history = new History();
    for (let i = 0; i < HISTORY_POINTS_MAX + 20; i++) {
      const reasons = new Map([[`reason-${i % (REASON_SERIES_MAX + 4)}`, 1]]);
      history.push({ at: i, callsPerSec: i, latencyP50Ms: null, latencyP99Ms: null,
        fsyncP50Ms: 1, fsyncP99Ms: 2, refusalsPerSec: reasons });
    }
    expect(history.length).toBe(HISTORY_POINTS_MAX);
    expect(history.at[0]).toBe(20);
    expect(history.refusals.size).toBe(REASON_SERIES_MAX + 1);
    expect(history.refusals.has('other')).toBe(true);
    for (const column of history.refusals.values()) expect(column).toHaveLength(HISTORY_POINTS_MAX);
  });
});

describe('a member\'s state in the cluster view', () => {
  it('shows the state it holds of its budget, what it said of them, or a dash', () => {
    const status = { stateBytes: null, stateBytesMax: null };
    expect(stateText({ ...status, stateBytes: 12 * 2 ** 20, stateBytesMax: 2.5 * 2 ** 30 }))
      .toBe('12.0 MiB of 2.5 GiB');
    expect(stateText({ ...status, stateBytes: 512, stateBytesMax: null })).toBe('512 B');
    expect(stateText({ ...status, stateBytes: null, stateBytesMax: 2 ** 20 })).toBe('? of 1.0 MiB');
    expect(stateText(status)).toBe('—');
    expect(stateText(null)).toBe('—');
  });
});

describe('the marks beside a member\'s health', () => {
  it('marks a disk low on space and a catch-up held back, and nothing else', () => {
    expect(memberMarks(null)).toEqual([]);
    expect(memberMarks({ storageFull: false, catchUpHeld: false })).toEqual([]);
    expect(memberMarks({}).length).toBe(0);
    expect(memberMarks({ storageFull: true }).map((m) => m.text)).toEqual(['disk full']);
    expect(memberMarks({ storageFull: true, catchUpHeld: true }).map((m) => m.test))
      .toEqual(['member-disk-full', 'member-held']);
    // What it holds back for: memory when an earlier release does not say.
    expect(memberMarks({ catchUpHeld: true }).map((m) => m.text)).toEqual(['held back: memory']);
    expect(memberMarks({ storageFull: true, catchUpHeld: true, catchUpHeldFor: 'space' })
      .map((m) => m.text)).toEqual(['disk full', 'held back: disk']);
    expect(memberMarks({ catchUpHeld: true, catchUpHeldFor: 'memory' })[0]!.title)
      .toContain('memory could not hold the state');
  });
});
