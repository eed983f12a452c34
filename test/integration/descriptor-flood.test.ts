/**
 * A flood of connections up to the process's limit on open files (host/http/accept-gate.ts,
 * host/storage/descriptors.ts). One real node with a limit of 256 and a snapshot every 10
 * entries, so it opens files of its own while the flood holds every descriptor it can take:
 * it must stop accepting (new clients refused at once), serve the connection it had, take its
 * snapshots, stay up, and accept again once the flood is gone.
 */
import { connect, createServer, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  removeDir, startNode, tempDir, UNLIMITED_RATES, type NodeProcess,
} from '../helpers/node-process.js';

const OPEN_FILES_MAX = 256;
/** More than the limit: the flood must reach it. */
const FLOOD_CONNECTIONS = 400;
const WRITES = 60;
const WAIT_MS = 10_000;

let node: NodeProcess;
let dir: string;

/**
 * A free port below the ephemeral range. While the node does not listen, a connect from this
 * machine to a port in that range may be given the same port as its own and connect to itself
 * (a TCP self-connect), which holds the port until it closes: a node's port is chosen below it.
 */
async function portBelowEphemeral(): Promise<number> {
  for (;;) {
    const port = 20_000 + Math.floor(Math.random() * 12_000);
    const free = await new Promise<boolean>((resolve) => {
      const server = createServer();
      server.once('error', () => resolve(false));
      server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
    });
    if (free) return port;
  }
}

beforeAll(async () => {
  dir = tempDir('descriptor-flood');
  node = await startNode({ dataDir: dir, openFilesMax: OPEN_FILES_MAX,
    port: await portBelowEphemeral(),
    env: { ...UNLIMITED_RATES, HIVEKV_SNAPSHOT_EVERY_ENTRIES: '10' } });
});

afterAll(async () => {
  expect(await node.stop()).toBe(0);
  removeDir(dir);
});

function open(): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect(node.port, '127.0.0.1', () => resolve(socket));
    socket.once('error', reject);
  });
}

/** Whether a new connection is refused by the kernel (no listening socket). */
function refused(): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(node.port, '127.0.0.1', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', (error: NodeJS.ErrnoException) => {
      resolve(error.code === 'ECONNREFUSED');
    });
  });
}

/** Requests on one kept-alive connection, one at a time. */
class KeptConnection {
  private received = '';
  private waiter: (() => void) | null = null;

  constructor(private readonly socket: Socket) {
    socket.on('data', (chunk: Buffer) => {
      this.received += chunk.toString('latin1');
      this.waiter?.();
    });
  }

  async request(method: string, path: string, body?: string): Promise<{ status: number;
    body: string }> {
    const head = `${method} ${path} HTTP/1.1\r\nHost: x\r\n` + (body === undefined ? '\r\n'
      : `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n`);
    this.socket.write(head + (body ?? ''));
    const deadline = Date.now() + WAIT_MS;
    for (;;) {
      const answer = this.complete();
      if (answer !== null) return answer;
      if (Date.now() > deadline) throw new Error(`no answer to ${method} ${path}`);
      await new Promise<void>((resolve) => {
        this.waiter = resolve;
        setTimeout(resolve, 50);
      });
    }
  }

  private complete(): { status: number; body: string } | null {
    const end = this.received.indexOf('\r\n\r\n');
    if (end < 0) return null;
    const head = this.received.slice(0, end);
    const length = Number(/content-length: (\d+)/i.exec(head)?.[1] ?? 0);
    if (this.received.length < end + 4 + length) return null;
    const body = this.received.slice(end + 4, end + 4 + length);
    this.received = this.received.slice(end + 4 + length);
    return { status: Number(head.slice(9, 12)), body };
  }
}

function metric(text: string, name: string): number {
  return Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1]);
}

describe('a flood of connections up to the limit on open files', () => {
  it('stops accepting, serves the connection it had, snapshots, and accepts again after',
    async () => {
      const kept = new KeptConnection(await open());
      const flood: Socket[] = [];
      for (let i = 0; i < FLOOD_CONNECTIONS; i++) {
        try {
          const socket = await open();
          socket.on('error', () => undefined);
          flood.push(socket);
        } catch {
          break;
        }
      }
      try {
        // The gate reads the descriptors ten times a second.
        const deadline = Date.now() + WAIT_MS;
        let metrics = (await kept.request('GET', '/metrics')).body;
        while (metric(metrics, 'hivekv_http_accepting') !== 0 && Date.now() < deadline) {
          await new Promise((resolve) => setTimeout(resolve, 100));
          metrics = (await kept.request('GET', '/metrics')).body;
        }
        expect(metric(metrics, 'hivekv_http_accepting')).toBe(0);
        expect(await refused()).toBe(true);
        // Each tenth write starts a snapshot: files the node must open with no free descriptor.
        for (let i = 0; i < WRITES; i++) {
          const answer = await kept.request('POST', '/api/v1/kv', JSON.stringify({ operations: [
            { op: 'put', ns: 'flood', key: `k${i}`, value: i, forever: true }] }));
          expect(answer.status).toBe(200);
          expect(JSON.parse(answer.body)).toMatchObject({ results: [{ applied: true }] });
        }
        const read = await kept.request('GET', `/api/v1/kv/flood/k${WRITES - 1}`);
        expect(JSON.parse(read.body)).toMatchObject({ found: true, value: WRITES - 1 });
      } finally {
        for (const socket of flood) socket.destroy();
      }
      const deadline = Date.now() + WAIT_MS;
      while (await refused() && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      const health = await fetch(`${node.url}/health`);
      expect(health.status).toBe(200);
      const metrics = await (await fetch(`${node.url}/metrics`)).text();
      expect(metric(metrics, 'hivekv_http_accepting')).toBe(1);
      expect(metric(metrics, 'hivekv_http_accept_pauses_total')).toBeGreaterThanOrEqual(1);
      expect(node.output()).toContain('snapshot taken');
      expect(node.output()).not.toContain('fatal');
    }, 60_000);
});
