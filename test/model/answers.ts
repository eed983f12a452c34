/**
 * The machine renders every call's answer itself (assembly/answer.ts). For tests, two ways
 * across that boundary:
 * - `answerFor`: what host/http/render.ts, transaction.ts and errors.ts write for a
 *   `CallOutcome` (the reference model's, say): the machine must answer byte for byte alike;
 * - `outcomeOf`: a machine answer read back into the `CallOutcome` it renders, so tests can
 *   assert on fields. Values come back as `JSON.stringify(JSON.parse(value))`.
 */
import type {
  CallAnswer, CallOutcome, KvCall, KvOp, KvReason, OpResult, Row,
} from '../../host/machine/commands.js';
import { errorBody, isKvError } from '../../host/http/errors.js';
import { renderCallOutcome } from '../../host/http/render.js';
import { renderTransactionOutcome } from '../../host/http/transaction.js';

/** An answer with its body as text, for comparisons. */
export interface AnswerText {
  readonly status: number;
  readonly etagVersion: number | null;
  readonly retryAfterSeconds: number | null;
  readonly body: string;
}

const decoder = new TextDecoder();

/** A machine answer with its body decoded, or the machine's refusal of the command. */
export function answerText(answer: CallAnswer): AnswerText | { readonly invalid: string } {
  if ('invalid' in answer) return answer;
  return { status: answer.status, etagVersion: answer.etagVersion,
    retryAfterSeconds: answer.retryAfterSeconds, body: decoder.decode(answer.body) };
}

/** What the host's renderers write for `outcome` of `call`, in the call's shape. */
export function answerFor(call: KvCall, outcome: CallOutcome): AnswerText | { invalid: string } {
  if (outcome.status === 'invalid') return { invalid: outcome.detail };
  const shape = call.shape ?? 'batch';
  const rendered = shape === 'transaction'
    ? renderTransactionOutcome(call, outcome, call.transactionId ?? '')
    : renderCallOutcome(call, outcome, shape);
  if (isKvError(rendered)) {
    return { status: rendered.status, etagVersion: null,
      retryAfterSeconds: rendered.retryAfterSeconds, body: errorBody(rendered) };
  }
  let etagVersion: number | null = null;
  const first = outcome.status === 'ok' ? outcome.results[0] : undefined;
  if (shape === 'single' && first?.kind === 'get' && first.found) etagVersion = first.version;
  return { status: 200, etagVersion, retryAfterSeconds: null, body: rendered };
}

type Json = Record<string, unknown>;

const timeOf = (iso: unknown): number | null => (iso === null ? null : Date.parse(iso as string));
const textOf = (value: unknown): string => JSON.stringify(value);

function rowOf(raw: Json): Row {
  return { key: raw['key'] as string, valueJson: 'value' in raw ? textOf(raw['value']) : null,
    version: raw['version'] as number, expiresAtMs: timeOf(raw['expiresAt']),
    updatedAtMs: timeOf(raw['updatedAt']) as number };
}

function resultOf(op: KvOp, raw: Json): OpResult {
  switch (op.op) {
    case 'get':
      if (raw['found'] !== true) return { kind: 'get', found: false, key: raw['key'] as string };
      return { kind: 'get', found: true, key: raw['key'] as string,
        valueJson: textOf(raw['value']), version: raw['version'] as number,
        expiresAtMs: timeOf(raw['expiresAt']), updatedAtMs: timeOf(raw['updatedAt']) as number };
    case 'getMany':
      return { kind: 'getMany', rows: (raw['rows'] as Json[]).map(rowOf),
        missing: raw['missing'] as string[], truncated: raw['truncated'] as boolean };
    case 'getPrefix':
      return { kind: 'getPrefix', rows: (raw['rows'] as Json[]).map(rowOf),
        truncated: raw['truncated'] as boolean, nextAfter: raw['nextAfter'] as string | null };
    default:
      return { kind: 'write', applied: raw['applied'] as boolean,
        reason: raw['applied'] === true ? null : raw['reason'] as KvReason,
        key: raw['key'] as string, valueJson: textOf(raw['value']),
        version: raw['version'] as number };
  }
}

const REFUSALS: Record<string, CallOutcome> = {
  kv_disabled: { status: 'paused' },
  feature_gated: { status: 'notGranted' },
  kv_quota_exceeded: { status: 'quotaExceeded' },
};

/** Reads a machine answer back into the outcome it renders (tests only). */
export function outcomeOf(call: KvCall, answer: CallAnswer): CallOutcome {
  if ('invalid' in answer) return { status: 'invalid', detail: answer.invalid };
  const body = JSON.parse(decoder.decode(answer.body)) as Json;
  if (answer.status !== 200) {
    const refusal = REFUSALS[body['error'] as string];
    if (refusal === undefined) throw new Error(`not a machine refusal: ${JSON.stringify(body)}`);
    return refusal;
  }
  if (body['ok'] === false) {
    return { status: 'precondition', failedIndex: body['failedIndex'] as number,
      kvReason: body['kvReason'] as KvReason, version: body['version'] as number,
      valueJson: textOf(body['value']) };
  }
  const elements = (call.shape ?? 'batch') === 'single' ? [body] : body['results'] as Json[];
  return { status: 'ok', results: elements.map((raw, i) => resultOf(call.ops[i] as KvOp, raw)) };
}
