// The machine's request parser (StateMachine.parseRequest): every reason of WIRE.md's
// validation table against the reference (validate.ts), the nesting bound, a 60 MB value,
// numbers read exactly (and where that differs from the reference), invalid UTF-8,
// percent-decoding, the growth estimate, the limits and the frame.
import { describe, expect, it } from 'vitest';
import { decodeCommand } from '../../host/machine/command-decode.js';
import { encodeCommand } from '../../host/machine/codec.js';
import type { Command, KvCall, KvOp } from '../../host/machine/commands.js';
import { DEFAULT_TENANT } from '../../host/machine/commands.js';
import {
  encodeRequestFrame, type ParseOutcome, type RequestFrame,
} from '../../host/machine/request.js';
import { StateMachine } from '../../host/machine/state-machine.js';
import { loadConfig, type KvLimits } from '../../host/node/config.js';
import { referenceParse } from '../helpers/request-reference.js';

const limits = loadConfig({}, {}).limits;
const T = DEFAULT_TENANT;

function machine(l: KvLimits = limits): StateMachine {
  const m = StateMachine.create();
  m.setRequestLimits(l);
  return m;
}

const shared = machine();

function batch(body: string | Uint8Array, extra: Partial<RequestFrame> = {}): RequestFrame {
  return { route: 'batch', body: typeof body === 'string' ? Buffer.from(body) : body, tenant: T,
    requireGrant: false, ...extra };
}

function refusalOf(outcome: ParseOutcome): [number, string, string] | 'command' {
  return outcome.kind === 'refused' ? [outcome.status, outcome.reason, outcome.detail]
    : 'command';
}

/** The call the machine wrote, decoded. */
function callOf(outcome: ParseOutcome): KvCall {
  if (outcome.kind !== 'command') throw new Error(`refused: ${JSON.stringify(outcome)}`);
  const decoded = decodeCommand(outcome.command);
  if (!decoded.ok || decoded.command.kind !== 'call') throw new Error('not a call');
  return decoded.command.call;
}

function opOf(outcome: ParseOutcome): KvOp {
  return callOf(outcome).ops[0]!;
}

const put = (fields: string): string =>
  `[{"op":"put","ns":"a","key":"k",${fields}}]`;

// [name, frame, status, reason]: at least one of every reason the parser gives.
const REASONS: Array<[string, RequestFrame, number, string]> = [
  ['not JSON', batch('{"operations":['), 400, 'kv_bad_body'],
  ['wrong root', batch('"ops"'), 400, 'kv_bad_body'],
  ['unknown op', batch('[{"op":"scan","ns":"a","key":"k"}]'), 400, 'kv_unknown_op'],
  ['bad namespace', batch('[{"op":"get","ns":"A","key":"k"}]'), 400, 'kv_bad_namespace'],
  ['bad key', batch('[{"op":"get","ns":"a","key":""}]'), 400, 'kv_bad_key'],
  ['no expiry', batch(put('"value":1')), 400, 'kv_expiry_not_specified'],
  ['bad ttl', batch(put('"value":1,"ttlSeconds":0')), 400, 'kv_bad_ttl'],
  ['bad expect', batch(put('"value":1,"forever":true,"expect":null')), 400, 'kv_bad_expect'],
  ['no prefix', batch('[{"op":"getPrefix","ns":"a","prefix":""}]'), 400, 'kv_prefix_required'],
  ['two writes to a key', batch('[{"op":"delete","ns":"a","key":"k"},' +
    '{"op":"incr","ns":"a","key":"k","delta":1,"forever":true}]'), 400,
  'kv_duplicate_key_in_call'],
  ['tenant field', batch('[{"op":"get","ns":"a","key":"k","tenantId":"x"}]'), 400,
    'kv_tenant_not_an_input'],
  ['too many ops', batch('[' + new Array(257).fill('{"op":"get","ns":"a","key":"k"}')
    .join(',') + ']'), 400, 'kv_too_many_ops'],
  ['too many keys', batch('[{"op":"getPrefix","ns":"a","prefix":"k","limit":1000},' +
    '{"op":"getMany","ns":"a","keys":["a","b","c","d","e","f","g","h","i","j","k","l",' +
    '"m","n","o","p","q","r","s","t","u","v","w","x","y"]}]'), 400, 'kv_too_many_keys'],
  ['query string', { route: 'path', method: 'GET', rawNs: 'a', rawKey: 'k', hasQuery: true,
    body: null, tenant: T, requireGrant: false }, 400, 'kv_no_query_string'],
  ['field in path', { route: 'path', method: 'PUT', rawNs: 'a', rawKey: 'k',
    body: Buffer.from('{"key":"k","value":1,"forever":true}'), tenant: T, requireGrant: false },
  400, 'kv_field_in_path'],
  ['getPrefix in a transaction', { route: 'transaction', transactionId: 'tx-1', tenant: T,
    body: Buffer.from('{"kv":[{"op":"getPrefix","ns":"a","prefix":"k"}]}'),
    requireGrant: false }, 400, 'kv_get_prefix_not_allowed_in_transaction'],
  ['queue op', { route: 'transaction', transactionId: 'tx-1', tenant: T,
    body: Buffer.from('{"operations":[{"push":1}],"kv":[]}'), requireGrant: false }, 400,
  'queue_not_available'],
  ['missing value', batch(put('"forever":true')), 400, 'kv_bad_request'],
  ['value too large', batch(put(`"forever":true,"value":"${'v'.repeat(65535)}"`)), 413,
    'kv_value_too_large'],
  ['key too large', batch(`[{"op":"get","ns":"a","key":"${'é'.repeat(257)}"}]`), 413,
    'kv_key_too_large'],
];

describe('every refusal of the validation table, as validate.ts gives it', () => {
  it.each(REASONS)('%s', (_name, frame, status, reason) => {
    const got = refusalOf(shared.parseRequest(frame));
    expect(got).toEqual(refusalOf(referenceParse(frame, limits)));
    expect(got === 'command' ? got : got.slice(0, 2)).toEqual([status, reason]);
  });
});

describe('nesting bound (JSON_DEPTH_MAX = 512 levels, the root included)', () => {
  const nested = (depth: number): string => '['.repeat(depth) + ']'.repeat(depth);

  it('a value nested 5,000 levels deep is a 400 on both sides (it was a 500)', () => {
    const frame = batch(put(`"forever":true,"value":${nested(5000)}`));
    const want = [400, 'kv_bad_body',
      'the body nests arrays and objects deeper than 512 levels'];
    expect(refusalOf(shared.parseRequest(frame))).toEqual(want);
    expect(refusalOf(referenceParse(frame, limits))).toEqual(want);
  });

  it('512 levels in all are stored; 513 are refused', () => {
    // The root array, the op object and the value: 2 levels above the value.
    const at = (depth: number): RequestFrame =>
      batch(put(`"forever":true,"value":${nested(depth - 2)}`));
    expect(opOf(shared.parseRequest(at(512)))).toMatchObject({ valueJson: nested(510) });
    expect(refusalOf(shared.parseRequest(at(513)))).toEqual(refusalOf(referenceParse(at(513),
      limits)));
    expect(refusalOf(shared.parseRequest(at(513)))).not.toBe('command');
  });

  it('a syntax error anywhere wins over depth', () => {
    const frame = batch(nested(600) + ',');
    expect(refusalOf(shared.parseRequest(frame))).toEqual([400, 'kv_bad_body',
      'the body is not JSON']);
  });

  it('a million levels: no stack to exhaust', () => {
    const frame = batch(nested(1_000_000));
    expect(refusalOf(shared.parseRequest(frame))[1]).toBe('kv_bad_body');
  });
});

describe('values', () => {
  it('a 60 MB body of one huge value is 413 kv_value_too_large on both sides', () => {
    const body = Buffer.alloc(60 * 1024 * 1024 + 64, 0x78);
    const head = Buffer.from('[{"op":"put","ns":"a","key":"k","forever":true,"value":"');
    head.copy(body);
    Buffer.from('"}]').copy(body, body.length - 3);
    const frame = batch(body);
    const want = [413, 'kv_value_too_large',
      'operations[0]: the value is over 65536 bytes of compact JSON'];
    expect(refusalOf(shared.parseRequest(frame))).toEqual(want);
    expect(refusalOf(referenceParse(frame, limits))).toEqual(want);
  });

  it('is kept as the client wrote it, whitespace removed', () => {
    const op = opOf(shared.parseRequest(batch(put(
      '"forever":true,"value": { "b" : [ 1.50 , -0, 1E2, "\\u0041\\n" ] , "a":null , "a":2 }'))));
    expect(op).toMatchObject({ valueJson: '{"b":[1.50,-0,1E2,"\\u0041\\n"],"a":null,"a":2}' });
  });

  it('the 64 KiB ceiling applies to that compact text', () => {
    const spelled = `"forever":true,"value":"${'\\u0041'.repeat(11000)}"`; // 66,002 bytes
    expect(refusalOf(shared.parseRequest(batch(put(spelled))))[1]).toBe('kv_value_too_large');
    // The reference measured its own re-serialisation (11,002 bytes) and took it.
    expect(referenceParse(batch(put(spelled)), limits).kind).toBe('command');
  });

  it('a number beyond a double is refused, wherever it sits in the value', () => {
    const detail = 'operations[0]: the value holds a number too large for a double ' +
      '(it would be stored as null)';
    for (const v of ['1e400', '-1e400', '[1,{"a":[1e309]}]', '1' + '0'.repeat(309)]) {
      const frame = batch(put(`"forever":true,"value":${v}`));
      expect(refusalOf(shared.parseRequest(frame))).toEqual([400, 'kv_bad_request', detail]);
      expect(refusalOf(referenceParse(frame, limits))).toEqual([400, 'kv_bad_request', detail]);
    }
  });

  it('the overflow threshold is exact: half an ulp above the largest double', () => {
    const threshold = ((1n << 1024n) - (1n << 970n)).toString();
    const justBelow = (BigInt(threshold) - 1n).toString();
    for (const [literal, finite] of [[justBelow, true], [threshold, false],
      ['1.7976931348623158e308', true], ['1.7976931348623159e308', false],
      ['0.' + justBelow + 'e309', true], [threshold + '.0000', false],
      [justBelow + '.999999999999', true]] as const) {
      expect(Number.isFinite(JSON.parse(literal)), literal).toBe(finite);
      const frame = batch(put(`"forever":true,"value":${literal}`));
      expect(shared.parseRequest(frame).kind, literal).toBe(finite ? 'command' : 'refused');
    }
  });

  it('shadowed members inside a value count: overflow and size (the reference drops them)', () => {
    const dup = batch(put('"forever":true,"value":{"a":1e400,"a":1}'));
    expect(refusalOf(shared.parseRequest(dup))[1]).toBe('kv_bad_request');
    expect(referenceParse(dup, limits).kind).toBe('command');
  });

  it('invalid UTF-8 in strings becomes U+FFFD as Node decodes it', () => {
    const bytes = Buffer.concat([Buffer.from('[{"op":"put","ns":"a","key":"k","forever":true,' +
      '"value":"x'), Buffer.from([0xe0, 0x80, 0xed, 0xa0, 0x80, 0xf0, 0x90]),
    Buffer.from('"}]')]);
    const frame = batch(bytes);
    const op = opOf(shared.parseRequest(frame));
    expect(op).toMatchObject({ valueJson: '"x\u{fffd}\u{fffd}\u{fffd}\u{fffd}\u{fffd}\u{fffd}"' });
    const keyBytes = Buffer.concat([Buffer.from('[{"op":"get","ns":"a","key":"'),
      Buffer.from([0xc3, 0x28, 0xff]), Buffer.from('"}]')]);
    expect(opOf(shared.parseRequest(batch(keyBytes)))).toEqual({ op: 'get', ns: 'a',
      key: '\u{fffd}(\u{fffd}' });
  });
});

describe('numbers are read exactly as written', () => {
  const incr = (delta: string): RequestFrame =>
    batch(`[{"op":"incr","ns":"a","key":"c","forever":true,"delta":${delta}}]`);
  const deltaOf = (frame: RequestFrame): unknown => {
    const op = opOf(shared.parseRequest(frame));
    return op.op === 'incr' ? op.delta : null;
  };

  it('incr operands become canonical decimal text', () => {
    for (const [literal, text] of [['1.5e1', '15'], ['-0', '0'], ['0.000', '0'],
      ['1E+21', '1000000000000000000000'], ['-12.50', '-12.5'], ['2.5e-3', '0.0025'],
      ['100e-2', '1'], ['0.1', '0.1']] as const) {
      expect(deltaOf(incr(literal)), literal).toBe(text);
    }
  });

  it('where a double would round, the machine does not (differs from the reference)', () => {
    expect(deltaOf(incr('0.30000000000000001'))).toBe('0.30000000000000001');
    expect(opOf(referenceParse(incr('0.30000000000000001'), limits))).toMatchObject({
      delta: '0.3' });
    expect(deltaOf(incr('1e-400'))).toBe('0.' + '0'.repeat(399) + '1');
    expect(opOf(referenceParse(incr('1e-400'), limits))).toMatchObject({ delta: '0' });
    expect(deltaOf(incr('12345678901234567890'))).toBe('12345678901234567890');
  });

  it('an operand with more than 1,000 digits after the point is refused', () => {
    expect(refusalOf(shared.parseRequest(incr('1e-1001')))).toEqual([400, 'kv_bad_request',
      'operations[0]: delta has more than 1000 digits after the point']);
    expect(deltaOf(incr('1e-1000'))).toBe('0.' + '0'.repeat(999) + '1');
  });

  it('an operand beyond a double is not finite, as before', () => {
    expect(refusalOf(shared.parseRequest(incr('1e400')))).toEqual([400, 'kv_bad_request',
      'operations[0]: delta must be a finite number']);
  });

  it('ttlSeconds, expect and limit are checked as exact integers', () => {
    const ttl = batch(put('"value":1,"ttlSeconds":1.0000000000000000001'));
    expect(refusalOf(shared.parseRequest(ttl))[1]).toBe('kv_bad_ttl');
    expect(referenceParse(ttl, limits).kind).toBe('command'); // rounded to 1
    const expectTiny = batch(put('"value":1,"forever":true,"expect":1e-400'));
    expect(refusalOf(shared.parseRequest(expectTiny))[1]).toBe('kv_bad_expect');
    expect(referenceParse(expectTiny, limits).kind).toBe('command'); // rounded to 0
    const big = batch(put('"value":1,"forever":true,"expect":9007199254740990.6'));
    expect(refusalOf(shared.parseRequest(big))[1]).toBe('kv_bad_expect');
    expect(opOf(shared.parseRequest(batch(put('"value":1,"ttlSeconds":6e1,"expect":5.0')))))
      .toMatchObject({ expiry: { kind: 'ttl', ttlSeconds: 60 }, expect: 5 });
    const limit = (l: string): unknown => {
      const op = opOf(shared.parseRequest(
        batch(`[{"op":"getPrefix","ns":"a","prefix":"k","limit":${l}}]`)));
      return op.op === 'getPrefix' ? op.limit : null;
    };
    expect([limit('999.99999999999999999'), limit('1.9'), limit('0.5'), limit('-1e400'),
      limit('1e400'), limit('-0'), limit('7')]).toEqual([999, 1, 1, 1, 1000, 1, 7]);
  });
});

describe('path routes', () => {
  const path = (rawKey: string, rawNs = 'a'): RequestFrame => ({ route: 'path', method: 'GET',
    rawNs, rawKey, body: null, tenant: T, requireGrant: false });

  it('decode the key once, as decodeURIComponent does', () => {
    for (const raw of ['a%2Fb', '%C3%A9t%C3%A9', '%F0%9F%98%80', 'é', '%25', 'a/b', '%c3%a9']) {
      expect(opOf(shared.parseRequest(path(raw))), raw).toEqual({ op: 'get', ns: 'a',
        key: decodeURIComponent(raw) });
    }
  });

  it('refuse what decodeURIComponent refuses', () => {
    for (const raw of ['%', '%2', '%zz', '%C3', '%C3x', '%C3%28', '%E0%80%80', '%ED%A0%80',
      '%F4%90%80%80', '%C0%AF', '%80', '%F8%88%80%80%80']) {
      expect(() => decodeURIComponent(raw)).toThrow();
      expect(refusalOf(shared.parseRequest(path(raw))), raw).toEqual([400, 'kv_bad_key',
        'the key is not valid percent-encoding']);
    }
    expect(refusalOf(shared.parseRequest(path('k', '%zz')))[1]).toBe('kv_bad_namespace');
    expect(refusalOf(shared.parseRequest(path('a%00b')))).toEqual([400, 'kv_bad_key',
      'key must not contain NUL']);
  });

  it('a put takes its fields from the body, and answers as a single element', () => {
    const frame: RequestFrame = { route: 'path', method: 'PUT', rawNs: 'a', rawKey: 'k',
      body: Buffer.from('{"value":{"x":1},"ttlSeconds":30,"required":true}'), tenant: T,
      requireGrant: true };
    const outcome = shared.parseRequest(frame);
    expect(outcome).toMatchObject({ kind: 'command', hasWrites: true, opCount: 1 });
    expect(decodeCommand((outcome as { command: Uint8Array }).command)).toEqual({
      ok: true, command: { kind: 'call', flags: { requireGrant: true }, call: {
        tenant: T, shape: 'single', readBytesCeiling: limits.maxReadBytes,
        ops: [{ op: 'put', sentAs: 'put', ns: 'a', key: 'k', valueJson: '{"x":1}',
          expiry: { kind: 'ttl', ttlSeconds: 30 }, expect: null, required: true }] } },
    });
  });
});

describe('the command and its header', () => {
  it('a transaction carries its id and shape; an empty call has no ops', () => {
    const tx = shared.parseRequest({ route: 'transaction', transactionId: 'tx-7', tenant: T,
      body: Buffer.from('{"operations":null,"kv":[]}'), requireGrant: false });
    expect(tx).toMatchObject({ kind: 'command', opCount: 0, hasWrites: false, growthBytes: 0 });
    expect(callOf(tx)).toEqual({ tenant: T, shape: 'transaction', transactionId: 'tx-7',
      ops: [], readBytesCeiling: limits.maxReadBytes });
  });

  it('each call carries its own tenant, whichever tenant the call before it named', () => {
    // The frame writer keeps the last tenant's bytes; a change of tenant must replace them.
    const tenants = [T, '11111111-2222-3333-4444-555555555555', T, 'ténant-ü', 'ténant-ü', T];
    for (const tenant of tenants) {
      expect(callOf(shared.parseRequest(batch('[{"op":"get","ns":"a","key":"k"}]',
        { tenant }))).tenant).toBe(tenant);
      const path = shared.parseRequest({ route: 'path', method: 'GET', rawNs: 'a', rawKey: 'k',
        body: null, tenant, requireGrant: false });
      expect(callOf(path).tenant).toBe(tenant);
    }
  });

  it('the walk steps over containers beside the operations, whatever they hold', () => {
    // The root's walk jumps over each container member to where the syntax pass saw it end;
    // containers holding brackets in strings, empty ones, nested ones and a second
    // `operations` (the last wins) must land it on the next member every time.
    const ops = '[{"op":"put","ns":"a","key":"k","value":{"v":[1,"]}"]},"forever":true}]';
    const plain = callOf(shared.parseRequest(batch(`{"operations":${ops}}`)));
    const bodies = [
      `{"x":{"a":[1,{"b":"}]"}]},"operations":${ops},"y":[]}`,
      `{"e":{},"operations":[],"f":[[],{}],"operations":${ops}}`,
      `{ "operations" : ${ops.replace(/,/g, ' , ')} , "z" : [ "[" , { } ] }`,
      `{"operations":[{"op":"get","ns":"a","key":"other"}],"w":[{"x":"\\"]"}],"operations":${ops}}`,
    ];
    for (const body of bodies) {
      const outcome = shared.parseRequest(batch(body));
      expect(callOf(outcome).ops, body).toEqual(plain.ops);
      expect(refusalOf(outcome), body).toBe(refusalOf(referenceParse(batch(body), limits)));
    }
    // A bare array: each operation sits at the depth the spans note.
    const bare = shared.parseRequest(batch(`[{"op":"get","ns":"a","key":"k"},${ops.slice(1)}`));
    expect(callOf(bare).ops.map((op) => op.op)).toEqual(['get', 'put']);
  });

  it('reads and checks only: no writes', () => {
    const out = shared.parseRequest(batch('{"operations":[{"op":"get","ns":"a","key":"k"},' +
      '{"op":"check","ns":"a","key":"k","expect":0,"required":true}]}'));
    expect(out).toMatchObject({ kind: 'command', opCount: 2, hasWrites: false });
  });
});

describe('growthBytes: the change of rowFootprint totals if every write applied', () => {
  /**
   * rowFootprint: the allocation of a row buffer (header 32 + store key (tenant 4, ns, NUL,
   * key) + value), rounded as assembly/row.ts `rowCapacity` does, + overhead 64.
   */
  const capacity = (rowBytes: number): number => {
    let payload = (16 + rowBytes + 15) & ~15;
    if (payload >= 256) {
      const step = 2 ** (Math.floor(Math.log2(payload)) - 4);
      payload = Math.ceil(payload / step) * step;
    }
    return payload - 16;
  };
  const rowFootprint = (storeKeyBytes: number, valueBytes: number): number =>
    capacity(32 + storeKeyBytes + valueBytes) + 64;
  const footprint = (ns: string, key: string, value: string): number =>
    rowFootprint(4 + Buffer.byteLength(ns) + 1 + Buffer.byteLength(key),
      Buffer.byteLength(value));
  /** The change of footprint when the value at a:key goes from `from` to `to` bytes. */
  const change = (key: string, from: number, to: number): number =>
    rowFootprint(6 + key.length, to) - rowFootprint(6 + key.length, from);

  function withRows(rows: Array<[string, string]>): StateMachine {
    const m = machine();
    const ops: KvOp[] = rows.map(([key, valueJson]) => ({ op: 'put', sentAs: 'put', ns: 'a',
      key, valueJson, expiry: { kind: 'ttl', ttlSeconds: 1 }, expect: null, required: false }));
    const command: Command = { kind: 'call', flags: { requireGrant: false },
      call: { tenant: T, ops, readBytesCeiling: 0 } };
    m.apply(1, 1000, encodeCommand(command));
    return m;
  }

  const growth = (m: StateMachine, body: string, tenant = T): number => {
    const out = m.parseRequest(batch(body, { tenant }));
    if (out.kind !== 'command') throw new Error(JSON.stringify(out));
    return out.growthBytes;
  };

  it('a tenant the machine has never seen: every write is a new row', () => {
    const m = machine();
    expect(growth(m, '[{"op":"put","ns":"a","key":"k","value":"abc","forever":true},' +
      '{"op":"incr","ns":"a","key":"c","delta":12,"forever":true},' +
      '{"op":"delete","ns":"a","key":"d"}]', 'someone-new')).toBe(
      footprint('a', 'k', '"abc"') + footprint('a', 'c', '12'));
  });

  it('a put replaces a row (expired ones too: they hold memory until swept)', () => {
    const m = withRows([['k', '"abcdef"']]); // expired after 1 s; parsing knows no time
    expect(growth(m, put('"value":"ab","forever":true'))).toBe(change('k', 8, 4));
    expect(growth(m, put('"value": [ 1 , 2 ] ,"forever":true'))).toBe(change('k', 8, 5));
    const long = 'x'.repeat(300);
    expect(growth(m, put(`"value":"${long}","forever":true`))).toBe(change('k', 8, 302));
    expect(change('k', 8, 302)).toBeGreaterThan(0);
  });

  it('a delete frees its row; of an absent key, nothing', () => {
    const m = withRows([['k', '1'], ['j', '22']]);
    expect(growth(m, '[{"op":"delete","ns":"a","key":"k"},{"op":"delete","ns":"a","key":"x"}]'))
      .toBe(-footprint('a', 'k', '1'));
  });

  it('incr: a new counter row, or the change of its text', () => {
    const m = withRows([['nine', '9'], ['word', '"text"'], ['big', '1e300']]);
    const incr = (key: string, delta: string): string =>
      `[{"op":"incr","ns":"a","key":"${key}","delta":${delta},"forever":true}]`;
    expect(growth(m, incr('new', '5'))).toBe(footprint('a', 'new', '5'));
    expect(growth(m, incr('nine', '1'))).toBe(change('nine', 1, 2)); // 9 -> 10
    // 9 -> -91, or -100 once expired
    expect(growth(m, incr('nine', '-100'))).toBe(change('nine', 1, 4));
    // Only an expired word is replaced.
    expect(growth(m, incr('word', '7'))).toBe(change('word', 6, 1));
    // The delta's length is added: an upper bound.
    expect(growth(m, incr('big', '0.5'))).toBe(change('big', 5, 8));
  });

  it('below the memory budget, 0 (nothing to check); at it, exact', () => {
    const m = withRows([['k', '"abcdef"'], ['j', '1']]);
    const stateBytes = m.memoryUse().stateBytes;
    const body = '[{"op":"put","ns":"a","key":"k","value":"ab","forever":true},' +
      '{"op":"delete","ns":"a","key":"j"}]';
    const exact = change('k', 8, 4) - footprint('a', 'j', '1');
    m.setGrowthBudget(stateBytes + 1);
    expect(growth(m, body)).toBe(0);
    expect(growth(m, '[{"op":"put","ns":"a","key":"new","value":1,"forever":true}]')).toBe(0);
    m.setGrowthBudget(stateBytes);
    expect(growth(m, body)).toBe(exact);
    expect(() => m.setGrowthBudget(-1)).toThrow(RangeError);
  });
});

describe('limits and frames', () => {
  it('limits beyond what the machine applies are refused at start', () => {
    const m = StateMachine.create();
    expect(() => m.setRequestLimits({ ...limits, maxValueBytes: 2 * 1024 * 1024 }))
      .toThrow(/maxValueBytes = 2097152 is beyond/);
    expect(() => m.setRequestLimits({ ...limits, maxOpsPerCall: 0 })).toThrow(/maxOpsPerCall/);
    expect(() => m.setRequestLimits({ ...limits, maxReadBytes: -1 })).toThrow(/maxReadBytes/);
  });

  it('the limits set are the ones enforced', () => {
    const m = machine({ ...limits, maxOpsPerCall: 1, maxKeyBytes: 3 });
    const two = batch('[{"op":"get","ns":"a","key":"k"},{"op":"get","ns":"a","key":"k"}]');
    expect(refusalOf(m.parseRequest(two))).toEqual(refusalOf(referenceParse(two,
      { ...limits, maxOpsPerCall: 1 })));
    expect(refusalOf(m.parseRequest(batch('[{"op":"get","ns":"a","key":"abcd"}]')))[1])
      .toBe('kv_key_too_large');
  });

  it('a malformed frame is the caller\'s bug: it throws, and the machine lives on', () => {
    const good = encodeRequestFrame(batch('[]'));
    const bad = [good.subarray(0, 5), Uint8Array.from([9, ...good.subarray(1)]),
      Uint8Array.from([...good, 0]), encodeRequestFrame({ ...batch('[]'), tenant: '' }),
      encodeRequestFrame({ route: 'transaction', body: Buffer.from('{}'), tenant: T,
        requireGrant: false })];
    for (const frame of bad) expect(() => shared.parseRequestFrame(frame)).toThrow(/malformed/);
    expect(shared.parseRequestFrame(good).kind).toBe('command');
  });
});
