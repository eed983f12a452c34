/**
 * Slow clients cannot make a node hold memory without bound. Clients that send requests and
 * never read the answers (host/http/answer-budget.ts): before, eight connections pipelining
 * large reads each grew a node by gigabytes, as uWebSockets kept every answer the socket
 * could not take. Now a connection holds at most one answer the client has not read, the sum
 * of those is bounded by HIVEKV_MAX_WAITING_ANSWER_BYTES, and a connection past it is closed.
 * Clients that send most of a large body and stall (host/http/body-budget.ts): the bodies
 * held are bounded by HIVEKV_MAX_HELD_BODY_BYTES, calls past it are refused, and uploads
 * stalled a second or more are closed to make room for a call that comes. Both ways
 * into the node are tried: a body of a declared length (the direct path) and a chunked one
 * (through hyper-express). Real processes over loopback; RSS read from /proc.
 */
import { readFileSync } from 'node:fs';
import { createConnection, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { sleep, waitFor } from '../helpers/cluster.js';
import {
  call, kv, removeDir, startNode, tempDir, UNLIMITED_RATES, type NodeProcess,
} from '../helpers/node-process.js';

const MIB = 1024 * 1024;
const VALUE_CHARS = 60_000;
const KEYS = 512;
const CONNECTIONS = 8;
const PIPELINED = 20;
const WAITING_MAX = 32 * MIB;
/** What the node may grow by while the clients hold their answers unread. */
const GROWTH_BYTES_MAX = 400 * MIB;

let node: NodeProcess;
const dir = tempDir('slow-clients');

beforeAll(async () => {
  node = await startNode({ dataDir: dir, env: { ...UNLIMITED_RATES,
    QUEEN_KV_MAX_READ_BYTES: String(32 * MIB), HIVEKV_MAX_WAITING_ANSWER_BYTES:
      String(WAITING_MAX) } });
  const value = 'v'.repeat(VALUE_CHARS);
  for (let i = 0; i < KEYS; i += 16) {
    const puts = Array.from({ length: 16 }, (_, j) => ({ op: 'put', ns: 'big',
      key: `k${String(i + j).padStart(3, '0')}`, value, forever: true }));
    expect((await kv(node.url, puts)).status).toBe(200);
  }
}, 60_000);

afterAll(async () => {
  await node.kill();
  removeDir(dir);
});

function rssBytes(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8').split('\n')
    .find((l) => l.startsWith('VmRSS:'))!;
  return Number(line.split(/\s+/)[1]) * 1024;
}

async function metric(name: string): Promise<number> {
  const text = (await call(node.url, 'GET', '/metrics')).text;
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return Number(line?.split(' ')[1] ?? NaN);
}

const READ = JSON.stringify({ operations: [{ op: 'getPrefix', ns: 'big', prefix: 'k',
  limit: 1000 }] });

function request(chunked: boolean): string {
  const head = 'POST /api/v1/kv HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\n';
  if (!chunked) return `${head}content-length: ${Buffer.byteLength(READ)}\r\n\r\n${READ}`;
  const size = Buffer.byteLength(READ).toString(16);
  return `${head}transfer-encoding: chunked\r\n\r\n${size}\r\n${READ}\r\n0\r\n\r\n`;
}

/** Connections that send reads and read nothing back; resolves once all are written. */
async function slowReaders(chunked: boolean, pipelined: number): Promise<Socket[]> {
  const sockets = await Promise.all(Array.from({ length: CONNECTIONS }, () =>
    new Promise<Socket>((resolve, reject) => {
      const socket = createConnection({ host: '127.0.0.1', port: node.port }, () => {
        socket.pause();
        resolve(socket);
      });
      socket.on('error', () => undefined);
      socket.once('error', reject);
    })));
  for (const socket of sockets) socket.write(request(chunked).repeat(pipelined));
  return sockets;
}

/** The node's growth in RSS while `sockets` hold their answers unread, over three seconds. */
async function growthWhileHeld(): Promise<number> {
  const before = rssBytes(node.pid);
  let peak = before;
  for (let i = 0; i < 20; i += 1) {
    await sleep(150);
    peak = Math.max(peak, rssBytes(node.pid));
  }
  return peak - before;
}

async function released(sockets: Socket[]): Promise<void> {
  for (const socket of sockets) socket.destroy();
  await waitFor('the waiting answers to be released', 10_000, async () =>
    await metric('hivekv_http_answer_bytes_waiting') === 0 ? true : undefined);
}

const BODIES = [['a declared length', false], ['a chunked body', true]] as const;

describe('clients that do not read their answers', () => {
  it.each(BODIES)('pipelining reads with %s: each connection holds one answer at most',
    async (_, chunked) => {
      const sockets = await slowReaders(chunked, PIPELINED);
      // Before, each connection's twenty answers were all kept: gigabytes.
      expect(await growthWhileHeld()).toBeLessThan(GROWTH_BYTES_MAX);
      await released(sockets);
    }, 60_000);

  it.each(BODIES)('one read each with %s: the answers waiting stay within the bound, and ' +
    'other clients are served', async (_, chunked) => {
    const closedBefore = await metric('hivekv_http_slow_readers_closed_total');
    const sockets = await slowReaders(chunked, 1);
    expect(await growthWhileHeld()).toBeLessThan(GROWTH_BYTES_MAX);
    const answerBytes = KEYS * VALUE_CHARS;
    expect(await metric('hivekv_http_answer_bytes_waiting'))
      .toBeLessThanOrEqual(WAITING_MAX + answerBytes);
    expect(await metric('hivekv_http_slow_readers_closed_total')).toBeGreaterThan(closedBefore);
    // A client that reads gets the whole answer meanwhile.
    const answer = await kv(node.url, [{ op: 'getPrefix', ns: 'big', prefix: 'k',
      limit: 1000 }]);
    expect(answer.status).toBe(200);
    expect(answer.body.results[0].rows).toHaveLength(KEYS);
    await released(sockets);
  }, 60_000);
});

describe('clients that send most of a large body and stall', () => {
  let small: NodeProcess;
  const smallDir = tempDir('held-bodies');
  const BODY_BYTES = 20 * MIB;
  const HELD_MAX = 64 * MIB;
  const UPLOADS = 12;

  beforeAll(async () => {
    small = await startNode({ dataDir: smallDir, env: { ...UNLIMITED_RATES,
      HIVEKV_MAX_HELD_BODY_BYTES: String(HELD_MAX) } });
  }, 60_000);

  afterAll(async () => {
    await small.kill();
    removeDir(smallDir);
  });

  it.each(BODIES)('with %s: the bodies held stay within the bound, the rest are refused',
    async (_, chunked) => {
      const metricOf = async (name: string): Promise<number> => {
        const text = (await call(small.url, 'GET', '/metrics')).text;
        return Number(text.split('\n').find((l) => l.startsWith(`${name} `))?.split(' ')[1]);
      };
      const refusedBefore = await metricOf('hivekv_http_bodies_refused_total');
      const before = rssBytes(small.pid);
      const head = 'POST /api/v1/kv HTTP/1.1\r\nHost: 127.0.0.1\r\n' +
        'content-type: application/json\r\n';
      const part = Buffer.alloc(BODY_BYTES - MIB, 'x');
      const sockets: Socket[] = [];
      const answers: string[] = [];
      for (let i = 0; i < UPLOADS; i += 1) {
        const socket = createConnection({ host: '127.0.0.1', port: small.port });
        socket.on('error', () => undefined);
        socket.on('data', (data: Buffer) => answers.push(data.toString()));
        socket.write(chunked ? `${head}transfer-encoding: chunked\r\n\r\n` +
          `${part.byteLength.toString(16)}\r\n` : `${head}content-length: ${BODY_BYTES}\r\n\r\n`);
        socket.write(part);
        sockets.push(socket);
      }
      let peak = before;
      for (let i = 0; i < 20; i += 1) {
        await sleep(150);
        peak = Math.max(peak, rssBytes(small.pid));
      }
      // Before, every connection's body was kept: 230 MB here, gigabytes with more of them.
      expect(peak - before).toBeLessThan(HELD_MAX + 64 * MIB);
      expect(await metricOf('hivekv_http_bodies_refused_total')).toBeGreaterThan(refusedBefore);
      expect(await metricOf('hivekv_http_body_bytes_held')).toBeLessThanOrEqual(HELD_MAX);
      for (const socket of sockets) socket.destroy();
      await waitFor('the bodies to be released', 10_000, async () =>
        await metricOf('hivekv_http_body_bytes_held') === 0 ? true : undefined);
      const put = await kv(small.url, [{ op: 'put', ns: 'b', key: 'k', value: 1,
        forever: true }]);
      expect(put.status).toBe(200);
    }, 60_000);

  it('with a declared length: uploads stalled a second make room for a call that comes',
    async () => {
      const metricOf = async (name: string): Promise<number> => {
        const text = (await call(small.url, 'GET', '/metrics')).text;
        return Number(text.split('\n').find((l) => l.startsWith(`${name} `))?.split(' ')[1]);
      };
      const closedBefore = await metricOf('hivekv_http_slow_uploads_closed_total');
      const head = 'POST /api/v1/kv HTTP/1.1\r\nHost: 127.0.0.1\r\n' +
        `content-type: application/json\r\ncontent-length: ${BODY_BYTES}\r\n\r\n`;
      const stalled: Socket[] = [];
      const closed = new Set<Socket>();
      for (let i = 0; i < 3; i += 1) {
        const socket = createConnection({ host: '127.0.0.1', port: small.port });
        socket.on('error', () => undefined);
        socket.on('close', () => closed.add(socket));
        socket.write(head);
        socket.write(Buffer.alloc(BODY_BYTES - MIB, 'x'));
        stalled.push(socket);
      }
      await waitFor('the three uploads to be held', 10_000, async () =>
        await metricOf('hivekv_http_body_bytes_held') === 3 * BODY_BYTES ? true : undefined);
      await sleep(1200);
      // 15 MB of puts: more than the 4 MiB left, taken once a stalled upload makes room.
      const value = 'v'.repeat(60_000);
      const puts = Array.from({ length: 256 }, (_, i) => ({ op: 'put', ns: 'room',
        key: `k${i}`, value, forever: true }));
      const answer = await kv(small.url, puts);
      expect(answer.status, answer.text.slice(0, 200)).toBe(200);
      expect(await metricOf('hivekv_http_slow_uploads_closed_total')).toBeGreaterThan(closedBefore);
      await waitFor('a stalled upload\'s connection to be closed', 10_000, async () =>
        closed.size > 0 ? true : undefined);
      for (const socket of stalled) socket.destroy();
      await waitFor('the bodies to be released', 10_000, async () =>
        await metricOf('hivekv_http_body_bytes_held') === 0 ? true : undefined);
    }, 60_000);
});
