// Loopback tests of the operator's routes: the console's files (content types, caching,
// ETag and 304, HEAD, the page's policy, nothing outside the build is reachable), the
// cluster table, the tenants list and the pause switch's state, each `admin` with JWT on.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SignJWT } from 'jose';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { JwtAuthenticator } from '../../host/http/auth.js';
import {
  CONSOLE_FILES_MAX, loadConsoleAssets, type ConsoleAssets,
} from '../../host/http/console-assets.js';
import type { RequestLogger, TenantResolver } from '../../host/http/guards.js';
import type { OperatorDeps, TenantsView } from '../../host/http/operator.js';
import { matchRoute } from '../../host/http/routes.js';
import { startHttpServer, type HttpServerHandle } from '../../host/http/server.js';
import { DEFAULT_TENANT } from '../../host/machine/commands.js';
import type { ClusterView } from '../../host/node/cluster-status.js';
import { loadConfig } from '../../host/node/config.js';
import type { ServiceResult } from '../../host/node/service.js';
import { FakeKvService } from '../helpers/fake-service.js';
import { removeDir, tempDir } from '../helpers/node-process.js';

const SECRET = 'operator-test-secret';
const PAGE = '<!doctype html><script type="module" src="/console/assets/app-1a2b.js"></script>';
const CLUSTER: ClusterView = { self: 'n1', leader: 'n1', staleAfterMs: 2500, members: [
  { id: 'n1', self: true, state: 'up', ageMs: 0, lagEntries: 0, status: { status: 'ok',
    role: 'leader', leader: 'n1', term: 3, commitIndex: 7, appliedIndex: 7, digest: null,
    url: 'http://127.0.0.1:6632', sentAt: '2026-11-01T00:00:00.000Z', storageFull: false,
    stateBytesMax: 2_684_354_560, stateBytes: 0, catchUpHeld: false,
    catchUpHeldFor: null } }] };
const TENANTS: TenantsView = { appliedIndex: 7, truncated: false, tenants: [{
  tenant: DEFAULT_TENANT, rows: 2, bytes: 40, quota: null }] };

let consoleDir: string;
let assets: ConsoleAssets;
const open: HttpServerHandle[] = [];

beforeAll(() => {
  consoleDir = tempDir('console-build');
  mkdirSync(join(consoleDir, 'assets'));
  writeFileSync(join(consoleDir, 'index.html'), PAGE);
  writeFileSync(join(consoleDir, 'assets', 'app-1a2b.js'), 'console.log(1)');
  writeFileSync(join(consoleDir, 'assets', 'app-1a2b.css'), 'body{}');
  writeFileSync(join(consoleDir, 'assets', 'app-1a2b.js.map'), '{}');
  assets = loadConsoleAssets(consoleDir);
});

afterAll(() => removeDir(consoleDir));

afterEach(async () => {
  for (const handle of open.splice(0)) await handle.close();
});

const allowAll: TenantResolver = { resolve: () => ({ ok: true, tenant: DEFAULT_TENANT }) };
const quiet: RequestLogger = { debug: () => undefined, info: () => undefined,
  warn: () => undefined, error: () => undefined };

async function start(options: { operator?: Partial<OperatorDeps> | null;
  jwt?: boolean } = {}) {
  const config = loadConfig({}, options.jwt === true
    ? { JWT_ENABLED: 'true', JWT_SECRET: SECRET } : {});
  const service = new FakeKvService();
  const operator: OperatorDeps = {
    cluster: () => CLUSTER,
    tenants: async () => ({ kind: 'done', value: TENANTS }),
    kvEnabled: async () => ({ kind: 'done', value: !service.paused }),
    consoleAssets: assets,
    consoleSettings: { node: 'n1', jwt: config.jwt.enabled, tenancy: false,
      defaultTenant: DEFAULT_TENANT, prefixLimit: 1000 },
    ...options.operator,
  };
  const handle = await startHttpServer({ service, config,
    authenticator: new JwtAuthenticator(config.jwt), tenants: allowAll,
    rateLimiter: { take: () => ({ ok: true }) },
    metrics: { observeRequest: () => undefined, refusal: () => undefined,
      render: async () => '', contentType: 'text/plain' },
    logger: quiet, ...(options.operator === null ? {} : { operator }) }, '127.0.0.1', 0);
  open.push(handle);
  return { base: `http://127.0.0.1:${handle.port}`, service };
}

async function get(base: string, path: string, headers: Record<string, string> = {},
  method = 'GET') {
  const res = await fetch(base + path, { method, headers });
  const text = await res.text();
  let json: unknown = null;
  try {
    json = JSON.parse(text);
  } catch {
    json = null;
  }
  return { status: res.status, headers: res.headers, text, json };
}

const bearer = async (role: string) => ({ authorization: 'Bearer ' + await new SignJWT({ role })
  .setProtectedHeader({ alg: 'HS256' }).sign(new TextEncoder().encode(SECRET)) });

describe('the console files', () => {
  it('serves the page at /console and /console/ with its policy, revalidated', async () => {
    const { base } = await start();
    for (const path of ['/console', '/console/', '/console/index.html']) {
      const r = await get(base, path);
      expect(r.status).toBe(200);
      expect(r.text).toBe(PAGE);
      expect(r.headers.get('content-type')).toBe('text/html; charset=utf-8');
      expect(r.headers.get('cache-control')).toBe('no-cache');
      expect(r.headers.get('content-security-policy')).toContain("default-src 'self'");
      expect(r.headers.get('content-security-policy')).toContain("connect-src 'self'");
      expect(r.headers.get('x-content-type-options')).toBe('nosniff');
      expect(r.headers.get('etag')).toMatch(/^"[A-Za-z0-9_-]{20,}"$/);
    }
  });

  it('answers 304 to a matching If-None-Match, and HEAD without a body', async () => {
    const { base } = await start();
    const etag = (await get(base, '/console')).headers.get('etag')!;
    const again = await get(base, '/console', { 'if-none-match': `W/"x", ${etag}` });
    expect(again.status).toBe(304);
    expect(again.text).toBe('');
    expect((await get(base, '/console', { 'if-none-match': '"other"' })).status).toBe(200);
    const head = await get(base, '/console', {}, 'HEAD');
    expect(head.status).toBe(200);
    expect(head.text).toBe('');
  });

  it('serves hashed assets with their type, cached for a year', async () => {
    const { base } = await start();
    const js = await get(base, '/console/assets/app-1a2b.js');
    expect(js.status).toBe(200);
    expect(js.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    expect(js.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    const css = await get(base, '/console/assets/app-1a2b.css');
    expect(css.headers.get('content-type')).toBe('text/css; charset=utf-8');
  });

  it('reaches no file outside the build and no file of an unknown type', async () => {
    const { base } = await start();
    for (const path of ['/console/assets/app-1a2b.js.map', '/console/../package.json',
      '/console/%2e%2e/package.json', '/console/assets/../../package.json', '/console/nope',
      '/console//etc/passwd']) {
      const r = await get(base, path);
      expect(r.status, path).toBe(404);
      expect(r.json).toMatchObject({ error: 'not_found' });
    }
    expect(assets.files.has('assets/app-1a2b.js.map')).toBe(false);
  });

  it('answers the settings the console starts from, never cached', async () => {
    const { base } = await start({ jwt: true });
    const r = await get(base, '/console/settings.json');
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ node: 'n1', jwt: true, tenancy: false,
      defaultTenant: DEFAULT_TENANT, prefixLimit: 1000 });
    expect(r.headers.get('cache-control')).toBe('no-store');
  });

  it('needs no token, takes GET and HEAD only, and says when it is not built', async () => {
    const { base } = await start({ jwt: true });
    expect((await get(base, '/console')).status).toBe(200);
    const post = await get(base, '/console', {}, 'POST');
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).toBe('GET, HEAD');
    const empty = tempDir('console-empty');
    try {
      const bare = await start({ operator: { consoleAssets: loadConsoleAssets(empty) } });
      const r = await get(bare.base, '/console');
      expect(r.status).toBe(404);
      expect(r.json).toMatchObject({ error: 'not_found', reason: 'console_not_built' });
    } finally {
      removeDir(empty);
    }
  });

  it('refuses a build over its bounds', () => {
    const big = tempDir('console-big');
    try {
      writeFileSync(join(big, 'index.html'), PAGE);
      for (let i = 0; i < CONSOLE_FILES_MAX; i++) writeFileSync(join(big, `f${i}.js`), '1');
      expect(() => loadConsoleAssets(big)).toThrow(/over/);
    } finally {
      removeDir(big);
    }
  });

  it('is routed apart from the KV path routes', () => {
    expect(matchRoute('GET', '/console/x')?.id).toBe('console');
    expect(matchRoute('GET', '/api/v1/kv/console/x')?.id).toBe('kvPath');
    expect(matchRoute('GET', '/consoles')).toBeNull();
  });
});

describe('the operator routes', () => {
  it('answer the cluster table and the tenants list to admin only', async () => {
    const { base } = await start({ jwt: true });
    for (const path of ['/api/v1/system/cluster', '/api/v1/system/tenants',
      '/api/v1/system/kv-timers']) {
      expect((await get(base, path)).status, path).toBe(401);
      const reader = await get(base, path, await bearer('read-only'));
      expect(reader.status, path).toBe(403);
      expect(reader.json).toMatchObject({ error: 'forbidden' });
    }
    const admin = await bearer('admin');
    const cluster = await get(base, '/api/v1/system/cluster', admin);
    expect(cluster.json).toEqual(CLUSTER);
    expect(cluster.headers.get('cache-control')).toBe('no-store');
    expect((await get(base, '/api/v1/system/tenants', admin)).json).toEqual(TENANTS);
  });

  it('reads the pause switch with GET and still sets it with POST', async () => {
    const { base } = await start();
    expect((await get(base, '/api/v1/system/kv-timers')).json).toEqual({ kv: true });
    const paused = await fetch(base + '/api/v1/system/kv-timers', { method: 'POST',
      headers: { 'content-type': 'application/json' }, body: '{"kv":false}' });
    expect(paused.status).toBe(200);
    expect((await get(base, '/api/v1/system/kv-timers')).json).toEqual({ kv: false });
    const other = await get(base, '/api/v1/system/kv-timers', {}, 'DELETE');
    expect(other.status).toBe(405);
    expect(other.headers.get('allow')).toBe('GET, POST');
  });

  it('turn a node that cannot answer into 503 kv_unavailable with Retry-After', async () => {
    const unavailable: ServiceResult<never> = { kind: 'unavailable', reason: 'no_leader',
      detail: 'no leader', retryAfterSeconds: 1 };
    const { base } = await start({ operator: { tenants: async () => unavailable,
      kvEnabled: async () => unavailable } });
    for (const path of ['/api/v1/system/tenants', '/api/v1/system/kv-timers']) {
      const r = await get(base, path);
      expect(r.status).toBe(503);
      expect(r.json).toMatchObject({ error: 'kv_unavailable', reason: 'no_leader' });
      expect(r.headers.get('retry-after')).toBe('1');
    }
  });

  it('are 404 on a server built without them', async () => {
    const { base } = await start({ operator: null });
    expect((await get(base, '/api/v1/system/cluster')).status).toBe(404);
    expect((await get(base, '/console')).status).toBe(404);
  });
});
