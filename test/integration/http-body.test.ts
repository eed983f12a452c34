/**
 * Request bodies as a client's TCP writes deliver them: a body of known length split across
 * several writes, a chunked body, a body cut short by a closed connection, and one longer
 * than its content-length; and requests the HTTP server cannot parse (docs/http.md,
 * "Conventions"). One real node over loopback, raw sockets.
 */
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  kv, removeDir, startNode, tempDir, UNLIMITED_RATES, type NodeProcess,
} from '../helpers/node-process.js';

let node: NodeProcess;
let dir: string;
let port: number;

beforeAll(async () => {
  dir = tempDir('http-body');
  node = await startNode({ dataDir: dir, env: UNLIMITED_RATES });
  port = Number(new URL(node.url).port);
});

afterAll(async () => {
  expect(await node.stop()).toBe(0);
  removeDir(dir);
});

const PAUSE_MS = 30;
const ANSWER_WAIT_MS = 5_000;

function open(): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => resolve(socket));
    socket.once('error', reject);
  });
}

/** Writes `pieces` with a pause between them; resolves with everything the node answered. */
async function exchange(pieces: readonly string[]): Promise<string> {
  const socket = await open();
  let answer = '';
  socket.on('data', (chunk: Buffer) => {
    answer += chunk.toString('latin1');
  });
  for (const piece of pieces) {
    socket.write(piece);
    await new Promise((resolve) => setTimeout(resolve, PAUSE_MS));
  }
  const deadline = Date.now() + ANSWER_WAIT_MS;
  while (!/\r\n\r\n[\s\S]*\}\s*$/.test(answer) && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  socket.destroy();
  return answer;
}

function head(bodyBytes: number): string {
  return `POST /api/v1/kv HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
    `Content-Length: ${bodyBytes}\r\n\r\n`;
}

function jsonOf(answer: string): { status: number; body: unknown } {
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1]);
  const body = answer.slice(answer.indexOf('\r\n\r\n') + 4);
  return { status, body: JSON.parse(body) };
}

describe('request bodies over TCP', () => {
  it('reads a body of known length that arrives in several writes', async () => {
    const body = JSON.stringify({ operations: [
      { op: 'put', ns: 'body', key: 'split', value: { n: 'x'.repeat(300) }, forever: true }] });
    const cuts = [0, 1, 40, 41, 200, body.length];
    const pieces = [head(Buffer.byteLength(body))];
    for (let i = 1; i < cuts.length; i++) pieces.push(body.slice(cuts[i - 1], cuts[i]));
    const { status, body: answer } = jsonOf(await exchange(pieces));
    expect(status).toBe(200);
    expect(answer).toMatchObject({ results: [{ op: 'put', applied: true, key: 'split' }] });
    const read = await kv(node.url, [{ op: 'get', ns: 'body', key: 'split' }]);
    expect(read.body.results[0]).toMatchObject({ found: true, value: { n: 'x'.repeat(300) } });
  });

  it('reads a chunked body', async () => {
    const body = JSON.stringify({ operations: [
      { op: 'put', ns: 'body', key: 'chunked', value: 7, forever: true }] });
    const half = Math.floor(body.length / 2);
    const chunk = (text: string) => `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n`;
    const { status, body: answer } = jsonOf(await exchange([
      'POST /api/v1/kv HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n' +
        'Transfer-Encoding: chunked\r\n\r\n',
      chunk(body.slice(0, half)), chunk(body.slice(half)), '0\r\n\r\n']));
    expect(status).toBe(200);
    expect(answer).toMatchObject({ results: [{ op: 'put', applied: true, key: 'chunked' }] });
  });

  it('serves on after a client closes in the middle of a body', async () => {
    const socket = await open();
    socket.write(head(500) + '{"operations":[{"op":"put"');
    await new Promise((resolve) => setTimeout(resolve, PAUSE_MS));
    socket.destroy();
    const r = await kv(node.url,
      [{ op: 'put', ns: 'body', key: 'after', value: 1, forever: true }]);
    expect(r.status).toBe(200);
  });

  it('never applies bytes past the content-length as part of the body', async () => {
    const body = JSON.stringify({ operations: [
      { op: 'put', ns: 'body', key: 'exact', value: 1, forever: true }] });
    // The extra bytes are the start of the next request on the connection, not this body.
    const answer = await exchange([head(Buffer.byteLength(body)) + body + 'GARBAGE']);
    expect(jsonOf(answer.slice(0, answer.indexOf('}]}') + 3)).status).toBe(200);
    const read = await kv(node.url, [{ op: 'get', ns: 'body', key: 'exact' }]);
    expect(read.body.results[0]).toMatchObject({ found: true, value: 1 });
  });
});

/** What the node wrote on a connection before it closed it, and when it closed it. */
async function untilClosed(request: string, waitMs: number):
  Promise<{ answer: string; closedAfterMs: number | null }> {
  const socket = await open();
  const started = Date.now();
  let answer = '';
  socket.on('data', (chunk: Buffer) => {
    answer += chunk.toString('latin1');
  });
  const closed = new Promise<number>((resolve) => socket.once('close', () => {
    resolve(Date.now() - started);
  }));
  socket.write(request);
  const closedAfterMs = await Promise.race([closed,
    new Promise<null>((resolve) => setTimeout(() => resolve(null), waitMs))]);
  socket.destroy();
  return { answer, closedAfterMs };
}

/** The HTTP server closes a connection idle for 10 s, checked every 4 s: 8 to 12 s. */
const IDLE_CLOSE_WITHIN_MS = 16_000;

describe('requests the HTTP server cannot parse', () => {
  it('answers no HTTP/1.0 request, none without a Host, and no bytes that are not HTTP, ' +
    'and closes each connection once it is idle', async () => {
    const requests = [
      'GET /health HTTP/1.0\r\nHost: x\r\n\r\n',
      'GET /health HTTP/1.1\r\n\r\n',
      '\u0001not http at all\r\n\r\n',
    ];
    const outcomes = await Promise.all(requests.map((request) =>
      untilClosed(request, IDLE_CLOSE_WITHIN_MS)));
    for (const outcome of outcomes) {
      expect(outcome.answer).toBe('');
      expect(outcome.closedAfterMs).not.toBeNull();
    }
    // The same request in HTTP/1.1 with a Host is answered, and the node served on.
    const health = await untilClosed('GET /health HTTP/1.1\r\nHost: x\r\nConnection: close' +
      '\r\n\r\n', ANSWER_WAIT_MS);
    expect(health.answer).toMatch(/^HTTP\/1\.1 200 /);
  }, IDLE_CLOSE_WITHIN_MS + 10_000);
});
