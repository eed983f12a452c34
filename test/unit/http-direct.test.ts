// The KV routes served on uWebSockets directly (host/http/uws-call.ts) against the same routes
// through hyper-express's request and response: two servers over loopback, one of each, get
// the same seeded requests (bodies of a declared length, chunked, none, over the limit; early
// refusals; async verdicts; HEAD, odd methods, query strings) and must answer byte for byte
// alike, but for the date and a generated request id. Then what only the direct path does: an
// answer decided before the body arrives waits for it on a kept-alive connection, a client
// that leaves mid-body costs nothing, and the calls it cannot take reach hyper-express.
// Replay a failure with SEED=<printed seed>.
import { Agent, request } from 'node:http';
import { connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { AuthResult, Role } from '../../host/http/guards.js';
import { startHttpServer, type HttpServerHandle } from '../../host/http/server.js';
import { UwsCall } from '../../host/http/uws-call.js';
import { createUnitRandom } from '../../host/core/prng.js';
import { DEFAULT_TENANT } from '../../host/machine/commands.js';
import { loadConfig } from '../../host/node/config.js';
import { FakeKvService } from '../helpers/fake-service.js';
import { quietHttpDeps } from '../helpers/http-deps.js';

const SEED = Number(process.env['SEED'] ?? Date.now() % 2 ** 31);
const REQUESTS = 600;
const MAX_BODY_BYTES = 2048;

const open: HttpServerHandle[] = [];
const agents: Agent[] = [];
afterEach(async () => {
  for (const agent of agents.splice(0)) agent.destroy();
  for (const handle of open.splice(0)) await handle.close();
  vi.restoreAllMocks();
});

/** Roles by token; `slow-` tokens are verified after a timer, as a token's first use is. */
const ROLES = new Map<string, Role>([['admin', 'admin'], ['reader', 'read-only'],
  ['writer', 'read-write']]);

async function start(kvDirect: boolean) {
  const config = loadConfig({}, { QUEEN_MAX_BODY_BYTES: String(MAX_BODY_BYTES),
    QUEEN_KV_MAX_KEY_BYTES: '32', QUEEN_KV_MAX_VALUE_BYTES: '256' });
  const service = new FakeKvService(config.limits);
  const verdict = (token: string): AuthResult => {
    const role = ROLES.get(token);
    return role === undefined ? { ok: false, detail: 'bad token' }
      : { ok: true, roles: new Set([role]) };
  };
  const handle = await startHttpServer({
    service, config, kvDirect,
    authenticator: {
      authenticate: (header) => {
        if (header === undefined) return { ok: true, roles: new Set<Role>(['read-write']) };
        const token = header.replace(/^Bearer /, '');
        if (!token.startsWith('slow-')) return verdict(token);
        return new Promise((resolve) => setTimeout(() => resolve(verdict(token.slice(5))), 5));
      },
      allows: (roles, access) => roles.has('admin') || (access === 'read'
        ? roles.has('read-only') || roles.has('read-write')
        : access === 'write' && roles.has('read-write')),
    },
    ...quietHttpDeps(),
  }, '127.0.0.1', 0);
  open.push(handle);
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  agents.push(agent);
  return { handle, service, agent };
}

type Framing = 'length' | 'chunked' | 'none';

interface Sent {
  method: string;
  path: string;
  headers: Record<string, string>;
  body: string | null;
  framing: Framing;
}

interface Got { status: number; headers: string[]; body: string }

function send(port: number, agent: Agent, sent: Sent): Promise<Got> {
  return new Promise((resolve, reject) => {
    const r = request({ host: '127.0.0.1', port, method: sent.method, path: sent.path,
      headers: sent.headers, agent }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.rawHeaders,
        body: Buffer.concat(chunks).toString('utf8') }));
    });
    r.on('error', (e) => reject(new Error(`${e.message}: ${JSON.stringify(sent)}`)));
    if (sent.body === null) {
      r.end();
    } else if (sent.framing === 'chunked') {
      // Said outright: node:http frames a GET's body with nothing at all unless told. Two
      // chunks, so that the body really arrives in pieces.
      r.setHeader('transfer-encoding', 'chunked');
      const half = Math.floor(sent.body.length / 2);
      r.write(sent.body.slice(0, half));
      r.end(sent.body.slice(half));
    } else {
      r.setHeader('content-length', Buffer.byteLength(sent.body));
      r.end(sent.body);
    }
  });
}

/** What must match: all but the date and the request id a server makes up. */
function comparable(got: Got): Got {
  const headers: string[] = [];
  for (let i = 0; i < got.headers.length; i += 2) {
    const name = got.headers[i]!.toLowerCase();
    if (name === 'date') continue;
    const value = got.headers[i + 1]!;
    headers.push(name, name === 'x-request-id' && !value.startsWith('client-') ? '<made>' : value);
  }
  const uuid = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g;
  return { status: got.status, headers, body: got.body.replace(uuid, '<uuid>') };
}

function generator(seed: number) {
  const random = createUnitRandom(seed);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)] as T;
  const chance = (p: number) => random() < p;
  const key = () => pick(['k', 'a%2Fb', 'p1', 'p2', '%E2%82%AC', '%zz', 'x'.repeat(40)]);
  const value = () => pick<unknown>([1, 'v', null, { deep: [1, 2] }, 'y'.repeat(300), -0.5]);
  const op = () => pick([
    { op: 'put', ns: 'orders', key: pick(['k', 'p1', 'p2']), value: value(), ttlSeconds: 60 },
    { op: 'get', ns: 'orders', key: pick(['k', 'p1', 'nope']) },
    { op: 'incr', ns: 'orders', key: 'n', delta: pick([1, 2.5, -1]), max: 5, forever: true },
    { op: 'delete', ns: 'orders', key: pick(['k', 'p1']), expect: pick([0, 1, 2]) },
    { op: 'check', ns: 'orders', key: 'k', expect: pick([0, 1]), required: chance(0.5) },
    { op: 'getPrefix', ns: 'orders', prefix: 'p', limit: 5 },
    { op: 'put', ns: 'Bad', key: 'k', value: 1 },
  ]);
  return (): Sent => {
    const route = pick(['batch', 'batch', 'path', 'path', 'transaction', 'other']);
    let path: string;
    let method: string;
    let body: string | null;
    switch (route) {
      case 'batch':
        path = '/api/v1/kv';
        method = chance(0.9) ? 'POST' : pick(['GET', 'PUT', 'HEAD', 'PATCH', 'OPTIONS']);
        body = JSON.stringify(pick([{ operations: [op(), op()] }, [op()], [], { operations: 1 }]));
        break;
      case 'path':
        path = `/api/v1/kv/${pick(['orders', 'orders', 'Bad', ''])}/${key()}`;
        method = pick(['GET', 'GET', 'PUT', 'PUT', 'DELETE', 'HEAD', 'POST']);
        body = method === 'PUT' ? JSON.stringify(pick([{ value: value(), ttlSeconds: 30 },
          { value: value(), forever: true, expect: pick([0, 1]) }, { ttlSeconds: 1 }]))
          : chance(0.1) ? '{}' : null;
        break;
      case 'transaction':
        path = '/api/v1/transaction';
        method = chance(0.9) ? 'POST' : 'GET';
        body = JSON.stringify(pick([{ kv: [op(), op()] }, { kv: [] }, { operations: [] }]));
        break;
      default:
        path = pick(['/health', '/api/v1/kvx', '/api/v1/kv//', '/nowhere']);
        method = pick(['GET', 'POST']);
        body = method === 'POST' ? '[]' : null;
    }
    if (chance(0.08)) path += pick(['?', '?a=1']);
    if (body !== null) {
      if (chance(0.05)) body = body.slice(0, Math.floor(body.length / 2));
      if (chance(0.04)) body = JSON.stringify([{ op: 'put', ns: 'orders', key: 'big',
        value: 'z'.repeat(MAX_BODY_BYTES) }]);
    }
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (chance(0.25)) {
      headers['authorization'] = 'Bearer ' + pick(['admin', 'reader', 'writer', 'nobody',
        'slow-writer', 'slow-reader', 'slow-nobody']);
    }
    if (chance(0.15)) headers['x-queen-tenant'] = pick([DEFAULT_TENANT, 'nope', '']);
    if (chance(0.2)) headers['x-request-id'] = 'client-' + Math.floor(random() * 1000);
    if (chance(0.1)) headers['idempotency-key'] = pick(['key-1', 'key-2', '', 'x'.repeat(300)]);
    const framing: Framing = body === null ? 'none' : chance(0.2) ? 'chunked' : 'length';
    return { method, path, headers, body, framing };
  };
}

describe('the KV routes on uWebSockets directly', () => {
  it('answer every call as they do through hyper-express', async () => {
    console.log(`http direct SEED=${SEED} requests=${REQUESTS}`);
    const accept = vi.spyOn(UwsCall, 'accept');
    const direct = await start(true);
    const hyper = await start(false);
    const next = generator(SEED);
    const statuses = new Map<number, number>();
    for (let i = 0; i < REQUESTS; i++) {
      const sent = next();
      const a = comparable(await send(direct.handle.port, direct.agent, sent));
      const b = comparable(await send(hyper.handle.port, hyper.agent, sent));
      expect(a, `SEED=${SEED} request ${i}: ${JSON.stringify(sent)}`).toEqual(b);
      statuses.set(a.status, (statuses.get(a.status) ?? 0) + 1);
    }
    console.log('statuses', JSON.stringify([...statuses].sort((x, y) => x[0] - y[0])));
    // Both services saw the same calls (a transaction's id is made up per call).
    const calls = (service: FakeKvService) => JSON.stringify(service.calls)
      .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, '<uuid>');
    expect(calls(direct.service)).toBe(calls(hyper.service));
    // The direct path took calls, and handed the chunked and oversized ones on.
    const taken = accept.mock.results.filter((r) => r.value !== null).length;
    expect(taken).toBeGreaterThan(REQUESTS / 3);
    expect(accept.mock.calls.length - taken).toBeGreaterThan(REQUESTS / 50);
    // Each of its four methods on a route of its own (server.ts); any other went on.
    expect(new Set(accept.mock.calls.map((call) => call[2]))).toEqual(
      new Set(['GET', 'PUT', 'POST', 'DELETE']));
    expect(statuses.get(200) ?? 0).toBeGreaterThan(REQUESTS / 5);
    expect(statuses.get(413) ?? 0).toBeGreaterThan(0);
  });
});

/** Reads from `socket` until `count` complete responses (by content-length) have arrived. */
function readResponses(socket: Socket, count: number): Promise<string[]> {
  return new Promise((resolve, reject) => {
    let buffered = '';
    const out: string[] = [];
    const timer = setTimeout(() => reject(new Error(`only ${out.length} answers: ${buffered}`)),
      5000);
    socket.setEncoding('latin1');
    socket.on('data', (text: string) => {
      buffered += text;
      for (;;) {
        const end = buffered.indexOf('\r\n\r\n');
        if (end < 0) break;
        const length = Number(/content-length: (\d+)/i.exec(buffered.slice(0, end))?.[1] ?? 0);
        if (buffered.length < end + 4 + length) break;
        out.push(buffered.slice(0, end + 4 + length));
        buffered = buffered.slice(end + 4 + length);
      }
      if (out.length >= count) {
        clearTimeout(timer);
        resolve(out);
      }
    });
    socket.on('error', reject);
  });
}

function connected(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => resolve(socket));
    socket.on('error', reject);
  });
}

describe('a direct call on its connection', () => {
  it('holds an answer decided before the body until the body is in, then reads on', async () => {
    const { handle, service } = await start(true);
    const socket = await connected(handle.port);
    const answers = readResponses(socket, 2);
    let bodySent = false;
    let answeredEarly = false;
    socket.once('data', () => {
      answeredEarly = !bodySent;
    });
    const body = JSON.stringify([{ op: 'put', ns: 'orders', key: 'k', value: 1, forever: true }]);
    // Refused by its token, before a byte of its body has come.
    socket.write('POST /api/v1/kv HTTP/1.1\r\nhost: x\r\nauthorization: Bearer nobody\r\n'
      + `content-length: ${body.length}\r\n\r\n`);
    await new Promise((resolve) => setTimeout(resolve, 50));
    socket.write(body.slice(0, 5));
    // Another call answered meanwhile: its request id is written from the bytes the waiting
    // answer's id was first written into (request-ids.ts), which the waiting answer copied.
    const other = await connected(handle.port);
    const otherAnswer = readResponses(other, 1);
    other.write('POST /api/v1/kv HTTP/1.1\r\nhost: x\r\n'
      + `content-length: ${body.length}\r\n\r\n${body}`);
    const [between] = await otherAnswer;
    other.destroy();
    await new Promise((resolve) => setTimeout(resolve, 20));
    bodySent = true;
    socket.write(body.slice(5));
    socket.write('POST /api/v1/kv HTTP/1.1\r\nhost: x\r\n'
      + `content-length: ${body.length}\r\n\r\n${body}`);
    const [first, second] = await answers;
    socket.destroy();
    // As through hyper-express: a client that writes its whole body before it reads is never
    // answered into a half-sent request.
    expect(answeredEarly).toBe(false);
    expect(first).toMatch(/^HTTP\/1\.1 401 /);
    expect(first).toContain('"reason":"unauthorized"');
    expect(second).toMatch(/^HTTP\/1\.1 200 /);
    expect(second).toContain('"version":2');
    // Made ids, one per call in the order the calls came, each answer with its own.
    const idOf = (answer: string) => /x-request-id: ([0-9a-f]{8}-)([0-9a-z]+)\r\n/i.exec(answer);
    const ids = [first!, between!, second!].map(idOf);
    expect(ids.every((id) => id !== null && id[1] === ids[0]![1])).toBe(true);
    expect(ids.map((id) => parseInt(id![2]!, 36) - parseInt(ids[0]![2]!, 36))).toEqual([0, 1, 2]);
    // Only the calls with their whole body reached the service: the first one's was dropped.
    expect(service.calls).toHaveLength(2);
  });

  it('reads a body that arrives in pieces, and one that arrives whole, alike', async () => {
    const { handle, service } = await start(true);
    const socket = await connected(handle.port);
    const answers = readResponses(socket, 2);
    const body = (key: string) => JSON.stringify([{ op: 'put', ns: 'orders', key,
      value: { text: 'p'.repeat(200) }, forever: true }]);
    const head = (bytes: number) => 'POST /api/v1/kv HTTP/1.1\r\nhost: x\r\n'
      + `content-length: ${bytes}\r\n\r\n`;
    const pieces = body('pieces');
    socket.write(head(pieces.length) + pieces.slice(0, 7));
    for (const [from, to] of [[7, 100], [100, pieces.length]] as const) {
      await new Promise((resolve) => setTimeout(resolve, 15));
      socket.write(pieces.slice(from, to));
    }
    await new Promise((resolve) => setTimeout(resolve, 15));
    socket.write(head(body('whole').length) + body('whole'));
    const [a, b] = await answers;
    socket.destroy();
    expect(a).toMatch(/^HTTP\/1\.1 200 /);
    expect(b).toMatch(/^HTTP\/1\.1 200 /);
    expect(JSON.stringify(service.calls)).toContain('"key":"pieces"');
    expect(JSON.stringify(service.calls)).toContain('"key":"whole"');
    expect(JSON.stringify(service.calls).match(/p{200}/g)).toHaveLength(2);
  });

  it('costs nothing when the client leaves mid-body, and the server serves on', async () => {
    const { handle, service, agent } = await start(true);
    const socket = await connected(handle.port);
    socket.write('POST /api/v1/kv HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\n[{"op":');
    await new Promise((resolve) => setTimeout(resolve, 30));
    socket.destroy();
    await new Promise((resolve) => setTimeout(resolve, 30));
    const got = await send(handle.port, agent, { method: 'GET', path: '/api/v1/kv/orders/k',
      headers: {}, body: null, framing: 'none' });
    expect(got.status).toBe(200);
    // Only the read reached the service.
    expect(service.calls).toHaveLength(1);
  });

  it('closes a connection that sends a request behind a call still waiting (docs/http.md)',
    async () => {
      const { handle, service } = await start(true);
      let open = () => undefined as void;
      service.gate = new Promise<void>((resolve) => {
        open = resolve;
      });
      const socket = await connected(handle.port);
      const received: string[] = [];
      socket.on('data', (chunk: Buffer) => received.push(chunk.toString('latin1')));
      const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
      const body = JSON.stringify([{ op: 'put', ns: 'orders', key: 'k', value: 1,
        forever: true }]);
      socket.write(`POST /api/v1/kv HTTP/1.1\r\nhost: x\r\ncontent-length: ${body.length}`
        + `\r\n\r\n${body}GET /health HTTP/1.1\r\nhost: x\r\n\r\n`);
      await closed;
      open();
      // The write still applies; only its answer had nowhere to go.
      await vi.waitFor(() => expect(service.calls).toHaveLength(1));
      expect(received).toEqual([]);
    });

  it('watches for a leaving client only while a call is open, and serves on after one left',
    async () => {
      // Counts the abort handlers the direct path attaches (uws-call.ts, watchAbortIfOpen).
      let watched = 0;
      const accept = UwsCall.accept.bind(UwsCall);
      vi.spyOn(UwsCall, 'accept').mockImplementation((res, req, method, maxBodyBytes,
        budget, bodies) => {
        const onAborted = res.onAborted.bind(res);
        res.onAborted = (handler) => {
          watched++;
          return onAborted(handler);
        };
        return accept(res, req, method, maxBodyBytes, budget, bodies);
      });
      const { handle, service, agent } = await start(true);
      const read = { method: 'GET', path: '/api/v1/kv/orders/k', body: null,
        framing: 'none' } as const;
      // Refused before the handler returns: nothing to watch.
      const refused = await send(handle.port, agent,
        { ...read, headers: { authorization: 'Bearer nobody' } });
      expect(refused.status).toBe(401);
      expect(watched).toBe(0);
      // This service answers a read a turn later: watched until then.
      expect((await send(handle.port, agent, { ...read, headers: {} })).status).toBe(200);
      expect(watched).toBe(1);
      // A token verified later, and a write held at the service's gate: both watched, and
      // clients gone before their answers leave nothing for the server to trip on.
      let openGate = () => undefined as void;
      service.gate = new Promise<void>((resolve) => {
        openGate = resolve;
      });
      const body = JSON.stringify([{ op: 'put', ns: 'orders', key: 'k', value: 2,
        forever: true }]);
      const reader = await connected(handle.port);
      reader.write('GET /api/v1/kv/orders/k HTTP/1.1\r\nhost: x\r\n'
        + 'authorization: Bearer slow-reader\r\n\r\n');
      const writer = await connected(handle.port);
      writer.write(`POST /api/v1/kv HTTP/1.1\r\nhost: x\r\ncontent-length: ${body.length}`
        + `\r\n\r\n${body}`);
      await vi.waitFor(() => expect(watched).toBe(3));
      reader.destroy();
      writer.destroy();
      await new Promise((resolve) => setTimeout(resolve, 30));
      service.gate = null;
      openGate();
      // The write still applies; only its answer had nowhere to go.
      await vi.waitFor(() => expect(service.calls.some((call) =>
        call.ops.some((op) => op.op === 'put'))).toBe(true));
      const after = await send(handle.port, agent, { ...read, headers: {} });
      expect(after.status).toBe(200);
      expect(JSON.parse(after.body)).toMatchObject({ value: 2 });
    });

  it('passes a body over the limit to hyper-express, which refuses it unread', async () => {
    const accept = vi.spyOn(UwsCall, 'accept');
    const { handle, agent } = await start(true);
    const body = 'x'.repeat(MAX_BODY_BYTES + 1);
    const got = await send(handle.port, agent, { method: 'POST', path: '/api/v1/kv',
      headers: {}, body, framing: 'length' });
    expect(got.status).toBe(413);
    expect(JSON.parse(got.body)).toMatchObject({ reason: 'kv_body_too_large' });
    expect(accept.mock.results.map((r) => r.value)).toEqual([null]);
  });
});
