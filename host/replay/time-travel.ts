/**
 * Questions about the past of a data directory: what a key held at an index (`getAt`), and
 * every entry that changed a key (`keyHistory`), answered by replaying the log through the
 * machine (replay.ts), so the answers are the node's own.
 */
import type { Entry } from '../core/raft/types.js';
import { DEFAULT_TENANT, type KvCall } from '../machine/commands.js';
import type { StateMachine } from '../machine/state-machine.js';
import type { DataDir } from './data-dir.js';
import { entryCommand } from './describe.js';
import { Replayer, type EntryOutcome } from './replay.js';

/** The read ceiling of a time-travel read: one value, at most 64 MiB (a value's own bound). */
const READ_CEILING_BYTES = 64 * 1024 * 1024;
const utf8 = new TextDecoder();

export interface KeyRef {
  readonly tenant?: string;
  readonly ns: string;
  readonly key: string;
}

/** A `get` result element (docs/http.md, "Result elements"). */
export type GetResult = Record<string, unknown> & { readonly found: boolean };

/** The key's `get` element as the machine answers it now, at its last entry's time. */
export function readKey(machine: StateMachine, ref: KeyRef): GetResult {
  const call: KvCall = { tenant: ref.tenant ?? DEFAULT_TENANT, shape: 'batch',
    ops: [{ op: 'get', ns: ref.ns, key: ref.key }], readBytesCeiling: READ_CEILING_BYTES };
  const answer = machine.read(call, machine.lastTimeMs);
  if ('invalid' in answer) throw new Error(`the machine refused the read: ${answer.invalid}`);
  const body = JSON.parse(utf8.decode(answer.body)) as { results?: GetResult[] };
  const result = body.results?.[0];
  if (result === undefined) throw new Error(`unexpected answer to a get: ${JSON.stringify(body)}`);
  return result;
}

export interface GetAt {
  readonly index: number;
  readonly timeMs: number;
  readonly tenant: string;
  readonly ns: string;
  readonly result: GetResult;
}

/** The key as the node would have answered at `index` (after applying it). */
export async function getAt(data: DataDir, index: number, ref: KeyRef,
  fromStart = false): Promise<GetAt> {
  const replayer = await Replayer.start(data, { to: index, fromStart });
  await replayer.run(() => false, () => undefined);
  const machine = replayer.machine;
  return { index: machine.appliedIndex, timeMs: machine.lastTimeMs,
    tenant: ref.tenant ?? DEFAULT_TENANT, ns: ref.ns, result: readKey(machine, ref) };
}

/** One change (or attempted change) of the key. */
export interface HistoryLine {
  readonly index: number;
  readonly time: string;
  /** put, putIfAbsent, delete, incr; `expired` when a sweep removed it; `snapshot` first. */
  readonly op: string;
  readonly applied: boolean;
  /** Why it did not apply: a write's reason, or the call's refusal (kv_precondition, ...). */
  readonly reason?: string;
  readonly version: number;
  readonly value: unknown;
}

/**
 * Every entry from the replay's start to its end that wrote (or tried to write) the key, in
 * order; when the replay starts from a snapshot, the first line is the key as it was there.
 */
export async function* keyHistory(data: DataDir, ref: KeyRef, to?: number):
  AsyncGenerator<HistoryLine> {
  const fromStart = data.firstIndex === 1;
  const replayer = await Replayer.start(data, { fromStart, ...(to === undefined ? {} : { to }) });
  const tenant = ref.tenant ?? DEFAULT_TENANT;
  let version = 0;
  if (replayer.startIndex > 0) {
    const now = readKey(replayer.machine, ref);
    version = typeof now['version'] === 'number' ? now['version'] : 0;
    yield { index: replayer.startIndex, time: new Date(replayer.machine.lastTimeMs).toISOString(),
      op: 'snapshot', applied: now.found, version, value: now.found ? now['value'] : null };
  }
  for await (const step of replayer.steps()) {
    if (step.outcome.kind === 'sweep' && step.outcome.removedKeys > 0 && version > 0) {
      const now = readKey(replayer.machine, ref);
      if (!now.found) {
        yield line(step.entry, 'expired', true, undefined, version, null);
        version = 0;
      }
      continue;
    }
    for (const change of callChanges(step.entry, step.outcome, tenant, ref)) {
      if (change.applied) version = change.op === 'delete' ? 0 : change.version;
      yield change;
    }
  }
}

function line(entry: Entry, op: string, applied: boolean, reason: string | undefined,
  version: number, value: unknown): HistoryLine {
  return { index: entry.index, time: new Date(entry.timeMs).toISOString(), op, applied,
    ...(reason === undefined ? {} : { reason }), version, value };
}

/** The writes of a call entry that name the key, each with its result element. */
function callChanges(entry: Entry, outcome: EntryOutcome, tenant: string, ref: KeyRef):
  HistoryLine[] {
  const command = entryCommand(entry);
  if (command === null || command.kind !== 'call' || command.call.tenant !== tenant) return [];
  const out: HistoryLine[] = [];
  command.call.ops.forEach((op, i) => {
    if (op.op !== 'put' && op.op !== 'delete' && op.op !== 'incr') return;
    if (op.ns !== ref.ns || op.key !== ref.key) return;
    const name = op.op === 'put' ? op.sentAs : op.op;
    out.push(resultLine(entry, outcome, name, i));
  });
  return out;
}

function resultLine(entry: Entry, outcome: EntryOutcome, op: string, i: number): HistoryLine {
  if (outcome.kind !== 'call') {
    return line(entry, op, false, outcome.kind, 0, null);
  }
  const body = (outcome.body ?? {}) as Record<string, unknown>;
  const results = Array.isArray(body['results']) ? body['results'] as Record<string, unknown>[]
    : 'op' in body ? [body] : [];
  const result = results.find((r) => r['index'] === i) ?? null;
  if (result === null) {
    const why = typeof body['reason'] === 'string' ? body['reason']
      : typeof body['error'] === 'string' ? body['error'] : `status ${outcome.status}`;
    return line(entry, op, false, why, 0, null);
  }
  const applied = result['applied'] === true;
  return line(entry, op, applied, applied ? undefined : String(result['reason']),
    Number(result['version'] ?? 0), result['value'] ?? null);
}
