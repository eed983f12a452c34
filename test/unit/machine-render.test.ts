// The machine writes every answer's JSON itself (assembly/answer.ts, json-out.ts). The
// reference is the host's renderer (host/http/render.ts): for keys holding every character
// JSON escapes, for times at the edges of the ISO-8601 format and for every answer shape, the
// machine's bytes must equal what the reference writes for the outcome the answer carries.
import { describe, expect, it } from 'vitest';
import { encodeCommand } from '../../host/machine/codec.js';
import {
  DEFAULT_TENANT, type CallOutcome, type KvCall, type KvOp,
} from '../../host/machine/commands.js';
import { StateMachine } from '../../host/machine/state-machine.js';
import { isoUtc } from '../../host/http/render.js';
import { answerFor, answerText, outcomeOf } from '../model/answers.js';

const CONTROL = Array.from({ length: 32 }, (_, i) => String.fromCharCode(i)).join('');
const KEYS = [
  'plain', 'quote"and\\back', `ctl${CONTROL.slice(1)}`, 'del\u007f', 'sep\u2028\u2029',
  'é\u{1F600}日本', '/slash/', '\u0001',
];

let index = 0;

/**
 * Applies `ops` in `shape` at `timeMs`, checks the answer against the reference rendering of
 * the outcome it carries, and returns that outcome.
 */
function check(m: StateMachine, ops: KvOp[], timeMs: number,
  shape: KvCall['shape'] = 'batch'): CallOutcome {
  const call: KvCall = { tenant: DEFAULT_TENANT, readBytesCeiling: 1 << 22, ops, shape,
    ...(shape === 'transaction' ? { transactionId: 'tx-"1"' } : {}) };
  const out = m.apply(++index, timeMs, encodeCommand({ kind: 'call', call,
    flags: { requireGrant: false } }));
  if (out.kind !== 'call' || out.answer === null) throw new Error('no answer');
  const got = answerText(out.answer);
  const outcome = outcomeOf(call, out.answer);
  expect(got).toEqual(answerFor(call, outcome));
  return outcome;
}

describe('answers rendered by the machine', () => {
  it('escapes keys exactly as JSON.stringify does, in every result kind', () => {
    const m = StateMachine.create();
    const t = 1_700_000_000_123;
    for (const key of KEYS) {
      check(m, [{ op: 'put', sentAs: 'put', ns: 'k', key, valueJson: '"v"',
        expiry: { kind: 'forever' }, expect: null, required: false }], t);
    }
    check(m, KEYS.map((key): KvOp => ({ op: 'get', ns: 'k', key })), t);
    check(m, [{ op: 'getMany', ns: 'k', keys: [...KEYS, 'missing\n'] }], t);
    check(m, [{ op: 'getPrefix', ns: 'k', prefix: 'q', after: '', limit: 1, keysOnly: false },
      { op: 'getPrefix', ns: 'k', prefix: '\u0001', after: '', limit: 5, keysOnly: true }], t);
  });

  it('writes times as toISOString does, from the epoch past year 9999', () => {
    const m = StateMachine.create();
    let last = 0;
    for (const t of [0, 1, 999, 86_399_999, 951_782_400_000, 253_402_300_799_999]) {
      const ttlSeconds = 220_898_620_800;
      const out = check(m, [{ op: 'put', sentAs: 'putIfAbsent', ns: 't', key: `k${t}`,
        valueJson: '1', expiry: { kind: 'ttl', ttlSeconds }, expect: 0, required: false },
      { op: 'get', ns: 't', key: `k${t}` }], t);
      // Entry times never go back; each put is stamped max(t, the last entry's time).
      last = Math.max(last, t);
      const got = out.status === 'ok' ? out.results[1] : undefined;
      expect(got).toMatchObject({ found: true, updatedAtMs: last,
        expiresAtMs: Math.min(last + ttlSeconds * 1000, Number.MAX_SAFE_INTEGER) });
    }
    expect(isoUtc(253_402_300_800_000 + 220_898_620_800_000))
      .toBe(new Date(253_402_300_800_000 + 220_898_620_800_000).toISOString());
  });

  it('wraps results in every shape, with the ETag of a found key on a path route', () => {
    const m = StateMachine.create();
    const put: KvOp = { op: 'put', sentAs: 'put', ns: 's', key: 'k', valueJson: '{"a":[1,2]}',
      expiry: { kind: 'forever' }, expect: null, required: false };
    check(m, [put], 5, 'single');
    check(m, [{ op: 'get', ns: 's', key: 'k' }], 5, 'single');
    check(m, [{ op: 'get', ns: 's', key: 'none' }], 5, 'single');
    check(m, [put, { op: 'check', ns: 's', key: 'k', expect: 1, required: false }], 5,
      'transaction');
    check(m, [{ ...put, expect: 999, required: true }], 5, 'transaction');
    check(m, [{ ...put, expect: 999, required: true }], 5, 'batch');
  });
});
