/**
 * The simulated peer network: one `SimTransport` per node incarnation over a shared
 * `SimNetwork` that delays, drops, duplicates and reorders frames, partitions the cluster
 * (symmetric and one-way) and clogs links (frames are held, then released in a random
 * order of links when unclogged).
 *
 * Implements the production `Transport` seam with its contract: best effort, a frame to an
 * unreachable or crashed peer is dropped, per-link queues are bounded and drop the newest
 * frame when full. All randomness comes from the run's `SimRandom`; all time from the
 * `SimScheduler`.
 */
import type { PeerAddress } from '../../host/node/config.js';
import type { Transport } from '../../host/transport/transport.js';
import type { Faults } from './faults.js';
import type { SimRandom } from './random.js';
import type { TimerHandle } from '../../host/node/scheduler.js';
import type { SimScheduler } from './scheduler.js';
import type { Trace } from './trace.js';

/** Frames held on one clogged link; past it the newest is dropped (the Transport contract). */
export const CLOGGED_FRAMES_PER_LINK_MAX = 4096;
/** Frames in flight in the whole network; a bound on memory, far above normal use. */
export const FRAMES_IN_FLIGHT_MAX = 200_000;
/** Base one-way latency of a link, drawn per link per seed. */
const LINK_BASE_US_MIN = 100;
const LINK_BASE_US_MAX = 3_000;
/** Extra delay of a reordered frame. */
const REORDER_EXTRA_US_MAX = 20_000;

interface Link {
  readonly baseUs: number;
  /** Mean of the exponential jitter added to each frame. */
  readonly jitterUs: number;
  clogged: boolean;
  held: Uint8Array[];
}

/** A frame on its way; a crash of its sender may cancel it (`senderCrashed`). */
interface InFlight {
  readonly handle: TimerHandle;
}

/** Describes a frame for the trace; returns text only, never throws. */
export type FrameDescriber = (frame: Uint8Array) => string;

export class SimNetwork {
  private readonly links = new Map<string, Link>();
  private readonly endpoints = new Map<string, SimTransport>();
  /**
   * "from>to" pairs that drop every frame (partitions, symmetric and one-way), with how many
   * blocks hold each: blocks overlap, and one that ends lifts only its own pairs.
   */
  private readonly blocked = new Map<string, number>();
  private inFlight = 0;
  /** Frames in flight by sender, so a crash can lose some of them. */
  private readonly inFlightFrom = new Map<string, Set<InFlight>>();
  /** Every node the network links, in the order they were added. */
  readonly nodeIds: string[] = [];
  /** Sees every frame a node sends, before faults: the driver-order checker hooks here. */
  onSend: ((from: string, to: string, frame: Uint8Array) => void) | null = null;
  describe: FrameDescriber = () => 'frame';
  framesSent = 0;

  constructor(nodeIds: readonly string[], private readonly rng: SimRandom,
    private readonly scheduler: SimScheduler, private readonly faults: Faults,
    private readonly trace: Trace) {
    for (const from of nodeIds) {
      for (const to of nodeIds) {
        if (from !== to) this.links.set(`${from}>${to}`, this.newLink());
      }
    }
    this.nodeIds.push(...nodeIds);
  }

  /** A link with its latency drawn from the run's PRNG. */
  private newLink(): Link {
    const baseUs = this.rng.between(LINK_BASE_US_MIN, LINK_BASE_US_MAX);
    return { baseUs, jitterUs: this.rng.between(10, baseUs), clogged: false, held: [] };
  }

  /** Links a new node both ways with every node already here (latencies drawn per link). */
  addNode(id: string): void {
    if (this.nodeIds.includes(id)) throw new Error(`network: ${id} is linked already`);
    for (const other of this.nodeIds) {
      this.links.set(`${id}>${other}`, this.newLink());
      this.links.set(`${other}>${id}`, this.newLink());
    }
    this.nodeIds.push(id);
  }

  /** A fresh transport for a new incarnation of `nodeId`; replaces any previous one. */
  transportFor(nodeId: string): SimTransport {
    const transport = new SimTransport(nodeId, this);
    this.endpoints.set(nodeId, transport);
    return transport;
  }

  /**
   * The node crashed: frames already in flight to it are lost when they arrive, and each of
   * its own frames in flight is lost with `net.crash-drops-sends` (still in the process's
   * send buffers when it died; the rest had reached the kernel and arrive).
   */
  detach(nodeId: string): void {
    this.endpoints.get(nodeId)?.kill();
    this.endpoints.delete(nodeId);
    const frames = this.inFlightFrom.get(nodeId);
    if (frames === undefined) return;
    let dropped = 0;
    for (const frame of [...frames]) {
      if (!this.faults.maybe('net.crash-drops-sends')) continue;
      frame.handle.cancel();
      frames.delete(frame);
      this.inFlight--;
      dropped++;
    }
    if (dropped > 0) this.trace.log(nodeId, `crash loses ${dropped} frames it sent`);
  }

  /**
   * Splits the cluster in two: no frame crosses between `side` and the rest until the
   * returned function lifts this partition (others may still hold some of the same pairs).
   */
  partition(side: readonly string[]): () => void {
    const pairs: string[] = [];
    for (const a of this.nodeIds) {
      for (const b of this.nodeIds) {
        if (a !== b && side.includes(a) !== side.includes(b)) pairs.push(`${a}>${b}`);
      }
    }
    const what = `${side.join(',')} | ${this.rest(side).join(',')}`;
    this.trace.log('net', `partition ${what}`);
    return this.hold(pairs, `partition ${what} healed`);
  }

  /** Frames from `from` to `to` are lost (the other direction works) until lifted. */
  blockOneWay(from: string, to: string): () => void {
    this.trace.log('net', `block ${from} -> ${to}`);
    return this.hold([`${from}>${to}`], `block ${from} -> ${to} lifted`);
  }

  private hold(pairs: readonly string[], liftedText: string): () => void {
    for (const pair of pairs) this.blocked.set(pair, (this.blocked.get(pair) ?? 0) + 1);
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      for (const pair of pairs) {
        const count = this.blocked.get(pair);
        if (count === undefined) continue; // cleared meanwhile
        if (count <= 1) this.blocked.delete(pair);
        else this.blocked.set(pair, count - 1);
      }
      this.trace.log('net', liftedText);
    };
  }

  /** Ends every partition and one-way block at once; clogged links stay clogged. */
  clearBlocks(): void {
    if (this.blocked.size === 0) return;
    this.blocked.clear();
    this.trace.log('net', 'partitions healed');
  }

  clog(from: string, to: string): void {
    const link = this.link(from, to);
    link.clogged = true;
    this.trace.log('net', `clog ${from} -> ${to}`);
  }

  /** Releases the held frames of `from -> to`, each with a fresh delay. */
  unclog(from: string, to: string): void {
    const link = this.link(from, to);
    if (!link.clogged) return;
    link.clogged = false;
    const held = link.held;
    link.held = [];
    this.trace.log('net', `unclog ${from} -> ${to} releasing ${held.length}`);
    for (const frame of held) this.schedule(from, to, link, frame);
  }

  /** Links that are clogged now, as [from, to]. */
  cloggedLinks(): Array<[string, string]> {
    const out: Array<[string, string]> = [];
    for (const [key, link] of this.links) {
      if (!link.clogged) continue;
      const [from, to] = key.split('>') as [string, string];
      out.push([from, to]);
    }
    return out;
  }

  /** Removes every partition and one-way block, and unclogs every link in a random order. */
  heal(): void {
    this.blocked.clear();
    for (const [from, to] of this.rng.shuffle(this.cloggedLinks())) this.unclog(from, to);
    this.trace.log('net', 'healed');
  }

  isBlocked(from: string, to: string): boolean {
    return this.blocked.has(`${from}>${to}`);
  }

  /** Called by a transport: faults, then delivery after the link's delay. */
  send(from: string, to: string, frame: Uint8Array): void {
    this.framesSent++;
    this.onSend?.(from, to, frame);
    const link = this.links.get(`${from}>${to}`);
    if (link === undefined) return; // not a member: dropped, as the contract says
    if (this.blocked.has(`${from}>${to}`) || this.faults.maybe('net.drop')) {
      if (this.trace.on) this.trace.log(from, `drop -> ${to} ${this.describe(frame)}`);
      return;
    }
    if (link.clogged) {
      if (link.held.length < CLOGGED_FRAMES_PER_LINK_MAX) link.held.push(frame);
      return;
    }
    this.schedule(from, to, link, frame);
    if (this.faults.maybe('net.duplicate')) this.schedule(from, to, link, frame);
  }

  private schedule(from: string, to: string, link: Link, frame: Uint8Array): void {
    if (this.inFlight >= FRAMES_IN_FLIGHT_MAX) return;
    let delayUs = link.baseUs + Math.round(-Math.log(1 - this.rng.float()) * link.jitterUs);
    if (this.faults.maybe('net.reorder')) delayUs += this.rng.below(REORDER_EXTRA_US_MAX);
    this.inFlight++;
    let frames = this.inFlightFrom.get(from);
    if (frames === undefined) {
      frames = new Set();
      this.inFlightFrom.set(from, frames);
    }
    const sent = frames;
    const entry: InFlight = {
      handle: this.scheduler.atDelayUs(delayUs, '', () => {
        this.inFlight--;
        sent.delete(entry);
        this.deliver(from, to, frame);
      }),
    };
    sent.add(entry);
  }

  private deliver(from: string, to: string, frame: Uint8Array): void {
    // A partition that started while the frame was in flight still cuts it.
    if (this.blocked.has(`${from}>${to}`)) return;
    const endpoint = this.endpoints.get(to);
    if (this.trace.on) {
      const fate = endpoint === undefined ? ' (node down)' : '';
      this.trace.log(to, `recv <- ${from} ${this.describe(frame)}${fate}`);
    }
    // As `ws` hands it over: a Buffer, whose `slice` is a view (a copy that must not be one
    // once made followers keep other bytes than their leader's).
    endpoint?.receive(from, Buffer.from(frame.buffer, frame.byteOffset, frame.byteLength));
  }

  private link(from: string, to: string): Link {
    const link = this.links.get(`${from}>${to}`);
    if (link === undefined) throw new Error(`network: no link ${from} -> ${to}`);
    return link;
  }

  private rest(side: readonly string[]): string[] {
    return this.nodeIds.filter((id) => !side.includes(id));
  }
}

/**
 * One node incarnation's end of the network. Like the WebSocket transport, it reaches the
 * members it was told about (`setPeers`) and any node that reached it first; a frame to
 * anyone else is dropped.
 */
export class SimTransport implements Transport {
  private onFrame: ((from: string, frame: Uint8Array) => void) | null = null;
  private dead = false;
  private peers = new Set<string>();
  private readonly heardFrom = new Set<string>();

  constructor(private readonly nodeId: string, private readonly network: SimNetwork) {}

  start(onFrame: (from: string, frame: Uint8Array) => void): Promise<void> {
    this.onFrame = onFrame;
    return Promise.resolve();
  }

  send(to: string, frame: Uint8Array): void {
    if (this.dead || (!this.peers.has(to) && !this.heardFrom.has(to))) return;
    this.network.send(this.nodeId, to, frame);
  }

  /** The simulated network queues nothing in the sender. */
  flush(): void {}

  setPeers(peers: readonly PeerAddress[]): void {
    this.peers = new Set(peers.map((p) => p.id));
  }

  close(): Promise<void> {
    this.dead = true;
    return Promise.resolve();
  }

  receive(from: string, frame: Uint8Array): void {
    if (this.dead) return;
    this.heardFrom.add(from);
    this.onFrame?.(from, frame);
  }

  kill(): void {
    this.dead = true;
    this.onFrame = null;
  }
}
