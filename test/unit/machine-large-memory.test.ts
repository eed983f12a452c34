/**
 * A machine whose memory passes 2 GiB keeps growing in steps. Past that size the allocator
 * can no longer double wasm memory and asks for what each allocation needs, one 64 KiB page
 * for a row, and V8 answers every `memory.grow` past 2 GiB with a full collection of the JS
 * heap: a node of 12M keys spent three quarters of its time in them. The allocator grows
 * in steps of 64 MiB there (scripts/runtime-corrections.mjs), so writing hundreds of MiB
 * past 2 GiB costs a handful of full collections, not one per row. Rows of 60 KB reach that size in
 * seconds; the test holds about 3 GiB while it runs.
 */
import { constants, PerformanceObserver } from 'node:perf_hooks';
import { describe, expect, it } from 'vitest';
import { get, Harness, put } from '../model/machine-harness.js';

const GiB = 2 ** 30;
const MiB = 2 ** 20;
const VALUE_JSON = JSON.stringify('v'.repeat(60_000));
const PUTS_PER_ENTRY = 16;
const SKEW_PUTS = 38;
/** Growth to watch past 2 GiB: four steps' worth, thousands of pages. */
const WATCHED_GROWTH_BYTES = 256 * MiB;
/** Bound on the entries the test writes (about 3.7 GiB of rows). */
const ENTRIES_MAX = 4_000;

function fill(h: Harness, entries: { next: number }, until: () => boolean): void {
  while (!until()) {
    expect(entries.next).toBeLessThan(ENTRIES_MAX);
    const ops = [];
    for (let i = 0; i < PUTS_PER_ENTRY; i++) {
      ops.push(put(`k${entries.next}-${i}`, VALUE_JSON));
    }
    h.ok(ops);
    entries.next++;
  }
}

describe('a machine past 2 GiB of memory', () => {
  it('grows in steps, not a page and a JS collection per row', async () => {
    const h = new Harness();
    const entries = { next: 0 };
    // Memory grows by doubling from whatever the first growth was; a first entry of this
    // size makes the doublings end at about 2.2 GiB instead of at exactly 2 and then 4 GiB,
    // where memory would never grow again.
    const skew = [];
    for (let i = 0; i < SKEW_PUTS; i++) skew.push(put(`skew${i}`, VALUE_JSON));
    h.ok(skew);
    fill(h, entries, () => h.m.memoryBytes() > 2 * GiB);
    const reached = h.m.memoryBytes();
    expect(reached).toBeLessThan(3 * GiB);
    // Past any room the last doubling left: from here memory grows only when it must.
    fill(h, entries, () => h.m.memoryBytes() > reached);
    const start = h.m.memoryBytes();

    let majorCollections = 0;
    const observer = new PerformanceObserver((list) => {
      for (const e of list.getEntries()) {
        const detail = (e as unknown as { detail?: { kind?: number } }).detail;
        if (detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR) majorCollections++;
      }
    });
    observer.observe({ entryTypes: ['gc'] });
    const rowsBefore = entries.next * PUTS_PER_ENTRY;
    fill(h, entries, () => h.m.memoryBytes() - start >= WATCHED_GROWTH_BYTES);
    const rows = entries.next * PUTS_PER_ENTRY - rowsBefore;
    await new Promise((resolve) => setTimeout(resolve, 50));
    observer.disconnect();

    // Thousands of 60 KB rows went in; a page at a time that would be as many collections.
    expect(rows).toBeGreaterThan(WATCHED_GROWTH_BYTES / 65_536);
    expect(majorCollections).toBeLessThan(64);
    // Every row is there and whole.
    const [first] = h.read([get('k0-0')]);
    expect(first).toMatchObject({ kind: 'get', found: true, valueJson: VALUE_JSON });
    const last = `k${entries.next - 1}-${PUTS_PER_ENTRY - 1}`;
    const [tail] = h.read([get(last)]);
    expect(tail).toMatchObject({ kind: 'get', found: true, valueJson: VALUE_JSON });
  }, 180_000);
});
