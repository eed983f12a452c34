/**
 * The listening side of the peer port: an HTTP (or HTTPS) server that upgrades one path to
 * WebSocket and hands each upgraded socket on, unauthenticated, under a `PreauthGuard`.
 * Everything a stranger can do before that is bounded here: the number of connections not
 * yet authenticated, the bytes of the upgrade request, the time to authenticate. Every
 * socket, raw or TLS or WebSocket, gets its `error` listener when it appears, before any
 * other branch runs: an unheard `error` event ends the process.
 */
import { createServer as createHttpServer, type IncomingMessage, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { Socket } from 'node:net';
import { WebSocketServer, type WebSocket } from 'ws';
import {
  FRAME_BYTES_MAX, PENDING_CONNECTIONS_MAX, PreauthGuard, UPGRADE_HEADER_BYTES_MAX,
  type PreauthViolation,
} from './peer-limits.js';

/** The one path the peer port upgrades; the version names the handshake's. */
export const PEER_PATH = '/raft/v1';

/** PEM material for a `wss` peer port; with `ca`, peers must present a certificate it signed. */
export interface PeerTlsMaterial {
  readonly cert: Buffer;
  readonly key: Buffer;
  readonly ca: Buffer | null;
}

/** Why the port dropped a connection before any handshake message. */
export type PortRefusal = PreauthViolation | 'busy' | 'not-an-upgrade' | 'http' | 'tls';

export interface PeerServerOptions {
  readonly host: string;
  readonly port: number;
  readonly tls: PeerTlsMaterial | null;
  /**
   * A WebSocket, upgraded and not yet authenticated. Call `authenticated` once its handshake
   * succeeds (it lifts the stranger's bounds); close it otherwise.
   */
  readonly onUpgrade: (socket: WebSocket, authenticated: () => void, remote: string) => void;
  readonly onRefusal: (refusal: PortRefusal, remote: string, detail: string) => void;
}

function remoteOf(socket: Socket): string {
  return `${socket.remoteAddress ?? '?'}:${socket.remotePort ?? '?'}`;
}

export class PeerServer {
  private server: Server | null = null;
  private readonly wss = new WebSocketServer({
    noServer: true,
    maxPayload: FRAME_BYTES_MAX,
    perMessageDeflate: false,
    clientTracking: false,
  });
  /** Connections not yet authenticated, by remote address and port (a TLS socket and its
   * TCP socket share them). */
  private readonly pending = new Map<string, PreauthGuard>();

  constructor(private readonly options: PeerServerOptions) {
    this.wss.on('error', () => undefined);
  }

  /** The port actually bound (useful with port 0). */
  get port(): number {
    const address = this.server?.address();
    return typeof address === 'object' && address !== null ? address.port : 0;
  }

  async start(): Promise<void> {
    const { tls } = this.options;
    const server = tls === null
      ? createHttpServer({ maxHeaderSize: UPGRADE_HEADER_BYTES_MAX })
      : createHttpsServer({ maxHeaderSize: UPGRADE_HEADER_BYTES_MAX, cert: tls.cert, key: tls.key,
        ...(tls.ca === null ? {} : { ca: tls.ca, requestCert: true, rejectUnauthorized: true }),
        minVersion: 'TLSv1.2' });
    this.server = server;
    server.on('connection', (socket: Socket) => this.onConnection(socket));
    server.on('upgrade', (request: IncomingMessage, socket: Socket, head: Buffer) =>
      this.onUpgradeRequest(request, socket, head));
    server.on('request', (_request, response) => {
      response.on('error', () => undefined);
      response.writeHead(404, { connection: 'close' }).end();
    });
    server.on('clientError', (error: Error, socket: Socket) => {
      socket.on('error', () => undefined);
      this.options.onRefusal('http', remoteOf(socket), error.message);
      socket.destroy();
    });
    server.on('tlsClientError', (error: Error, socket: Socket) => {
      socket.on('error', () => undefined);
      this.options.onRefusal('tls', remoteOf(socket), error.message);
      socket.destroy();
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ host: this.options.host, port: this.options.port, exclusive: true }, () => {
        server.off('error', reject);
        resolve();
      });
    });
    server.on('error', () => undefined);
  }

  async close(): Promise<void> {
    for (const guard of this.pending.values()) guard.release();
    const server = this.server;
    if (server === null) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  private onConnection(socket: Socket): void {
    socket.on('error', () => socket.destroy());
    const remote = remoteOf(socket);
    if (this.pending.size >= PENDING_CONNECTIONS_MAX) {
      socket.destroy();
      this.options.onRefusal('busy', remote, `${PENDING_CONNECTIONS_MAX} connections are ` +
        'already authenticating');
      return;
    }
    const guard = new PreauthGuard(socket, (violation) => {
      this.options.onRefusal(violation, remote, violation === 'bytes'
        ? 'sent too much before authenticating' : 'did not authenticate in time');
    });
    this.pending.set(remote, guard);
    socket.once('close', () => {
      guard.release();
      if (this.pending.get(remote) === guard) this.pending.delete(remote);
    });
  }

  private onUpgradeRequest(request: IncomingMessage, socket: Socket, head: Buffer): void {
    socket.on('error', () => socket.destroy());
    const remote = remoteOf(socket);
    const guard = this.pending.get(remote);
    if (guard === undefined || request.url !== PEER_PATH ||
      request.headers.upgrade?.toLowerCase() !== 'websocket') {
      socket.destroy();
      this.options.onRefusal('not-an-upgrade', remote, `an upgrade of ${String(request.url)
        .slice(0, 64)}`);
      return;
    }
    this.wss.handleUpgrade(request, socket, head, (webSocket) => {
      webSocket.on('error', () => webSocket.terminate());
      // `ws` reads the socket now; the bytes past the upgrade request (`head`) come back
      // through it on the next tick, and count with the rest.
      guard.countFrom(socket);
      this.options.onUpgrade(webSocket, () => {
        guard.authenticated();
        if (this.pending.get(remote) === guard) this.pending.delete(remote);
      }, remote);
    });
  }
}
