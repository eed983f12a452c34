/**
 * The peer link over WebSocket (`ws`): every node listens on its peer address and dials every
 * other member. A node sends on the connection it dialled and receives on the ones it
 * accepted, so each direction has exactly one socket and frames between two nodes keep their
 * order. Delivery is best effort: Raft resends what is lost.
 *
 * Never throws on a missing or slow peer: a frame for a peer that is not connected, or whose
 * send buffer is over its bound, is dropped and counted.
 */
import { WebSocket, WebSocketServer } from 'ws';
import type { IncomingMessage } from 'node:http';
import type { PeerAddress } from '../node/config.js';
import type { Transport } from './transport.js';

/** A frame larger than this is refused by the receiver (a snapshot chunk is at most 1 MiB). */
export const FRAME_BYTES_MAX = 80 * 1024 * 1024;
/** Bytes queued on one peer's socket before new frames for it are dropped. */
export const PEER_BUFFERED_BYTES_MAX = 64 * 1024 * 1024;
const RECONNECT_DELAY_MIN_MS = 50;
const RECONNECT_DELAY_MAX_MS = 1000;
const PATH_PREFIX = '/raft/';

interface OutboundLink {
  readonly peer: PeerAddress;
  socket: WebSocket | null;
  reconnectDelayMs: number;
  reconnectTimer: NodeJS.Timeout | null;
}

export interface WsTransportOptions {
  readonly selfId: string;
  readonly listen: { readonly host: string; readonly port: number };
  readonly peers: readonly PeerAddress[];
  readonly onLinkChange?: (peer: string, up: boolean) => void;
}

export class WsTransport implements Transport {
  private server: WebSocketServer | null = null;
  private readonly links = new Map<string, OutboundLink>();
  private readonly inbound = new Set<WebSocket>();
  private onFrame: ((from: string, frame: Uint8Array) => void) | null = null;
  private closed = false;
  /** Frames dropped because a peer was down or its buffer was full. */
  droppedFrames = 0;

  constructor(private readonly options: WsTransportOptions) {}

  /** The port actually bound (useful with port 0). */
  get listenPort(): number {
    const address = this.server?.address();
    return typeof address === 'object' && address !== null ? address.port : 0;
  }

  async start(onFrame: (from: string, frame: Uint8Array) => void): Promise<void> {
    this.onFrame = onFrame;
    const server = new WebSocketServer({
      host: this.options.listen.host,
      port: this.options.listen.port,
      maxPayload: FRAME_BYTES_MAX,
      perMessageDeflate: false,
    });
    this.server = server;
    server.on('connection', (socket, request) => this.accept(socket, request));
    await new Promise<void>((resolve, reject) => {
      server.once('listening', resolve);
      server.once('error', reject);
    });
    server.on('error', () => undefined);
    for (const peer of this.options.peers) {
      if (peer.id === this.options.selfId) continue;
      const link: OutboundLink = {
        peer, socket: null, reconnectDelayMs: RECONNECT_DELAY_MIN_MS, reconnectTimer: null,
      };
      this.links.set(peer.id, link);
      this.dial(link);
    }
  }

  send(to: string, frame: Uint8Array): void {
    const socket = this.links.get(to)?.socket;
    if (socket === undefined || socket === null || socket.readyState !== WebSocket.OPEN ||
      socket.bufferedAmount > PEER_BUFFERED_BYTES_MAX) {
      this.droppedFrames++;
      return;
    }
    socket.send(frame, { binary: true });
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const link of this.links.values()) {
      if (link.reconnectTimer !== null) clearTimeout(link.reconnectTimer);
      link.socket?.terminate();
    }
    for (const socket of this.inbound) socket.terminate();
    const server = this.server;
    if (server !== null) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  private accept(socket: WebSocket, request: IncomingMessage): void {
    // First, before any branch: an `error` event with no listener would end the process.
    socket.on('error', () => socket.terminate());
    const url = request.url ?? '';
    const from = url.startsWith(PATH_PREFIX) ? decodeURIComponent(url.slice(PATH_PREFIX.length))
      : '';
    if (!this.options.peers.some((p) => p.id === from) || from === this.options.selfId) {
      socket.close(1008, 'unknown peer id');
      return;
    }
    this.inbound.add(socket);
    socket.on('message', (data, isBinary) => {
      if (!isBinary || this.onFrame === null) return;
      const frame = Array.isArray(data) ? Buffer.concat(data) : data instanceof ArrayBuffer
        ? new Uint8Array(data) : data;
      this.onFrame(from, frame);
    });
    socket.on('close', () => this.inbound.delete(socket));
  }

  private dial(link: OutboundLink): void {
    if (this.closed) return;
    const { host, port } = link.peer;
    const url = `ws://${host}:${port}${PATH_PREFIX}${encodeURIComponent(this.options.selfId)}`;
    const socket = new WebSocket(url, { perMessageDeflate: false, maxPayload: FRAME_BYTES_MAX });
    socket.on('error', () => undefined);
    link.socket = socket;
    socket.on('open', () => {
      link.reconnectDelayMs = RECONNECT_DELAY_MIN_MS;
      this.options.onLinkChange?.(link.peer.id, true);
    });
    socket.on('close', () => {
      if (link.socket === socket) link.socket = null;
      this.options.onLinkChange?.(link.peer.id, false);
      if (this.closed) return;
      link.reconnectTimer = setTimeout(() => {
        link.reconnectTimer = null;
        this.dial(link);
      }, link.reconnectDelayMs);
      link.reconnectDelayMs = Math.min(RECONNECT_DELAY_MAX_MS, link.reconnectDelayMs * 2);
    });
  }
}
