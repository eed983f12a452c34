/**
 * The KV surface of one durable node, over loopback, against a real process: every route,
 * rule and refusal of spec/kv-concepts.md, spec/kv-routes.md and spec/WIRE.md.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  call, kv, removeDir, startNode, tempDir, UNLIMITED_RATES, type NodeProcess,
} from '../helpers/node-process.js';

let node: NodeProcess;
let dir: string;
let base: string;

beforeAll(async () => {
  dir = tempDir('routes');
  node = await startNode({ dataDir: dir, env: UNLIMITED_RATES });
  base = node.url;
});

afterAll(async () => {
  expect(await node.stop()).toBe(0);
  removeDir(dir);
});

const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
let keySeq = 0;
const fresh = (name: string) => `${name}-${++keySeq}`;

describe('POST /api/v1/kv', () => {
  it('writes and reads back in one call, index-aligned (kv-concepts example)', async () => {
    const key = fresh('9137');
    const r = await kv(base, [
      { op: 'put', ns: 'orders', key, value: { status: 'paid' }, ttlSeconds: 2592000 },
      { op: 'get', ns: 'orders', key },
    ]);
    expect(r.status).toBe(200);
    const [put, get] = r.body.results;
    expect(put).toMatchObject({ index: 0, op: 'put', applied: true, key,
      value: { status: 'paid' } });
    expect(put.version).toBeGreaterThan(0);
    expect(get).toMatchObject({ index: 1, op: 'get', found: true, key, value: { status: 'paid' },
      version: put.version });
    expect(get.expiresAt).toMatch(ISO_MS);
    expect(get.updatedAt).toMatch(ISO_MS);
    const ttlMs = Date.parse(get.expiresAt) - Date.parse(get.updatedAt);
    expect(ttlMs).toBe(2592000 * 1000);
  });

  it('answers an empty list with no results, and takes a bare array', async () => {
    expect((await call(base, 'POST', '/api/v1/kv', { operations: [] })).body)
      .toEqual({ results: [] });
    const r = await call(base, 'POST', '/api/v1/kv', [{ op: 'get', ns: 'a', key: 'nope' }]);
    expect(r.body.results[0]).toEqual({ index: 0, op: 'get', found: false, key: 'nope' });
  });

  it('keeps null as a value, distinct from absence', async () => {
    const key = fresh('n');
    await kv(base, [{ op: 'put', ns: 'x', key, value: null, forever: true }]);
    const r = await kv(base, [{ op: 'get', ns: 'x', key }]);
    expect(r.body.results[0]).toMatchObject({ found: true, value: null, expiresAt: null });
  });

  it('evaluates a call\'s reads after its writes', async () => {
    const key = fresh('ryw');
    const r = await kv(base, [
      { op: 'get', ns: 'x', key },
      { op: 'put', ns: 'x', key, value: 7, ttlSeconds: 60 },
    ]);
    expect(r.body.results[0]).toMatchObject({ found: true, value: 7 });
  });

  it('gives putIfAbsent exactly one winner; the loser sees the winner', async () => {
    const key = fresh('ord');
    const body = (v: string) => [{ op: 'putIfAbsent', ns: 'orders', key, value: { chargeId: v },
      ttlSeconds: 604800 }];
    const answers = await Promise.all(['a', 'b', 'c', 'd'].map((v) => kv(base, body(v))));
    const results = answers.map((a) => a.body.results[0]);
    const winners = results.filter((r) => r.applied);
    expect(winners).toHaveLength(1);
    for (const loser of results.filter((r) => !r.applied)) {
      expect(loser).toMatchObject({ op: 'putIfAbsent', reason: 'exists',
        value: winners[0].value, version: winners[0].version });
    }
  });

  it('applies expect N only at version N, and never creates', async () => {
    const key = fresh('cas');
    const absent = await kv(base, [{ op: 'put', ns: 'c', key, value: 1, ttlSeconds: 60,
      expect: 5 }]);
    expect(absent.body.results[0]).toMatchObject({ applied: false, reason: 'absent',
      value: null, version: 0 });
    const created = (await kv(base, [{ op: 'put', ns: 'c', key, value: 1, ttlSeconds: 60 }]))
      .body.results[0];
    const stale = await kv(base, [{ op: 'put', ns: 'c', key, value: 2, ttlSeconds: 60,
      expect: created.version + 1000 }]);
    expect(stale.body.results[0]).toMatchObject({ applied: false, reason: 'version', value: 1,
      version: created.version });
    const won = await kv(base, [{ op: 'put', ns: 'c', key, value: 2, ttlSeconds: 60,
      expect: created.version }]);
    expect(won.body.results[0]).toMatchObject({ applied: true, value: 2 });
    expect(won.body.results[0].version).toBeGreaterThan(created.version);
  });

  it('answers delete with the deleted value, absent, and expect 0 both ways', async () => {
    const key = fresh('del');
    const put = (await kv(base, [{ op: 'put', ns: 'd', key, value: 'v', forever: true }]))
      .body.results[0];
    const live = await kv(base, [{ op: 'delete', ns: 'd', key, expect: 0 }]);
    expect(live.body.results[0]).toMatchObject({ applied: false, reason: 'exists' });
    const del = await kv(base, [{ op: 'delete', ns: 'd', key }]);
    expect(del.body.results[0]).toEqual({ index: 0, op: 'delete', applied: true, key,
      value: 'v', version: put.version });
    const again = await kv(base, [{ op: 'delete', ns: 'd', key }]);
    expect(again.body.results[0]).toMatchObject({ applied: false, reason: 'absent', value: null,
      version: 0 });
    const zero = await kv(base, [{ op: 'delete', ns: 'd', key, expect: 0 }]);
    expect(zero.body.results[0]).toMatchObject({ applied: true, value: null, version: 0 });
  });

  it('aborts the whole call when a required precondition loses', async () => {
    const marker = fresh('marker');
    const other = fresh('other');
    await kv(base, [{ op: 'putIfAbsent', ns: 'orders', key: marker,
      value: { chargeId: 'ch_8812' }, ttlSeconds: 600 }]);
    const r = await kv(base, [
      { op: 'put', ns: 'orders', key: other, value: 1, ttlSeconds: 600 },
      { op: 'putIfAbsent', ns: 'orders', key: marker, value: { chargeId: 'x' }, ttlSeconds: 600,
        required: true },
    ]);
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ ok: false, reason: 'kv_precondition', failedIndex: 1,
      kvReason: 'exists', value: { chargeId: 'ch_8812' } });
    expect(r.body.version).toBeGreaterThan(0);
    const after = await kv(base, [{ op: 'get', ns: 'orders', key: other }]);
    expect(after.body.results[0].found).toBe(false);
  });

  it('reports the lowest failedIndex when several required ops lose', async () => {
    const r = await kv(base, [
      { op: 'put', ns: 'q', key: fresh('a'), value: 1, ttlSeconds: 9, expect: 3, required: true },
      { op: 'put', ns: 'q', key: fresh('b'), value: 1, ttlSeconds: 9, expect: 4, required: true },
    ]);
    expect(r.body).toMatchObject({ ok: false, failedIndex: 0, kvReason: 'absent', version: 0,
      value: null });
  });

  it('checks a version without writing (check)', async () => {
    const key = fresh('chk');
    const absent = await kv(base, [{ op: 'check', ns: 'c', key, expect: 0 }]);
    expect(absent.body.results[0]).toMatchObject({ op: 'check', applied: true, version: 0 });
    const put = (await kv(base, [{ op: 'put', ns: 'c', key, value: 1, forever: true }]))
      .body.results[0];
    const wrong = await kv(base, [{ op: 'check', ns: 'c', key, expect: 0 }]);
    expect(wrong.body.results[0]).toMatchObject({ applied: false, reason: 'exists' });
    const right = await kv(base, [{ op: 'check', ns: 'c', key, expect: put.version }]);
    expect(right.body.results[0]).toMatchObject({ applied: true, version: put.version });
  });
});

describe('incr', () => {
  it('is a rate limiter in one call: applied is the admission decision', async () => {
    const key = fresh('acme:2026-08-17T14');
    const op = { op: 'incr', ns: 'quota', key, delta: 1, max: 3, ttlSeconds: 3600 };
    const seen = [];
    for (let i = 0; i < 5; i++) seen.push((await kv(base, [op])).body.results[0]);
    expect(seen.map((r) => r.applied)).toEqual([true, true, true, false, false]);
    expect(seen.map((r) => r.value)).toEqual([1, 2, 3, 3, 3]);
    expect(seen[3]).toMatchObject({ reason: 'limit', version: seen[2].version });
  });

  it('refuses a first increment outside the bounds with value 0 and version 0', async () => {
    const r = await kv(base, [{ op: 'incr', ns: 'q', key: fresh('k'), delta: 5, max: 3,
      forever: true }]);
    expect(r.body.results[0]).toMatchObject({ applied: false, reason: 'limit', value: 0,
      version: 0 });
  });

  it('adds exact decimals', async () => {
    const key = fresh('dec');
    await kv(base, [{ op: 'incr', ns: 'q', key, delta: 0.1, forever: true }]);
    const r = await kv(base, [{ op: 'incr', ns: 'q', key, delta: 0.2, forever: true }]);
    expect(r.body.results[0].value).toBe(0.3);
    expect(r.text).toContain('"value":0.3');
  });

  it('refuses a live non-number with reason type', async () => {
    const key = fresh('t');
    await kv(base, [{ op: 'put', ns: 'q', key, value: { a: 1 }, ttlSeconds: 60 }]);
    const r = await kv(base, [{ op: 'incr', ns: 'q', key, delta: 1, ttlSeconds: 60 }]);
    expect(r.body.results[0]).toMatchObject({ applied: false, reason: 'type', value: { a: 1 } });
  });

  it('keeps a live counter\'s expiry (create-only TTL)', async () => {
    const key = fresh('ttl');
    await kv(base, [{ op: 'incr', ns: 'q', key, delta: 1, ttlSeconds: 100 }]);
    const first = (await kv(base, [{ op: 'get', ns: 'q', key }])).body.results[0];
    await kv(base, [{ op: 'incr', ns: 'q', key, delta: 1, ttlSeconds: 5000 }]);
    const second = (await kv(base, [{ op: 'get', ns: 'q', key }])).body.results[0];
    expect(second.value).toBe(2);
    expect(second.expiresAt).toBe(first.expiresAt);
  });

  it('counts an expired counter from zero with a new window', async () => {
    const key = fresh('win');
    await kv(base, [{ op: 'put', ns: 'q', key, value: 'not a number', ttlSeconds: 1 }]);
    await new Promise((resolve) => setTimeout(resolve, 1100));
    const r = await kv(base, [{ op: 'incr', ns: 'q', key, delta: 2, ttlSeconds: 60 }]);
    expect(r.body.results[0]).toMatchObject({ applied: true, value: 2 });
  });
});

describe('lifetimes', () => {
  it('hides an expired key at once and replaces the expiry on put', async () => {
    const key = fresh('exp');
    await kv(base, [{ op: 'put', ns: 'e', key, value: 1, ttlSeconds: 1 }]);
    await kv(base, [{ op: 'put', ns: 'e', key: `${key}-kept`, value: 1, ttlSeconds: 1 }]);
    await kv(base, [{ op: 'put', ns: 'e', key: `${key}-kept`, value: 2, forever: true }]);
    await new Promise((resolve) => setTimeout(resolve, 1100));
    const r = await kv(base, [{ op: 'get', ns: 'e', key }, { op: 'get', ns: 'e',
      key: `${key}-kept` }]);
    expect(r.body.results[0].found).toBe(false);
    expect(r.body.results[1]).toMatchObject({ found: true, value: 2, expiresAt: null });
  });

  it('lets putIfAbsent win over an expired row', async () => {
    const key = fresh('lock');
    await kv(base, [{ op: 'put', ns: 'e', key, value: 'old', ttlSeconds: 1 }]);
    await new Promise((resolve) => setTimeout(resolve, 1100));
    const r = await kv(base, [{ op: 'putIfAbsent', ns: 'e', key, value: 'new', ttlSeconds: 9 }]);
    expect(r.body.results[0]).toMatchObject({ applied: true, value: 'new' });
  });
});

describe('multi-key reads', () => {
  it('returns getMany rows in key order and missing in request order', async () => {
    const p = fresh('gm');
    await kv(base, [
      { op: 'put', ns: 'm', key: `${p}-b`, value: 'b', forever: true },
      { op: 'put', ns: 'm', key: `${p}-a`, value: 'a', forever: true },
    ]);
    const r = await kv(base, [{ op: 'getMany', ns: 'm',
      keys: [`${p}-z`, `${p}-b`, `${p}-y`, `${p}-a`] }]);
    const result = r.body.results[0];
    expect(result.rows.map((row: { key: string }) => row.key)).toEqual([`${p}-a`, `${p}-b`]);
    expect(result.missing).toEqual([`${p}-z`, `${p}-y`]);
    expect(result.truncated).toBe(false);
  });

  it('pages a prefix with limit, after and nextAfter', async () => {
    const p = fresh('pf') + ':';
    const puts = ['c', 'a', 'e', 'b', 'd'].map((k) => ({ op: 'put', ns: 'p', key: p + k,
      value: k, forever: true }));
    await kv(base, puts);
    const first = (await kv(base, [{ op: 'getPrefix', ns: 'p', prefix: p, limit: 2 }]))
      .body.results[0];
    expect(first.rows.map((row: { key: string }) => row.key)).toEqual([p + 'a', p + 'b']);
    expect(first).toMatchObject({ truncated: true, nextAfter: p + 'b' });
    const last = (await kv(base, [{ op: 'getPrefix', ns: 'p', prefix: p, after: p + 'c',
      limit: 2, keysOnly: true }])).body.results[0];
    expect(last.rows.map((row: { key: string }) => row.key)).toEqual([p + 'd', p + 'e']);
    expect(last).toMatchObject({ truncated: false, nextAfter: null });
    expect(last.rows[0].value).toBeUndefined();
    expect(last.rows[0].version).toBeGreaterThan(0);
  });
});

describe('validation', () => {
  const bad = (reason: string, operations: unknown, status = 400, error = 'kv_bad_request') =>
    [reason, operations, status, error] as const;
  it.each([
    bad('kv_expiry_not_specified', [{ op: 'put', ns: 'a', key: 'k', value: 1 }]),
    bad('kv_expiry_not_specified', [{ op: 'put', ns: 'a', key: 'k', value: 1, ttlSeconds: 5,
      forever: true }]),
    bad('kv_expiry_not_specified', [{ op: 'incr', ns: 'a', key: 'k', delta: 1, forever: false }]),
    bad('kv_bad_ttl', [{ op: 'put', ns: 'a', key: 'k', value: 1, ttlSeconds: 0 }]),
    bad('kv_bad_ttl', [{ op: 'put', ns: 'a', key: 'k', value: 1, ttlSeconds: 1.5 }]),
    bad('kv_unknown_op', [{ op: 'scan', ns: 'a' }]),
    bad('kv_bad_namespace', [{ op: 'get', ns: 'Orders', key: 'k' }]),
    bad('kv_bad_namespace', [{ op: 'get', key: 'k' }]),
    bad('kv_bad_key', [{ op: 'get', ns: 'a', key: '' }]),
    bad('kv_bad_key', [{ op: 'get', ns: 'a', key: 'a\u0000b' }]),
    bad('kv_bad_key', [{ op: 'get', ns: 'a', key: 5 }]),
    bad('kv_bad_expect', [{ op: 'put', ns: 'a', key: 'k', value: 1, forever: true,
      expect: null }]),
    bad('kv_bad_expect', [{ op: 'putIfAbsent', ns: 'a', key: 'k', value: 1, forever: true,
      expect: 0 }]),
    bad('kv_bad_expect', [{ op: 'incr', ns: 'a', key: 'k', delta: 1, forever: true,
      expect: 1 }]),
    bad('kv_prefix_required', [{ op: 'getPrefix', ns: 'a', prefix: '' }]),
    bad('kv_prefix_required', [{ op: 'getPrefix', ns: 'a' }]),
    bad('kv_duplicate_key_in_call', [{ op: 'put', ns: 'a', key: 'k', value: 1, forever: true },
      { op: 'delete', ns: 'a', key: 'k' }]),
    bad('kv_tenant_not_an_input', [{ op: 'get', ns: 'a', key: 'k', tenant: 'x' }]),
    bad('kv_too_many_ops', Array.from({ length: 257 }, (_, i) => ({ op: 'get', ns: 'a',
      key: `k${i}` }))),
    bad('kv_too_many_keys', [{ op: 'getMany', ns: 'a',
      keys: Array.from({ length: 1025 }, (_, i) => `k${i}`) }]),
    bad('kv_bad_request', [{ op: 'getMany', ns: 'a', keys: [] }]),
    bad('kv_bad_request', [{ op: 'put', ns: 'a', key: 'k', forever: true }]),
    bad('kv_bad_request', [{ op: 'incr', ns: 'a', key: 'k', delta: '1', forever: true }]),
    bad('kv_bad_request', [{ op: 'delete', ns: 'a', key: 'k', required: 'yes' }]),
    bad('kv_value_too_large', [{ op: 'put', ns: 'a', key: 'k', value: 'x'.repeat(65536),
      forever: true }], 413, 'payload_too_large'),
    bad('kv_key_too_large', [{ op: 'get', ns: 'a', key: 'é'.repeat(257) }], 413,
      'payload_too_large'),
  ])('refuses %s', async (reason, operations, status, error) => {
    const r = await kv(base, operations as unknown[]);
    expect(r.status).toBe(status);
    expect(r.body).toMatchObject({ error, reason });
    expect(typeof r.body.detail).toBe('string');
  });

  it.each([
    ['not JSON', '{"operations":'],
    ['an object without operations', '{"ops":[]}'],
    ['a number', '5'],
  ])('refuses a body that is %s with kv_bad_body', async (_name, text) => {
    const r = await call(base, 'POST', '/api/v1/kv', text);
    expect(r.status).toBe(400);
    expect(r.body).toMatchObject({ error: 'kv_bad_request', reason: 'kv_bad_body' });
  });

  it('refuses a value whose number overflows a double instead of storing null', async () => {
    const text =
      '{"operations":[{"op":"put","ns":"a","key":"inf","value":[1e400],"forever":true}]}';
    const r = await call(base, 'POST', '/api/v1/kv', text);
    expect(r.status).toBe(400);
    expect(r.body.error).toBe('kv_bad_request');
  });

  it('accepts a value of exactly the ceiling and reads of a written key', async () => {
    const value = 'x'.repeat(65534);
    const key = fresh('big');
    const r = await kv(base, [{ op: 'put', ns: 'a', key, value, forever: true },
      { op: 'get', ns: 'a', key }]);
    expect(r.status).toBe(200);
    expect(r.body.results[1].value).toBe(value);
  });
});

describe('path routes', () => {
  it('reads one key with an ETag, and writes and deletes by path', async () => {
    const key = fresh('ord') + '/items/1';
    const path = `/api/v1/kv/orders/${key}`;
    const put = await call(base, 'PUT', path, { value: { state: 'paid' }, ttlSeconds: 604800 });
    expect(put.status).toBe(200);
    expect(put.body).toMatchObject({ index: 0, op: 'put', applied: true, key });
    const got = await call(base, 'GET', path);
    expect(got.body).toMatchObject({ op: 'get', found: true, key, value: { state: 'paid' } });
    expect(got.headers.get('etag')).toBe(`"${put.body.version}"`);
    const cas = await call(base, 'PUT', path, { value: { state: 'shipped' }, ttlSeconds: 604800,
      expect: put.body.version + 99 });
    expect(cas.body).toMatchObject({ applied: false, reason: 'version' });
    const del = await call(base, 'DELETE', path);
    expect(del.body).toMatchObject({ op: 'delete', applied: true, value: { state: 'paid' } });
    const gone = await call(base, 'GET', path);
    expect(gone.status).toBe(200);
    expect(gone.body).toEqual({ index: 0, op: 'get', found: false, key });
  });

  it('takes %2F as a literal slash inside one key', async () => {
    const key = fresh('a/b');
    await call(base, 'PUT', `/api/v1/kv/s/${encodeURIComponent(key)}`, { value: 1,
      forever: true });
    const r = await kv(base, [{ op: 'get', ns: 's', key }]);
    expect(r.body.results[0]).toMatchObject({ found: true, value: 1 });
  });

  it('refuses any query string and fields the path already names', async () => {
    const q = await call(base, 'GET', '/api/v1/kv/orders/x?prefix=quota:acme:');
    expect(q.status).toBe(400);
    expect(q.body).toMatchObject({ error: 'kv_bad_request', reason: 'kv_no_query_string' });
    const f = await call(base, 'PUT', '/api/v1/kv/orders/x', { ns: 'other', value: 1,
      forever: true });
    expect(f.status).toBe(400);
    expect(f.body.reason).toBe('kv_field_in_path');
  });
});

describe('the transaction wire', () => {
  it('commits a kv rider with flat results', async () => {
    const key = fresh('tx');
    const r = await call(base, 'POST', '/api/v1/transaction', { operations: [],
      kv: [{ op: 'put', ns: 't', key, value: 1, forever: true }, { op: 'get', ns: 't', key }] });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ success: true });
    expect(typeof r.body.transactionId).toBe('string');
    expect(r.body.results[1]).toMatchObject({ index: 1, opIndex: 1, type: 'kv', found: true });
  });

  it('rolls back on a lost required precondition', async () => {
    const key = fresh('tx');
    await kv(base, [{ op: 'put', ns: 't', key, value: 'mine', forever: true }]);
    const r = await call(base, 'POST', '/api/v1/transaction', {
      kv: [{ op: 'putIfAbsent', ns: 't', key, value: 'x', forever: true, required: true }],
    });
    expect(r.body).toMatchObject({ success: false, ok: false, reason: 'kv_precondition',
      failedIndex: 0, kvReason: 'exists', value: 'mine', results: [] });
  });

  it('refuses getPrefix and queue operations', async () => {
    const p = await call(base, 'POST', '/api/v1/transaction', {
      kv: [{ op: 'getPrefix', ns: 't', prefix: 'a' }] });
    expect(p.body).toMatchObject({ reason: 'kv_get_prefix_not_allowed_in_transaction' });
    const q = await call(base, 'POST', '/api/v1/transaction', {
      operations: [{ type: 'push', queue: 'q', items: [] }] });
    expect(q.status).toBe(400);
  });
});

describe('the node', () => {
  it('reports health', async () => {
    const r = await call(base, 'GET', '/health');
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ status: 'ok', id: 'n1', role: 'leader', leader: 'n1' });
    expect(r.body.appliedIndex).toBeGreaterThan(0);
    expect(r.body.commitIndex).toBeGreaterThanOrEqual(r.body.appliedIndex);
  });

  it('answers an unknown route with 404 in the envelope', async () => {
    const r = await call(base, 'GET', '/api/v1/nope');
    expect(r.status).toBe(404);
    expect(typeof r.body.error).toBe('string');
  });

  it('gives unique, increasing versions across keys', async () => {
    const ops = Array.from({ length: 20 }, (_, i) => ({ op: 'put', ns: 'v', key: fresh(`v${i}`),
      value: i, forever: true }));
    const versions = (await kv(base, ops)).body.results.map((r: { version: number }) =>
      r.version);
    expect(new Set(versions).size).toBe(20);
    const next = (await kv(base, [{ op: 'put', ns: 'v', key: fresh('w'), value: 0,
      forever: true }])).body.results[0].version;
    expect(next).toBeGreaterThan(Math.max(...versions));
  });
});
