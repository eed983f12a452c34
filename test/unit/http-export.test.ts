// Loopback tests of `GET /api/v1/system/export`: `admin` only with JWT on, the dump streamed
// as ndjson with its index in a header, a body of many chunks arriving whole and in order,
// 503 before the first line when the node cannot answer, and a failure mid-stream cutting
// the connection so a short body never looks complete.
import { SignJWT } from 'jose';
import { afterEach, describe, expect, it } from 'vitest';
import { JwtAuthenticator } from '../../host/http/auth.js';
import type { RequestLogger, TenantResolver } from '../../host/http/guards.js';
import type { OperatorDeps } from '../../host/http/operator.js';
import { startHttpServer, type HttpServerHandle } from '../../host/http/server.js';
import { DEFAULT_TENANT } from '../../host/machine/commands.js';
import { loadConfig } from '../../host/node/config.js';
import { FakeKvService } from '../helpers/fake-service.js';

const SECRET = 'export-test-secret';
const open: HttpServerHandle[] = [];
afterEach(async () => {
  for (const handle of open.splice(0)) await handle.close();
});

const allowAll: TenantResolver = { resolve: () => ({ ok: true, tenant: DEFAULT_TENANT }) };
const quiet: RequestLogger = { debug: () => undefined, info: () => undefined,
  warn: () => undefined, error: () => undefined };

async function start(exportDump: OperatorDeps['exportDump']): Promise<string> {
  const config = loadConfig({}, { JWT_ENABLED: 'true', JWT_SECRET: SECRET });
  const operator: OperatorDeps = {
    cluster: () => ({ self: 'n1', leader: 'n1', staleAfterMs: 2500, members: [] }),
    tenants: async () => ({ kind: 'done', value: { appliedIndex: 0, truncated: false,
      tenants: [] } }),
    kvEnabled: async () => ({ kind: 'done', value: true }),
    consoleAssets: { files: new Map(), dir: '' },
    consoleSettings: { node: 'n1', jwt: true, tenancy: false, defaultTenant: DEFAULT_TENANT,
      prefixLimit: 1000 },
    ...(exportDump === undefined ? {} : { exportDump }),
  };
  const handle = await startHttpServer({ service: new FakeKvService(), config,
    authenticator: new JwtAuthenticator(config.jwt), tenants: allowAll,
    rateLimiter: { take: () => ({ ok: true }) },
    metrics: { observeRequest: () => undefined, refusal: () => undefined,
      render: async () => '', contentType: 'text/plain' },
    logger: quiet, operator }, '127.0.0.1', 0);
  open.push(handle);
  return `http://127.0.0.1:${handle.port}/api/v1/system/export`;
}

const bearer = async (role: string) => ({ authorization: 'Bearer ' + await new SignJWT({ role })
  .setProtectedHeader({ alg: 'HS256' }).sign(new TextEncoder().encode(SECRET)) });

/** 2,000 chunks of one line each, about 2 MB. */
async function* lines(failAfter = Infinity): AsyncGenerator<string> {
  for (let i = 0; i < 2000; i++) {
    if (i === failAfter) throw new Error('the snapshot file went away');
    yield JSON.stringify({ i, pad: 'x'.repeat(1000) }) + '\n';
  }
}

describe('GET /api/v1/system/export', () => {
  it('streams the dump to admin only, whole and in order', async () => {
    const url = await start(async () => ({ kind: 'done', value: { index: 42, text: lines() } }));
    expect((await fetch(url)).status).toBe(401);
    expect((await fetch(url, { headers: await bearer('read-write') })).status).toBe(403);
    const r = await fetch(url, { headers: await bearer('admin') });
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('application/x-ndjson');
    expect(r.headers.get('x-hivekv-export-index')).toBe('42');
    const got = (await r.text()).trimEnd().split('\n').map((l) => JSON.parse(l).i);
    expect(got).toEqual(Array.from({ length: 2000 }, (_, i) => i));
  });

  it('answers 503 before the first line when the node cannot export', async () => {
    const url = await start(async () => ({ kind: 'unavailable', reason: 'no_leader',
      detail: 'no leader', retryAfterSeconds: 1 }));
    const r = await fetch(url, { headers: await bearer('admin') });
    expect(r.status).toBe(503);
    expect(await r.json()).toMatchObject({ error: 'kv_unavailable', reason: 'no_leader' });
  });

  it('cuts the connection when the dump fails mid-stream', async () => {
    const url = await start(async () => ({ kind: 'done',
      value: { index: 7, text: lines(500) } }));
    const r = await fetch(url, { headers: await bearer('admin') });
    expect(r.status).toBe(200);
    await expect(r.text()).rejects.toThrow();
  });

  it('is 404 on a server that cannot export', async () => {
    const url = await start(undefined);
    expect((await fetch(url, { headers: await bearer('admin') })).status).toBe(404);
  });
});
