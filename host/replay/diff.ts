/**
 * Compares two data directories (two replicas, or a replica and a backup): where both logs
 * hold an index, their entries must be the same bytes (term, time, kind, data); where both
 * replays reach an index, their digests must be equal. The answer is the first index where
 * either parts, with both sides shown, or the last index through which they agree.
 */
import type { Entry } from '../core/raft/types.js';
import type { DataDir } from './data-dir.js';
import { describeEntry, type EntryDescription } from './describe.js';
import { Replayer, type ReplayedEntry } from './replay.js';

export interface DiffSide {
  readonly entry: EntryDescription | null;
  readonly digest: string | null;
}

export type DiffResult =
  | { readonly kind: 'identical'; readonly throughIndex: number; readonly digest: string | null;
      /** Each side's last index: past `throughIndex` only one of them holds entries. */
      readonly lastIndexA: number | null; readonly lastIndexB: number | null }
  /** The entries at `index` are not the same bytes. */
  | { readonly kind: 'log'; readonly index: number; readonly a: DiffSide; readonly b: DiffSide }
  /** The same entries (or none to compare), different states after `index`. */
  | { readonly kind: 'digest'; readonly index: number; readonly a: DiffSide;
      readonly b: DiffSide };

export function sameEntry(x: Entry, y: Entry): boolean {
  return x.index === y.index && x.term === y.term && x.timeMs === y.timeMs &&
    x.type === y.type && Buffer.from(x.data.buffer, x.data.byteOffset, x.data.byteLength)
    .equals(Buffer.from(y.data.buffer, y.data.byteOffset, y.data.byteLength));
}

/** The first index in [from, to] where both logs hold different entries, with both. */
async function firstLogParting(a: DataDir, b: DataDir, from: number, to: number):
  Promise<{ index: number; a: Entry; b: Entry } | null> {
  if (to < from) return null;
  const other = b.entries(from, to);
  for await (const x of a.entries(from, to)) {
    const next = await other.next();
    if (next.done === true) return null;
    if (!sameEntry(x, next.value)) return { index: x.index, a: x, b: next.value };
  }
  return null;
}

/** Advances a replay's step iterator until the state is at `index` (or its log ends). */
async function advance(steps: AsyncGenerator<ReplayedEntry>, replayer: Replayer, index: number):
  Promise<void> {
  while (replayer.machine.appliedIndex < index) {
    const next = await steps.next();
    if (next.done === true) return;
  }
}

/** Compares two data directories; see the file comment. */
export async function diffDataDirs(a: DataDir, b: DataDir): Promise<DiffResult> {
  const lastA = a.lastIndex;
  const lastB = b.lastIndex;
  const end = Math.min(lastA ?? 0, lastB ?? 0);
  const ra = await Replayer.start(a, { to: end });
  const rb = await Replayer.start(b, { to: end });
  const start = Math.max(ra.startIndex, rb.startIndex);
  // Entries both logs hold before both replays can compare states.
  const overlapFrom = Math.max(a.firstIndex ?? Infinity, b.firstIndex ?? Infinity);
  const early = await firstLogParting(a, b, overlapFrom, Math.min(start, end));
  if (early !== null) return logParting(early.index, early.a, early.b, null, null);
  const stepsA = ra.steps();
  const stepsB = rb.steps();
  await advance(stepsA, ra, start);
  await advance(stepsB, rb, start);
  let digestA = ra.machine.digest();
  let digestB = rb.machine.digest();
  if (digestA !== digestB) {
    return { kind: 'digest', index: start, a: { entry: null, digest: digestA },
      b: { entry: null, digest: digestB } };
  }
  for (let index = start + 1; index <= end; index++) {
    const x = await stepsA.next();
    const y = await stepsB.next();
    if (x.done === true || y.done === true) break;
    const ea = x.value.entry;
    const eb = y.value.entry;
    digestA = x.value.digest;
    digestB = y.value.digest;
    if (!sameEntry(ea, eb)) return logParting(index, ea, eb, digestA, digestB);
    if (digestA !== digestB) {
      return { kind: 'digest', index, a: { entry: describeEntry(ea), digest: digestA },
        b: { entry: describeEntry(eb), digest: digestB } };
    }
  }
  return { kind: 'identical', throughIndex: Math.max(end, start),
    digest: end >= start ? digestA : null, lastIndexA: lastA, lastIndexB: lastB };
}

function logParting(index: number, a: Entry, b: Entry, digestA: string | null,
  digestB: string | null): DiffResult {
  return { kind: 'log', index, a: { entry: describeEntry(a), digest: digestA },
    b: { entry: describeEntry(b), digest: digestB } };
}
