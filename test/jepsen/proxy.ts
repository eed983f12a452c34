/**
 * A TCP proxy for one directed peer link (the connections node A dials to node B carry A's
 * Raft frames to B), with the faults a network has: stall (bytes stop, TCP keeps the
 * connection: the sender's buffer fills, what was sent arrives late after healing), reset
 * (connections cut, new ones refused), delay (every chunk held for a while, order kept) and
 * flaky (each chunk may cut its connection). It never looks inside the bytes, and can record
 * the first bytes a dialler sent on each connection, so a test can replay a real handshake.
 */
import { createServer, connect, type Server, type Socket } from 'node:net';

export type LinkMode =
  | { readonly kind: 'pass' }
  | { readonly kind: 'stall' }
  | { readonly kind: 'reset' }
  | { readonly kind: 'delay'; readonly ms: number }
  | { readonly kind: 'flaky'; readonly cutProbability: number };

/** Bytes recorded per connection, when recording. */
const RECORD_BYTES_MAX = 64 * 1024;
/** Connections recorded, at most. */
const RECORDED_CONNECTIONS_MAX = 16;

/** One direction of a connection: chunks leave in the order they came, never overtaking. */
interface Direction {
  readonly to: Socket;
  readonly queue: Array<{ readonly chunk: Buffer; readonly atMs: number }>;
  timer: NodeJS.Timeout | null;
}

interface Pair {
  readonly client: Socket;
  readonly server: Socket;
  readonly up: Direction;
  readonly down: Direction;
}

export class LinkProxy {
  private server: Server | null = null;
  private readonly pairs = new Set<Pair>();
  private mode: LinkMode = { kind: 'pass' };
  private port = 0;
  /** The first bytes the dialler sent on each connection, oldest first. */
  readonly recorded: Buffer[] = [];

  constructor(private readonly target: { readonly host: string; readonly port: number },
    private readonly random: () => number = Math.random, private readonly record = false) {}

  /** Listens on 127.0.0.1:`port` (0 picks one); resolves with the port. */
  async start(port = 0): Promise<number> {
    const server = createServer((client) => this.onClient(client));
    server.on('error', () => undefined);
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve());
    });
    const address = server.address();
    this.port = typeof address === 'object' && address !== null ? address.port : 0;
    return this.port;
  }

  /** The port this proxy listens on, once started. */
  get currentPort(): number {
    return this.port;
  }

  get currentMode(): LinkMode {
    return this.mode;
  }

  setMode(mode: LinkMode): void {
    const was = this.mode;
    this.mode = mode;
    if (mode.kind === 'reset') for (const pair of this.pairs) this.cut(pair);
    if (was.kind === 'stall' && mode.kind !== 'stall') {
      for (const pair of this.pairs) {
        pair.client.resume();
        pair.server.resume();
      }
    }
    if (mode.kind === 'stall') {
      for (const pair of this.pairs) {
        pair.client.pause();
        pair.server.pause();
      }
    }
  }

  async close(): Promise<void> {
    for (const pair of this.pairs) this.cut(pair);
    const server = this.server;
    if (server !== null) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  private onClient(client: Socket): void {
    client.on('error', () => undefined);
    if (this.mode.kind === 'reset') {
      client.destroy();
      return;
    }
    const server = connect({ host: this.target.host, port: this.target.port });
    server.on('error', () => undefined);
    const pair: Pair = { client, server, up: { to: server, queue: [], timer: null },
      down: { to: client, queue: [], timer: null } };
    this.pairs.add(pair);
    const recording = this.record && this.recorded.length < RECORDED_CONNECTIONS_MAX
      ? { bytes: [] as Buffer[], total: 0 } : null;
    if (recording !== null) this.recorded.push(Buffer.alloc(0));
    const slot = this.recorded.length - 1;
    client.on('data', (chunk: Buffer) => {
      if (recording !== null && recording.total < RECORD_BYTES_MAX) {
        recording.bytes.push(chunk);
        recording.total += chunk.length;
        this.recorded[slot] = Buffer.concat(recording.bytes);
      }
      this.forward(pair, pair.up, chunk);
    });
    server.on('data', (chunk: Buffer) => this.forward(pair, pair.down, chunk));
    const end = () => this.cut(pair);
    client.on('close', end);
    server.on('close', end);
    if (this.mode.kind === 'stall') {
      client.pause();
      server.pause();
    }
  }

  private forward(pair: Pair, direction: Direction, chunk: Buffer): void {
    const mode = this.mode;
    switch (mode.kind) {
      case 'pass':
      case 'stall':
        // A chunk read just before a stall still goes: TCP had it already.
        this.release(direction, chunk, 0);
        return;
      case 'reset':
        this.cut(pair);
        return;
      case 'delay':
        this.release(direction, chunk, mode.ms);
        return;
      case 'flaky':
        if (this.random() < mode.cutProbability) this.cut(pair);
        else this.release(direction, chunk, 0);
        return;
    }
  }

  /** Queues `chunk` to leave `delayMs` from now, but never before a chunk queued earlier. */
  private release(direction: Direction, chunk: Buffer, delayMs: number): void {
    if (delayMs === 0 && direction.queue.length === 0) {
      direction.to.write(chunk);
      return;
    }
    direction.queue.push({ chunk, atMs: Date.now() + delayMs });
    this.pump(direction);
  }

  private pump(direction: Direction): void {
    if (direction.timer !== null) return;
    const now = Date.now();
    while (direction.queue.length > 0 && (direction.queue[0]?.atMs ?? 0) <= now) {
      const next = direction.queue.shift();
      if (next !== undefined && !direction.to.destroyed) direction.to.write(next.chunk);
    }
    const head = direction.queue[0];
    if (head === undefined) return;
    direction.timer = setTimeout(() => {
      direction.timer = null;
      this.pump(direction);
    }, head.atMs - now);
  }

  private cut(pair: Pair): void {
    this.pairs.delete(pair);
    for (const direction of [pair.up, pair.down]) {
      if (direction.timer !== null) clearTimeout(direction.timer);
      direction.queue.length = 0;
    }
    pair.client.destroy();
    pair.server.destroy();
  }
}
