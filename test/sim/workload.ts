/**
 * The simulated clients' workload: which calls they make, and how a call's outcome becomes
 * per-key history for the linearizability checker and tallies for the counter and
 * putIfAbsent checks.
 *
 * Keys: `r*` registers (put, get, delete), `p*` putIfAbsent races (one winner each), `n*`
 * counters (incr by 1, get), and `ex` an exact counter bumped only together with a fresh
 * `m-*` marker by `putIfAbsent ... required: true` in the same call, retried on an unknown
 * outcome, so `ex` must end equal to the number of markers. One value in BIG_VALUE_EVERY is
 * longer than 8 KiB. Pure: no I/O, no clock.
 */
import {
  DEFAULT_TENANT, type CallOutcome, type KvCall, type KvOp, type OpResult,
} from '../../host/machine/commands.js';
import type { HistoryOp, KvInput, KvOutput } from './linearizability.js';
import type { SimRandom } from './random.js';

export const NS = 'sim';
export const REGISTER_KEYS = ['r0', 'r1', 'r2'];
export const RACE_KEYS = ['p0', 'p1', 'p2'];
export const COUNTER_KEYS = ['n0', 'n1'];
export const EXACT_KEY = 'ex';
/** Read ceiling of every simulated call (QUEEN_KV_MAX_READ_BYTES's default). */
const READ_BYTES_CEILING = 4 * 1024 * 1024;

/** One logical client operation: the call, and the per-key inputs it stands for. */
export interface PlannedCall {
  readonly call: KvCall;
  /** Per op of the call: the key and the model input (null: not checked per key). */
  readonly inputs: ReadonlyArray<{ readonly key: string; readonly input: KvInput }>;
  /** For an exact-counter call: its marker key (retried with the same marker). */
  readonly marker: string | null;
}

function forever(): { kind: 'forever' } {
  return { kind: 'forever' };
}

function callOf(ops: KvOp[]): KvCall {
  return { tenant: DEFAULT_TENANT, ops, readBytesCeiling: READ_BYTES_CEILING };
}

/** One read-only call of `get`s: a linearizable view of all the keys at one instant. */
export function getCall(keys: readonly string[]): PlannedCall {
  return {
    call: callOf(keys.map((key) => ({ op: 'get', ns: NS, key }))),
    inputs: keys.map((key) => ({ key, input: { kind: 'get' } })),
    marker: null,
  };
}

export function putCall(key: string, value: string, ifAbsent: boolean): PlannedCall {
  const op: KvOp = { op: 'put', sentAs: ifAbsent ? 'putIfAbsent' : 'put', ns: NS, key,
    valueJson: value, expiry: forever(), expect: ifAbsent ? 0 : null, required: false };
  const input: KvInput = ifAbsent ? { kind: 'putIfAbsent', value } : { kind: 'put', value };
  return { call: callOf([op]), inputs: [{ key, input }], marker: null };
}

function incrOp(key: string): KvOp {
  return { op: 'incr', ns: NS, key, delta: '1', min: null, max: null, expiry: forever(),
    required: false };
}

/** The exact-counter call: a required marker and the increment, all or nothing. */
export function exactCall(marker: string): PlannedCall {
  const pia: KvOp = { op: 'put', sentAs: 'putIfAbsent', ns: NS, key: marker, valueJson: '1',
    expiry: forever(), expect: 0, required: true };
  return {
    call: callOf([pia, incrOp(EXACT_KEY)]),
    inputs: [{ key: marker, input: { kind: 'putIfAbsent', value: '1' } },
      { key: EXACT_KEY, input: { kind: 'incr', delta: 1 } }],
    marker,
  };
}

/**
 * Every BIG_VALUE_EVERY-th value is padded past 8 KiB, so its log entry is one a follower
 * keeps in a buffer of its own rather than in its log's shared slabs. Chosen by the unique
 * number, not by a draw, so the random stream (and every recorded seed) stays as it was.
 */
export const BIG_VALUE_EVERY = 25;
const BIG_VALUE_PAD = 'x'.repeat(9000);

/** Markers one run creates at most, so the final read of all of them fits one call. */
export const MARKERS_MAX = 200;

/**
 * Draws the next call of `client`; `unique` makes every written value distinct. With
 * `allowExact` false (the marker budget is spent) it draws no exact-counter call.
 */
export function nextCall(rng: SimRandom, client: string, unique: number,
  allowExact: boolean): PlannedCall {
  const value = unique % BIG_VALUE_EVERY === 0 ? `"${client}-${unique}-${BIG_VALUE_PAD}"`
    : `"${client}-${unique}"`;
  const roll = rng.below(100);
  if (roll < 40) {
    const key = rng.pick(REGISTER_KEYS);
    const kind = rng.below(10);
    if (kind < 4) return putCall(key, value, false);
    if (kind < 9) return getCall([key]);
    return {
      call: callOf([{ op: 'delete', ns: NS, key, expect: null, required: false }]),
      inputs: [{ key, input: { kind: 'delete' } }], marker: null,
    };
  }
  if (roll < 60) {
    const key = rng.pick(RACE_KEYS);
    return rng.chance(0.6) ? putCall(key, value, true) : getCall([key]);
  }
  if (roll < 85 || !allowExact) {
    const key = rng.pick(COUNTER_KEYS);
    if (rng.chance(0.3)) return getCall([key]);
    return { call: callOf([incrOp(key)]), inputs: [{ key, input: { kind: 'incr', delta: 1 } }],
      marker: null };
  }
  return exactCall(`m-${client}-${unique}`);
}

function outputOf(result: OpResult): KvOutput | string {
  if (result.kind === 'get') {
    return result.found ? { kind: 'get', found: true, value: result.valueJson }
      : { kind: 'get', found: false, value: null };
  }
  if (result.kind === 'write') {
    return { kind: 'write', applied: result.applied, reason: result.reason,
      value: result.valueJson };
  }
  return `unexpected ${result.kind} result`;
}

/**
 * Turns one call's outcome into history ops. `outcome` null: unknown. Returns an error text
 * for an outcome the simulator never provokes (invalid, paused, a wrong result shape).
 */
export function historyOf(planned: PlannedCall, client: string, outcome: CallOutcome | null,
  call: number, ret: number): HistoryOp[] | string {
  const ops: HistoryOp[] = [];
  if (outcome === null) {
    for (const { key, input } of planned.inputs) {
      ops.push({ key, client, input, output: null, call, ret: Infinity });
    }
    return ops;
  }
  if (outcome.status === 'precondition') {
    // Only the exact call has a required op: its marker exists; nothing was applied.
    const first = planned.inputs[0];
    if (planned.marker === null || first === undefined || outcome.failedIndex !== 0) {
      return `unexpected precondition outcome ${JSON.stringify(outcome)}`;
    }
    return [{ key: first.key, client, input: first.input, call, ret,
      output: { kind: 'write', applied: false, reason: outcome.kvReason,
        value: outcome.valueJson } }];
  }
  if (outcome.status !== 'ok') return `unexpected outcome ${JSON.stringify(outcome)}`;
  if (outcome.results.length !== planned.inputs.length) return 'results not index-aligned';
  for (const [i, { key, input }] of planned.inputs.entries()) {
    const output = outputOf(outcome.results[i] as OpResult);
    if (typeof output === 'string') return output;
    ops.push({ key, client, input, output, call, ret });
  }
  return ops;
}
