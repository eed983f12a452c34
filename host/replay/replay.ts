/**
 * Deterministic replay of a data directory: the state rebuilt from the newest usable snapshot
 * (or from index 1) by applying the log's entries through the same WebAssembly module, exactly
 * as a node applies committed entries (`StateMachine.applyEntries`, the entries' own times,
 * envelopes and dedup decided by the machine), so the digest after index N is the digest any
 * replica reported at appliedIndex N.
 *
 * Two paces: `run` applies entries in batches and looks only at digests (fast, for `replay`
 * and `diff`); `steps` applies one entry at a time and reports what each decided, the answer
 * of every call included: before each entry the machine is told that the entry's origin is
 * its own, so it writes the answer it wrote on the node that took the request. Whose answer
 * a machine writes changes nothing in its state.
 */
import type { Entry } from '../core/raft/types.js';
import { CMD_SWEEP } from '../machine/abi.js';
import type { AnswerHeader } from '../machine/codec.js';
import type { CheckpointOutcome } from '../machine/commands.js';
import { StateMachine, type AppliedEntrySink } from '../machine/state-machine.js';
import { decodeEnvelope } from '../node/envelope.js';
import { restoreMachine } from '../node/snapshotter.js';
import { DataDir } from './data-dir.js';

/** Entries `run` hands the machine per crossing, at most. */
const RUN_BATCH_ENTRIES = 4096;
const utf8 = new TextDecoder();

export interface ReplayOptions {
  /** The last index to apply (default: the log's last index). */
  readonly to?: number;
  /** Start from an empty state at index 0 (the log must still hold index 1). */
  readonly fromStart?: boolean;
}

/** What the machine decided about one entry. */
export type EntryOutcome =
  /** A call: the HTTP status and JSON body the node that took the request answered with. */
  | { readonly kind: 'call'; readonly status: number; readonly body: unknown }
  | { readonly kind: 'sweep'; readonly removedKeys: number }
  /** A quota row or the pause switch changed. */
  | { readonly kind: 'admin' }
  /** An empty entry, a no-op command, or a config entry (the machine applies nothing). */
  | { readonly kind: 'noop' }
  /** A normal entry that applied nothing: no valid envelope, or a duplicated proposal. */
  | { readonly kind: 'skipped'; readonly reason: string }
  /** A leader's digest compared with the replayed state's at its index. */
  | CheckpointOutcome
  /** The machine refused the command (a bug in the node that proposed it). */
  | { readonly kind: 'invalid'; readonly detail: string };

export interface ReplayedEntry {
  readonly entry: Entry;
  readonly outcome: EntryOutcome;
  /** The state digest after this entry. */
  readonly digest: string;
}

/** Why a replay cannot start or go on; the message says what the directory lacks. */
export class ReplayError extends Error {
  override readonly name = 'ReplayError';
}

/**
 * Refuses a range of entries the log does not hold whole (`to` Number.MAX_SAFE_INTEGER: from
 * `from` to the end, which must start within the log), saying what it holds and, when the
 * range starts before it, that those entries were compacted into a snapshot. `replay` and
 * `inspect --entries` answer a range whole or not at all.
 */
export function requireEntries(data: DataDir, from: number, to: number): void {
  const first = data.firstIndex;
  const last = data.lastIndex;
  const openEnded = to === Number.MAX_SAFE_INTEGER;
  if (first !== null && last !== null && from >= first && from <= last &&
    (openEnded || to <= last)) {
    return;
  }
  const asked = openEnded ? `${from}..` : from === to ? String(from) : `${from}..${to}`;
  const held = first === null ? 'the log holds no entries'
    : `the log holds ${first}..${last ?? first}`;
  const compacted = first !== null && from < first
    ? ` (entries before ${first} were compacted into a snapshot)` : '';
  throw new ReplayError(`${held}: it does not cover ${asked}${compacted}`);
}

/** A machine positioned at the start of a replay of one data directory. */
export class Replayer {
  private constructor(
    readonly data: DataDir,
    readonly machine: StateMachine,
    /** The index the state was restored at (0 from the start). */
    readonly startIndex: number,
    /** The term of the start (the snapshot's; 0 from the start). */
    readonly startTerm: number,
    /** The last index this replay applies. */
    readonly endIndex: number,
  ) {}

  /** Restores the starting state; throws ReplayError when the directory cannot give it. */
  static async start(data: DataDir, options: ReplayOptions = {}): Promise<Replayer> {
    const first = data.firstIndex;
    const last = data.lastIndex;
    const snapshot = options.fromStart === true ? null
      : data.usableSnapshot(options.to ?? Number.MAX_SAFE_INTEGER);
    const startIndex = snapshot?.meta.index ?? 0;
    const endIndex = options.to ?? Math.max(last ?? 0, startIndex);
    if (snapshot === null && startIndex < endIndex && first !== 1) {
      throw new ReplayError(options.fromStart === true
        ? `the log starts at index ${first ?? 'none'}: index 1 is gone (compacted into a ` +
          'snapshot), so --from-start cannot replay it'
        : `no usable snapshot at or below index ${endIndex}, and the log starts at ` +
          `${first ?? 'none'}, not 1`);
    }
    if (endIndex > startIndex) requireEntries(data, startIndex + 1, endIndex);
    const machine = StateMachine.create();
    if (snapshot !== null) await restoreMachine(data, machine, snapshot);
    return new Replayer(data, machine, startIndex, snapshot?.meta.term ?? 0, endIndex);
  }

  /**
   * Applies every entry up to `endIndex` in batches, calling `mark` after each index that
   * `isMark` picks and after the last, with the term and the digest there. Verifies every
   * checkpoint entry on the way (the machine compares the leader's digest with its own); the
   * summary counts them and names the first that did not match. A divergence does not stop
   * the replay: the state after it is still the state this log gives.
   */
  async run(isMark: (index: number) => boolean,
    mark: (index: number, term: number, digest: string) => void): Promise<ReplaySummary> {
    const sink = new CheckpointSink();
    let batch: Entry[] = [];
    let term = this.startTerm;
    const flush = () => {
      if (batch.length === 0) return;
      this.machine.applyEntries(batch, sink);
      term = batch[batch.length - 1]!.term;
      batch = [];
    };
    for await (const entry of this.data.entries(this.startIndex + 1, this.endIndex)) {
      batch.push(entry);
      if (isMark(entry.index) || batch.length >= RUN_BATCH_ENTRIES) flush();
      if (isMark(entry.index)) mark(entry.index, term, this.machine.digest());
    }
    flush();
    const at = this.machine.appliedIndex;
    if (at !== this.endIndex) {
      throw new ReplayError(`replay stopped at ${at}, short of ${this.endIndex}`);
    }
    if (!isMark(at)) mark(at, term, this.machine.digest());
    return sink.summary();
  }

  /** Applies the entries one at a time, yielding what each decided and the digest after. */
  async *steps(): AsyncGenerator<ReplayedEntry> {
    const capture = new CaptureSink();
    let originKey = '';
    for await (const entry of this.data.entries(this.startIndex + 1, this.endIndex)) {
      const envelope = entry.type === 'normal' ? decodeEnvelope(entry.data) : null;
      if (envelope !== null) {
        const key = `${envelope.origin.incarnation}:${envelope.origin.nodeId}`;
        if (key !== originKey) {
          this.machine.setOrigin(envelope.origin.nodeId, envelope.origin.incarnation);
          originKey = key;
        }
      }
      capture.reset();
      this.machine.applyEntries([entry], capture);
      yield { entry, outcome: capture.outcome(entry, envelope !== null),
        digest: this.machine.digest() };
    }
  }
}

/** Replays a data directory (a path or one already open), one entry at a time. */
export async function* replay(dir: string | DataDir, options: ReplayOptions = {}):
  AsyncGenerator<ReplayedEntry> {
  const data = typeof dir === 'string' ? await DataDir.open(dir) : dir;
  const replayer = await Replayer.start(data, options);
  yield* replayer.steps();
}

/** What a replay found about the checkpoints in the log. */
export interface ReplaySummary {
  /** Checkpoints whose digest matched the replayed state's. */
  readonly checkpointsPassed: number;
  /** Checkpoints about an index before the replay's start (or too far back to check). */
  readonly checkpointsUnverifiable: number;
  /** Checkpoints that did not match. */
  readonly checkpointsDiverged: number;
  /** The first checkpoint that did not match, if any. */
  readonly divergence: { readonly entryIndex: number; readonly outcome: CheckpointOutcome } | null;
}

/** Counts checkpoint verdicts and keeps the first divergence; ignores everything else. */
class CheckpointSink implements AppliedEntrySink {
  passed = 0;
  unverifiable = 0;
  diverged = 0;
  divergence: ReplaySummary['divergence'] = null;

  answer(): void {}
  done(): void {}
  admin(): void {}
  swept(): void {}
  invalid(): void {}
  checkpoint(entryIndex: number, outcome: CheckpointOutcome): void {
    if (outcome.verdict === 'passed') this.passed++;
    else if (outcome.verdict === 'unverifiable') this.unverifiable++;
    else {
      this.diverged++;
      this.divergence ??= { entryIndex, outcome };
    }
  }

  summary(): ReplaySummary {
    return { checkpointsPassed: this.passed, checkpointsUnverifiable: this.unverifiable,
      checkpointsDiverged: this.diverged, divergence: this.divergence };
  }
}

/** Collects what `applyEntries` said about one entry. */
class CaptureSink implements AppliedEntrySink {
  private answered: { status: number; body: unknown } | null = null;
  private finished = false;
  private adminChanged = false;
  private removedKeys = 0;
  private refusal: string | null = null;
  private checked: CheckpointOutcome | null = null;

  reset(): void {
    this.checked = null;
    this.answered = null;
    this.finished = false;
    this.adminChanged = false;
    this.removedKeys = 0;
    this.refusal = null;
  }

  answer(_seq: number, header: AnswerHeader, body: Uint8Array): void {
    const text = utf8.decode(body);
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      // A body that is not JSON is shown as its text.
    }
    this.answered = { status: header.status, body: parsed };
  }

  done(): void { this.finished = true; }
  admin(): void { this.adminChanged = true; }
  swept(removedKeys: number): void { this.removedKeys = removedKeys; }
  invalid(_index: number, detail: string): void { this.refusal = detail; }
  checkpoint(_index: number, outcome: CheckpointOutcome): void { this.checked = outcome; }

  outcome(entry: Entry, hasEnvelope: boolean): EntryOutcome {
    if (this.refusal !== null) return { kind: 'invalid', detail: this.refusal };
    if (this.answered !== null) return { kind: 'call', ...this.answered };
    if (this.adminChanged) return { kind: 'admin' };
    if (this.checked !== null) return this.checked;
    if (entry.type !== 'normal') return { kind: 'noop' };
    if (!hasEnvelope) return { kind: 'skipped', reason: 'no valid envelope' };
    if (!this.finished) {
      return { kind: 'skipped', reason: 'duplicate proposal (its origin and sequence ' +
        'number already applied)' };
    }
    return this.removedKeys > 0 || isSweep(entry)
      ? { kind: 'sweep', removedKeys: this.removedKeys } : { kind: 'noop' };
  }
}

/** A sweep command (CMD_SWEEP) inside an envelope. */
function isSweep(entry: Entry): boolean {
  const envelope = decodeEnvelope(entry.data);
  return envelope !== null && envelope.command[0] === CMD_SWEEP;
}
