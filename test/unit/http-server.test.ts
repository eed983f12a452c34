// Loopback tests of the HTTP server (127.0.0.1, port 0) against the in-memory fake service:
// every route, ETag, %2F keys, query-string refusal, field-in-path, 413s, 404/405, the guard
// order of WIRE.md, transaction shapes, stopAccepting and drain.
import { afterEach, describe, expect, it } from 'vitest';
import type {
  Access, AuthResult, Authenticator, RateDecision, RateLimiter, RateOverride, RequestLogger, Role,
  TenantResolver, TenantResult,
} from '../../host/http/guards.js';
import { startHttpServer, type HttpServerHandle } from '../../host/http/server.js';
import { DEFAULT_TENANT, type CallOutcome } from '../../host/machine/commands.js';
import { loadConfig } from '../../host/node/config.js';
import { FakeKvService } from '../helpers/fake-service.js';

const TENANT_B = '11111111-2222-3333-4444-555555555555';

/** Tokens: "admin", "reader", "writer"; anything else is refused. */
class FakeAuth implements Authenticator {
  enabled = false;
  /** Each verdict takes this long, as a token's first verification does (auth.ts). */
  delayMs = 0;
  async authenticate(header: string | undefined): Promise<AuthResult> {
    if (this.delayMs > 0) await new Promise((resolve) => setTimeout(resolve, this.delayMs));
    if (!this.enabled) return { ok: true, roles: new Set<Role>(['admin']) };
    const token = header?.replace(/^Bearer /, '');
    const role: Role | undefined = token === 'admin' ? 'admin' : token === 'reader' ? 'read-only'
      : token === 'writer' ? 'read-write' : undefined;
    if (role === undefined) return { ok: false, detail: 'bad token' };
    return { ok: true, roles: new Set([role]) };
  }
  allows(roles: ReadonlySet<Role>, access: Access): boolean {
    if (roles.has('admin')) return true;
    if (access === 'read') return roles.has('read-only') || roles.has('read-write');
    if (access === 'write') return roles.has('read-write');
    return false;
  }
}

class FakeTenants implements TenantResolver {
  resolve(header: string | undefined): TenantResult {
    if (header === undefined || header === '') return { ok: true, tenant: DEFAULT_TENANT };
    return /^[0-9a-f-]{36}$/.test(header) ? { ok: true, tenant: header }
      : { ok: false, detail: 'x-queen-tenant is not a UUID' };
  }
}

class FakeRate implements RateLimiter {
  denyAfter = Infinity;
  taken: string[] = [];
  overrides: Array<RateOverride | null> = [];
  take(tenant: string, kind: 'read' | 'write', override: RateOverride | null): RateDecision {
    this.taken.push(kind);
    this.overrides.push(override);
    if (this.taken.length <= this.denyAfter) return { ok: true };
    return { ok: false, retryAfterSeconds: 2.2 };
  }
}

interface Env {
  base: string;
  handle: HttpServerHandle;
  service: FakeKvService;
  auth: FakeAuth;
  rate: FakeRate;
  lines: Array<Record<string, unknown>>;
  observed: Array<[string, string, number]>;
}

const open: HttpServerHandle[] = [];
afterEach(async () => {
  for (const handle of open.splice(0)) await handle.close();
});

async function start(env: Record<string, string> = {}): Promise<Env> {
  const config = loadConfig({}, { QUEEN_MAX_BODY_BYTES: '4096', QUEEN_KV_MAX_VALUE_BYTES: '64',
    QUEEN_KV_MAX_KEY_BYTES: '16', ...env });
  const service = new FakeKvService(config.limits);
  const auth = new FakeAuth();
  const rate = new FakeRate();
  const lines: Array<Record<string, unknown>> = [];
  const observed: Array<[string, string, number]> = [];
  const log = (fields: Record<string, unknown>) => void lines.push(fields);
  const logger: RequestLogger = { debug: log, info: log, warn: log, error: log };
  const metrics = {
    observeRequest: (route: string, method: string, status: number) =>
      void observed.push([route, method, status]),
    refusal: () => undefined,
    render: async () => 'hivekv_up 1\n',
    contentType: 'text/plain; version=0.0.4',
  };
  const handle = await startHttpServer({ service, config, authenticator: auth,
    tenants: new FakeTenants(), rateLimiter: rate, metrics, logger }, '127.0.0.1', 0);
  open.push(handle);
  return { base: `http://127.0.0.1:${handle.port}`, handle, service, auth, rate, lines, observed };
}

async function call(env: Env, method: string, path: string, body?: unknown,
  headers: Record<string, string> = {}) {
  const text = body === undefined ? undefined : typeof body === 'string' ? body
    : JSON.stringify(body);
  const res = await fetch(env.base + path, { method, body: text,
    headers: { 'content-type': 'application/json', ...headers } });
  const raw = await res.text();
  let json: any = null;
  try {
    json = JSON.parse(raw);
  } catch {
    json = raw;
  }
  return { status: res.status, json, raw, headers: res.headers };
}

/** POSTs `pieces` as a chunked body (no content-length), one chunk each. */
function postChunked(env: Env, pieces: readonly string[]): Promise<globalThis.Response> {
  const stream = new ReadableStream({ start(c) {
    for (const piece of pieces) c.enqueue(new TextEncoder().encode(piece));
    c.close();
  } });
  return fetch(env.base + '/api/v1/kv', { method: 'POST', body: stream,
    duplex: 'half' } as RequestInit);
}

const put = (key: string, value: unknown, extra: object = {}) =>
  ({ op: 'put', ns: 'orders', key, value, ttlSeconds: 60, ...extra });

describe('POST /api/v1/kv', () => {
  it('runs a batch and answers index-aligned results (kv-concepts.md example)', async () => {
    const env = await start();
    const r = await call(env, 'POST', '/api/v1/kv', { operations: [
      put('9137', { status: 'paid' }), { op: 'get', ns: 'orders', key: '9137' }] });
    expect(r.status).toBe(200);
    expect(r.json.results[0]).toEqual({ index: 0, op: 'put', applied: true, key: '9137',
      value: { status: 'paid' }, version: 1 });
    expect(r.json.results[1]).toMatchObject({ index: 1, op: 'get', found: true, version: 1,
      expiresAt: '2026-09-22T10:16:30.123Z', updatedAt: '2026-09-22T10:15:30.123Z' });
    expect(r.headers.get('x-request-id')).toMatch(/.+/);
  });

  it('takes a bare array, answers an empty list with {"results":[]}', async () => {
    const env = await start();
    expect((await call(env, 'POST', '/api/v1/kv', [])).raw).toBe('{"results":[]}');
    const r = await call(env, 'POST', '/api/v1/kv', [{ op: 'get', ns: 'a', key: 'k' }]);
    expect(r.json.results).toEqual([{ index: 0, op: 'get', found: false, key: 'k' }]);
  });

  it('echoes putIfAbsent and renders a lost required precondition as 200', async () => {
    const env = await start();
    const marker = { op: 'putIfAbsent', ns: 'orders', key: 'ord_8812',
      value: { chargeId: 'ch_8812' }, ttlSeconds: 604800 };
    const first = await call(env, 'POST', '/api/v1/kv', { operations: [marker] });
    expect(first.json.results[0]).toMatchObject({ op: 'putIfAbsent', applied: true });
    const lost = await call(env, 'POST', '/api/v1/kv', [marker]);
    expect(lost.json.results[0]).toMatchObject({ applied: false, reason: 'exists', version: 1 });
    const gate = await call(env, 'POST', '/api/v1/kv', [{ ...marker, required: true }]);
    expect(gate.status).toBe(200);
    expect(gate.raw).toBe('{"ok":false,"reason":"kv_precondition","failedIndex":0,' +
      '"kvReason":"exists","version":1,"value":{"chargeId":"ch_8812"}}');
  });

  it('refuses non-JSON with kv_bad_body, tolerating a wrong content-type', async () => {
    const env = await start();
    const bad = await call(env, 'POST', '/api/v1/kv', '{nope');
    expect(bad.status).toBe(400);
    expect(bad.json).toMatchObject({ error: 'kv_bad_request', reason: 'kv_bad_body' });
    expect(typeof bad.json.detail).toBe('string');
    const r = await call(env, 'POST', '/api/v1/kv', '[]', { 'content-type': 'text/plain' });
    expect(r.status).toBe(200);
  });

  it('answers 413 envelopes: value, key, and a body over the limit unread', async () => {
    const env = await start();
    const value = await call(env, 'POST', '/api/v1/kv', [put('k', 'x'.repeat(100))]);
    expect([value.status, value.json.reason]).toEqual([413, 'kv_value_too_large']);
    expect(value.json.error).toBe('payload_too_large');
    const key = await call(env, 'POST', '/api/v1/kv', [put('k'.repeat(17), 1)]);
    expect([key.status, key.json.reason]).toEqual([413, 'kv_key_too_large']);
    const body = await call(env, 'POST', '/api/v1/kv', '[' + ' '.repeat(5000) + ']');
    expect([body.status, body.json.reason]).toEqual([413, 'kv_body_too_large']);
    const res = await postChunked(env, Array.from({ length: 10 }, () => ' '.repeat(1000)));
    expect(res.status).toBe(413);
    expect(((await res.json()) as { reason: string }).reason).toBe('kv_body_too_large');
  });

  it('reads a body that arrived whole while the call waited for its verdict', async () => {
    const env = await start();
    env.auth.delayMs = 100;
    const sized = await call(env, 'POST', '/api/v1/kv', [put('slow', { n: 'x'.repeat(40) })]);
    expect(sized.status).toBe(200);
    expect(sized.json.results[0]).toMatchObject({ op: 'put', applied: true, key: 'slow' });
    const res = await postChunked(env, ['[{"op":"get",', '"ns":"orders","key":"slow"}]']);
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ results: [{ op: 'get', found: true,
      value: { n: 'x'.repeat(40) } }] });
  });

  it('reads a chunked body under the limit', async () => {
    const env = await start();
    const res = await postChunked(env, ['[{"op":"get",', '"ns":"a","key":"k"}]']);
    expect(res.status).toBe(200);
  });
});

describe('path routes', () => {
  it('GET found carries ETag "<version>" and answers the element itself', async () => {
    const env = await start();
    await call(env, 'PUT', '/api/v1/kv/orders/ord_8812', { value: { state: 'new' },
      ttlSeconds: 604800 });
    const r = await call(env, 'GET', '/api/v1/kv/orders/ord_8812');
    expect(r.status).toBe(200);
    expect(r.headers.get('etag')).toBe('"1"');
    expect(r.json).toMatchObject({ index: 0, op: 'get', found: true, value: { state: 'new' } });
    const missing = await call(env, 'GET', '/api/v1/kv/orders/nope');
    expect(missing.status).toBe(200);
    expect(missing.headers.get('etag')).toBeNull();
    expect(missing.json).toEqual({ index: 0, op: 'get', found: false, key: 'nope' });
  });

  it('keeps the catch-all key whole and decodes %2F once into a literal slash', async () => {
    const env = await start({ QUEEN_KV_MAX_KEY_BYTES: '512' });
    await call(env, 'PUT', '/api/v1/kv/orders/order/9f1/items', { value: 1, forever: true });
    await call(env, 'PUT', '/api/v1/kv/orders/a%2Fb', { value: 2, forever: true });
    await call(env, 'PUT', '/api/v1/kv/orders/pct%252F', { value: 3, forever: true });
    const r = await call(env, 'POST', '/api/v1/kv', [{ op: 'getMany', ns: 'orders',
      keys: ['order/9f1/items', 'a/b', 'pct%2F'] }]);
    expect(r.json.results[0].rows.map((row: { key: string }) => row.key))
      .toEqual(['a/b', 'order/9f1/items', 'pct%2F']);
    expect(r.json.results[0].missing).toEqual([]);
  });

  it('PUT with expect and DELETE answer write elements (kv-routes.md examples)', async () => {
    const env = await start();
    await call(env, 'PUT', '/api/v1/kv/orders/ord_8812', { value: 1, ttlSeconds: 604800 });
    const stale = await call(env, 'PUT', '/api/v1/kv/orders/ord_8812',
      { value: { state: 'shipped' }, ttlSeconds: 604800, expect: 90101 });
    expect(stale.json).toEqual({ index: 0, op: 'put', applied: false, reason: 'version',
      key: 'ord_8812', value: 1, version: 1 });
    const del = await call(env, 'DELETE', '/api/v1/kv/orders/ord_8812');
    expect(del.json).toEqual({ index: 0, op: 'delete', applied: true, key: 'ord_8812',
      value: 1, version: 1 });
    const again = await call(env, 'DELETE', '/api/v1/kv/orders/ord_8812');
    expect(again.json).toMatchObject({ applied: false, reason: 'absent', value: null,
      version: 0 });
  });

  it('refuses a query string and fields of the URL in the body', async () => {
    const env = await start();
    const q = await call(env, 'GET', '/api/v1/kv/quota/x?prefix=quota:acme:');
    expect([q.status, q.json.reason]).toEqual([400, 'kv_no_query_string']);
    for (const field of ['op', 'ns', 'namespace', 'key']) {
      const r = await call(env, 'PUT', '/api/v1/kv/orders/k', { value: 1, forever: true,
        [field]: 'x' });
      expect([r.status, r.json.reason]).toEqual([400, 'kv_field_in_path']);
    }
    const ns = await call(env, 'GET', '/api/v1/kv/Orders/k');
    expect(ns.json.reason).toBe('kv_bad_namespace');
    const empty = await call(env, 'GET', '/api/v1/kv/orders/');
    expect(empty.json.reason).toBe('kv_bad_key');
    expect(env.service.calls).toHaveLength(0);
  });
});

describe('routing and refusals', () => {
  it('answers 404 and 405 envelopes', async () => {
    const env = await start();
    const missing = await call(env, 'GET', '/api/v2/kv');
    expect([missing.status, missing.json.error]).toEqual([404, 'not_found']);
    const wrong = await call(env, 'PATCH', '/api/v1/kv/orders/k', { value: 1 });
    expect([wrong.status, wrong.json.error]).toEqual([405, 'method_not_allowed']);
    expect(wrong.headers.get('allow')).toBe('GET, PUT, DELETE');
    expect((await call(env, 'GET', '/api/v1/kv')).status).toBe(405);
  });

  it('checks auth (401), role (403), tenant (400) before validation', async () => {
    const env = await start();
    env.auth.enabled = true;
    const bad = '{"not":"valid"}';
    expect((await call(env, 'POST', '/api/v1/kv', bad)).json.error).toBe('unauthorized');
    const reader = { authorization: 'Bearer reader' };
    expect((await call(env, 'POST', '/api/v1/kv', bad, reader)).json.error).toBe('forbidden');
    expect((await call(env, 'GET', '/api/v1/kv/a/b', undefined, reader)).status).toBe(200);
    const writer = { authorization: 'Bearer writer', 'x-queen-tenant': 'nope' };
    const tenant = await call(env, 'POST', '/api/v1/kv', bad, writer);
    expect([tenant.status, tenant.json.reason]).toEqual([400, 'kv_bad_tenant']);
    const sys = await call(env, 'GET', `/api/v1/system/kv-quota/${TENANT_B}`, undefined,
      { authorization: 'Bearer writer' });
    expect(sys.json.error).toBe('forbidden');
  });

  it('refuses in the order pause (503) > grant (403) > rate (429)', async () => {
    const env = await start({ QUEEN_KV_REQUIRE_GRANT: 'true' });
    env.rate.denyAfter = 0;
    env.service.paused = true;
    const write = [put('k', 1)];
    const paused = await call(env, 'POST', '/api/v1/kv', write);
    expect([paused.status, paused.json.error]).toEqual([503, 'kv_disabled']);
    expect(paused.headers.get('retry-after')).toBe('1');
    env.service.paused = false;
    const gated = await call(env, 'POST', '/api/v1/kv', write);
    expect([gated.status, gated.json.error]).toEqual([403, 'feature_gated']);
    expect(gated.headers.get('retry-after')).toBeNull();
    const read = await call(env, 'POST', '/api/v1/kv', [{ op: 'get', ns: 'a', key: 'k' }]);
    expect([read.status, read.json.error]).toEqual([429, 'rate_limited']);
    expect(read.headers.get('retry-after')).toBe('3');
    expect(env.rate.taken).toEqual(['read']);
    expect(env.service.calls).toHaveLength(0);
  });

  it('validates before the pause: a bad body while paused is still a 400', async () => {
    const env = await start();
    env.service.paused = true;
    const r = await call(env, 'POST', '/api/v1/kv', [{ op: 'get', ns: 'a' }]);
    expect([r.status, r.json.reason]).toEqual([400, 'kv_bad_key']);
    const none = await call(env, 'POST', '/api/v1/kv');
    expect([none.status, none.json.reason]).toEqual([400, 'kv_bad_body']);
  });

  it('passes the quota row as the rate override; a check-only call is a read', async () => {
    const env = await start();
    await env.service.setQuota(DEFAULT_TENANT, { enabled: true, maxRows: null, maxBytes: null,
      maxReadsPerSec: 7, maxWritesPerSec: null });
    await call(env, 'POST', '/api/v1/kv', [{ op: 'check', ns: 'a', key: 'k', expect: 0 }]);
    expect(env.rate.taken).toEqual(['read']);
    expect(env.rate.overrides).toEqual([{ readsPerSec: 7, writesPerSec: null }]);
    await call(env, 'POST', '/api/v1/transaction', { kv: [put('k', 1)] });
    expect(env.rate.taken).toHaveLength(1);
  });

  it('answers what the log decided: paused, not granted, over quota, invalid', async () => {
    const env = await start();
    const cases: Array<[CallOutcome, number, string]> = [
      [{ status: 'paused' }, 503, 'kv_disabled'],
      [{ status: 'notGranted' }, 403, 'feature_gated'],
      [{ status: 'quotaExceeded' }, 403, 'kv_quota_exceeded'],
      [{ status: 'invalid', detail: 'bad op code' }, 500, 'internal_error'],
    ];
    for (const [outcome, status, error] of cases) {
      env.service.outcome = outcome;
      const r = await call(env, 'POST', '/api/v1/kv', [put('k', 1)]);
      expect([r.status, r.json.error]).toEqual([status, error]);
    }
    expect(env.lines.at(-1)).toMatchObject({ status: 500, detail: expect.stringContaining(
      'bad op code') });
  });

  it('answers 500 to an unexpected exception, logs it, and keeps serving', async () => {
    const env = await start();
    env.service.failure = new Error('boom');
    const r = await call(env, 'GET', '/api/v1/kv/a/b');
    expect([r.status, r.json.error]).toEqual([500, 'internal_error']);
    expect(env.lines.some((l) => l['err'] === 'boom')).toBe(true);
    env.service.failure = null;
    expect((await call(env, 'GET', '/api/v1/kv/a/b')).status).toBe(200);
  });

  it('maps an unavailable service to 503 kv_unavailable with Retry-After', async () => {
    const env = await start();
    env.service.unavailable = { kind: 'unavailable', reason: 'no_leader', detail: 'no leader',
      retryAfterSeconds: 0.2 };
    const r = await call(env, 'GET', '/api/v1/kv/a/b');
    expect([r.status, r.json.error, r.json.reason]).toEqual([503, 'kv_unavailable', 'no_leader']);
    expect(r.headers.get('retry-after')).toBe('1');
  });

  it('honours x-request-id and logs one line per request', async () => {
    const env = await start();
    const r = await call(env, 'GET', '/api/v1/kv/a/b', undefined, { 'x-request-id': 'abc-1' });
    expect(r.headers.get('x-request-id')).toBe('abc-1');
    expect(env.lines).toHaveLength(1);
    expect(env.lines[0]).toMatchObject({ requestId: 'abc-1', status: 200,
      route: '/api/v1/kv/:ns/*key', tenant: DEFAULT_TENANT });
    expect(env.observed).toEqual([['/api/v1/kv/:ns/*key', 'GET', 200]]);
  });
});

describe('transaction, system routes, health, metrics', () => {
  it('commits kv riders with flat index, opIndex and type', async () => {
    const env = await start();
    const r = await call(env, 'POST', '/api/v1/transaction', { operations: [],
      requiredLeases: [], kv: [put('a', 1), { op: 'get', ns: 'orders', key: 'a' }] });
    expect(r.status).toBe(200);
    expect(r.json.success).toBe(true);
    expect(typeof r.json.transactionId).toBe('string');
    expect(r.json.results[1]).toMatchObject({ index: 1, opIndex: 1, type: 'kv', op: 'get',
      found: true });
  });

  it('rolls back a lost required; refuses queue ops, getPrefix, and pause (403)', async () => {
    const env = await start();
    await call(env, 'POST', '/api/v1/kv', [put('a', 1)]);
    const r = await call(env, 'POST', '/api/v1/transaction',
      { kv: [put('b', 2), put('a', 3, { expect: 0, required: true })] });
    expect(r.json).toMatchObject({ success: false, ok: false, reason: 'kv_precondition',
      failedIndex: 1, kvReason: 'exists', version: 1, value: 1, results: [] });
    const queue = await call(env, 'POST', '/api/v1/transaction',
      { operations: [{ type: 'push', queue: 'q', items: [] }], kv: [] });
    expect([queue.status, queue.json.reason]).toEqual([400, 'queue_not_available']);
    const prefix = await call(env, 'POST', '/api/v1/transaction',
      { kv: [{ op: 'getPrefix', ns: 'a', prefix: 'x' }] });
    expect(prefix.json.reason).toBe('kv_get_prefix_not_allowed_in_transaction');
    env.service.paused = true;
    const paused = await call(env, 'POST', '/api/v1/transaction', { kv: [put('c', 1)] });
    expect([paused.status, paused.json.error]).toEqual([403, 'kv_disabled']);
  });

  it('pauses through kv-timers and keeps quota rows', async () => {
    const env = await start();
    expect((await call(env, 'POST', '/api/v1/system/kv-timers', { kv: false })).status).toBe(200);
    expect(env.service.paused).toBe(true);
    expect((await call(env, 'POST', '/api/v1/system/kv-timers', { kv: 'no' })).status).toBe(400);
    const quota = { enabled: true, maxRows: 10, maxBytes: null, maxReadsPerSec: null,
      maxWritesPerSec: 5 };
    const set = await call(env, 'PUT', `/api/v1/system/kv-quota/${TENANT_B}`, quota);
    expect(set.status).toBe(200);
    const got = await call(env, 'GET', `/api/v1/system/kv-quota/${TENANT_B}`);
    expect(got.json).toEqual({ tenant: TENANT_B, quota, usage: { rows: 0, bytes: 0 } });
    const bad = await call(env, 'GET', '/api/v1/system/kv-quota/not-a-uuid');
    expect(bad.json.reason).toBe('kv_bad_tenant');
  });

  it('answers /health and /metrics', async () => {
    const env = await start();
    const health = await call(env, 'GET', '/health');
    expect([health.status, health.json.status]).toEqual([200, 'ok']);
    const metrics = await call(env, 'GET', '/metrics');
    expect(metrics.raw).toBe('hivekv_up 1\n');
    expect(metrics.headers.get('content-type')).toContain('text/plain');
  });

  it('stopAccepting answers 503 shutting_down; drain waits for the call in flight', async () => {
    const env = await start();
    let open: () => void = () => undefined;
    env.service.gate = new Promise((resolve) => (open = resolve));
    const pending = call(env, 'POST', '/api/v1/kv', [put('k', 1)]);
    for (let i = 0; i < 100 && env.service.calls.length === 0; i++) {
      await new Promise((r) => setTimeout(r, 5));
    }
    env.handle.stopAccepting();
    const refused = await call(env, 'GET', '/api/v1/kv/a/b');
    expect([refused.status, refused.json.reason]).toEqual([503, 'shutting_down']);
    let drained = false;
    const draining = env.handle.drain(5000).then(() => (drained = true));
    await new Promise((r) => setTimeout(r, 30));
    expect(drained).toBe(false);
    open();
    await draining;
    expect((await pending).status).toBe(200);
    const started = Date.now();
    await env.handle.drain(5000);
    expect(Date.now() - started).toBeLessThan(100);
  });
});
