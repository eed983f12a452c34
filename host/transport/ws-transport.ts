/**
 * The peer link over WebSocket (`ws`): every node listens on its peer address and dials every
 * other member. A node sends on the connection it dialled and receives on the ones it
 * accepted, so each direction has one socket and frames between two nodes keep their order;
 * to a peer it has no link to yet (a leader that is adding it), it answers on the socket that
 * peer dialled. Delivery is best effort: Raft resends what is lost.
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
/** What a member id may be (host/core/raft/configuration.ts). */
const PEER_ID_PATTERN = /^[A-Za-z0-9_.-]{1,64}$/;

interface OutboundLink {
  peer: PeerAddress;
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
  /** The newest socket each peer dialled to us, to answer a peer we have no link to. */
  private readonly inboundByPeer = new Map<string, WebSocket>();
  private started = false;
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
    this.started = true;
    this.setPeers(this.options.peers);
  }

  setPeers(peers: readonly PeerAddress[]): void {
    if (!this.started || this.closed) return;
    const wanted = new Map(peers.filter((p) => p.id !== this.options.selfId)
      .map((p) => [p.id, p] as const));
    for (const [id, link] of this.links) {
      const peer = wanted.get(id);
      if (peer !== undefined && peer.host === link.peer.host && peer.port === link.peer.port) {
        continue;
      }
      this.links.delete(id);
      if (link.reconnectTimer !== null) clearTimeout(link.reconnectTimer);
      link.socket?.terminate();
    }
    for (const peer of wanted.values()) {
      if (this.links.has(peer.id)) continue;
      const link: OutboundLink = {
        peer, socket: null, reconnectDelayMs: RECONNECT_DELAY_MIN_MS, reconnectTimer: null,
      };
      this.links.set(peer.id, link);
      this.dial(link);
    }
  }

  send(to: string, frame: Uint8Array): void {
    const open = (s: WebSocket | null | undefined): s is WebSocket =>
      s !== undefined && s !== null && s.readyState === WebSocket.OPEN;
    const dialled = this.links.get(to)?.socket;
    const socket = open(dialled) ? dialled : this.inboundByPeer.get(to);
    if (!open(socket) || socket.bufferedAmount > PEER_BUFFERED_BYTES_MAX) {
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
    const url = request.url ?? '';
    const from = url.startsWith(PATH_PREFIX) ? decodeURIComponent(url.slice(PATH_PREFIX.length))
      : '';
    // Any well-formed id but our own: a node being added hears first from a leader that is
    // in no configuration it knows yet.
    if (!PEER_ID_PATTERN.test(from) || from === this.options.selfId) {
      socket.close(1008, 'unknown peer id');
      return;
    }
    this.inbound.add(socket);
    this.inboundByPeer.set(from, socket);
    socket.on('message', (data, isBinary) => this.receive(from, data, isBinary));
    socket.on('close', () => {
      this.inbound.delete(socket);
      if (this.inboundByPeer.get(from) === socket) this.inboundByPeer.delete(from);
    });
    socket.on('error', () => socket.terminate());
  }

  private receive(from: string, data: WebSocket.RawData, isBinary: boolean): void {
    if (!isBinary || this.onFrame === null) return;
    const frame = Array.isArray(data) ? Buffer.concat(data) : data instanceof ArrayBuffer
      ? new Uint8Array(data) : data;
    this.onFrame(from, frame);
  }

  private dial(link: OutboundLink): void {
    if (this.closed) return;
    const { host, port } = link.peer;
    const url = `ws://${host}:${port}${PATH_PREFIX}${encodeURIComponent(this.options.selfId)}`;
    const socket = new WebSocket(url, { perMessageDeflate: false, maxPayload: FRAME_BYTES_MAX });
    link.socket = socket;
    socket.on('open', () => {
      link.reconnectDelayMs = RECONNECT_DELAY_MIN_MS;
      this.options.onLinkChange?.(link.peer.id, true);
    });
    socket.on('error', () => undefined);
    // A peer with no link to us answers on this socket (see `send`).
    socket.on('message', (data, isBinary) => this.receive(link.peer.id, data, isBinary));
    socket.on('close', () => {
      if (link.socket === socket) link.socket = null;
      this.options.onLinkChange?.(link.peer.id, false);
      if (this.closed || this.links.get(link.peer.id) !== link) return;
      link.reconnectTimer = setTimeout(() => {
        link.reconnectTimer = null;
        this.dial(link);
      }, link.reconnectDelayMs);
      link.reconnectDelayMs = Math.min(RECONNECT_DELAY_MAX_MS, link.reconnectDelayMs * 2);
    });
  }
}
