/**
 * TEST ONLY: a small in-memory `KvService` for the HTTP socket tests. It implements enough
 * real semantics (versions, expect, required, expiry by a settable clock, reads of its own
 * writes) that routing and rendering are exercised against honest answers; the WebAssembly
 * machine is the real implementation and is tested on its own.
 */
import type {
  CallOutcome, KvCall, KvOp, KvReason, OpResult, QuotaSettings, Row,
} from '../../host/machine/commands.js';
import type { NodeHealth, QuotaView, ServiceResult, Unavailable } from '../../host/node/service.js';
import type { CallSink, KvService, SubmittedCall } from '../../host/node/service.js';
import { decodeCommand } from '../../host/machine/command-decode.js';
import { encodeCommand } from '../../host/machine/codec.js';
import { isWriteOp } from '../../host/machine/commands.js';
import type { ParseOutcome, RequestFrame } from '../../host/machine/request.js';
import { loadConfig, type KvLimits } from '../../host/node/config.js';
import { isKvError, type KvError } from '../../host/http/errors.js';
import { validateTransactionBody } from '../../host/http/transaction.js';
import {
  parseJsonBody, validateKvBody, validatePathCall,
} from '../../host/http/validate.js';

import { answerFor } from '../model/answers.js';

/** The fake remembers this many recent calls, so a long fuzz or load run stays bounded. */
const CALLS_KEPT_MAX = 1000;

interface Stored {
  valueJson: string;
  version: number;
  expiresAtMs: number | null;
  updatedAtMs: number;
}

export class FakeKvService implements KvService {
  nowMs = Date.UTC(2026, 8, 22, 10, 15, 30, 123);
  paused = false;
  /** When set, every call answers this instead of running. */
  unavailable: Unavailable | null = null;
  /** When set, every call answers this outcome (what the log decided at apply time). */
  outcome: CallOutcome | null = null;
  /** When set, `execute` throws it: the server must answer 500 and stay up. */
  failure: Error | null = null;
  /** When set, `execute` waits for this before answering (drain tests). */
  gate: Promise<void> | null = null;
  readonly calls: KvCall[] = [];
  private readonly rows = new Map<string, Stored>();
  private readonly quotas = new Map<string, QuotaSettings>();
  private version = 0;

  /** `limits`: what the parser enforces (the server's config, in the tests that set one). */
  constructor(private readonly limits: KvLimits = loadConfig({}, {}).limits) {}

  /**
   * Parses with the reference validator (host/http/validate.ts), which the machine's parser
   * matches rule for rule (test/model/request-parity.test.ts).
   */
  parse(frame: RequestFrame): ParseOutcome {
    const call = this.validate(frame);
    if (isKvError(call)) return { kind: 'refused', status: call.status, reason: call.reason,
      detail: call.detail };
    return { kind: 'command', hasWrites: call.ops.some(isWriteOp), opCount: call.ops.length,
      growthBytes: 0, command: encodeCommand({ kind: 'call', call,
        flags: { requireGrant: frame.requireGrant } }) };
  }

  private validate(frame: RequestFrame): KvCall | KvError {
    const text = frame.body === null ? undefined : new TextDecoder().decode(frame.body);
    if (frame.route === 'batch') {
      return validateKvBody(parseJsonBody(text ?? ''), frame.tenant, this.limits);
    }
    if (frame.route === 'path') {
      const target = { rawNs: frame.rawNs ?? '', rawKey: frame.rawKey ?? '',
        query: frame.hasQuery === true ? '' : undefined };
      return validatePathCall(frame.method ?? 'GET', target,
        text === undefined ? undefined : parseJsonBody(text), frame.tenant, this.limits);
    }
    return validateTransactionBody(parseJsonBody(text ?? ''), frame.tenant, this.limits,
      frame.transactionId ?? '');
  }

  /**
   * Runs the call on the fake store and answers what the machine would render for it, after
   * a turn (or the gate). A set `failure` throws at once, as a bug in a service would.
   */
  submit(submitted: SubmittedCall, sink: CallSink): void {
    if (this.failure !== null) throw this.failure;
    const decoded = decodeCommand(submitted.command);
    if (!decoded.ok || decoded.command.kind !== 'call') {
      throw new Error(`fake service: not a call command: ${JSON.stringify(decoded)}`);
    }
    const call = decoded.command.call;
    void this.decide(call).then((result) => {
      if (result.kind !== 'done') {
        sink.unavailable(result);
        return;
      }
      const answer = answerFor(call, result.value);
      if ('invalid' in answer) {
        sink.refused(answer.invalid);
        return;
      }
      const body = new TextEncoder().encode(answer.body);
      sink.answered({ status: answer.status, etagVersion: answer.etagVersion,
        retryAfterSeconds: answer.retryAfterSeconds, bodyLength: body.length }, body);
    });
  }

  private async decide(call: KvCall): Promise<ServiceResult<CallOutcome>> {
    if (this.calls.length >= CALLS_KEPT_MAX) this.calls.shift();
    this.calls.push(call);
    if (this.gate !== null) await this.gate;
    if (this.unavailable !== null) return this.unavailable;
    if (this.outcome !== null) return done(this.outcome);
    if (this.paused) return done({ status: 'paused' });
    // Only a call with a `required` op can roll back; copy the rows only then.
    const rollback = call.ops.some((op) => 'required' in op && op.required);
    const saved = rollback ? new Map(this.rows) : this.rows;
    const savedVersion = this.version;
    const results: OpResult[] = [];
    for (let i = 0; i < call.ops.length; i++) {
      const op = call.ops[i] as KvOp;
      const result = this.apply(call.tenant, op);
      const required = 'required' in op && op.required;
      if (result.kind === 'write' && !result.applied && required && result.reason !== null) {
        this.rows.clear();
        for (const [k, v] of saved) this.rows.set(k, v);
        this.version = savedVersion;
        return done({ status: 'precondition', failedIndex: i, kvReason: result.reason,
          version: result.version, valueJson: result.valueJson });
      }
      results.push(result);
    }
    return done({ status: 'ok', results });
  }

  private id(tenant: string, ns: string, key: string): string {
    return tenant + '\u0000' + ns + '\u0000' + key;
  }

  private live(tenant: string, ns: string, key: string): Stored | null {
    const row = this.rows.get(this.id(tenant, ns, key));
    if (row === undefined) return null;
    return row.expiresAtMs !== null && row.expiresAtMs <= this.nowMs ? null : row;
  }

  private apply(tenant: string, op: KvOp): OpResult {
    const row = (key: string) => this.live(tenant, op.ns, key);
    switch (op.op) {
      case 'get': {
        const r = row(op.key);
        return r === null ? { kind: 'get', found: false, key: op.key }
          : { kind: 'get', found: true, key: op.key, ...r };
      }
      case 'getMany': {
        const rows: Row[] = [];
        const missing: string[] = [];
        for (const key of op.keys) {
          const r = row(key);
          if (r === null) missing.push(key);
          else rows.push({ key, ...r });
        }
        rows.sort((a, b) => Buffer.compare(Buffer.from(a.key), Buffer.from(b.key)));
        return { kind: 'getMany', rows, missing, truncated: false };
      }
      case 'getPrefix':
        return this.prefix(tenant, op);
      case 'check': {
        const r = row(op.key);
        const reason = verdict(r, op.expect);
        return write(reason, op.key, r);
      }
      case 'put': {
        const r = row(op.key);
        const reason = op.expect === null ? null : verdict(r, op.expect);
        if (reason !== null) return write(reason, op.key, r);
        const expiresAtMs = op.expiry.kind === 'forever' ? null
          : this.nowMs + op.expiry.ttlSeconds * 1000;
        const stored = { valueJson: op.valueJson, version: ++this.version, expiresAtMs,
          updatedAtMs: this.nowMs };
        this.rows.set(this.id(tenant, op.ns, op.key), stored);
        return write(null, op.key, stored);
      }
      case 'delete': {
        const r = row(op.key);
        const reason = op.expect === null ? (r === null ? 'absent' : null) : verdict(r, op.expect);
        if (reason !== null || r === null) return write(reason, op.key, r);
        this.rows.delete(this.id(tenant, op.ns, op.key));
        return write(null, op.key, r);
      }
      case 'incr': {
        const r = row(op.key);
        const current = r === null ? 0 : Number(r.valueJson);
        if (!Number.isFinite(current)) return write('type', op.key, r);
        const next = current + Number(op.delta);
        const outside = (op.max !== null && next > Number(op.max)) ||
          (op.min !== null && next < Number(op.min)) || !Number.isSafeInteger(Math.trunc(next));
        if (outside) return write('limit', op.key, r);
        const stored = { valueJson: String(next), version: ++this.version,
          expiresAtMs: r?.expiresAtMs ?? null, updatedAtMs: this.nowMs };
        this.rows.set(this.id(tenant, op.ns, op.key), stored);
        return write(null, op.key, stored);
      }
    }
  }

  private prefix(tenant: string, op: Extract<KvOp, { op: 'getPrefix' }>): OpResult {
    const keys: string[] = [];
    const head = this.id(tenant, op.ns, '');
    for (const id of this.rows.keys()) {
      if (!id.startsWith(head)) continue;
      const key = id.slice(head.length);
      if (key.startsWith(op.prefix) && key > op.after && this.live(tenant, op.ns, key)) {
        keys.push(key);
      }
    }
    keys.sort();
    const page = keys.slice(0, op.limit);
    const rows = page.map((key) => {
      const r = this.live(tenant, op.ns, key) as Stored;
      return { key, ...r, valueJson: op.keysOnly ? null : r.valueJson };
    });
    const truncated = keys.length > op.limit;
    return { kind: 'getPrefix', rows, truncated,
      nextAfter: truncated ? (page[page.length - 1] ?? null) : null };
  }

  async setPaused(paused: boolean): Promise<ServiceResult<void>> {
    this.paused = paused;
    return done(undefined);
  }

  async setQuota(tenant: string, quota: QuotaSettings): Promise<ServiceResult<void>> {
    this.quotas.set(tenant, quota);
    return done(undefined);
  }

  async getQuota(tenant: string): Promise<ServiceResult<QuotaView>> {
    return done({ tenant, quota: this.quotas.get(tenant) ?? null, usage: { rows: 0, bytes: 0 } });
  }

  isPausedLocally(): boolean {
    return this.paused;
  }

  quotaLocally(tenant: string): QuotaSettings | null {
    return this.quotas.get(tenant) ?? null;
  }

  health(): NodeHealth {
    return { status: 'ok', id: 'n1', role: 'leader', leader: 'n1', term: 1, commitIndex: 0,
      appliedIndex: 0, clusterId: 'hivekv-fake', stateBytes: 0, stateBytesMax: 2684354560 };
  }
}

function done<T>(value: T): ServiceResult<T> {
  return { kind: 'done', value };
}

function verdict(row: Stored | null, expect: number): 'exists' | 'absent' | 'version' | null {
  if (expect === 0) return row === null ? null : 'exists';
  if (row === null) return 'absent';
  return row.version === expect ? null : 'version';
}

function write(reason: KvReason | null, key: string,
  row: Stored | null): OpResult {
  return { kind: 'write', applied: reason === null, reason, key,
    valueJson: row === null ? 'null' : row.valueJson, version: row === null ? 0 : row.version };
}
