/**
 * The fault run's checkers, over a finished history (the final reads after healing
 * included). Pure: each takes the history and returns a verdict with the evidence.
 *
 * - linearizable: every key's history, with the simulator's checker (Wing & Gong with
 *   Lowe's memoization); keys it gave up on are reported, not passed silently;
 * - counters: no value seen outside [0, COUNTER_MAX], and the final value lies between the
 *   increments acknowledged and those plus the ones whose outcome is unknown;
 * - claims: at most one acknowledged putIfAbsent winner per key, and it is what stays;
 * - bank: every read of all accounts sums to the opening total, and no balance is negative;
 * - ledger: every acknowledged ledger write is there after healing.
 */
import {
  checkHistory, describeOp, type HistoryOp, type KvOutput,
} from '../sim/linearizability.js';
import type { History, RecordedOp } from './history.js';
import { ACCOUNT_OPENING_BALANCE, ACCOUNTS, COUNTER_MAX } from './workload.js';

export interface Verdict {
  readonly name: string;
  readonly valid: boolean;
  /** One line for the report. */
  readonly summary: string;
  /** Evidence when invalid: a history excerpt. */
  readonly evidence: readonly string[];
}

const EVIDENCE_LINES_MAX = 40;

function verdict(name: string, problems: string[], summary: string): Verdict {
  return { name, valid: problems.length === 0, summary: problems.length === 0 ? summary
    : `${problems.length} problem(s): ${problems[0]}`,
  evidence: problems.slice(0, EVIDENCE_LINES_MAX) };
}

export function checkLinearizable(history: History): Verdict {
  const ops = history.linearizabilityOps();
  const keys = new Set(ops.map((op) => op.key)).size;
  const result = checkHistory(ops);
  if (result.kind === 'violation') {
    const excerpt = result.ops.slice(0, EVIDENCE_LINES_MAX).map(describeOp);
    return { name: 'linearizable', valid: false, summary: `key ${result.key} is not ` +
      `linearizable (${result.ops.length} ops)`, evidence: excerpt };
  }
  const inconclusive = result.inconclusive.length;
  return { name: 'linearizable', valid: true, summary: `${keys} keys, ${ops.length} ops` +
    (inconclusive > 0 ? `; ${inconclusive} key(s) inconclusive (search bound): ` +
      result.inconclusive.slice(0, 5).join(', ') : ''), evidence: [] };
}

function numberOf(output: KvOutput | null): number | null {
  if (output === null || output.value === null || output.value === 'null') return null;
  const value = Number(output.value);
  return Number.isFinite(value) ? value : null;
}

function opsByKey(history: History, prefix: string): Map<string, HistoryOp[]> {
  const byKey = new Map<string, HistoryOp[]>();
  for (const op of history.linearizabilityOps()) {
    if (!op.key.startsWith(prefix)) continue;
    const list = byKey.get(op.key) ?? [];
    list.push(op);
    byKey.set(op.key, list);
  }
  return byKey;
}

/** The value the final reads (process `final-*`) saw of `key`, agreed by all of them. */
function finalValues(history: History, key: string): Array<string | null> {
  const values: Array<string | null> = [];
  for (const op of history.ops) {
    if (!op.process.startsWith('final-') || op.type !== 'ok') continue;
    for (const part of op.parts) {
      if (part.key === key && part.output?.kind === 'get') values.push(part.output.value);
    }
  }
  return values;
}

export function checkCounters(history: History): Verdict {
  const problems: string[] = [];
  const byKey = opsByKey(history, 'ctr-');
  for (const [key, ops] of byKey) {
    let acked = 0;
    let unknown = 0;
    for (const op of ops) {
      const seen = numberOf(op.output);
      if (seen !== null && (seen < 0 || seen > COUNTER_MAX)) {
        problems.push(`${key}: ${describeOp(op)} is outside [0, ${COUNTER_MAX}]`);
      }
      if (op.input.kind !== 'incr') continue;
      if (op.output === null) unknown++;
      else if (op.output.kind === 'write' && op.output.applied) acked++;
    }
    for (const value of finalValues(history, key)) {
      const final = value === null ? 0 : Number(value);
      if (final < Math.min(acked, COUNTER_MAX) || final > Math.min(acked + unknown, COUNTER_MAX)) {
        problems.push(`${key}: final ${final}, but ${acked} increments were acknowledged and ` +
          `${unknown} unknown (max ${COUNTER_MAX})`);
      }
    }
  }
  return verdict('counters', problems, `${byKey.size} counters within [0, ${COUNTER_MAX}]`);
}

export function checkClaims(history: History): Verdict {
  const problems: string[] = [];
  const byKey = opsByKey(history, 'claim-');
  let won = 0;
  for (const [key, ops] of byKey) {
    const winners = ops.filter((op) => op.input.kind === 'putIfAbsent' &&
      op.output?.kind === 'write' && op.output.applied);
    if (winners.length > 1) {
      problems.push(`${key}: ${winners.length} acknowledged winners: ` +
        winners.map(describeOp).join(' | '));
    }
    const winner = winners[0];
    if (winner === undefined || winner.input.kind !== 'putIfAbsent') continue;
    won++;
    for (const value of finalValues(history, key)) {
      if (value !== winner.input.value) {
        problems.push(`${key}: the winner wrote ${winner.input.value}, the final read saw ` +
          `${value}`);
      }
    }
  }
  return verdict('claims', problems, `${byKey.size} claim keys, ${won} with an acknowledged ` +
    'winner, none with two');
}

/** Every `balance`-like read of a whole bank: all accounts of one generation in one call. */
function bankReads(history: History): Array<{ op: RecordedOp; generation: string;
  balances: Array<number | null> }> {
  const reads: Array<{ op: RecordedOp; generation: string; balances: Array<number | null> }> = [];
  for (const op of history.ops) {
    if (op.type !== 'ok' || (op.f !== 'balance' && op.f !== 'final-bank')) continue;
    const generation = /^acct-(\d+)-/.exec(op.parts[0]?.key ?? '')?.[1];
    if (generation === undefined || op.parts.length !== ACCOUNTS) continue;
    reads.push({ op, generation, balances: op.parts.map((part) => {
      const value = part.output?.kind === 'get' ? part.output.value : null;
      return value === null ? null : (JSON.parse(value) as { b: number }).b;
    }) });
  }
  return reads;
}

export function checkBank(history: History): Verdict {
  const problems: string[] = [];
  const total = ACCOUNTS * ACCOUNT_OPENING_BALANCE;
  const reads = bankReads(history);
  for (const { op, generation, balances } of reads) {
    if (balances.every((b) => b === null)) continue;
    const sum = balances.reduce<number>((a, b) => a + (b ?? 0), 0);
    if (balances.some((b) => b === null) || sum !== total || balances.some((b) => (b ?? 0) < 0)) {
      problems.push(`bank ${generation}: ${op.process} read [${balances.join(', ')}] ` +
        `(sum ${sum}, expected ${total}) at event ${op.invokedAt}`);
    }
  }
  const transfers = history.ops.filter((op) => op.f === 'transfer');
  const applied = transfers.filter((op) => op.type === 'ok' && op.parts.length === 2 &&
    op.parts.every((p) => p.output?.kind === 'write' && p.output.applied)).length;
  return verdict('bank', problems, `${reads.length} reads of whole banks all summed to ` +
    `${total}; ${applied} of ${transfers.length} transfers acknowledged`);
}

export function checkLedger(history: History, ledgerKeys: ReadonlySet<string>): Verdict {
  const problems: string[] = [];
  const acknowledged = history.ops.filter((op) => op.f === 'ledger' && op.type === 'ok');
  const finals = history.ops.filter((op) => op.f === 'final-ledger' && op.type === 'ok');
  const found = new Map<string, number>();
  for (const op of finals) {
    for (const part of op.parts) {
      if (part.output?.kind === 'get' && part.output.found) {
        found.set(part.key, (found.get(part.key) ?? 0) + 1);
      }
    }
  }
  const readers = new Set(finals.map((op) => op.process)).size;
  for (const op of acknowledged) {
    const key = op.parts[0]?.key;
    if (key === undefined) continue;
    const seenBy = found.get(key) ?? 0;
    if (seenBy < readers) {
      problems.push(`${key} was acknowledged at event ${op.completedAt} by ${op.node}, but ` +
        `${readers - seenBy} of ${readers} final reads miss it`);
    }
  }
  if (readers === 0 && acknowledged.length > 0) problems.push('no final read of the ledger');
  return verdict('ledger', problems, `${acknowledged.length} acknowledged of ${ledgerKeys.size} ` +
    `ledger writes, all read back by ${readers} nodes`);
}
