/**
 * A linearizability checker for the simulator's client histories, per key, after Wing and
 * Gong, with Lowe's memoization (the algorithm Porcupine and Knossos use): search for an
 * order of the operations that respects real time and that a small sequential KV model
 * accepts, caching (set of linearized ops, model state) pairs already explored.
 *
 * An operation whose outcome is unknown (a 503 timeout, a crashed node) has its response at
 * +infinity: it may take effect at any point after its invocation, or never (it then sits
 * last, where it changes no observation). Pure: no I/O; the search is bounded by
 * `SEARCH_STEPS_MAX` and answers `inconclusive` past it rather than running on.
 *
 * Unknown operations that ask the same thing are twins: the search takes them in the order
 * they were invoked, never a later twin before an earlier one (`unknownTwins`). Any order
 * that works can be rearranged so: swapping two twins changes no state, and the earlier
 * one may go wherever the later one could. Without it, k concurrent unknown increments of a
 * counter are 2^k sets to explore, and the search gave up on the counter every exactly-once
 * client touches in about one simulator seed in a hundred.
 *
 * An unknown write whose value no operation ever shows (`unseenWrites`) is left out: it may
 * as well never have taken effect. Where the search would place it, the key holds its value
 * until the next write; an answered operation then either shows that value (a read, a
 * refusal, a delete, a cas that expected it) or is a put, whose answer does not depend on
 * what the key held; and unknown operations there either overwrite the key or may be taken
 * as never having acted. So an order without it works whenever one with it does. This holds
 * for keys without increments only (an increment shows the sum, not the value it added to).
 * Without it, a partition that left a dozen puts of a register unknown and unread made the
 * search give up on that register in a few simulator seeds in ten thousand.
 */

/**
 * What a client asked of one key. Values are JSON text; counters hold integers.
 *
 * `cas` is a put with `expect`: the client read the key at some version, saw `expect` (the
 * value's JSON text, or null for absent), and writes `value` only if it is still at that
 * version. The model compares values, which stands for comparing versions only when every
 * write of the key writes a value of its own (a test's workload makes them unique).
 * `incr` with `max` is refused (`limit`) when the result would pass it.
 */
export type KvInput =
  | { readonly kind: 'get' }
  | { readonly kind: 'put'; readonly value: string }
  | { readonly kind: 'putIfAbsent'; readonly value: string }
  | { readonly kind: 'cas'; readonly expect: string | null; readonly value: string }
  | { readonly kind: 'incr'; readonly delta: number; readonly max?: number }
  | { readonly kind: 'delete' };

/** What the client saw. `value` is the result's JSON text (`"null"` for absent). */
export type KvOutput =
  | { readonly kind: 'get'; readonly found: boolean; readonly value: string | null }
  | {
      readonly kind: 'write';
      readonly applied: boolean;
      readonly reason: string | null;
      readonly value: string;
    };

export interface HistoryOp {
  readonly key: string;
  readonly client: string;
  readonly input: KvInput;
  /** null: the outcome is unknown. */
  readonly output: KvOutput | null;
  /** Position of the invocation in the run's event order. */
  readonly call: number;
  /** Position of the response; Infinity when the outcome is unknown. */
  readonly ret: number;
}

/**
 * `ok` lists the keys whose search gave up (too many concurrent unknown outcomes): they are
 * neither proven nor refuted, and the caller reports them.
 */
export type CheckResult =
  | { readonly kind: 'ok'; readonly inconclusive: readonly string[] }
  | { readonly kind: 'violation'; readonly key: string; readonly ops: readonly HistoryOp[] };

/** Search steps per key before the checker gives up (`inconclusive`). */
export const SEARCH_STEPS_MAX = 1_000_000;
/** Operations one key's history may hold; a longer history is a bug in the caller. */
export const OPS_PER_KEY_MAX = 5_000;

/** The model: the key's JSON value, or null when absent. */
type State = string | null;

/** The sequential KV model: the next state, or undefined when `output` is impossible. */
export function step(state: State, input: KvInput, output: KvOutput | null):
  State | undefined {
  const next = effect(state, input);
  if (output === null) return next;
  switch (input.kind) {
    case 'get':
      if (output.kind !== 'get' || output.found !== (state !== null)) return undefined;
      return state === null || output.value === state ? state : undefined;
    case 'put':
      return isWrite(output, true, null, input.value) ? next : undefined;
    case 'putIfAbsent':
      if (state === null) return isWrite(output, true, null, input.value) ? next : undefined;
      return isWrite(output, false, 'exists', state) ? next : undefined;
    case 'cas':
      if (state !== input.expect) {
        return isWrite(output, false, casRefusal(state, input.expect), state ?? 'null') ? state
          : undefined;
      }
      return isWrite(output, true, null, input.value) ? next : undefined;
    case 'incr':
      if (incrPassesMax(state, input)) {
        return isWrite(output, false, 'limit', state ?? '0') ? state : undefined;
      }
      return isWrite(output, true, null, next ?? '') ? next : undefined;
    case 'delete':
      if (state === null) return isWrite(output, false, 'absent', 'null') ? next : undefined;
      return isWrite(output, true, null, state) ? next : undefined;
  }
}

function isWrite(output: KvOutput, applied: boolean, reason: string | null, value: string):
  boolean {
  return output.kind === 'write' && output.applied === applied && output.reason === reason &&
    output.value === value;
}

/** The reason the machine gives a refused put with `expect` (ops.ts, refusedByExpect). */
function casRefusal(state: State, expect: string | null): string {
  if (expect === null) return 'exists';
  return state === null ? 'absent' : 'version';
}

function incrPassesMax(state: State, input: { delta: number; max?: number }): boolean {
  return input.max !== undefined && (state === null ? 0 : Number(state)) + input.delta > input.max;
}

function effect(state: State, input: KvInput): State {
  switch (input.kind) {
    case 'get': return state;
    case 'put': return input.value;
    case 'putIfAbsent': return state ?? input.value;
    case 'cas': return state === input.expect ? input.value : state;
    case 'incr':
      // A refusal leaves the key as it was (absent stays absent).
      return incrPassesMax(state, input) ? state
        : String((state === null ? 0 : Number(state)) + input.delta);
    case 'delete': return null;
  }
}

interface Node {
  readonly op: number;
  readonly isCall: boolean;
  /** For a call: its return node. */
  match: Node | null;
  prev: Node | null;
  next: Node | null;
}

function buildList(ops: readonly HistoryOp[]): Node {
  const events: Array<{ time: number; op: number; isCall: boolean }> = [];
  ops.forEach((op, i) => {
    events.push({ time: op.call, op: i, isCall: true });
    events.push({ time: op.ret, op: i, isCall: false });
  });
  // Calls before returns at equal times is the permissive choice; the runner's times are
  // distinct anyway, except the shared +infinity of unknown outcomes.
  events.sort((a, b) => a.time - b.time || (a.isCall === b.isCall ? a.op - b.op :
    a.isCall ? -1 : 1));
  const head: Node = { op: -1, isCall: false, match: null, prev: null, next: null };
  const calls = new Map<number, Node>();
  let tail = head;
  for (const event of events) {
    const node: Node = { op: event.op, isCall: event.isCall, match: null, prev: tail, next: null };
    tail.next = node;
    tail = node;
    if (event.isCall) calls.set(event.op, node);
    else (calls.get(event.op) as Node).match = node;
  }
  return head;
}

function lift(call: Node): void {
  const ret = call.match as Node;
  (call.prev as Node).next = call.next;
  if (call.next !== null) call.next.prev = call.prev;
  (ret.prev as Node).next = ret.next;
  if (ret.next !== null) ret.next.prev = ret.prev;
}

function unlift(call: Node): void {
  const ret = call.match as Node;
  (ret.prev as Node).next = ret;
  if (ret.next !== null) ret.next.prev = ret;
  (call.prev as Node).next = call;
  if (call.next !== null) call.next.prev = call;
}

/**
 * For each operation whose outcome is unknown, its nearest twin invoked before it (the same
 * input, its outcome unknown too), in the list's order of calls; -1 for none.
 */
function unknownTwins(ops: readonly HistoryOp[]): Int32Array {
  const twins = new Int32Array(ops.length).fill(-1);
  const lastByInput = new Map<string, number>();
  const byCall = ops.map((_, i) => i).sort((a, b) =>
    (ops[a] as HistoryOp).call - (ops[b] as HistoryOp).call || a - b);
  for (const i of byCall) {
    const op = ops[i] as HistoryOp;
    if (op.output !== null) continue;
    const input = JSON.stringify(op.input);
    twins[i] = lastByInput.get(input) ?? -1;
    lastByInput.set(input, i);
  }
  return twins;
}

/**
 * The unknown writes (put, putIfAbsent, cas) whose value no operation shows: no answer
 * carries it and no cas expects it. None on a key that is ever incremented.
 */
export function unseenWrites(ops: readonly HistoryOp[]): Set<HistoryOp> {
  const unseen = new Set<HistoryOp>();
  if (ops.some((op) => op.input.kind === 'incr')) return unseen;
  const shown = new Set<string>();
  for (const op of ops) {
    if (op.output !== null && op.output.value !== null) shown.add(op.output.value);
    if (op.input.kind === 'cas' && op.input.expect !== null) shown.add(op.input.expect);
  }
  for (const op of ops) {
    const input = op.input;
    if (op.output !== null) continue;
    if ((input.kind === 'put' || input.kind === 'putIfAbsent' || input.kind === 'cas') &&
      !shown.has(input.value)) unseen.add(op);
  }
  return unseen;
}

/**
 * Checks one key's history from the initial state (absent). `keepUnseen` searches with the
 * unknown writes nobody saw as well (the tests compare the two).
 */
export function checkKey(history: readonly HistoryOp[], initial: State = null,
  keepUnseen = false): 'ok' | 'violation' | number {
  if (history.length > OPS_PER_KEY_MAX) {
    throw new Error(`history of ${history.length} ops on one key`);
  }
  const unseen = keepUnseen ? new Set<HistoryOp>() : unseenWrites(history);
  const ops = unseen.size === 0 ? history : history.filter((op) => !unseen.has(op));
  const head = buildList(ops);
  const twins = unknownTwins(ops);
  const linearized = new Uint32Array(Math.ceil(ops.length / 32) + 1);
  const seen = new Set<string>();
  const stack: Array<{ node: Node; state: State }> = [];
  let state = initial;
  let entry = head.next;
  for (let steps = 0; head.next !== null; steps++) {
    if (steps >= SEARCH_STEPS_MAX) return steps;
    if (entry === null) return 'violation'; // unreachable: a return always ends the list
    if (entry.isCall) {
      const twin = twins[entry.op] as number;
      if (twin >= 0 && (linearized[twin >> 5]! & (1 << (twin & 31))) === 0) {
        entry = entry.next;
        continue;
      }
      const op = ops[entry.op] as HistoryOp;
      const next = step(state, op.input, op.output);
      if (next !== undefined) {
        linearized[entry.op >> 5]! |= 1 << (entry.op & 31);
        const key = `${linearized.join(',')}|${next === null ? '\u0000' : next}`;
        if (!seen.has(key)) {
          seen.add(key);
          stack.push({ node: entry, state });
          state = next;
          lift(entry);
          entry = head.next;
          continue;
        }
        linearized[entry.op >> 5]! &= ~(1 << (entry.op & 31));
      }
      entry = entry.next;
      continue;
    }
    // A return whose call is not linearized yet: undo the last choice.
    const top = stack.pop();
    if (top === undefined) return 'violation';
    linearized[top.node.op >> 5]! &= ~(1 << (top.node.op & 31));
    state = top.state;
    unlift(top.node);
    entry = top.node.next;
  }
  return 'ok';
}

/** Checks every key's history independently (linearizability is local). */
export function checkHistory(ops: readonly HistoryOp[]): CheckResult {
  const byKey = new Map<string, HistoryOp[]>();
  for (const op of ops) {
    const list = byKey.get(op.key);
    if (list === undefined) byKey.set(op.key, [op]);
    else list.push(op);
  }
  const inconclusive: string[] = [];
  for (const [key, list] of [...byKey].sort((a, b) => (a[0] < b[0] ? -1 : 1))) {
    const verdict = checkKey(list);
    if (verdict === 'violation') return { kind: 'violation', key, ops: list };
    if (typeof verdict === 'number') inconclusive.push(key);
  }
  return { kind: 'ok', inconclusive };
}

/** One line per op, for a failure report. */
export function describeOp(op: HistoryOp): string {
  const input = op.input.kind === 'put' || op.input.kind === 'putIfAbsent'
    ? `${op.input.kind}(${op.input.value})`
    : op.input.kind === 'cas' ? `cas(${op.input.expect ?? 'absent'} -> ${op.input.value})`
      : op.input.kind === 'incr' ? `incr(${op.input.delta}${op.input.max === undefined ? ''
        : ` max ${op.input.max}`})` : op.input.kind;
  const out = op.output === null ? 'unknown'
    : op.output.kind === 'get' ? (op.output.found ? `found ${op.output.value}` : 'missing')
      : `${op.output.applied ? 'applied' : `refused ${op.output.reason}`} ${op.output.value}`;
  const ret = op.ret === Infinity ? 'inf' : String(op.ret);
  return `[${op.call}..${ret}] ${op.client} ${op.key} ${input} -> ${out}`;
}
