/**
 * The in-memory Raft log: the entries after the last snapshot, with the commit, apply and
 * persistence cursors (§5.3, §7).
 *
 * Pure: no I/O, no clock. The driver persists what `Ready.entries` says and reloads it at
 * start-up; this class only tracks which suffix it has handed out to be persisted
 * (`persistingIndex`) and which suffix is durable (`stableIndex`). The two differ while the
 * driver's writes are in flight: it may take the next Ready before the last one's fsync.
 *
 * Invariants, asserted on every change:
 * - entry i has index `snapshot.index + 1 + i` (no holes: an append must follow the last
 *   entry) and terms never decrease;
 * - `timeMs` never decreases along the log, starting from the snapshot's stamp;
 * - `appliedIndex <= applyingIndex <= commitIndex <= lastIndex()`, and `commitIndex` never
 *   decreases; an entry at or below `commitIndex` is never overwritten;
 * - `stableIndex <= persistingIndex <= lastIndex()`, and committed entries are handed out to
 *   apply only up to `stableIndex`: what this node applies, it holds durably;
 * - the configuration in effect is the newest `config` entry in the log, or the snapshot's
 *   when there is none (thesis §4.1: a configuration takes effect when appended, and an
 *   overwritten one stops being in effect with it).
 */
import { configurationOf, decodeConfigEntry, sameConfiguration } from './configuration.js';
import { EntryColumns } from './entry-columns.js';
import type { Configuration, Entry, Snapshot, SnapshotMeta } from './types.js';

/** A configuration and the index of the entry (or snapshot) that set it. */
export interface IndexedConfiguration {
  readonly index: number;
  readonly config: Configuration;
}

/** Bytes counted per entry on top of its data, for the byte bounds of batches. */
export const ENTRY_OVERHEAD_BYTES = 32;

export function entryBytes(entry: Entry): number {
  return entry.data.length + ENTRY_OVERHEAD_BYTES;
}

export function raftAssert(condition: boolean, what: string): asserts condition {
  if (!condition) raftFail(what);
}

/**
 * A broken invariant. Checks on the path of every call test first and build their message
 * only here: a template with numbers in it costs its conversions and concatenation (about
 * 40 ns) each time, failing or not.
 */
export function raftFail(what: string): never {
  throw new Error(`raft invariant violated: ${what}`);
}

export class RaftLog {
  /** The last snapshot: it covers every index up to `snapshot.index`. */
  snapshot: SnapshotMeta;
  /** Entry i has log index `snapshot.index + 1 + i` (entry-columns.ts: no object each). */
  private entries = new EntryColumns();
  /** Highest index known committed (§5.3). Never decreases. */
  commitIndex: number;
  /** Highest index the driver confirmed applied (through `advance`). */
  appliedIndex: number;
  /** Highest index handed to the driver to apply (in an outstanding Ready). */
  applyingIndex: number;
  /** Entries up to here are durable (the driver said so through `stableTo`). */
  stableIndex: number;
  /** Entries up to here went out in a `Ready.entries`; the rest go out in the next one. */
  persistingIndex: number;
  /** A snapshot received from a leader and not yet durable (`Ready.snapshot`). */
  pendingSnapshot: Snapshot | null = null;
  /** The `config` entries among `entries`, oldest first, decoded. */
  private configEntries: IndexedConfiguration[] = [];
  /** The snapshot's configuration, without its index, term and stamp. */
  private snapshotConfig: Configuration;
  /** Counts changes of the configuration in effect, so the core notices one cheaply. */
  configChanges = 0;

  constructor(snapshot: SnapshotMeta, entries: readonly Entry[], commitIndex: number) {
    this.snapshot = snapshot;
    this.snapshotConfig = configurationOf(snapshot);
    this.commitIndex = snapshot.index;
    this.appliedIndex = snapshot.index;
    this.applyingIndex = snapshot.index;
    this.stableIndex = snapshot.index;
    this.persistingIndex = snapshot.index;
    if (entries.length > 0) this.appendAfter(snapshot.index, entries);
    this.stableIndex = this.lastIndex();
    this.persistingIndex = this.lastIndex();
    raftAssert(commitIndex <= this.lastIndex(), `restored commitIndex ${commitIndex} > last`);
    this.commitIndex = Math.max(commitIndex, snapshot.index);
  }

  firstIndex(): number {
    return this.snapshot.index + 1;
  }

  lastIndex(): number {
    return this.snapshot.index + this.entries.length;
  }

  lastTerm(): number {
    const n = this.entries.length;
    return n === 0 ? this.snapshot.term : this.entries.term(n - 1);
  }

  lastTimeMs(): number {
    const n = this.entries.length;
    return n === 0 ? this.snapshot.timeMs : this.entries.timeMs(n - 1);
  }

  /** The term at `index`, or null when it is compacted away or beyond the log. */
  term(index: number): number | null {
    if (index === this.snapshot.index) return this.snapshot.term;
    const i = this.positionOf(index);
    return i < 0 ? null : this.entries.term(i);
  }

  /** The entry at `index` (a new object each call), or undefined outside the log. */
  entry(index: number): Entry | undefined {
    const i = this.positionOf(index);
    return i < 0 ? undefined : this.entries.get(i, index);
  }

  /** The bytes of the entry at `index` as `entryBytes` counts them, or 0 outside the log. */
  entryBytesAt(index: number): number {
    const i = this.positionOf(index);
    return i < 0 ? 0 : this.entries.dataBytes(i) + ENTRY_OVERHEAD_BYTES;
  }

  /** Where the entry at `index` is among `entries`, or -1 when the log does not hold it. */
  private positionOf(index: number): number {
    const i = index - this.snapshot.index - 1;
    return i >= 0 && i < this.entries.length ? i : -1;
  }

  matchTerm(index: number, term: number): boolean {
    return this.term(index) === term;
  }

  /** §5.4.1: a log is at least as up to date when its last term is higher, or equal and
   *  its last index is at least ours. */
  isUpToDate(lastLogIndex: number, lastLogTerm: number): boolean {
    const ourTerm = this.lastTerm();
    return lastLogTerm > ourTerm || (lastLogTerm === ourTerm && lastLogIndex >= this.lastIndex());
  }

  /**
   * The largest index <= `index` whose term is <= `term`, used for fast backtracking: no
   * entry after it can match a log whose entry at `index` has `term`. Floors at the
   * snapshot index (everything there is committed and therefore matches).
   */
  findConflictByTerm(index: number, term: number): number {
    let at = Math.min(index, this.lastIndex());
    for (; at > this.snapshot.index; at--) {
      if (this.term(at)! <= term) return at;
    }
    return this.snapshot.index;
  }

  /**
   * Follower side of AppendEntries (§5.3). Returns the index of the last new entry when
   * `prevLogIndex`/`prevLogTerm` match, else null. Entries already present are skipped; the
   * first conflicting one and everything after it are replaced.
   */
  maybeAppend(prevLogIndex: number, prevLogTerm: number, entries: readonly Entry[]): number | null {
    if (!this.matchTerm(prevLogIndex, prevLogTerm)) return null;
    const lastNew = prevLogIndex + entries.length;
    let skip = 0;
    for (; skip < entries.length; skip++) {
      const entry = entries[skip]!;
      raftAssert(entry.index === prevLogIndex + 1 + skip, 'append entries are contiguous');
      if (entry.index <= this.snapshot.index) continue;
      if (this.term(entry.index) !== entry.term) break;
    }
    if (skip < entries.length) {
      const first = entries[skip]!;
      if (first.index <= this.commitIndex) {
        raftFail(`append would overwrite committed index ${first.index} (commit ${
          this.commitIndex})`);
      }
      // A leader's entries arrive as views into its message's frame: copied as they append.
      this.appendAfter(first.index - 1, entries.slice(skip), true);
    }
    return lastNew;
  }

  /**
   * Replaces everything after `afterIndex` with `entries` (which start at afterIndex + 1).
   * `copyBytes`: the entries' bytes are views into a buffer the log must not keep (a peer's
   * frame); else bytes in a buffer shared by many entries are kept where they are.
   */
  appendAfter(afterIndex: number, entries: readonly Entry[], copyBytes = false): void {
    if (afterIndex < this.snapshot.index || afterIndex > this.lastIndex()) {
      raftFail(`append after ${afterIndex} outside [${this.snapshot.index}, ${
        this.lastIndex()}]`);
    }
    if (afterIndex < this.commitIndex) {
      raftFail(`append after ${afterIndex} would rewrite committed entries (commit ${
        this.commitIndex})`);
    }
    // Most appends go on from the last entry: a store to an array's length is a call into
    // the runtime even when it changes nothing.
    const kept = afterIndex - this.snapshot.index;
    if (this.entries.length !== kept) this.entries.truncate(kept);
    while ((this.configEntries.at(-1)?.index ?? 0) > afterIndex) {
      this.configEntries.pop();
      this.configChanges++;
    }
    let prevTerm = this.lastTerm();
    let prevTimeMs = this.lastTimeMs();
    for (const entry of entries) {
      // One test first: this runs per entry, and the messages are built only for a failure.
      if (entry.index !== this.lastIndex() + 1 || entry.term < prevTerm ||
        entry.timeMs < prevTimeMs) {
        raftAssert(entry.index === this.lastIndex() + 1, `log hole at ${entry.index}`);
        raftAssert(entry.term >= prevTerm, `term decreases at index ${entry.index}`);
        raftAssert(entry.timeMs >= prevTimeMs, `timeMs decreases at index ${entry.index}`);
      }
      this.entries.push(entry, copyBytes);
      prevTerm = entry.term;
      prevTimeMs = entry.timeMs;
      if (entry.type === 'config') this.noteConfigEntry(entry);
    }
    this.stableIndex = Math.min(this.stableIndex, afterIndex);
    this.persistingIndex = Math.min(this.persistingIndex, afterIndex);
  }

  private noteConfigEntry(entry: Entry): void {
    const decoded = decodeConfigEntry(entry.data);
    raftAssert(decoded !== null, `config entry ${entry.index} does not decode`);
    this.configEntries.push({ index: entry.index, config: decoded.config });
    this.configChanges++;
  }

  /** The configuration in effect: the newest in the log, committed or not (thesis §4.1). */
  configuration(): IndexedConfiguration {
    return this.configEntries.at(-1) ??
      { index: this.snapshot.index, config: this.snapshotConfig };
  }

  /** The configuration in effect at `index`, which must not be compacted away. */
  configurationAt(index: number): IndexedConfiguration {
    if (index < this.snapshot.index || index > this.lastIndex()) {
      raftFail(`configuration at ${index} outside [${this.snapshot.index}, ${this.lastIndex()}]`);
    }
    for (let i = this.configEntries.length - 1; i >= 0; i--) {
      const found = this.configEntries[i] as IndexedConfiguration;
      if (found.index <= index) return found;
    }
    return { index: this.snapshot.index, config: this.snapshotConfig };
  }

  /** Raises `commitIndex`; asserts that it never decreases nor passes the last index. */
  commitTo(index: number): boolean {
    if (index <= this.commitIndex) return false;
    if (index > this.lastIndex()) raftFail(`commit ${index} beyond last ${this.lastIndex()}`);
    this.commitIndex = index;
    return true;
  }

  /** Entries in [lo, hi], at most `maxBytes` (but at least one entry when lo <= hi). */
  slice(lo: number, hi: number, maxBytes: number): Entry[] {
    if (lo < this.firstIndex()) raftFail(`slice from compacted index ${lo}`);
    const out: Entry[] = [];
    let bytes = 0;
    for (let index = lo; index <= Math.min(hi, this.lastIndex()); index++) {
      const i = index - this.snapshot.index - 1;
      bytes += this.entries.dataBytes(i) + ENTRY_OVERHEAD_BYTES;
      if (out.length > 0 && bytes > maxBytes) break;
      out.push(this.entries.get(i, index));
    }
    return out;
  }

  /** True while entries wait to be handed out for persistence. */
  hasUnpersisted(): boolean {
    return this.persistingIndex < this.lastIndex();
  }

  /** The entries not handed out for persistence yet; from now on they count as handed out. */
  takeUnpersisted(): Entry[] {
    const entries: Entry[] = [];
    for (let index = this.persistingIndex + 1; index <= this.lastIndex(); index++) {
      entries.push(this.entries.get(index - this.snapshot.index - 1, index));
    }
    this.persistingIndex = this.lastIndex();
    return entries;
  }

  /**
   * Marks entries durable up to `index` if the log still holds `term` there. An entry that
   * was overwritten after it was handed out no longer matches and stays unstable until the
   * write of its replacement reports.
   */
  stableTo(index: number, term: number): void {
    if (index > this.stableIndex && index <= this.persistingIndex &&
      this.matchTerm(index, term)) {
      this.stableIndex = index;
    }
  }

  /** The highest committed index this node may apply: committed and durable here. */
  private applicableIndex(): number {
    return Math.min(this.commitIndex, this.stableIndex);
  }

  /** Committed, durable entries not yet handed out, at most `maxBytes` (at least one). */
  nextCommitted(maxBytes: number): Entry[] {
    if (this.pendingSnapshot !== null) return [];
    return this.slice(this.applyingIndex + 1, this.applicableIndex(), maxBytes);
  }

  hasNextCommitted(): boolean {
    return this.pendingSnapshot === null && this.applicableIndex() > this.applyingIndex;
  }

  /** The driver applied everything up to `index`. */
  appliedTo(index: number): void {
    if (index > this.commitIndex) raftFail(`applied ${index} > committed ${this.commitIndex}`);
    if (index < this.appliedIndex) raftFail(`applied index moves back to ${index}`);
    this.appliedIndex = index;
    this.applyingIndex = Math.max(this.applyingIndex, index);
  }

  /** Drops entries up to `meta.index`, which must be applied and still in the log. */
  compact(meta: SnapshotMeta): void {
    raftAssert(meta.index <= this.appliedIndex,
      `compact at ${meta.index} beyond applied ${this.appliedIndex}`);
    raftAssert(meta.index <= this.stableIndex, `compact at unstable index ${meta.index}`);
    raftAssert(this.term(meta.index) === meta.term, `compact meta term differs at ${meta.index}`);
    raftAssert(sameConfiguration(meta, this.configurationAt(meta.index).config),
      `compact meta at ${meta.index} carries another configuration than the log`);
    this.entries.dropFirst(meta.index - this.snapshot.index);
    this.configEntries = this.configEntries.filter((c) => c.index > meta.index);
    this.snapshot = meta;
    this.snapshotConfig = configurationOf(meta);
  }

  /** Installs a snapshot received from a leader: the log restarts after `meta.index`. */
  restore(snapshot: Snapshot): void {
    const meta = snapshot.meta;
    raftAssert(meta.index > this.commitIndex, `restore at ${meta.index} <= commit`);
    this.entries.truncate(0);
    this.configEntries = [];
    this.configChanges++;
    this.snapshot = meta;
    this.snapshotConfig = configurationOf(meta);
    this.commitIndex = meta.index;
    this.applyingIndex = meta.index;
    this.stableIndex = meta.index;
    this.persistingIndex = meta.index;
    this.pendingSnapshot = snapshot;
  }

  /** The driver persisted and restored the pending snapshot. */
  snapshotPersisted(index: number): void {
    if (this.pendingSnapshot !== null && this.pendingSnapshot.meta.index === index) {
      this.pendingSnapshot = null;
      this.appliedIndex = Math.max(this.appliedIndex, index);
    }
  }
}
