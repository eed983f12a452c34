/**
 * Honesty checks, run after every point outside its timed window: the figures count only
 * what the target really did.
 *
 * - answered: no request failed (transport error, non-2xx, unreadable answer, no answer).
 * - reads found: every read of a preloaded key found it.
 * - read back: a sample of the keys this point wrote holds a value this point wrote.
 * - per-key counts: for CAS and counters (keys of this point alone), each key's stored
 *   number equals the increments the generator saw acknowledged, and never passes the bound.
 * - target's count: the target's own write counter moved by what the generator saw
 *   acknowledged (hivekv versions, etcd revisions, Redis calls per command).
 *
 * A request that failed or never answered may or may not have written: those widen the
 * tolerance of the count checks by their number, and are reported by the first check.
 */
import type { TargetKind } from './codecs.js';
import type { PointFigures, PointRun } from './generator.js';
import type { Store } from './store.js';
import { valueNumber, valueTag, type Workload } from './workloads.js';

export interface Check {
  readonly name: string;
  readonly ok: boolean;
  readonly detail: string;
}

/** Keys read back for the per-key checks at most (all of them below this). */
const PER_KEY_SAMPLE_MAX = 5_000;

/** Every request answered 2xx: a function of the figures alone. */
export function answered(f: PointFigures): Check {
  const statuses = Object.entries(f.all.statuses).filter(([s]) => s !== '200')
    .map(([s, n]) => `${n} x ${s === '500' ? 'error reply' : `HTTP ${s}`}`);
  const problems = [...statuses, f.all.failed > 0 ? `${f.all.failed} failed` : '',
    f.stuck > 0 ? `${f.stuck} never answered` : ''].filter((s) => s !== '');
  // A compare-and-swap loop that lost every race is an outcome of the workload, not an error.
  const gaveUp = f.all.gaveUp > 0 ? `; ${f.all.gaveUp} increments not applied: their ` +
    'compare-and-swap loop lost 64 races in a row' : '';
  return { name: 'answered', ok: problems.length === 0 && f.all.requests > 0,
    detail: (problems.length === 0 ? `${f.all.requests} requests, all answered 2xx`
      : problems.join(', ')) + gaveUp };
}

function readsFound(run: PointRun): Check {
  const missing = run.figures.all.notFound;
  return { name: 'reads found', ok: missing === 0,
    detail: missing === 0 ? 'every read found its preloaded key' : `${missing} reads missed` };
}

async function readBack(store: Store, run: PointRun, tag: string): Promise<Check> {
  const keys = [...new Set(run.writtenKeys)];
  const values = await store.read(keys, false);
  const wrong = keys.filter((k) => valueTag(values.get(k) ?? null) !== tag);
  return { name: 'read back', ok: keys.length > 0 && wrong.length === 0,
    detail: `${keys.length - wrong.length} of ${keys.length} written keys hold this run's ` +
      `value${wrong.length > 0 ? ` (wrong: ${wrong.slice(0, 3).join(', ')})` : ''}` };
}

async function perKeyCounts(store: Store, kind: TargetKind, run: PointRun, w: Workload):
  Promise<Check> {
  const entries = Object.entries(run.checkAppliedByKey);
  const sample = entries.slice(0, PER_KEY_SAMPLE_MAX);
  const hashes = kind === 'redis' && (w.mix.cas ?? 0) > 0;
  const values = await store.read(sample.map(([k]) => k), hashes);
  let mismatched = 0;
  let overBound = 0;
  let stored = 0;
  let acknowledged = 0;
  for (const [key, applied] of sample) {
    const n = valueNumber(values.get(key) ?? null);
    const value = Number.isNaN(n) ? 0 : n;
    stored += value;
    acknowledged += applied;
    if (value !== applied) mismatched++;
    if ((w.mix.incr ?? 0) > 0 && value > w.incrMax) overBound++;
  }
  const slack = run.figures.all.failed + run.figures.stuck;
  const ok = entries.length > 0 && overBound === 0 && Math.abs(stored - acknowledged) <= slack;
  return { name: 'per-key counts', ok, detail: `${sample.length} of ${entries.length} keys ` +
    `read: stored ${stored}, acknowledged ${acknowledged}` +
    `${mismatched > 0 ? `, ${mismatched} keys differ` : ''}` +
    `${overBound > 0 ? `, ${overBound} past the bound` : ''}` };
}

/** What the target's counters should have moved by. */
function expectedCounts(kind: TargetKind, run: PointRun): Record<string, number> {
  const r = run.checkRequests;
  if (kind === 'hivekv') return { version: run.checkKeyWrites + 1 };
  if (kind === 'etcd') return { revision: run.checkWriteRequests };
  // The increment script calls GET once; calls from scripts count in commandstats.
  return { get: (r['get'] ?? 0) + (r['incr'] ?? 0), set: r['put'] ?? 0, mset: r['putMany'] ?? 0,
    evalsha: (r['cas'] ?? 0) + (r['incr'] ?? 0) };
}

function targetCount(kind: TargetKind, run: PointRun, before: Record<string, number>,
  after: Record<string, number>): Check {
  const expected = expectedCounts(kind, run);
  const slack = run.figures.all.failed + run.figures.stuck;
  const parts: string[] = [];
  let ok = true;
  for (const [name, want] of Object.entries(expected)) {
    const moved = (after[name] ?? 0) - (before[name] ?? 0);
    if (Math.abs(moved - want) > slack) ok = false;
    if (want > 0 || moved > 0) parts.push(`${name} +${moved} (expected ${want})`);
  }
  return { name: "target's count", ok, detail: parts.join(', ') || 'nothing written' };
}

/** Runs every check that applies to `w` on `run`. */
export async function checkPoint(store: Store, run: PointRun, w: Workload, tag: string,
  before: Record<string, number>, after: Record<string, number>): Promise<Check[]> {
  const checks = [answered(run.figures)];
  if (w.space === 'preloaded' && ((w.mix.get ?? 0) > 0 || (w.mix.rmw ?? 0) > 0)) {
    checks.push(readsFound(run));
  }
  if ((w.mix.put ?? 0) + (w.mix.rmw ?? 0) + (w.mix.batch ?? 0) > 0) {
    checks.push(await readBack(store, run, tag));
  }
  if (w.space === 'fresh') checks.push(await perKeyCounts(store, store.kind, run, w));
  checks.push(targetCount(store.kind, run, before, after));
  return checks;
}
