// Table tests of host/http/validate.ts: every reason and status of WIRE.md's validation
// table, the limits of kv-concepts.md, and the examples of kv-routes.md.
import { describe, expect, it } from 'vitest';
import { toDecimalText } from '../../host/http/decimal-text.js';
import { isKvError, type KvError } from '../../host/http/errors.js';
import { validateTransactionBody } from '../../host/http/transaction.js';
import {
  parseJsonBody, validateKvBody, validatePathCall, validateQuotaSettings, validateTenantSegment,
  TTL_SECONDS_MAX,
} from '../../host/http/validate.js';
import { DEFAULT_TENANT, type KvCall } from '../../host/machine/commands.js';
import { loadConfig } from '../../host/node/config.js';

const limits = loadConfig({}, {}).limits;
const T = DEFAULT_TENANT;

function run(body: unknown): KvCall | KvError {
  return validateKvBody(body, T, limits);
}

function refusal(body: unknown): [number, string, string] | 'ok' {
  const result = run(body);
  return isKvError(result) ? [result.status, result.error, result.reason] : 'ok';
}

const put = (extra: object = {}) => ({ op: 'put', ns: 'orders', key: 'k', value: 1,
  ttlSeconds: 60, ...extra });

// [name, operations, expected status, expected reason]
const CASES: Array<[string, unknown[], number, string]> = [
  ['unknown op', [{ op: 'scan', ns: 'a', key: 'k' }], 400, 'kv_unknown_op'],
  ['op missing', [{ ns: 'a', key: 'k' }], 400, 'kv_unknown_op'],
  ['ns missing', [{ op: 'get', key: 'k' }], 400, 'kv_bad_namespace'],
  ['ns upper case', [{ op: 'get', ns: 'Orders', key: 'k' }], 400, 'kv_bad_namespace'],
  ['ns starts with dot', [{ op: 'get', ns: '.a', key: 'k' }], 400, 'kv_bad_namespace'],
  ['ns 65 chars', [{ op: 'get', ns: 'a'.repeat(65), key: 'k' }], 400, 'kv_bad_namespace'],
  ['key missing', [{ op: 'get', ns: 'a' }], 400, 'kv_bad_key'],
  ['key empty', [{ op: 'get', ns: 'a', key: '' }], 400, 'kv_bad_key'],
  ['key number', [{ op: 'get', ns: 'a', key: 7 }], 400, 'kv_bad_key'],
  ['key with NUL', [{ op: 'get', ns: 'a', key: 'a\u0000b' }], 400, 'kv_bad_key'],
  ['key lone surrogate', [{ op: 'get', ns: 'a', key: 'a\ud800' }], 400, 'kv_bad_key'],
  ['key 513 bytes', [{ op: 'get', ns: 'a', key: 'k'.repeat(513) }], 413, 'kv_key_too_large'],
  ['key 171 x 3 bytes', [{ op: 'get', ns: 'a', key: '€'.repeat(171) }], 413, 'kv_key_too_large'],
  ['put no expiry', [put({ ttlSeconds: undefined })], 400, 'kv_expiry_not_specified'],
  ['put both expiries', [put({ forever: true })], 400, 'kv_expiry_not_specified'],
  ['forever:false only', [put({ ttlSeconds: undefined, forever: false })], 400,
    'kv_expiry_not_specified'],
  ['forever not boolean', [put({ ttlSeconds: undefined, forever: 'yes' })], 400,
    'kv_bad_request'],
  ['incr no expiry', [{ op: 'incr', ns: 'a', key: 'k', delta: 1 }], 400,
    'kv_expiry_not_specified'],
  ['ttl 0', [put({ ttlSeconds: 0 })], 400, 'kv_bad_ttl'],
  ['ttl negative', [put({ ttlSeconds: -1 })], 400, 'kv_bad_ttl'],
  ['ttl fraction', [put({ ttlSeconds: 1.5 })], 400, 'kv_bad_ttl'],
  ['ttl string', [put({ ttlSeconds: '60' })], 400, 'kv_bad_ttl'],
  ['ttl null', [put({ ttlSeconds: null })], 400, 'kv_bad_ttl'],
  ['ttl past year 9999', [put({ ttlSeconds: TTL_SECONDS_MAX + 1 })], 400, 'kv_bad_ttl'],
  ['expect null', [put({ expect: null })], 400, 'kv_bad_expect'],
  ['expect negative', [put({ expect: -1 })], 400, 'kv_bad_expect'],
  ['expect fraction', [put({ expect: 1.5 })], 400, 'kv_bad_expect'],
  ['expect string', [{ op: 'delete', ns: 'a', key: 'k', expect: '3' }], 400, 'kv_bad_expect'],
  ['putIfAbsent with expect', [put({ op: 'putIfAbsent', expect: 0 })], 400, 'kv_bad_expect'],
  ['incr with expect', [{ op: 'incr', ns: 'a', key: 'k', delta: 1, forever: true, expect: 1 }],
    400, 'kv_bad_expect'],
  ['check without expect', [{ op: 'check', ns: 'a', key: 'k' }], 400, 'kv_bad_expect'],
  ['prefix missing', [{ op: 'getPrefix', ns: 'a' }], 400, 'kv_prefix_required'],
  ['prefix empty', [{ op: 'getPrefix', ns: 'a', prefix: '' }], 400, 'kv_prefix_required'],
  ['two writes to one key', [put(), { op: 'delete', ns: 'orders', key: 'k' }], 400,
    'kv_duplicate_key_in_call'],
  ['tenant field', [{ op: 'get', ns: 'a', key: 'k', tenant: 'x' }], 400,
    'kv_tenant_not_an_input'],
  ['tenantId field', [{ op: 'get', ns: 'a', key: 'k', tenantId: 'x' }], 400,
    'kv_tenant_not_an_input'],
  ['_tenant field', [put({ _tenant: null })], 400, 'kv_tenant_not_an_input'],
  ['257 ops', Array.from({ length: 257 }, () => ({ op: 'get', ns: 'a', key: 'k' })), 400,
    'kv_too_many_ops'],
  ['1025 keys', [{ op: 'getMany', ns: 'a', keys: Array.from({ length: 1025 }, (_, i) => `${i}`) }],
    400, 'kv_too_many_keys'],
  ['getPrefix counts as its limit', [{ op: 'getPrefix', ns: 'a', prefix: 'p', limit: 1000 },
    { op: 'getMany', ns: 'a', keys: ['x'.repeat(1)].concat(Array(24).fill('y')) }], 400,
    'kv_too_many_keys'],
  ['put without value', [{ op: 'put', ns: 'a', key: 'k', forever: true }], 400, 'kv_bad_request'],
  ['value with a number beyond a double', [put({ value: { n: [1, Infinity] } })], 400,
    'kv_bad_request'],
  ['incr delta string', [{ op: 'incr', ns: 'a', key: 'k', delta: '1', forever: true }], 400,
    'kv_bad_request'],
  ['incr delta missing', [{ op: 'incr', ns: 'a', key: 'k', forever: true }], 400,
    'kv_bad_request'],
  ['incr max null', [{ op: 'incr', ns: 'a', key: 'k', delta: 1, max: null, forever: true }],
    400, 'kv_bad_request'],
  ['required not boolean', [put({ required: 'yes' })], 400, 'kv_bad_request'],
  ['keysOnly not boolean', [{ op: 'getPrefix', ns: 'a', prefix: 'p', keysOnly: 1 }], 400,
    'kv_bad_request'],
  ['getMany empty keys', [{ op: 'getMany', ns: 'a', keys: [] }], 400, 'kv_bad_request'],
  ['getMany keys not array', [{ op: 'getMany', ns: 'a', keys: 'k' }], 400, 'kv_bad_request'],
  ['op not an object', [7], 400, 'kv_bad_request'],
  ['value over 64 KiB', [put({ value: 'x'.repeat(65_535) })], 413, 'kv_value_too_large'],
];

describe('validateKvBody refusals (WIRE.md, "Validation")', () => {
  it.each(CASES)('%s', (_name, operations, status, reason) => {
    const result = refusal({ operations });
    expect(result).not.toBe('ok');
    const [gotStatus, error, gotReason] = result as [number, string, string];
    expect([gotStatus, gotReason]).toEqual([status, reason]);
    expect(error).toBe(status === 413 ? 'payload_too_large' : 'kv_bad_request');
  });

  it('refuses bodies that are neither an array nor {operations:[...]}', () => {
    for (const body of [null, 7, 'x', {}, { operations: {} }, { ops: [] }]) {
      expect(refusal(body)).toEqual([400, 'kv_bad_request', 'kv_bad_body']);
    }
    expect(refusal(parseJsonBody('{"operations":'))).toEqual([400, 'kv_bad_request',
      'kv_bad_body']);
  });

  it('refuses a body nested deeper than JSON_DEPTH_MAX (512) levels, however deep', () => {
    const nested = (depth: number): string => '['.repeat(depth) + ']'.repeat(depth);
    const put = (value: string): string =>
      `[{"op":"put","ns":"a","key":"k","forever":true,"value":${value}}]`;
    for (const depth of [511, 5000, 100_000]) {
      expect(refusal(parseJsonBody(put(nested(depth))))).toEqual([400, 'kv_bad_request',
        'kv_bad_body']);
    }
    // 510 inside the op inside the list: 512 in all.
    expect(refusal(parseJsonBody(put(nested(510))))).toBe('ok');
    // Brackets inside strings do not nest.
    expect(refusal(parseJsonBody(put(`"${'['.repeat(600)}\\\"${'{'.repeat(600)}"`))))
      .toBe('ok');
  });

  it('refuses a tenant named beside the operations too', () => {
    expect(refusal({ tenant: T, operations: [] })).toEqual([400, 'kv_bad_request',
      'kv_tenant_not_an_input']);
  });

  it('the first refusal in operation order wins, and nothing is partially accepted', () => {
    expect(refusal([{ op: 'get', ns: 'a', key: '' }, { op: 'nope' }])).toEqual([400,
      'kv_bad_request', 'kv_bad_key']);
  });
});

describe('validateKvBody acceptance', () => {
  it('accepts a value of exactly 64 KiB of compact JSON, measured in UTF-8 bytes', () => {
    expect(refusal([put({ value: 'x'.repeat(65_534) })])).toBe('ok');
    // '€' is 3 UTF-8 bytes: 21,844 of them and the quotes are 65,534 bytes, 21,845 are 65,537.
    expect(refusal([put({ value: '€'.repeat(21_844) })])).toBe('ok');
    expect(refusal([put({ value: '€'.repeat(21_845) })])).toEqual([413, 'payload_too_large',
      'kv_value_too_large']);
  });

  it('accepts a 512-byte key, 1,024 keys and 256 ops', () => {
    expect(refusal([{ op: 'get', ns: 'a', key: 'k'.repeat(512) }])).toBe('ok');
    const keys = Array.from({ length: 1024 }, (_, i) => `${i}`);
    expect(refusal([{ op: 'getMany', ns: 'a', keys }])).toBe('ok');
    expect(refusal(Array.from({ length: 256 }, () => ({ op: 'get', ns: 'a', key: 'k' }))))
      .toBe('ok');
  });

  it('desugars putIfAbsent to put with expect 0, keeping the name as sent', () => {
    const call = run([{ op: 'putIfAbsent', ns: 'orders', key: 'ord_8812',
      value: { chargeId: 'ch_8812' }, ttlSeconds: 604800 }]) as KvCall;
    expect(call).toEqual({ tenant: T, readBytesCeiling: 4 * 1024 * 1024, ops: [{ op: 'put',
      sentAs: 'putIfAbsent', ns: 'orders', key: 'ord_8812', valueJson: '{"chargeId":"ch_8812"}',
      expiry: { kind: 'ttl', ttlSeconds: 604800 }, expect: 0, required: false }] });
  });

  it('stores values as compact JSON text, null included', () => {
    const call = run([put({ value: { a: [1, 2, { b: null }] } }), put({ key: 'n', value: null,
      ttlSeconds: undefined, forever: true, required: true })]) as KvCall;
    expect(call.ops[0]).toMatchObject({ valueJson: '{"a":[1,2,{"b":null}]}', expect: null });
    expect(call.ops[1]).toMatchObject({ valueJson: 'null', expiry: { kind: 'forever' },
      required: true });
  });

  it('clamps getPrefix limit to 1..prefixLimit with a default of 100; after "" = no cursor', () => {
    const cases: Array<[unknown, number]> = [[undefined, 100], [5000, 1000], [0, 1], [-3, 1],
      [7.9, 7], [null, 100]];
    for (const [limit, clamped] of cases) {
      const call = run([{ op: 'getPrefix', ns: 'a', prefix: 'p', limit, after: '' }]) as KvCall;
      expect(call.ops[0]).toEqual({ op: 'getPrefix', ns: 'a', prefix: 'p', after: '',
        limit: clamped, keysOnly: false });
    }
    expect(refusal([{ op: 'getPrefix', ns: 'a', prefix: 'p', limit: '10' }])).toEqual([400,
      'kv_bad_request', 'kv_bad_request']);
  });

  it('allows reads and checks of a written key; check is not a write', () => {
    expect(refusal([put(), { op: 'get', ns: 'orders', key: 'k' },
      { op: 'check', ns: 'orders', key: 'k', expect: 3 }])).toBe('ok');
    expect(refusal([put(), put({ ns: 'other' })])).toBe('ok');
  });

  it('turns incr numbers into canonical decimal text (kv-routes.md rate limiter)', () => {
    const call = run([{ op: 'incr', ns: 'quota', key: 'acme:2026-08-17T14', delta: 1,
      max: 1000, ttlSeconds: 3600 }]) as KvCall;
    expect(call.ops[0]).toEqual({ op: 'incr', ns: 'quota', key: 'acme:2026-08-17T14',
      delta: '1', min: null, max: '1000', expiry: { kind: 'ttl', ttlSeconds: 3600 },
      required: false });
  });
});

describe('toDecimalText', () => {
  const CASES_DEC: Array<[number, string]> = [
    [0, '0'], [-0, '0'], [1, '1'], [-12, '-12'], [0.3, '0.3'], [0.1 + 0.2, '0.30000000000000004'],
    [1e21, '1000000000000000000000'], [1.5e-7, '0.00000015'], [-1e-7, '-0.0000001'],
    [123.456, '123.456'], [1e-10, '0.0000000001'], [2.5e22, '25000000000000000000000'],
    [Number.MAX_SAFE_INTEGER, '9007199254740991'],
  ];
  it.each(CASES_DEC)('%s -> %s', (value, text) => {
    expect(toDecimalText(value)).toBe(text);
  });
  it('refuses non-finite numbers', () => {
    expect(toDecimalText(Infinity)).toBeNull();
    expect(toDecimalText(Number.NaN)).toBeNull();
    expect(refusal(parseJsonBody('[{"op":"incr","ns":"a","key":"k","delta":1e400,' +
      '"forever":true}]'))).toEqual([400, 'kv_bad_request', 'kv_bad_request']);
  });
});

describe('validatePathCall', () => {
  const target = (rawKey: string, query?: string) => ({ rawNs: 'orders', rawKey, query });
  it('decodes the key once and builds get/put/delete', () => {
    const get = validatePathCall('GET', target('a%2Fb%25'), undefined, T, limits) as KvCall;
    expect(get.ops).toEqual([{ op: 'get', ns: 'orders', key: 'a/b%' }]);
    expect(get.shape).toBe('single');
    const body = { value: { state: 'shipped' }, ttlSeconds: 604800, expect: 90101 };
    const put1 = validatePathCall('PUT', target('ord_8812'), body, T, limits) as KvCall;
    expect(put1.ops[0]).toMatchObject({ op: 'put', sentAs: 'put', expect: 90101 });
    const del = validatePathCall('DELETE', target('ord_8812'), undefined, T, limits) as KvCall;
    expect(del.ops).toEqual([{ op: 'delete', ns: 'orders', key: 'ord_8812', expect: null,
      required: false }]);
  });
  it('refuses query strings, URL fields in the body, bad encoding and bodies', () => {
    const reason = (r: KvCall | KvError) => (isKvError(r) ? r.reason : 'ok');
    expect(reason(validatePathCall('GET', target('k', ''), undefined, T, limits)))
      .toBe('kv_no_query_string');
    expect(reason(validatePathCall('PUT', target('k'), { value: 1, forever: true, key: 'k' }, T,
      limits))).toBe('kv_field_in_path');
    expect(reason(validatePathCall('GET', target('%E0%A4%A'), undefined, T, limits)))
      .toBe('kv_bad_key');
    expect(reason(validatePathCall('PUT', target('k'), [1], T, limits))).toBe('kv_bad_body');
    expect(reason(validatePathCall('PUT', target('k'), { value: 1 }, T, limits)))
      .toBe('kv_expiry_not_specified');
    expect(reason(validatePathCall('PUT', target('k'), undefined, T, limits)))
      .toBe('kv_bad_request');
  });
});

describe('transaction wire and system bodies', () => {
  const tx = (body: unknown) => {
    const r = validateTransactionBody(body, T, limits, 'tx-1');
    return isKvError(r) ? r.reason : r.ops.length;
  };
  it('carries the transaction id and the transaction shape in the call', () => {
    const r = validateTransactionBody({ kv: [{ op: 'get', ns: 'a', key: 'k' }] }, T, limits,
      'tx-1') as KvCall;
    expect(r).toMatchObject({ shape: 'transaction', transactionId: 'tx-1' });
  });
  it('bounds kv to 64 ops over 256 keys and refuses getPrefix and queue ops', () => {
    const get = { op: 'get', ns: 'a', key: 'k' };
    expect(tx({ kv: Array(64).fill(get) })).toBe(64);
    expect(tx({ kv: Array(65).fill(get) })).toBe('kv_too_many_ops');
    const keys = Array.from({ length: 257 }, (_, i) => `${i}`);
    expect(tx({ kv: [{ op: 'getMany', ns: 'a', keys }] })).toBe('kv_too_many_keys');
    expect(tx({ kv: [{ op: 'getPrefix', ns: 'a', prefix: 'p' }] }))
      .toBe('kv_get_prefix_not_allowed_in_transaction');
    expect(tx({ operations: [{ type: 'ack' }] })).toBe('queue_not_available');
    expect(tx({ requiredLeases: ['l'] })).toBe('queue_not_available');
    expect(tx({ kv: {} })).toBe('kv_bad_body');
    expect(tx([])).toBe('kv_bad_body');
  });
  it('validates quota rows and tenants', () => {
    expect(validateQuotaSettings({ maxRows: 5 })).toEqual({ enabled: true, maxRows: 5,
      maxBytes: null, maxReadsPerSec: null, maxWritesPerSec: null });
    expect(isKvError(validateQuotaSettings({ maxRows: -1 }))).toBe(true);
    expect(isKvError(validateQuotaSettings({ enabled: 'yes' }))).toBe(true);
    expect(validateTenantSegment('AAAAAAAA-bbbb-cccc-dddd-eeeeeeeeeeee'))
      .toBe('aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee');
    expect(isKvError(validateTenantSegment('x'))).toBe(true);
  });
});
