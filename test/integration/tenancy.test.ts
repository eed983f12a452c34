/**
 * Tenants, access and limits against real processes: JWT roles, tenant isolation, grants and
 * quotas (also after a restart and after expiry sweeps), the operator pause, rate limits, the
 * refusal order of WIRE.md, metrics and request ids.
 */
import { SignJWT } from 'jose';
import { describe, expect, it } from 'vitest';
import {
  call, kv, removeDir, startNode, tempDir, UNLIMITED_RATES,
} from '../helpers/node-process.js';

const SECRET = 'a-test-secret-of-enough-length-0123456789';
const TENANT_A = '3f1c9a52-0000-4000-8000-00000000000a';
const TENANT_B = '3f1c9a52-0000-4000-8000-00000000000b';
const put = (key: string, extra: Record<string, unknown> = {}) =>
  ({ op: 'put', ns: 'acct', key, value: { v: key }, forever: true, ...extra });

async function token(claims: Record<string, unknown>, expiresIn = '1h',
  secret = SECRET): Promise<string> {
  return new SignJWT(claims).setProtectedHeader({ alg: 'HS256' }).setIssuedAt()
    .setExpirationTime(expiresIn).sign(new TextEncoder().encode(secret));
}

const bearer = (jwt: string) => ({ authorization: `Bearer ${jwt}` });
const tenant = (id: string) => ({ 'x-queen-tenant': id });

describe('auth', () => {
  it('refuses missing, forged and expired tokens, and checks each route\'s role', async () => {
    const dir = tempDir('auth');
    const node = await startNode({ dataDir: dir,
      env: { ...UNLIMITED_RATES, JWT_ENABLED: 'true', JWT_SECRET: SECRET } });
    try {
      const url = node.url;
      const getPath = '/api/v1/kv/acct/k1';
      expect((await call(url, 'GET', getPath)).body).toMatchObject({ error: 'unauthorized' });
      const forged = await token({ role: 'admin' }, '1h', 'another-secret-of-enough-length-xx');
      expect((await call(url, 'GET', getPath, undefined, bearer(forged))).status).toBe(401);
      const expired = await new SignJWT({ role: 'admin' }).setProtectedHeader({ alg: 'HS256' })
        .setExpirationTime(Math.floor(Date.now() / 1000) - 60)
        .sign(new TextEncoder().encode(SECRET));
      expect((await call(url, 'GET', getPath, undefined, bearer(expired))).status).toBe(401);

      const reader = bearer(await token({ role: 'read-only' }));
      const writer = bearer(await token({ roles: ['read-write'] }));
      const admin = bearer(await token({ role: 'admin' }));
      const writeOnly = bearer(await token({ role: 'write-only' }));
      expect((await call(url, 'GET', getPath, undefined, reader)).status).toBe(200);
      const denied = await kv(url, [put('k1')], reader);
      expect(denied.status).toBe(403);
      expect(denied.body).toMatchObject({ error: 'forbidden' });
      expect((await kv(url, [put('k1')], writer)).status).toBe(200);
      expect((await call(url, 'GET', getPath, undefined, writeOnly)).status).toBe(403);
      const timers = { kv: true };
      expect((await call(url, 'POST', '/api/v1/system/kv-timers', timers, writer)).status)
        .toBe(403);
      expect((await call(url, 'POST', '/api/v1/system/kv-timers', timers, admin)).status)
        .toBe(200);
      expect((await call(url, 'GET', getPath, undefined, admin)).body)
        .toMatchObject({ found: true });
    } finally {
      await node.kill();
      removeDir(dir);
    }
  });
});

describe('tenancy', () => {
  it('refuses to start with the tenant header but no trusted proxy', async () => {
    const dir = tempDir('tenancy-refuse');
    try {
      await expect(startNode({ dataDir: dir, env: { QUEEN_TENANCY_HEADER: 'true' } }))
        .rejects.toThrow(/QUEEN_KV_TRUSTED_PROXY/);
    } finally {
      removeDir(dir);
    }
  });

  it('keeps tenants apart, also through getPrefix, and refuses a malformed header',
    async () => {
      const dir = tempDir('tenancy');
      const node = await startNode({ dataDir: dir, env: { ...UNLIMITED_RATES,
        QUEEN_TENANCY_HEADER: 'true', QUEEN_KV_TRUSTED_PROXY: 'true',
        QUEEN_KV_REQUIRE_GRANT: 'false' } });
      try {
        await kv(node.url, [put('shared:1')], tenant(TENANT_A));
        const fromB = await kv(node.url, [
          { op: 'get', ns: 'acct', key: 'shared:1' },
          { op: 'getMany', ns: 'acct', keys: ['shared:1'] },
          { op: 'getPrefix', ns: 'acct', prefix: 'shared' },
        ], tenant(TENANT_B));
        expect(fromB.body.results[0].found).toBe(false);
        expect(fromB.body.results[1].missing).toEqual(['shared:1']);
        expect(fromB.body.results[2].rows).toEqual([]);
        const fromA = await kv(node.url, [{ op: 'getPrefix', ns: 'acct', prefix: 'shared' }],
          tenant(TENANT_A.toUpperCase()));
        expect(fromA.body.results[0].rows).toHaveLength(1);
        const bad = await kv(node.url, [put('x')], tenant('not-a-uuid'));
        expect(bad.status).toBe(400);
        expect(bad.body.error).toBe('kv_bad_request');
      } finally {
        await node.kill();
        removeDir(dir);
      }
    });
});

describe('grants and quotas', () => {
  it('gates writes on a grant, counts rows, survives a restart and frees rows on expiry',
    async () => {
      const dir = tempDir('quota');
      const env = { ...UNLIMITED_RATES, QUEEN_TENANCY_HEADER: 'true',
        QUEEN_KV_TRUSTED_PROXY: 'true', QUEEN_KV_EXPIRE_EVERY_MS: '100' };
      let node = await startNode({ dataDir: dir, env });
      try {
        const gated = await kv(node.url, [put('a')], tenant(TENANT_A));
        expect(gated.status).toBe(403);
        expect(gated.body).toMatchObject({ error: 'feature_gated' });
        expect((await kv(node.url, [{ op: 'get', ns: 'acct', key: 'a' }], tenant(TENANT_A)))
          .status).toBe(200);
        const quota = { enabled: true, maxRows: 2, maxBytes: null, maxReadsPerSec: null,
          maxWritesPerSec: null };
        const set = await call(node.url, 'PUT', `/api/v1/system/kv-quota/${TENANT_A}`, quota);
        expect(set.status).toBe(200);
        expect((await kv(node.url, [put('a'), put('b')], tenant(TENANT_A))).status).toBe(200);
        const over = await kv(node.url, [put('c')], tenant(TENANT_A));
        expect(over.status).toBe(403);
        expect(over.body).toMatchObject({ error: 'kv_quota_exceeded' });
        expect((await kv(node.url, [put('a')], tenant(TENANT_A))).status).toBe(200);

        expect(await node.stop()).toBe(0);
        node = await startNode({ dataDir: dir, env });
        const view = await call(node.url, 'GET', `/api/v1/system/kv-quota/${TENANT_A}`);
        expect(view.body).toMatchObject({ quota: { enabled: true, maxRows: 2 },
          usage: { rows: 2 } });
        expect((await kv(node.url, [put('c')], tenant(TENANT_A))).status).toBe(403);
        const del = await kv(node.url, [{ op: 'delete', ns: 'acct', key: 'b' }],
          tenant(TENANT_A));
        expect(del.body.results[0].applied).toBe(true);
        expect((await kv(node.url, [put('c', { forever: undefined, ttlSeconds: 1 })],
          tenant(TENANT_A))).status).toBe(200);
        await new Promise((resolve) => setTimeout(resolve, 1500));
        const after = await call(node.url, 'GET', `/api/v1/system/kv-quota/${TENANT_A}`);
        expect(after.body.usage.rows).toBe(1);
        expect((await kv(node.url, [put('d')], tenant(TENANT_A))).status).toBe(200);
      } finally {
        await node.kill();
        removeDir(dir);
      }
    }, 60_000);
});

describe('pause, rate limits and their order', () => {
  it('pauses KV through the log, 503 on the routes and 403 in the transaction wire',
    async () => {
      const dir = tempDir('pause');
      let node = await startNode({ dataDir: dir,
        env: { QUEEN_KV_WRITE_RATE: '1', QUEEN_KV_WRITE_BURST: '1' } });
      try {
        expect((await kv(node.url, [put('p1')])).status).toBe(200);
        const limited = await kv(node.url, [put('p2')]);
        expect(limited.status).toBe(429);
        expect(limited.body).toMatchObject({ error: 'rate_limited' });
        expect(Number(limited.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
        const tx = await call(node.url, 'POST', '/api/v1/transaction', { kv: [put('t1')] });
        expect(tx.body).toMatchObject({ success: true });

        await call(node.url, 'POST', '/api/v1/system/kv-timers', { kv: false });
        const paused = await kv(node.url, [put('p3')]);
        expect(paused.status).toBe(503);
        expect(paused.body).toMatchObject({ error: 'kv_disabled' });
        expect(Number(paused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
        const pausedTx = await call(node.url, 'POST', '/api/v1/transaction', { kv: [put('t2')] });
        expect(pausedTx.status).toBe(403);
        expect(pausedTx.body).toMatchObject({ error: 'kv_disabled' });

        expect(await node.stop()).toBe(0);
        node = await startNode({ dataDir: dir, env: UNLIMITED_RATES });
        expect((await kv(node.url, [put('p4')])).status).toBe(503);
        await call(node.url, 'POST', '/api/v1/system/kv-timers', { kv: true });
        expect((await kv(node.url, [put('p5')])).status).toBe(200);
      } finally {
        await node.kill();
        removeDir(dir);
      }
    }, 60_000);

  it('exposes metrics and echoes x-request-id', async () => {
    const dir = tempDir('metrics');
    const node = await startNode({ dataDir: dir, env: UNLIMITED_RATES });
    try {
      const r = await kv(node.url, [put('m')], { 'x-request-id': 'req-abc-123' });
      expect(r.headers.get('x-request-id')).toBe('req-abc-123');
      const metrics = await call(node.url, 'GET', '/metrics');
      expect(metrics.status).toBe(200);
      expect(metrics.text).toMatch(/hivekv_/);
      expect(metrics.text).toContain('/api/v1/kv');
    } finally {
      await node.kill();
      removeDir(dir);
    }
  });
});
