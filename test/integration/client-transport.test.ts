/**
 * The client's retries, idempotency keys and refusals, against small scripted HTTP servers on
 * 127.0.0.1 that record every request and answer what each test tells them to: a 503 first
 * and then an answer, a request left hanging, a 429, a proxy's HTML 502.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { createClient, HivekvError } from '../../host/client/index.js';
import { freePort } from '../helpers/node-process.js';

interface Seen {
  readonly method: string;
  readonly path: string;
  readonly headers: IncomingMessage['headers'];
  readonly body: string;
}

type Responder = (res: ServerResponse, seen: Seen) => void;

interface ScriptedServer {
  readonly url: string;
  readonly seen: Seen[];
  close(): Promise<void>;
}

const servers: ScriptedServer[] = [];

afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()));
});

/** A server that answers request i with `script[i]` (the last one once the script runs out). */
async function scripted(script: Responder[]): Promise<ScriptedServer> {
  const seen: Seen[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const record = { method: req.method ?? '', path: req.url ?? '', headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8') };
      seen.push(record);
      const respond = script[Math.min(seen.length, script.length) - 1] as Responder;
      respond(res, record);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  const handle = {
    url: `http://127.0.0.1:${port}`,
    seen,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
  servers.push(handle);
  return handle;
}

function json(status: number, body: unknown, headers: Record<string, string> = {}): Responder {
  return (res) => {
    res.writeHead(status, { 'content-type': 'application/json', ...headers });
    res.end(JSON.stringify(body));
  };
}

const INCR_ANSWER = json(200, { results: [{ index: 0, op: 'incr', applied: true, key: 'k',
  value: 1, version: 7 }] });
const GET_ANSWER = json(200, { results: [{ index: 0, op: 'get', found: false, key: 'k' }] });
const UNAVAILABLE = json(503, { error: 'kv_unavailable', reason: 'no_leader',
  detail: 'no leader yet' });
const HANG: Responder = () => undefined;
const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** Fast retries: these tests are about which attempts happen, not how long they wait. */
const FAST = { retryBaseMs: 5, retryCapMs: 20 };

describe('Idempotency-Key', () => {
  it('is on every write, the same on every retry, and fresh for the next call', async () => {
    const server = await scripted([UNAVAILABLE, UNAVAILABLE, INCR_ANSWER]);
    const client = createClient({ urls: [server.url], ...FAST });
    const result = await client.kv.incr('stats', 'k', 1, { forever: true });
    expect(result).toMatchObject({ applied: true, value: 1 });
    expect(server.seen).toHaveLength(3);
    const keys = server.seen.map((seen) => seen.headers['idempotency-key']);
    expect(keys[0]).toMatch(UUID_V4);
    expect(new Set(keys).size).toBe(1);
    // The body is the same on every attempt too: the key covers one request, not several.
    expect(new Set(server.seen.map((seen) => seen.body)).size).toBe(1);
    await client.kv.incr('stats', 'k', 1, { forever: true });
    expect(server.seen[3]?.headers['idempotency-key']).not.toBe(keys[0]);
  });

  it('is the caller\'s own when given, on batches and transactions too', async () => {
    const server = await scripted([INCR_ANSWER, json(200, { results: [] }),
      json(200, { transactionId: 't', success: true, results: [{ index: 0, opIndex: 0,
        type: 'kv', op: 'incr', applied: true, key: 'k', value: 1, version: 1 }] })]);
    const client = createClient({ urls: [server.url] });
    await client.kv.incr('stats', 'k', 1, { forever: true, idempotencyKey: 'charge ch_8812' });
    await client.kv.batch().run({ idempotencyKey: 'ignored-for-a-read' });
    await client.transaction().kv.incr('stats', 'k', 1, { forever: true }).commit();
    expect(server.seen[0]?.headers['idempotency-key']).toBe('charge ch_8812');
    expect(JSON.parse(server.seen[0]?.body ?? '')).toEqual({ operations: [{ op: 'incr',
      ns: 'stats', key: 'k', delta: 1, forever: true }] });
    expect(server.seen[1]?.headers['idempotency-key']).toBeUndefined();
    expect(server.seen[2]?.path).toBe('/api/v1/transaction');
    expect(server.seen[2]?.headers['idempotency-key']).toMatch(/^[0-9a-f-]{36}$/);
    await expect(client.kv.put('a', 'b', 1, { ttl: '1h', idempotencyKey: ' padded' }))
      .rejects.toThrow(TypeError);
    expect(server.seen).toHaveLength(3);
  });

  it('is never on a read, retried or not', async () => {
    const server = await scripted([UNAVAILABLE, GET_ANSWER, json(200, { results: [{ index: 0,
      op: 'check', applied: true, key: 'k', value: null, version: 0 }] })]);
    const client = createClient({ urls: [server.url], ...FAST });
    expect(await client.kv.get('orders', 'k')).toMatchObject({ found: false });
    expect(await client.kv.check('orders', 'k', 0)).toMatchObject({ applied: true });
    expect(server.seen).toHaveLength(3);
    for (const seen of server.seen) expect(seen.headers['idempotency-key']).toBeUndefined();
  });
});

describe('retries', () => {
  it('moves to the next node on a 503, and starts there next time', async () => {
    const first = await scripted([json(503, { error: 'kv_unavailable', reason: 'no_leader',
      detail: 'x' }, { 'retry-after': '30' })]);
    const second = await scripted([INCR_ANSWER]);
    const client = createClient({ urls: [first.url, second.url], ...FAST });
    const startedMs = Date.now();
    await client.kv.incr('stats', 'k', 1, { forever: true });
    // Another node is asked at once: the first one's Retry-After is about itself.
    expect(Date.now() - startedMs).toBeLessThan(10_000);
    expect(first.seen[0]?.headers['idempotency-key'])
      .toBe(second.seen[0]?.headers['idempotency-key']);
    await client.kv.incr('stats', 'k', 1, { forever: true });
    expect(first.seen).toHaveLength(1);
    expect(second.seen).toHaveLength(2);
  });

  it('moves past a node that refuses connections', async () => {
    const dead = `http://127.0.0.1:${await freePort()}`;
    const live = await scripted([INCR_ANSWER]);
    const client = createClient({ urls: [dead, live.url], ...FAST });
    expect(await client.kv.incr('stats', 'k', 1, { forever: true }))
      .toMatchObject({ applied: true });
    expect(live.seen).toHaveLength(1);
  });

  it('gives up on a node that does not answer within timeoutMs, and retries', async () => {
    const server = await scripted([HANG, INCR_ANSWER]);
    const client = createClient({ urls: [server.url], timeoutMs: 300, ...FAST });
    expect(await client.kv.incr('stats', 'k', 1, { forever: true }))
      .toMatchObject({ applied: true });
    expect(server.seen).toHaveLength(2);
    expect(server.seen[0]?.headers['idempotency-key'])
      .toBe(server.seen[1]?.headers['idempotency-key']);
  });

  it('reports a timeout as status 0 once the retries are spent', async () => {
    const server = await scripted([HANG]);
    const client = createClient({ urls: [server.url], timeoutMs: 200, retries: 1, ...FAST });
    const error = await client.kv.put('a', 'b', 1, { ttl: '1h' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(HivekvError);
    expect(error).toMatchObject({ status: 0, error: 'kv_unavailable', reason: 'client_timeout',
      attempts: 2, url: server.url });
    expect((error as HivekvError).idempotencyKey)
      .toBe(server.seen[0]?.headers['idempotency-key']);
  });

  it('waits out a 429\'s Retry-After on the same node', async () => {
    const limited = json(429, { error: 'rate_limited', reason: 'rate_limited', detail: 'spent' },
      { 'retry-after': '1' });
    const server = await scripted([limited, INCR_ANSWER]);
    const other = await scripted([INCR_ANSWER]);
    const client = createClient({ urls: [server.url, other.url], ...FAST });
    const startedMs = Date.now();
    await client.kv.incr('stats', 'k', 1, { forever: true });
    expect(Date.now() - startedMs).toBeGreaterThanOrEqual(1000);
    expect(server.seen).toHaveLength(2);
    expect(other.seen).toHaveLength(0);
  });

  it('does not wait out a Retry-After over a minute: the caller decides', async () => {
    const server = await scripted([json(429, { error: 'rate_limited', reason: 'rate_limited',
      detail: 'spent' }, { 'retry-after': '120' })]);
    const client = createClient({ urls: [server.url] });
    await expect(client.kv.get('a', 'b')).rejects.toMatchObject({ status: 429,
      retryAfterSeconds: 120, attempts: 1 });
  });

  it('never retries a 4xx other than 429, and keeps its envelope', async () => {
    const server = await scripted([json(400, { error: 'kv_bad_request',
      reason: 'kv_expiry_not_specified', detail: 'name exactly one' })]);
    const client = createClient({ urls: [server.url, server.url], ...FAST });
    const error = await client.kv.put('a', 'b', 1).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(HivekvError);
    expect(error).toMatchObject({ status: 400, error: 'kv_bad_request', code: 'kv_bad_request',
      reason: 'kv_expiry_not_specified', detail: 'name exactly one', retryAfterSeconds: null,
      attempts: 1 });
    expect(server.seen).toHaveLength(1);
  });

  it('retries a proxy\'s 502 without an envelope, and says what came', async () => {
    const html: Responder = (res) => {
      res.writeHead(502, { 'content-type': 'text/html' });
      res.end('<html>Bad Gateway</html>');
    };
    const server = await scripted([html]);
    const client = createClient({ urls: [server.url], retries: 2, ...FAST });
    await expect(client.kv.get('a', 'b')).rejects.toMatchObject({ status: 502,
      error: 'http_502', reason: 'no_envelope', attempts: 3 });
    expect(server.seen).toHaveLength(3);
  });

  it('retries nothing with retries: 0', async () => {
    const server = await scripted([UNAVAILABLE]);
    const client = createClient({ urls: [server.url], retries: 0 });
    await expect(client.kv.get('a', 'b')).rejects.toMatchObject({ status: 503,
      reason: 'no_leader', attempts: 1 });
  });
});

describe('headers and answers', () => {
  it('sends the token and the tenant, and JSON', async () => {
    const server = await scripted([GET_ANSWER]);
    const tenant = '0d9c7a52-3c1e-4f63-9a0e-6f4c1b2a9e11';
    const client = createClient({ urls: server.url, token: 'abc.def.ghi', tenant });
    await client.kv.get('orders', 'k');
    const headers = server.seen[0]?.headers ?? {};
    expect(headers['authorization']).toBe('Bearer abc.def.ghi');
    expect(headers['x-queen-tenant']).toBe(tenant);
    expect(headers['content-type']).toBe('application/json');
    expect(server.seen[0]?.path).toBe('/api/v1/kv');
    expect(() => createClient({ urls: server.url, tenant: 'acme' })).toThrow(/UUID/);
  });

  it('refuses an answer whose results do not line up with the operations', async () => {
    const server = await scripted([json(200, { results: [] }), json(200, '<not an answer>')]);
    const client = createClient({ urls: [server.url] });
    await expect(client.kv.get('a', 'b')).rejects.toMatchObject({ error: 'bad_response',
      detail: expect.stringContaining('0 results for 1 operations') });
    await expect(client.kv.get('a', 'b')).rejects.toMatchObject({ error: 'bad_response' });
  });
});
