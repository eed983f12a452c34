/**
 * The state machine in-process, for test harnesses (`import { KvMachine } from
 * 'hivekv/machine'`): the same WebAssembly module every node runs, fed the same way a
 * single node feeds it (the request parsed and validated by the machine, a call with writes
 * applied as the next log entry, a read answered at the current time), with the clock in
 * the caller's hands. Nothing here reads the wall clock, so a harness is deterministic: the
 * same calls at the same times give the same answers and the same digest as a node.
 */
import { encodeCommand } from './codec.js';
import { DEFAULT_TENANT, type QuotaSettings } from './commands.js';
import type { RequestLimits } from './request.js';
import { restoreFromBytes, snapshotToBytes } from './snapshot-bytes.js';
import { StateMachine } from './state-machine.js';

export { DEFAULT_TENANT };
export type { QuotaSettings, RequestLimits };
const utf8 = new TextEncoder();
const utf8Decoder = new TextDecoder();

export interface KvMachineOptions {
  /** The clock's start, in ms since the epoch (default 0). */
  readonly nowMs?: number;
  /** The tenant calls run as unless a call names one. */
  readonly tenant?: string;
  /** The node's QUEEN_KV_* limits (default: the machine's defaults). */
  readonly limits?: RequestLimits;
  /** QUEEN_KV_REQUIRE_GRANT: a write needs an enabled quota row for its tenant. */
  readonly requireGrant?: boolean;
}

/** What a call answered: the HTTP status and JSON body a node would have sent. */
export interface KvAnswer {
  readonly status: number;
  readonly body: unknown;
  /** The log index the call applied at, or null for a read (or a refused call). */
  readonly index: number | null;
}

export class KvMachine {
  private nowMs: number;
  private index: number;

  private constructor(readonly machine: StateMachine,
    private readonly options: KvMachineOptions) {
    this.nowMs = options.nowMs ?? 0;
    this.index = machine.appliedIndex;
    if (options.limits !== undefined) machine.setRequestLimits(options.limits);
  }

  /** An empty state at index 0. */
  static create(options: KvMachineOptions = {}): KvMachine {
    return new KvMachine(StateMachine.create(), options);
  }

  /** A state restored from `snapshot()` bytes; the clock starts at its last entry's time. */
  static restore(bytes: Uint8Array, options: KvMachineOptions = {}): KvMachine {
    const machine = StateMachine.create();
    restoreFromBytes(machine, bytes);
    return new KvMachine(machine, { ...options, nowMs: options.nowMs ?? machine.lastTimeMs });
  }

  /** The clock, in ms since the epoch. */
  get now(): number { return this.nowMs; }
  /** Sets the clock; it may go back, but entries never apply before the last entry's time. */
  setTime(ms: number): void {
    if (!Number.isSafeInteger(ms) || ms < 0) throw new RangeError(`bad time ${ms}`);
    this.nowMs = ms;
  }
  /** Moves the clock forward by `ms`. */
  advance(ms: number): void { this.setTime(this.nowMs + ms); }

  get appliedIndex(): number { return this.machine.appliedIndex; }
  /** The state digest (16 hex digits), as /health reports it. O(1). */
  digest(): string { return this.machine.digest(); }

  /** `POST /api/v1/kv` with these operations (docs/http.md, "Operations"). */
  kv(operations: readonly unknown[], tenant?: string): KvAnswer {
    return this.request('batch', { operations }, tenant);
  }

  /** `POST /api/v1/transaction` with this body (docs/http.md, "The transaction rider"). */
  transaction(body: unknown, transactionId: string, tenant?: string): KvAnswer {
    return this.request('transaction', body, tenant, transactionId);
  }

  private request(route: 'batch' | 'transaction', body: unknown, tenant?: string,
    transactionId?: string): KvAnswer {
    const parsed = this.machine.parseRequest({
      route, body: utf8.encode(JSON.stringify(body)),
      tenant: tenant ?? this.options.tenant ?? DEFAULT_TENANT,
      requireGrant: this.options.requireGrant ?? false,
      ...(transactionId === undefined ? {} : { transactionId }),
    });
    if (parsed.kind === 'refused') {
      return { status: parsed.status, index: null,
        body: { error: parsed.reason, detail: parsed.detail } };
    }
    if (!parsed.hasWrites) {
      const got: { answer: KvAnswer | null } = { answer: null };
      this.machine.readCommandInto(parsed.command, this.nowMs, {
        answered: (header, bytes) => {
          got.answer = { status: header.status, body: jsonOf(bytes), index: null };
        },
        refused: (detail) => { throw new Error(`the machine refused a read: ${detail}`); },
      });
      if (got.answer === null) throw new Error('the machine did not answer the read');
      return got.answer;
    }
    return this.applyCommand(parsed.command);
  }

  /** Sweeps up to `maxKeys` keys expired at the current time, as a log entry; how many. */
  sweep(maxKeys = 1000): number {
    const out = this.applyRaw(encodeCommand({ kind: 'sweep', maxKeys }));
    return out.kind === 'sweep' ? out.removedKeys : 0;
  }

  /** Sets a tenant's quota row, as a log entry. */
  setQuota(tenant: string, quota: QuotaSettings): void {
    this.applyRaw(encodeCommand({ kind: 'setQuota', tenant, quota }));
  }

  /** Pauses or resumes writes, as a log entry. */
  setPaused(paused: boolean): void {
    this.applyRaw(encodeCommand({ kind: 'setPaused', paused }));
  }

  /** The whole state as snapshot bytes (docs/codec.md, "Snapshot"). */
  snapshot(): Uint8Array {
    return snapshotToBytes(this.machine);
  }

  private applyCommand(command: Uint8Array): KvAnswer {
    const out = this.applyRaw(command);
    if (out.kind !== 'call' || out.answer === null) {
      throw new Error(`the machine did not answer the call: ${JSON.stringify(out)}`);
    }
    return { status: out.answer.status, body: jsonOf(out.answer.body), index: this.index };
  }

  private applyRaw(command: Uint8Array): ReturnType<StateMachine['apply']> {
    this.index = this.machine.appliedIndex + 1;
    const out = this.machine.apply(this.index, this.nowMs, command);
    if (out.kind === 'invalid') throw new Error(`the machine refused a command: ${out.detail}`);
    return out;
  }
}

function jsonOf(bytes: Uint8Array): unknown {
  const text = utf8Decoder.decode(bytes);
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
