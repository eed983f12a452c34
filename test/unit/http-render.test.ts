// Table tests of host/http/render.ts and the transaction renderer: the exact JSON text of
// every result element shape of WIRE.md, "Result elements".
import { describe, expect, it } from 'vitest';
import { isKvError, type KvError } from '../../host/http/errors.js';
import { isoUtc, renderCallOutcome, renderElement } from '../../host/http/render.js';
import { renderTransactionOutcome } from '../../host/http/transaction.js';
import type { KvCall, KvOp, OpResult } from '../../host/machine/commands.js';

const T0 = Date.UTC(2026, 8, 22, 10, 15, 30, 123);
const T1 = T0 + 60_000;
const head = (op: string) => `{"index":3,"op":"${op}"`;
const ttl = { kind: 'ttl', ttlSeconds: 60 } as const;

const OPS: Record<string, KvOp> = {
  get: { op: 'get', ns: 'a', key: 'k' },
  getMany: { op: 'getMany', ns: 'a', keys: ['b', 'a', 'z'] },
  getPrefix: { op: 'getPrefix', ns: 'a', prefix: 'p', after: '', limit: 2, keysOnly: false },
  put: { op: 'put', sentAs: 'put', ns: 'a', key: 'k', valueJson: '1', expiry: ttl, expect: null,
    required: false },
  putIfAbsent: { op: 'put', sentAs: 'putIfAbsent', ns: 'a', key: 'k', valueJson: '1',
    expiry: ttl, expect: 0, required: false },
  delete: { op: 'delete', ns: 'a', key: 'k', expect: null, required: false },
  incr: { op: 'incr', ns: 'a', key: 'k', delta: '1', min: null, max: '10', expiry: ttl,
    required: false },
  check: { op: 'check', ns: 'a', key: 'k', expect: 0, required: false },
};

// [name, op, result, exact element text]
const CASES: Array<[string, KvOp, OpResult, string]> = [
  ['get found', OPS.get as KvOp, { kind: 'get', found: true, key: 'k', valueJson: '{"x":[1]}',
    version: 7, expiresAtMs: T1, updatedAtMs: T0 },
  head('get') + ',"found":true,"key":"k","value":{"x":[1]},"version":7,' +
    '"expiresAt":"2026-09-22T10:16:30.123Z","updatedAt":"2026-09-22T10:15:30.123Z"}'],
  ['get found forever, value null', OPS.get as KvOp, { kind: 'get', found: true, key: 'k',
    valueJson: 'null', version: 1, expiresAtMs: null, updatedAtMs: T0 },
  head('get') + ',"found":true,"key":"k","value":null,"version":1,"expiresAt":null,' +
    '"updatedAt":"2026-09-22T10:15:30.123Z"}'],
  ['get missing, escaped key', OPS.get as KvOp, { kind: 'get', found: false, key: 'a"\\\n€' },
    head('get') + ',"found":false,"key":"a\\"\\\\\\n€"}'],
  ['getMany', OPS.getMany as KvOp, { kind: 'getMany', rows: [{ key: 'a', valueJson: '"v"',
    version: 2, expiresAtMs: null, updatedAtMs: T0 }, { key: 'b', valueJson: '3', version: 4,
    expiresAtMs: T1, updatedAtMs: T0 }], missing: ['z'], truncated: false },
  head('getMany') + ',"rows":[{"key":"a","value":"v","version":2,"expiresAt":null,' +
    '"updatedAt":"2026-09-22T10:15:30.123Z"},{"key":"b","value":3,"version":4,' +
    '"expiresAt":"2026-09-22T10:16:30.123Z","updatedAt":"2026-09-22T10:15:30.123Z"}],' +
    '"missing":["z"],"truncated":false}'],
  ['getPrefix truncated', OPS.getPrefix as KvOp, { kind: 'getPrefix', rows: [{ key: 'p1',
    valueJson: '1', version: 1, expiresAtMs: null, updatedAtMs: T0 }], truncated: true,
  nextAfter: 'p1' },
  head('getPrefix') + ',"rows":[{"key":"p1","value":1,"version":1,"expiresAt":null,' +
    '"updatedAt":"2026-09-22T10:15:30.123Z"}],"truncated":true,"nextAfter":"p1"}'],
  ['getPrefix keysOnly, last page', OPS.getPrefix as KvOp, { kind: 'getPrefix', rows: [
    { key: 'p1', valueJson: null, version: 1, expiresAtMs: null, updatedAtMs: T0 }],
  truncated: false, nextAfter: null },
  head('getPrefix') + ',"rows":[{"key":"p1","version":1,"expiresAt":null,' +
    '"updatedAt":"2026-09-22T10:15:30.123Z"}],"truncated":false,"nextAfter":null}'],
  ['put applied', OPS.put as KvOp, { kind: 'write', applied: true, reason: null, key: 'k',
    valueJson: '{"s":"paid"}', version: 9 },
  head('put') + ',"applied":true,"key":"k","value":{"s":"paid"},"version":9}'],
  ['putIfAbsent lost', OPS.putIfAbsent as KvOp, { kind: 'write', applied: false,
    reason: 'exists', key: 'k', valueJson: '{"chargeId":"ch_8812"}', version: 90101 },
  head('putIfAbsent') + ',"applied":false,"reason":"exists","key":"k",' +
    '"value":{"chargeId":"ch_8812"},"version":90101}'],
  ['delete absent', OPS.delete as KvOp, { kind: 'write', applied: false, reason: 'absent',
    key: 'k', valueJson: 'null', version: 0 },
  head('delete') + ',"applied":false,"reason":"absent","key":"k","value":null,"version":0}'],
  ['incr limit', OPS.incr as KvOp, { kind: 'write', applied: false, reason: 'limit', key: 'k',
    valueJson: '10', version: 5 },
  head('incr') + ',"applied":false,"reason":"limit","key":"k","value":10,"version":5}'],
  ['check applied', OPS.check as KvOp, { kind: 'write', applied: true, reason: null, key: 'k',
    valueJson: 'null', version: 0 },
  head('check') + ',"applied":true,"key":"k","value":null,"version":0}'],
];

describe('renderElement (WIRE.md, "Result elements")', () => {
  it.each(CASES)('%s', (_name, op, result, text) => {
    const sent = op.op === 'put' ? op.sentAs : op.op;
    expect(renderElement(op, result, head(sent))).toBe(text);
    expect(() => JSON.parse(text)).not.toThrow();
  });

  it('throws on a result that does not answer its op (a broken contract)', () => {
    expect(() => renderElement(OPS.get as KvOp, { kind: 'write', applied: true, reason: null,
      key: 'k', valueJson: '1', version: 1 }, head('get'))).toThrow(/does not answer/);
    expect(() => renderElement(OPS.put as KvOp, { kind: 'get', found: false, key: 'k' },
      head('put'))).toThrow(/does not answer/);
  });
});

const call = (ops: KvOp[]): KvCall => ({ tenant: 't', ops, readBytesCeiling: 100 });
const missing: OpResult = { kind: 'get', found: false, key: 'k' };

describe('renderCallOutcome', () => {
  it('wraps batches, answers the single element for path routes', () => {
    const c = call([OPS.get as KvOp]);
    expect(renderCallOutcome(c, { status: 'ok', results: [missing] }, 'batch'))
      .toBe('{"results":[{"index":0,"op":"get","found":false,"key":"k"}]}');
    expect(renderCallOutcome(c, { status: 'ok', results: [missing] }, 'single'))
      .toBe('{"index":0,"op":"get","found":false,"key":"k"}');
    expect(() => renderCallOutcome(c, { status: 'ok', results: [] }, 'batch')).toThrow();
  });

  it('renders a lost required precondition as the 200 body of kv-routes.md', () => {
    const text = renderCallOutcome(call([OPS.put as KvOp]), { status: 'precondition',
      failedIndex: 0, kvReason: 'exists', version: 90101, valueJson: '{"chargeId":"ch_8812"}' },
    'batch');
    expect(text).toBe('{"ok":false,"reason":"kv_precondition","failedIndex":0,' +
      '"kvReason":"exists","version":90101,"value":{"chargeId":"ch_8812"}}');
  });

  it('maps the refusals a log entry may still decide to their statuses', () => {
    const status = (outcome: Parameters<typeof renderCallOutcome>[1]) => {
      const r = renderCallOutcome(call([OPS.put as KvOp]), outcome, 'batch');
      return isKvError(r) ? [r.status, r.error, r.retryAfterSeconds] : r;
    };
    expect(status({ status: 'paused' })).toEqual([503, 'kv_disabled', 1]);
    expect(status({ status: 'notGranted' })).toEqual([403, 'feature_gated', null]);
    expect(status({ status: 'quotaExceeded' })).toEqual([403, 'kv_quota_exceeded', null]);
    expect(status({ status: 'invalid', detail: 'x' })).toEqual([500, 'internal_error', null]);
  });
});

describe('renderTransactionOutcome (WIRE.md, "The transaction wire")', () => {
  const c = call([OPS.put as KvOp, OPS.get as KvOp]);
  const applied: OpResult = { kind: 'write', applied: true, reason: null, key: 'k',
    valueJson: '1', version: 2 };
  it('commits with flat index, opIndex and type', () => {
    expect(renderTransactionOutcome(c, { status: 'ok', results: [applied, missing] }, 'tx1', 2))
      .toBe('{"transactionId":"tx1","success":true,"results":[' +
        '{"index":2,"opIndex":0,"type":"kv","op":"put","applied":true,"key":"k","value":1,' +
        '"version":2},{"index":3,"opIndex":1,"type":"kv","op":"get","found":false,"key":"k"}]}');
  });
  it('rolls back with the failed flat index and an empty result list', () => {
    expect(renderTransactionOutcome(c, { status: 'precondition', failedIndex: 0,
      kvReason: 'version', version: 4, valueJson: '"v"' }, 'tx1', 1))
      .toBe('{"transactionId":"tx1","success":false,"ok":false,"reason":"kv_precondition",' +
        '"failedIndex":1,"kvReason":"version","version":4,"value":"v","results":[]}');
  });
  it('answers a pause with 403 kv_disabled', () => {
    const r = renderTransactionOutcome(c, { status: 'paused' }, 'tx1') as KvError;
    expect([r.status, r.error, r.retryAfterSeconds]).toEqual([403, 'kv_disabled', null]);
  });
});

describe('isoUtc', () => {
  it('matches Date#toISOString on edges and on seeded random instants', () => {
    const seed = Number(process.env['SEED'] ?? Date.now() % 2 ** 31);
    let state = seed >>> 0;
    const next = () => {
      state = (Math.imul(state, 1_664_525) + 1_013_904_223) >>> 0;
      return state / 2 ** 32;
    };
    const edges = [0, 1, 999, 86_399_999, 86_400_000, Date.UTC(2000, 1, 29, 23, 59, 59, 999),
      Date.UTC(2100, 2, 1), Date.UTC(1970, 0, 1, 0, 0, 0, 5), 253_402_300_799_999,
      253_402_300_800_000, -1];
    for (const ms of edges) expect(isoUtc(ms), `ms=${ms}`).toBe(new Date(ms).toISOString());
    for (let i = 0; i < 20_000; i++) {
      const ms = Math.floor(next() * 253_402_300_800_000);
      expect(isoUtc(ms), `SEED=${seed} ms=${ms}`).toBe(new Date(ms).toISOString());
    }
  });
});
