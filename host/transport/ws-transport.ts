/**
 * The peer link over WebSocket (`ws`), `wss` with TLS: every node listens on its peer address
 * (`peer-server.ts`) and dials every other member in its peer table. A node sends on the
 * connection it dialled and receives on the ones it accepted, so each direction has one
 * socket and frames between two nodes keep their order; to a peer it has no link to (a
 * leader adding this node, whose address it does not know yet), it answers on the socket
 * that peer dialled. Delivery is best effort: Raft resends what is lost.
 *
 * No Raft frame counts before its link has authenticated (`handshake.ts`): both ends prove
 * the cluster secret for this cluster id, this pair of members and this connection. Until
 * then a connection is held to the stranger's bounds (`peer-limits.ts`), and a binary frame
 * is a protocol violation that closes it. Any member id that proves the secret may link, in
 * the table or not: a node being added hears first from a leader it does not know, and
 * Raft, not the transport, decides what a message from a non-member counts for.
 *
 * The peer table can change at run time (`setPeers`): a member added is dialled, a member
 * removed loses its links, a member that moved is dialled at its new address.
 *
 * Never throws on a missing, slow or hostile peer: a frame for a peer that is not linked, or
 * whose send buffer is over its bound, is dropped and counted; a misbehaving connection is
 * closed and logged (one line per kind per window, however many there are).
 */
import { randomBytes } from 'node:crypto';
import type { Socket } from 'node:net';
import { WebSocket } from 'ws';
import type { PeerAddress } from '../node/config.js';
import {
  AcceptorHandshake, DialerHandshake, HANDSHAKE_MESSAGE_BYTES_MAX, NONCE_BYTES,
  type ClusterSecrets, type HandshakeStep,
} from './handshake.js';
import {
  FRAME_BYTES_MAX, HANDSHAKE_DEADLINE_MS, LogThrottle, PEER_BUFFERED_BYTES_MAX, PreauthGuard,
} from './peer-limits.js';
import { PEER_PATH, PeerServer, type PeerTlsMaterial, type PortRefusal } from './peer-server.js';
import type { Transport } from './transport.js';

export { FRAME_BYTES_MAX, PEER_BUFFERED_BYTES_MAX } from './peer-limits.js';

const RECONNECT_DELAY_MIN_MS = 50;
const RECONNECT_DELAY_MAX_MS = 1000;
/** WebSocket close code for a refused handshake (policy violation, RFC 6455 §7.4.1). */
const CLOSE_POLICY = 1008;

/** The log lines the transport writes; the node's logger fits. */
export interface TransportLog {
  info(fields: Record<string, unknown>, message: string): void;
  warn(fields: Record<string, unknown>, message: string): void;
}

export interface WsTransportOptions {
  readonly selfId: string;
  readonly clusterId: string;
  readonly secrets: ClusterSecrets;
  readonly listen: { readonly host: string; readonly port: number };
  /** Every member this node links to, itself included or not (it is skipped). */
  readonly peers: readonly PeerAddress[];
  /** Null: plain `ws`. Otherwise `wss`; with a CA, mutual TLS. */
  readonly tls?: PeerTlsMaterial | null;
  readonly log?: TransportLog;
  readonly onLinkChange?: (peer: string, up: boolean) => void;
}

/** One member in the peer table and the link this node dials to it. */
interface OutboundLink {
  peer: PeerAddress;
  /** The socket being dialled or open; frames go out only once `authenticated`. */
  socket: WebSocket | null;
  authenticated: boolean;
  reconnectDelayMs: number;
  reconnectTimer: NodeJS.Timeout | null;
  /** The last failure logged for this link, so a link that keeps failing logs it once. */
  lastFailure: string;
}

/** Counters for metrics and tests. */
export interface TransportStats {
  /** Frames dropped because a peer was not linked or its buffer was full. */
  droppedFrames: number;
  /** Connections refused or closed, by reason (a handshake refusal or a port bound). */
  readonly refusals: Record<string, number>;
}

const silentLog: TransportLog = { info: () => undefined, warn: () => undefined };

export class WsTransport implements Transport {
  private readonly server: PeerServer;
  private readonly links = new Map<string, OutboundLink>();
  /** Authenticated inbound sockets, one per peer (a newer one replaces an older one). */
  private readonly inbound = new Map<string, WebSocket>();
  /** Inbound sockets still authenticating. */
  private readonly strangers = new Set<WebSocket>();
  private onFrame: ((from: string, frame: Uint8Array) => void) | null = null;
  private closed = false;
  /** Sockets written to in this turn of the event loop, corked until `uncorkAll`. */
  private readonly corked = new Set<Socket>();
  private readonly throttle = new LogThrottle();
  private readonly log: TransportLog;
  readonly stats: TransportStats = { droppedFrames: 0, refusals: {} };

  constructor(private readonly options: WsTransportOptions) {
    this.log = options.log ?? silentLog;
    this.server = new PeerServer({
      host: options.listen.host,
      port: options.listen.port,
      tls: options.tls ?? null,
      onUpgrade: (socket, authenticated, remote) => this.accept(socket, authenticated, remote),
      onRefusal: (refusal, remote, detail) => this.noteRefusal(refusal, remote, detail),
    });
  }

  /** The port actually bound (useful with port 0). */
  get listenPort(): number {
    return this.server.port;
  }

  /** Frames dropped because a peer was not linked or its buffer was full. */
  get droppedFrames(): number {
    return this.stats.droppedFrames;
  }

  /** `setPeers` was called: the start-up list no longer applies. */
  private peersSet = false;

  async start(onFrame: (from: string, frame: Uint8Array) => void): Promise<void> {
    this.onFrame = onFrame;
    await this.server.start();
    // The node may have set its peers already (from the configuration in its log, which wins
    // over the start-up list); those are dialled now.
    if (!this.peersSet) this.setPeers(this.options.peers);
    for (const link of this.links.values()) {
      if (link.socket === null && link.reconnectTimer === null) this.dial(link);
    }
  }

  /**
   * Replaces the peer table. New members are dialled; members no longer listed are no longer
   * dialled; a member whose address changed is dialled again at the new one. A link such a
   * member dialled to us stays: a member being removed still needs its answers until its
   * removal commits (Raft thesis §4.2.2), and the core decides whose messages count.
   */
  setPeers(peers: readonly PeerAddress[]): void {
    this.peersSet = true;
    const wanted = new Map(peers.filter((p) => p.id !== this.options.selfId)
      .map((p) => [p.id, p]));
    for (const [id, link] of this.links) {
      const peer = wanted.get(id);
      if (peer !== undefined && peer.host === link.peer.host && peer.port === link.peer.port) {
        continue;
      }
      this.dropLink(link);
      this.links.delete(id);
    }
    for (const peer of wanted.values()) {
      if (this.links.has(peer.id)) continue;
      const link: OutboundLink = { peer, socket: null, authenticated: false,
        reconnectDelayMs: RECONNECT_DELAY_MIN_MS, reconnectTimer: null, lastFailure: '' };
      this.links.set(peer.id, link);
      if (this.onFrame !== null) this.dial(link);
    }
  }

  send(to: string, frame: Uint8Array): void {
    const link = this.links.get(to);
    const dialled = link?.authenticated === true ? link.socket : null;
    const socket = isOpen(dialled) ? dialled : this.inbound.get(to);
    if (!isOpen(socket) || socket.bufferedAmount > PEER_BUFFERED_BYTES_MAX) {
      this.stats.droppedFrames++;
      return;
    }
    this.corkForThisTurn(socket);
    socket.send(frame, { binary: true });
  }

  /**
   * Holds a socket's writes until the event loop has run every callback of this turn, then
   * writes them in one system call: a node's Readies of one turn (appends, heartbeats,
   * answers) each send a frame to the same peer, and a write on loopback costs about 20 µs
   * here. Order on the socket is kept; a frame waits at most for the rest of the turn.
   */
  private corkForThisTurn(socket: WebSocket): void {
    const raw = (socket as unknown as { _socket?: Socket })._socket;
    if (raw === undefined || this.corked.has(raw)) return;
    if (this.corked.size === 0) setImmediate(this.uncorkAll);
    raw.cork();
    this.corked.add(raw);
  }

  private readonly uncorkAll = (): void => {
    for (const raw of this.corked) raw.uncork();
    this.corked.clear();
  };

  /** The corked sockets written now; the turn's `setImmediate` then finds none. */
  flush(): void {
    this.uncorkAll();
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const link of this.links.values()) this.dropLink(link);
    for (const socket of this.inbound.values()) socket.terminate();
    for (const socket of this.strangers) socket.terminate();
    await this.server.close();
  }

  // ---------------------------------------------------------------- accepting

  private accept(socket: WebSocket, authenticated: () => void, remote: string): void {
    const { selfId, clusterId, secrets } = this.options;
    const handshake = new AcceptorHandshake({ clusterId, selfId }, secrets,
      randomBytes(NONCE_BYTES), () => true);
    let peerId: string | null = null;
    let refused = false;
    this.strangers.add(socket);
    socket.on('close', () => {
      this.strangers.delete(socket);
      if (peerId !== null && this.inbound.get(peerId) === socket) this.inbound.delete(peerId);
    });
    socket.on('message', (data, isBinary) => {
      if (peerId !== null) {
        if (isBinary) this.deliver(peerId, data);
        else this.violation(socket, 'protocol', remote, `${peerId} sent text after the handshake`);
        return;
      }
      // Frames already buffered behind a refusal are not heard.
      if (refused) return;
      const step = this.handshakeStep(handshake, data, isBinary);
      if (step.kind === 'send') {
        socket.send(step.message);
        return;
      }
      if (step.kind === 'refused') {
        refused = true;
        this.refuse(socket, step, remote);
        return;
      }
      peerId = step.peerId;
      this.strangers.delete(socket);
      authenticated();
      if (step.message !== null) socket.send(step.message);
      this.inbound.get(peerId)?.close(CLOSE_POLICY, 'replaced by a newer link');
      this.inbound.set(peerId, socket);
      this.log.info({ peer: peerId, remote, direction: 'inbound',
        peerSecret: step.peerSecretIndex + 1 }, 'peer link authenticated');
    });
  }

  /** A handshake message in, a step out; binary or oversized input is refused here. */
  private handshakeStep(handshake: AcceptorHandshake | DialerHandshake, data: WebSocket.RawData,
    isBinary: boolean): HandshakeStep {
    const bytes = rawBytes(data);
    if (isBinary || bytes.length > HANDSHAKE_MESSAGE_BYTES_MAX) {
      const detail = isBinary ? 'a binary frame before the handshake ended'
        : `a handshake message of ${bytes.length} bytes`;
      return { kind: 'refused', reason: isBinary ? 'protocol' : 'malformed', byPeer: false,
        detail, message: null };
    }
    return handshake.receive(Buffer.from(bytes).toString('utf8'));
  }

  private deliver(from: string, data: WebSocket.RawData): void {
    this.onFrame?.(from, rawBytes(data));
  }

  // ---------------------------------------------------------------- dialling

  private dial(link: OutboundLink): void {
    if (this.closed) return;
    const { host, port } = link.peer;
    const tls = this.options.tls ?? null;
    const url = `${tls === null ? 'ws' : 'wss'}://${host}:${port}${PEER_PATH}`;
    const socket = new WebSocket(url, {
      perMessageDeflate: false,
      maxPayload: FRAME_BYTES_MAX,
      handshakeTimeout: HANDSHAKE_DEADLINE_MS,
      ...(tls === null ? {} : {
        minVersion: 'TLSv1.2' as const,
        ...(tls.ca === null ? {} : { ca: tls.ca, cert: tls.cert, key: tls.key }),
      }),
    });
    socket.on('error', (error) => this.noteDialFailure(link, error.message));
    link.socket = socket;
    link.authenticated = false;
    const remote = `${host}:${port}`;
    const guard = { current: null as PreauthGuard | null };
    let upgraded: Socket | null = null;
    socket.on('upgrade', (response) => {
      upgraded = response.socket;
      guard.current = new PreauthGuard(response.socket, (violation) => this.noteRefusal(violation,
        remote, `${link.peer.id} did not complete the handshake`));
    });
    const handshake = new DialerHandshake({ clusterId: this.options.clusterId,
      selfId: this.options.selfId }, link.peer.id, this.options.secrets, randomBytes(NONCE_BYTES));
    socket.on('open', () => {
      // Only now: `ws` reads the socket (see PreauthGuard.countFrom).
      if (upgraded !== null) guard.current?.countFrom(upgraded);
      socket.send(handshake.hello());
    });
    let refused = false;
    socket.on('message', (data, isBinary) => {
      if (link.authenticated) {
        if (isBinary) this.deliver(link.peer.id, data);
        return;
      }
      if (refused) return;
      const step = this.handshakeStep(handshake, data, isBinary);
      if (step.kind === 'send') {
        socket.send(step.message);
      } else if (step.kind === 'refused') {
        refused = true;
        this.refuse(socket, step, remote, link.peer.id);
      } else {
        this.linkUp(link, socket, guard.current, step.peerSecretIndex);
      }
    });
    socket.on('close', () => this.onDialledClose(link, socket, guard.current));
  }

  private linkUp(link: OutboundLink, socket: WebSocket, guard: PreauthGuard | null,
    peerSecretIndex: number): void {
    guard?.authenticated();
    link.authenticated = true;
    link.reconnectDelayMs = RECONNECT_DELAY_MIN_MS;
    link.lastFailure = '';
    this.log.info({ peer: link.peer.id, direction: 'outbound', peerSecret: peerSecretIndex + 1 },
      'peer link authenticated');
    if (link.socket === socket) this.options.onLinkChange?.(link.peer.id, true);
  }

  private onDialledClose(link: OutboundLink, socket: WebSocket, guard: PreauthGuard | null): void {
    guard?.release();
    if (link.socket !== socket) return;
    const wasUp = link.authenticated;
    link.socket = null;
    link.authenticated = false;
    if (wasUp) this.options.onLinkChange?.(link.peer.id, false);
    if (this.closed || this.links.get(link.peer.id) !== link) return;
    link.reconnectTimer = setTimeout(() => {
      link.reconnectTimer = null;
      this.dial(link);
    }, link.reconnectDelayMs);
    link.reconnectDelayMs = Math.min(RECONNECT_DELAY_MAX_MS, link.reconnectDelayMs * 2);
  }

  private dropLink(link: OutboundLink): void {
    if (link.reconnectTimer !== null) clearTimeout(link.reconnectTimer);
    link.reconnectTimer = null;
    const socket = link.socket;
    link.socket = null;
    link.authenticated = false;
    socket?.terminate();
  }

  // ---------------------------------------------------------------- refusals and logs

  private refuse(socket: WebSocket, step: Extract<HandshakeStep, { kind: 'refused' }>,
    remote: string, peerId?: string): void {
    if (step.message !== null && socket.readyState === WebSocket.OPEN) socket.send(step.message);
    socket.close(CLOSE_POLICY, step.reason);
    // A socket whose peer will not answer the close is cut after a short grace.
    setTimeout(() => socket.terminate(), 1000).unref();
    const who = peerId === undefined ? 'an inbound connection' : `the link to ${peerId}`;
    this.count(`handshake-${step.byPeer ? 'refused-by-peer' : step.reason}`, remote,
      `${who} failed its handshake: ${step.detail}`, { reason: step.reason, byPeer: step.byPeer });
  }

  private violation(socket: WebSocket, reason: string, remote: string, detail: string): void {
    socket.terminate();
    this.count(reason, remote, detail, {});
  }

  private noteRefusal(refusal: PortRefusal, remote: string, detail: string): void {
    this.count(`port-${refusal}`, remote, detail, {});
  }

  private noteDialFailure(link: OutboundLink, message: string): void {
    if (message === link.lastFailure) return;
    link.lastFailure = message;
    const admit = this.throttle.admit(`dial-${link.peer.id}-${message}`, Date.now());
    if (!admit.log) return;
    this.log.warn({ peer: link.peer.id, address: `${link.peer.host}:${link.peer.port}`,
      error: message, held: admit.held }, 'cannot reach peer; retrying');
  }

  private count(kind: string, remote: string, detail: string,
    fields: Record<string, unknown>): void {
    this.stats.refusals[kind] = (this.stats.refusals[kind] ?? 0) + 1;
    const admit = this.throttle.admit(kind, Date.now());
    if (!admit.log) return;
    this.log.warn({ remote, kind, ...fields, detail, heldBack: admit.held },
      'peer connection refused');
  }
}

function isOpen(socket: WebSocket | null | undefined): socket is WebSocket {
  return socket !== undefined && socket !== null && socket.readyState === WebSocket.OPEN;
}

function rawBytes(data: WebSocket.RawData): Uint8Array {
  if (Array.isArray(data)) return Buffer.concat(data);
  return data instanceof ArrayBuffer ? new Uint8Array(data) : data;
}
