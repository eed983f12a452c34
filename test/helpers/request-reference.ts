/**
 * The reference side of the request parser: what the HTTP layer decided before the parser
 * moved into the machine (Node's UTF-8 decoding of the body, JSON.parse, validate.ts or
 * transaction.ts, encodeCommand), given the same `RequestFrame` the machine's parser takes.
 * Tests compare the two; the parse benchmark times this side as the baseline.
 */
import { encodeCommand } from '../../host/machine/codec.js';
import { isWriteOp, type KvCall } from '../../host/machine/commands.js';
import type { ParseOutcome, RequestFrame } from '../../host/machine/request.js';
import type { KvLimits } from '../../host/node/config.js';
import { isKvError, type KvError } from '../../host/http/errors.js';
import { validateTransactionBody } from '../../host/http/transaction.js';
import { parseJsonBody, validateKvBody, validatePathCall } from '../../host/http/validate.js';

/** The call validate.ts makes of a frame, or its refusal. */
export function referenceCall(frame: RequestFrame, limits: KvLimits): KvCall | KvError {
  const body = frame.body;
  const text = body === null ? undefined
    : Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('utf8');
  switch (frame.route) {
    case 'batch':
      return validateKvBody(parseJsonBody(text ?? ''), frame.tenant, limits);
    case 'path':
      return validatePathCall(frame.method ?? 'GET', {
        rawNs: frame.rawNs ?? '', rawKey: frame.rawKey ?? '',
        query: frame.hasQuery === true ? '' : undefined,
      }, text === undefined ? undefined : parseJsonBody(text), frame.tenant, limits);
    case 'transaction':
      return validateTransactionBody(parseJsonBody(text ?? ''), frame.tenant, limits,
        frame.transactionId ?? '');
  }
}

/** referenceCall, shaped like the machine's answer (growthBytes is not estimated here). */
export function referenceParse(frame: RequestFrame, limits: KvLimits): ParseOutcome {
  const call = referenceCall(frame, limits);
  if (isKvError(call)) {
    return { kind: 'refused', status: call.status, reason: call.reason, detail: call.detail };
  }
  const command = encodeCommand({ kind: 'call', call,
    flags: { requireGrant: frame.requireGrant } });
  return { kind: 'command', hasWrites: call.ops.some(isWriteOp), opCount: call.ops.length,
    growthBytes: 0, command };
}
