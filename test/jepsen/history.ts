/**
 * The fault run's history: every client operation as an invocation and a completion (`ok`,
 * `fail` for a definite no, `info` for an outcome nobody knows), in the one real-time order
 * of the harness process. Each operation carries what it means for each key it touched, in
 * the terms of the simulator's linearizability model (test/sim/linearizability.ts), and the
 * facts the other checkers need. Pure bookkeeping: no I/O.
 */
import type { HistoryOp, KvInput, KvOutput } from '../sim/linearizability.js';

export type Completion = 'ok' | 'fail' | 'info';

/** One key's part of an operation: what was asked, and what was seen (null: unknown). */
export interface KeyPart {
  readonly key: string;
  readonly input: KvInput;
  readonly output: KvOutput | null;
}

export interface RecordedOp {
  readonly id: number;
  /** The client (a Jepsen "process"), or `final-nX` for the reads after healing. */
  readonly process: string;
  readonly node: string;
  /** The operation's name: read, write, cas, incr, claim, transfer, balance, ledger... */
  readonly f: string;
  /** Position of the invocation in the run's event order. */
  readonly invokedAt: number;
  readonly invokedMs: number;
  completedAt: number | null;
  completedMs: number | null;
  type: Completion | null;
  /** Per-key meaning, filled on completion (a `fail` keeps none: it had no effect). */
  parts: KeyPart[];
  /** What the call sent, for the history file. */
  readonly request: unknown;
  /** What it got back (status and body, or the error), for the history file. */
  response: unknown;
}

/** Events a history may hold; a run that would pass it stops issuing operations. */
export const HISTORY_OPS_MAX = 2_000_000;

export class History {
  readonly ops: RecordedOp[] = [];
  private clock = 0;

  constructor(private readonly startMs: number) {}

  get full(): boolean {
    return this.ops.length >= HISTORY_OPS_MAX;
  }

  invoke(process: string, node: string, f: string, request: unknown): RecordedOp {
    const op: RecordedOp = { id: this.ops.length, process, node, f, invokedAt: this.clock++,
      invokedMs: Date.now() - this.startMs, completedAt: null, completedMs: null, type: null,
      parts: [], request, response: null };
    this.ops.push(op);
    return op;
  }

  complete(op: RecordedOp, type: Completion, parts: KeyPart[], response: unknown): void {
    if (op.type !== null) throw new Error(`op ${op.id} completed twice`);
    op.type = type;
    op.completedAt = type === 'info' ? null : this.clock++;
    op.completedMs = Date.now() - this.startMs;
    op.parts = type === 'fail' ? [] : parts;
    op.response = response;
  }

  /** Counts of invocations and completions by type. */
  counts(): Record<'invoke' | Completion | 'open', number> {
    const counts = { invoke: this.ops.length, ok: 0, fail: 0, info: 0, open: 0 };
    for (const op of this.ops) {
      if (op.type === null) counts.open++;
      else counts[op.type]++;
    }
    return counts;
  }

  /**
   * The per-key operations for the linearizability checker. An `info` (or still open)
   * operation may have taken effect at any time after its invocation: its return is at
   * infinity and its output unknown.
   */
  linearizabilityOps(): HistoryOp[] {
    const out: HistoryOp[] = [];
    for (const op of this.ops) {
      if (op.type === 'fail') continue;
      const unknown = op.type !== 'ok';
      for (const part of op.parts) {
        if (unknown && part.input.kind === 'get') continue;
        out.push({ key: part.key, client: op.process, input: part.input,
          output: unknown ? null : part.output, call: op.invokedAt,
          ret: unknown ? Infinity : (op.completedAt ?? Infinity) });
      }
    }
    return out;
  }

  /** Jepsen-style event lines: one invoke and one completion per operation. */
  *eventLines(): Generator<string> {
    const events: Array<{ at: number; line: string }> = [];
    for (const op of this.ops) {
      events.push({ at: op.invokedAt, line: JSON.stringify({ index: op.invokedAt,
        timeMs: op.invokedMs, process: op.process, node: op.node, type: 'invoke', f: op.f,
        value: op.request }) });
      events.push({ at: op.completedAt ?? Number.MAX_SAFE_INTEGER - op.id,
        line: JSON.stringify({ index: op.completedAt, timeMs: op.completedMs,
          process: op.process, node: op.node, type: op.type ?? 'info', f: op.f,
          value: op.response }) });
    }
    events.sort((a, b) => a.at - b.at);
    for (const event of events) yield event.line;
  }
}
