/**
 * The fault run's clients. Each client is bound to one node and issues one operation at a
 * time, drawn from its own seeded generator, against keys of the current generation (keys
 * change every GENERATION_MS, so each key's history stays small enough to check):
 *
 * - registers: read, write (a value of its own), cas (a put with `expect`, at the version
 *   this client last read);
 * - counters: incr by one with `max: COUNTER_MAX`, read;
 * - claims: putIfAbsent of a value of its own, read (one winner per key);
 * - a bank: transfers between two accounts, each a call of two puts with `expect` and
 *   `required: true` at the versions just read, and reads of every account in one call (the
 *   total never changes);
 * - a ledger: keys written once each, all read back after healing (no acknowledged write
 *   may be missing);
 * - bulk writes: one call of BULK_PUTS puts, a log entry of more than 8 KiB, which a
 *   follower keeps in a buffer of its own (not in the log's shared slabs). No checker reads
 *   them back: the replicas' checkpoints and the replay's digest compare them.
 *
 * Every value a client writes is its own (`<client>-<n>`), so a value names its write.
 */
import type { KvInput, KvOutput } from '../sim/linearizability.js';
import type { History, KeyPart, RecordedOp } from './history.js';

export const NAMESPACE = 'jepsen';
export const GENERATION_MS = 15_000;
export const REGISTERS = 3;
export const COUNTERS = 2;
export const COUNTER_MAX = 30;
export const CLAIMS = 3;
export const ACCOUNTS = 4;
export const ACCOUNT_OPENING_BALANCE = 100;
export const TRANSFER_MAX = 7;
/** Puts in one bulk call, over a fixed set of keys: about 14 KB of log entry. */
export const BULK_PUTS = 64;
const BULK_VALUE_BYTES = 160;
/** A client waits this long for an answer; past it the outcome is unknown. */
export const CLIENT_TIMEOUT_MS = 4000;
/** After a refused connection a client waits this long before its next operation. */
const BACKOFF_MS = 100;

/** What came back from one HTTP call. */
export type CallResult =
  | { readonly kind: 'answer'; readonly status: number; readonly body: unknown }
  /** Nothing reached the node (the connection was refused): certainly no effect. */
  | { readonly kind: 'refused'; readonly error: string }
  /** A timeout or a broken connection: the call may or may not have taken effect. */
  | { readonly kind: 'unknown'; readonly error: string };

/** POSTs `{operations}` to `/api/v1/kv`. Never throws. */
export async function kvCall(url: string, operations: readonly unknown[]): Promise<CallResult> {
  try {
    const response = await fetch(`${url}/api/v1/kv`, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ operations }), signal: AbortSignal.timeout(CLIENT_TIMEOUT_MS),
    });
    const text = await response.text();
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {
      // not JSON: keep the text
    }
    return { kind: 'answer', status: response.status, body };
  } catch (error) {
    const cause = (error as { cause?: { code?: string } }).cause;
    if (cause?.code === 'ECONNREFUSED') return { kind: 'refused', error: 'ECONNREFUSED' };
    return { kind: 'unknown', error: cause?.code ?? (error as Error).name };
  }
}

// ---------------------------------------------------------------- results as model outputs

interface WriteResult {
  readonly applied: boolean;
  readonly reason?: string;
  readonly value?: unknown;
  readonly version?: number;
}

interface GetResult {
  readonly found: boolean;
  readonly value?: unknown;
  readonly version?: number;
}

function text(value: unknown): string {
  return value === undefined ? 'null' : JSON.stringify(value);
}

function writeOutput(result: WriteResult): KvOutput {
  return { kind: 'write', applied: result.applied, reason: result.applied ? null
    : (result.reason ?? null), value: text(result.value) };
}

function getOutput(result: GetResult): KvOutput {
  return { kind: 'get', found: result.found, value: result.found ? text(result.value) : null };
}

/**
 * An answer that refuses a write before the log: a 4xx (a 429 included), or a 503 with any
 * reason but `timeout`, the one whose outcome is unknown (`kv_disabled`, `no_leader`,
 * `shutting_down`, ...).
 */
function refusedBeforeLog(status: number, body: unknown): boolean {
  if (status >= 400 && status < 500) return true;
  if (status !== 503 || typeof body !== 'object' || body === null) return false;
  const { error, reason } = body as { error?: unknown; reason?: unknown };
  return error === 'kv_disabled' || (error === 'kv_unavailable' && typeof reason === 'string' &&
    reason !== 'timeout');
}

function results(body: unknown): unknown[] | null {
  const list = (body as { results?: unknown })?.results;
  return Array.isArray(list) ? list : null;
}

// ---------------------------------------------------------------- keys

export function registerKey(generation: number, i: number): string {
  return `reg-${generation}-${i}`;
}
export function counterKey(generation: number, i: number): string {
  return `ctr-${generation}-${i}`;
}
export function claimKey(generation: number, i: number): string {
  return `claim-${generation}-${i}`;
}
export function accountKey(generation: number, i: number): string {
  return `acct-${generation}-${i}`;
}

export interface ClientContext {
  readonly history: History;
  readonly startMs: number;
  readonly random: () => number;
  /** Every ledger key a client wrote (acknowledged or not), for the final read. */
  readonly ledgerKeys: Set<string>;
  /** Bank generations a client opened (or tried to). */
  readonly banks: Set<number>;
}

/** What a client remembers between its operations: the last version it read of each key. */
interface Seen {
  readonly version: number;
  readonly value: string | null;
}

export class Client {
  private written = 0;
  private readonly seen = new Map<string, Seen>();
  private readonly opened = new Set<number>();

  constructor(readonly name: string, private readonly node: { id: string; url: string },
    private readonly context: ClientContext) {}

  /** Runs operations until `untilMs` (wall clock) or `stop()` says so. */
  async run(untilMs: number, stopped: () => boolean): Promise<void> {
    while (Date.now() < untilMs && !stopped() && !this.context.history.full) {
      const result = await this.step();
      if (result === 'refused') await new Promise((resolve) => setTimeout(resolve, BACKOFF_MS));
    }
  }

  private generation(): number {
    return Math.floor((Date.now() - this.context.startMs) / GENERATION_MS);
  }

  private pick(n: number): number {
    return Math.floor(this.context.random() * n);
  }

  private uniqueValue(): string {
    return `${this.name}-${++this.written}`;
  }

  /** One operation, chosen by weight. */
  private async step(): Promise<'done' | 'refused'> {
    const g = this.generation();
    const roll = this.context.random();
    if (roll < 0.14) return this.read(registerKey(g, this.pick(REGISTERS)), 'read');
    if (roll < 0.24) return this.write(registerKey(g, this.pick(REGISTERS)));
    if (roll < 0.36) return this.cas(registerKey(g, this.pick(REGISTERS)));
    if (roll < 0.48) return this.incr(counterKey(g, this.pick(COUNTERS)));
    if (roll < 0.53) return this.read(counterKey(g, this.pick(COUNTERS)), 'read-counter');
    if (roll < 0.61) return this.claim(claimKey(g, this.pick(CLAIMS)));
    if (roll < 0.64) return this.read(claimKey(g, this.pick(CLAIMS)), 'read-claim');
    if (roll < 0.80) return this.transfer(g);
    if (roll < 0.88) return this.balances(g);
    if (roll < 0.985) return this.ledger();
    return this.bulk();
  }

  /**
   * Sends one call and records it: `parts` turns a 200's results into per-key parts, and
   * `unknownParts` says what the call meant when its outcome is unknown.
   */
  private async record(f: string, operations: readonly unknown[], isWrite: boolean,
    parts: (results: unknown[], body: unknown) => KeyPart[] | null,
    unknownParts: KeyPart[]): Promise<{ result: CallResult; op: RecordedOp }> {
    const op = this.context.history.invoke(this.name, this.node.id, f, operations);
    const result = await kvCall(this.node.url, operations);
    const response = result.kind === 'answer' ? { status: result.status, body: result.body }
      : { error: result.error };
    if (result.kind === 'answer' && result.status === 200) {
      const list = results(result.body) ?? [];
      const decoded = parts(list, result.body);
      if (decoded !== null) {
        this.context.history.complete(op, 'ok', decoded, response);
        return { result, op };
      }
    }
    // A read has no effect, so any other answer is a plain failure; so is a write that
    // never reached the node, or one refused before the log (a 4xx, a 429, a 503 but
    // `timeout`: docs/http.md). Were one applied all the same, the checkers would find it.
    const definite = !isWrite || result.kind === 'refused' ||
      (result.kind === 'answer' && refusedBeforeLog(result.status, result.body));
    this.context.history.complete(op, definite ? 'fail' : 'info', unknownParts, response);
    return { result, op };
  }

  private done(result: CallResult): 'done' | 'refused' {
    return result.kind === 'refused' ? 'refused' : 'done';
  }

  private async read(key: string, f: string): Promise<'done' | 'refused'> {
    const input: KvInput = { kind: 'get' };
    const { result } = await this.record(f, [{ op: 'get', ns: NAMESPACE, key }], false,
      (list) => {
        const got = list[0] as GetResult | undefined;
        if (got === undefined) return null;
        this.seen.set(key, { version: got.found ? (got.version ?? 0) : 0,
          value: got.found ? text(got.value) : null });
        return [{ key, input, output: getOutput(got) }];
      }, []);
    return this.done(result);
  }

  private async write(key: string): Promise<'done' | 'refused'> {
    const value = this.uniqueValue();
    const input: KvInput = { kind: 'put', value: text(value) };
    const { result } = await this.record('write', [{ op: 'put', ns: NAMESPACE, key, value,
      forever: true }], true, (list) => {
      const put = list[0] as WriteResult | undefined;
      return put === undefined ? null : [{ key, input, output: writeOutput(put) }];
    }, [{ key, input, output: null }]);
    return this.done(result);
  }

  /** A put at the version this client last read of the key; a read first if it has none. */
  private async cas(key: string): Promise<'done' | 'refused'> {
    const seen = this.seen.get(key);
    if (seen === undefined) return this.read(key, 'read');
    const value = this.uniqueValue();
    const input: KvInput = { kind: 'cas', expect: seen.value, value: text(value) };
    const { result } = await this.record('cas', [{ op: 'put', ns: NAMESPACE, key, value,
      forever: true, expect: seen.version }], true, (list) => {
      const put = list[0] as WriteResult | undefined;
      if (put === undefined) return null;
      if (put.applied) this.seen.set(key, { version: put.version ?? 0, value: text(value) });
      else this.seen.delete(key);
      return [{ key, input, output: writeOutput(put) }];
    }, [{ key, input, output: null }]);
    if (result.kind !== 'answer') this.seen.delete(key);
    return this.done(result);
  }

  private async incr(key: string): Promise<'done' | 'refused'> {
    const input: KvInput = { kind: 'incr', delta: 1, max: COUNTER_MAX };
    const { result } = await this.record('incr', [{ op: 'incr', ns: NAMESPACE, key, delta: 1,
      max: COUNTER_MAX, forever: true }], true, (list) => {
      const out = list[0] as WriteResult | undefined;
      return out === undefined ? null : [{ key, input, output: writeOutput(out) }];
    }, [{ key, input, output: null }]);
    return this.done(result);
  }

  private async claim(key: string): Promise<'done' | 'refused'> {
    const value = this.uniqueValue();
    const input: KvInput = { kind: 'putIfAbsent', value: text(value) };
    const { result } = await this.record('claim', [{ op: 'putIfAbsent', ns: NAMESPACE, key,
      value, forever: true }], true, (list) => {
      const out = list[0] as WriteResult | undefined;
      return out === undefined ? null : [{ key, input, output: writeOutput(out) }];
    }, [{ key, input, output: null }]);
    return this.done(result);
  }

  private async ledger(): Promise<'done' | 'refused'> {
    const key = `led-${this.name}-${++this.written}`;
    this.context.ledgerKeys.add(key);
    const input: KvInput = { kind: 'put', value: text(key) };
    const { result } = await this.record('ledger', [{ op: 'put', ns: NAMESPACE, key,
      value: key, forever: true }], true, (list) => {
      const out = list[0] as WriteResult | undefined;
      return out === undefined ? null : [{ key, input, output: writeOutput(out) }];
    }, [{ key, input, output: null }]);
    return this.done(result);
  }

  /** BULK_PUTS puts in one call, over keys every client shares; checked by the digests. */
  private async bulk(): Promise<'done' | 'refused'> {
    const value = this.uniqueValue().padEnd(BULK_VALUE_BYTES, '.');
    const operations = Array.from({ length: BULK_PUTS }, (_, i) => ({ op: 'put',
      ns: NAMESPACE, key: `bulk-${i}`, value, forever: true }));
    const { result } = await this.record('bulk', operations, true, () => [], []);
    return this.done(result);
  }

  // ---------------------------------------------------------------- the bank

  /** Opens generation g's bank once per client: putIfAbsent of every account, one call. */
  private async openBank(g: number): Promise<'done' | 'refused'> {
    this.opened.add(g);
    this.context.banks.add(g);
    const keys = Array.from({ length: ACCOUNTS }, (_, i) => accountKey(g, i));
    const opening = { b: ACCOUNT_OPENING_BALANCE, w: `open-${g}` };
    const input: KvInput = { kind: 'putIfAbsent', value: text(opening) };
    const inputs = keys.map((key) => ({ key, input }));
    const { result } = await this.record('open', keys.map((key) => ({ op: 'putIfAbsent',
      ns: NAMESPACE, key, value: opening, forever: true })), true, (list) => {
      if (list.length !== keys.length) return null;
      return inputs.map((part, i) => ({ ...part, output: writeOutput(list[i] as WriteResult) }));
    }, inputs.map((part) => ({ ...part, output: null })));
    return this.done(result);
  }

  /** Reads every account of generation g in one call (the bank checker sums them). */
  private async balances(g: number): Promise<'done' | 'refused'> {
    if (!this.opened.has(g)) return this.openBank(g);
    const keys = Array.from({ length: ACCOUNTS }, (_, i) => accountKey(g, i));
    const { result } = await this.readAccounts('balance', keys);
    return this.done(result);
  }

  private async readAccounts(f: string, keys: readonly string[]):
    Promise<{ result: CallResult; op: RecordedOp }> {
    return this.record(f, keys.map((key) => ({ op: 'get', ns: NAMESPACE, key })), false,
      (list) => {
        if (list.length !== keys.length) return null;
        return keys.map((key, i) => {
          const got = list[i] as GetResult;
          this.seen.set(key, { version: got.found ? (got.version ?? 0) : 0,
            value: got.found ? text(got.value) : null });
          return { key, input: { kind: 'get' } as KvInput, output: getOutput(got) };
        });
      }, []);
  }

  /**
   * Reads two accounts, then moves up to TRANSFER_MAX from one to the other in one call of
   * two puts with `expect` and `required: true`: both apply or neither does.
   */
  private async transfer(g: number): Promise<'done' | 'refused'> {
    if (!this.opened.has(g)) return this.openBank(g);
    const from = this.pick(ACCOUNTS);
    const to = (from + 1 + this.pick(ACCOUNTS - 1)) % ACCOUNTS;
    const keys = [accountKey(g, from), accountKey(g, to)];
    const read = await this.readAccounts('transfer-read', keys);
    if (read.op.type !== 'ok') return this.done(read.result);
    const [a, b] = keys.map((key) => this.seen.get(key));
    if (a?.value === null || b?.value === null || a === undefined || b === undefined) {
      return 'done';
    }
    const balanceA = (JSON.parse(a.value) as { b: number }).b;
    const balanceB = (JSON.parse(b.value) as { b: number }).b;
    const amount = Math.min(balanceA, 1 + this.pick(TRANSFER_MAX));
    if (amount <= 0) return 'done';
    const tag = this.uniqueValue();
    const values = [{ b: balanceA - amount, w: tag }, { b: balanceB + amount, w: tag }];
    const seen = [a, b];
    const inputs: KeyPart[] = keys.map((key, i) => ({ key, output: null,
      input: { kind: 'cas', expect: seen[i]!.value, value: text(values[i]) } }));
    const { result } = await this.record('transfer', keys.map((key, i) => ({ op: 'put',
      ns: NAMESPACE, key, value: values[i], forever: true, expect: seen[i]!.version,
      required: true })), true, (list, body) => transferParts(inputs, list, body), inputs);
    for (const key of keys) this.seen.delete(key);
    return this.done(result);
  }
}

/**
 * A transfer's per-key parts: both applied; or, when a `required` precondition lost, only
 * the op that failed, refused with what the node reported (the other had no effect).
 */
function transferParts(inputs: KeyPart[], list: unknown[], body: unknown): KeyPart[] | null {
  const failed = body as { ok?: boolean; reason?: string; failedIndex?: number;
    kvReason?: string; value?: unknown };
  if (failed.ok === false && failed.reason === 'kv_precondition') {
    const part = inputs[failed.failedIndex ?? -1];
    if (part === undefined) return null;
    return [{ ...part, output: { kind: 'write', applied: false, reason: failed.kvReason ?? null,
      value: text(failed.value) } }];
  }
  if (list.length !== inputs.length) return null;
  return inputs.map((part, i) => ({ ...part, output: writeOutput(list[i] as WriteResult) }));
}
