/**
 * One client connection of the load generator: a raw TCP socket with HTTP/1.1 keep-alive or
 * RESP framing. Received bytes land in one reused buffer (`onread`), so a reply's body is
 * valid only during the `onReply` call; only a reply split across reads is copied.
 */
import { connect, type Socket } from 'node:net';

import { parseHttp, parseRespReply, type Reply } from './wire.js';

export type Framing = 'http' | 'resp';

const READ_BUFFER_BYTES = 256 * 1024;
const CONNECT_TIMEOUT_MS = 10_000;

export class Conn {
  onReply: (reply: Reply) => void = () => undefined;
  onClose: (error: Error | null) => void = () => undefined;
  private readonly socket: Socket;
  private carry: Buffer | null = null;
  private readonly parse: (b: Buffer, at: number) => { reply: Reply; end: number } | null;
  closed = false;

  private constructor(socket: Socket, framing: Framing) {
    this.socket = socket;
    this.parse = framing === 'http' ? parseHttp : parseRespReply;
  }

  /** Connects to 127.0.0.1-style `host:port`; rejects after a bounded wait. */
  static open(host: string, port: number, framing: Framing): Promise<Conn> {
    return new Promise((resolve, reject) => {
      let conn: Conn | null = null;
      const socket = connect({ host, port, noDelay: true, onread: {
        buffer: Buffer.allocUnsafe(READ_BUFFER_BYTES),
        callback: (bytes: number, buffer: Uint8Array) => {
          conn?.received(Buffer.from(buffer.buffer, buffer.byteOffset, bytes));
          return true;
        },
      } });
      conn = new Conn(socket, framing);
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new Error(`connect ${host}:${port}: timed out`));
      }, CONNECT_TIMEOUT_MS);
      socket.on('error', (error) => {
        clearTimeout(timer);
        if (conn !== null && !conn.closed) {
          conn.closed = true;
          conn.onClose(error);
        }
        reject(error);
      });
      socket.on('close', () => {
        if (conn !== null && !conn.closed) {
          conn.closed = true;
          conn.onClose(null);
        }
      });
      socket.once('connect', () => {
        clearTimeout(timer);
        resolve(conn!);
      });
    });
  }

  send(request: Buffer): void {
    this.socket.write(request);
  }

  close(): void {
    this.closed = true;
    this.socket.destroy();
  }

  private received(chunk: Buffer): void {
    let data = chunk;
    if (this.carry !== null) {
      data = Buffer.concat([this.carry, chunk]);
      this.carry = null;
    }
    let at = 0;
    for (;;) {
      const parsed = this.parse(data, at);
      if (parsed === null) break;
      at = parsed.end;
      this.onReply(parsed.reply);
    }
    // The read buffer is reused: keep a copy of a partial reply.
    if (at < data.length) this.carry = Buffer.from(data.subarray(at));
  }
}

/**
 * A request/answer client for setup and verification (not timed). One request in flight per
 * connection (hyper-express closes a connection that pipelines), over `width` connections.
 */
export class Client {
  private readonly queue: Array<{ bytes: Buffer; resolve: (r: Reply) => void;
    reject: (e: Error) => void }> = [];
  private readonly busy = new Set<Conn>();

  private constructor(private readonly conns: readonly Conn[]) {
    for (const conn of conns) {
      let current: { resolve: (r: Reply) => void; reject: (e: Error) => void } | null = null;
      const next = () => {
        const item = this.queue.shift();
        current = item ?? null;
        if (item === undefined) this.busy.delete(conn);
        else conn.send(item.bytes);
      };
      conn.onReply = (reply) => {
        current?.resolve(detach(reply));
        next();
      };
      conn.onClose = (error) => {
        current?.reject(error ?? new Error('connection closed'));
        current = null;
        if (this.conns.every((c) => c.closed)) {
          for (const item of this.queue.splice(0)) item.reject(new Error('connection closed'));
        }
      };
      this.starters.set(conn, (item) => {
        current = item;
        this.busy.add(conn);
        conn.send(item.bytes);
      });
    }
  }

  private readonly starters = new Map<Conn, (item: { bytes: Buffer;
    resolve: (r: Reply) => void; reject: (e: Error) => void }) => void>();

  static async open(host: string, port: number, framing: Framing, width = 1):
    Promise<Client> {
    const conns: Conn[] = [];
    for (let i = 0; i < width; i++) conns.push(await Conn.open(host, port, framing));
    return new Client(conns);
  }

  request(bytes: Buffer): Promise<Reply> {
    return new Promise((resolve, reject) => {
      const item = { bytes, resolve, reject };
      const idle = this.conns.find((c) => !c.closed && !this.busy.has(c));
      if (idle !== undefined) this.starters.get(idle)!(item);
      else if (this.conns.every((c) => c.closed)) reject(new Error('connection closed'));
      else this.queue.push(item);
    });
  }

  close(): void {
    for (const conn of this.conns) conn.close();
  }
}

/** A copy of a reply that outlives the read buffer. */
function detach(reply: Reply): Reply {
  const copy = (v: unknown): unknown => Buffer.isBuffer(v) ? Buffer.from(v) :
    Array.isArray(v) ? v.map(copy) : v;
  return { status: reply.status, body: copy(reply.body) as Reply['body'] };
}
