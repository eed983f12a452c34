/**
 * A tiny in-test Raft network: RaftCore instances, an in-memory "disk" per node, and a FIFO
 * of messages delivered between them. It drives each core the way the node driver must
 * (ready.ts): send early messages, persist, send messages, apply, advance; and, like the
 * driver, it fills the snapshot chunks a leader sends from the snapshots on its disk and
 * writes the chunks a follower receives to its disk.
 *
 * Used by the unit tests (test/unit/raft-*.test.ts), the interaction interpreter and the
 * step() benchmark. Every loop is bounded. It checks state machine safety as it goes:
 * two nodes never apply different entries at one index (§5.4.3).
 */
import {
  createRaft, type MembershipAnswer, type RaftConfig, type RaftCore, type ReadState,
} from '../../host/core/raft/raft.js';
import type { Message } from '../../host/core/raft/messages.js';
import type { Ready } from '../../host/core/raft/ready.js';
import type { Entry, HardState, Snapshot, SnapshotMeta } from '../../host/core/raft/types.js';
import { EMPTY_HARD_STATE } from '../../host/core/raft/types.js';
import {
  decodeConfigEntry, type MembershipChange,
} from '../../host/core/raft/configuration.js';

export interface Disk {
  hardState: HardState;
  snapshot: Snapshot | null;
  /** The bytes of `snapshot`. */
  snapshotData: Uint8Array | null;
  /** Every snapshot's bytes by index, as storage keeps files (a leader sends from here). */
  snapshots: Map<number, Uint8Array>;
  /** The snapshot being received: its chunks so far. */
  incoming: { meta: SnapshotMeta; parts: Uint8Array[]; bytes: number; totalBytes: number } |
    null;
  entries: Entry[];
}

function emptyDisk(): Disk {
  return { hardState: EMPTY_HARD_STATE, snapshot: null, snapshotData: null,
    snapshots: new Map(), incoming: null, entries: [] };
}

export interface Node {
  readonly id: string;
  raft: RaftCore;
  readonly config: RaftConfig;
  disk: Disk;
  /** Entries applied in order since the last snapshot restore. */
  applied: Entry[];
  appliedIndex: number;
  readStates: ReadState[];
  membershipAnswers: MembershipAnswer[];
  up: boolean;
}

/** Rounds of process-then-deliver one `deliverAll` runs at most. */
export const DELIVER_ROUNDS_MAX = 200;

export function defaultConfig(id: string, voters: readonly string[], seed: number): RaftConfig {
  return {
    id, voters, seed, electionTicks: 10, heartbeatTicks: 1, maxInflightAppends: 64,
    maxEntriesBytesPerAppend: 1024 * 1024, maxSnapshotChunkBytes: 1024 * 1024,
    preVote: true, checkQuorum: true,
  };
}

export class Cluster {
  readonly nodes = new Map<string, Node>();
  /** Messages sent and not yet delivered, oldest first. */
  queue: Message[] = [];
  /** Groups of a partition: a message crosses only within one group. Null: healed. */
  groups: string[][] | null = null;
  /** Index -> term of every entry any node applied; all nodes must agree (§5.4.3). */
  private readonly appliedTerms = new Map<number, number>();
  /** Called for every message delivered (transcripts, counters). */
  onDeliver: ((m: Message) => void) | null = null;
  /** Drops a message in flight when it returns true (fault injection in tests). */
  dropIf: ((m: Message) => boolean) | null = null;
  stepCount = 0;

  constructor(ids: readonly string[], private readonly configure?: (c: RaftConfig) => RaftConfig,
    private readonly seed = 1) {
    for (const id of ids) this.createNode(id, ids);
  }

  private createNode(id: string, voters: readonly string[]): Node {
    const base = defaultConfig(id, voters, this.seed * 1000 + this.nodes.size);
    const config = this.configure === undefined ? base : this.configure(base);
    const disk = emptyDisk();
    const raft = createRaft(config, { hardState: disk.hardState, snapshot: null,
      snapshotDataBytes: null, entries: [] });
    const node: Node = { id, raft, config, disk, applied: [], appliedIndex: 0, readStates: [],
      membershipAnswers: [], up: true };
    this.nodes.set(id, node);
    return node;
  }

  /** A new, empty node that knows no configuration (`serve --join`): it waits to be added. */
  join(id: string): Node {
    if (this.nodes.has(id)) throw new Error(`node ${id} exists`);
    return this.createNode(id, []);
  }

  node(id: string): Node {
    const node = this.nodes.get(id);
    if (node === undefined) throw new Error(`no node ${id}`);
    return node;
  }

  raft(id: string): RaftCore {
    return this.node(id).raft;
  }

  /** Handles one Ready of `id` in the driver's order; returns the Ready. */
  processReady(id: string): Ready | null {
    const node = this.node(id);
    if (!node.up || !node.raft.hasReady()) return null;
    const ready = node.raft.ready();
    this.queue.push(...fillChunks(node.disk, ready.earlyMessages));
    persist(node.disk, ready);
    this.queue.push(...fillChunks(node.disk, ready.messages));
    this.apply(node, ready);
    node.readStates.push(...ready.readStates);
    node.membershipAnswers.push(...ready.membershipAnswers);
    node.raft.advance(ready);
    const last = ready.entries[ready.entries.length - 1];
    if (last !== undefined) node.raft.persisted(last.index, last.term);
    // Every byte of a snapshot written: the core installs it, the next Ready carries it.
    const incoming = node.disk.incoming;
    if (ready.receivedSnapshot.length > 0 && incoming !== null &&
      incoming.bytes === incoming.totalBytes) {
      node.raft.snapshotWritten(incoming.meta.index);
    }
    return ready;
  }

  /** Processes every node's Ready until none has one (bounded). */
  processAll(): void {
    for (let round = 0; round < DELIVER_ROUNDS_MAX; round++) {
      let any = false;
      for (const id of this.nodes.keys()) if (this.processReady(id) !== null) any = true;
      if (!any) return;
    }
    throw new Error('processAll did not settle');
  }

  canReach(from: string, to: string): boolean {
    if (!this.node(to).up || !this.node(from).up) return false;
    if (this.groups === null) return true;
    return this.groups.some((g) => g.includes(from) && g.includes(to));
  }

  /** Delivers what is queued now (one hop). Returns the messages delivered. */
  deliverOnce(): Message[] {
    const batch = this.queue;
    this.queue = [];
    const delivered: Message[] = [];
    for (const m of batch) {
      if (!this.canReach(m.from, m.to) || this.dropIf?.(m) === true) continue;
      delivered.push(m);
      this.onDeliver?.(m);
      this.stepCount++;
      this.node(m.to).raft.step(m);
    }
    return delivered;
  }

  /** Processes and delivers until the network is quiet (bounded). */
  deliverAll(): Message[] {
    const all: Message[] = [];
    for (let round = 0; round < DELIVER_ROUNDS_MAX; round++) {
      this.processAll();
      if (this.queue.length === 0) return all;
      all.push(...this.deliverOnce());
    }
    throw new Error('deliverAll did not settle');
  }

  tick(id: string, count = 1): void {
    for (let i = 0; i < count; i++) this.node(id).raft.tick();
  }

  /** Ticks every live node `count` times, processing and delivering after each tick. */
  tickAll(count: number): void {
    for (let i = 0; i < count; i++) {
      for (const node of this.nodes.values()) if (node.up) node.raft.tick();
      this.deliverAll();
    }
  }

  /** Ticks `id` until it leaves the follower role (bounded), then delivers everything. */
  campaign(id: string): number {
    const raft = this.raft(id);
    const limit = this.node(id).config.electionTicks * 2 + 1;
    for (let n = 1; n <= limit; n++) {
      raft.tick();
      if (raft.status().role !== 'follower') {
        this.deliverAll();
        return n;
      }
    }
    throw new Error(`${id} did not campaign within ${limit} ticks`);
  }

  leaders(): string[] {
    return [...this.nodes.values()]
      .filter((n) => n.up && n.raft.status().role === 'leader').map((n) => n.id);
  }

  crash(id: string): void {
    this.node(id).up = false;
    this.queue = this.queue.filter((m) => m.to !== id && m.from !== id);
  }

  /**
   * Snapshots `id` at `meta` with these bytes: stored first (for chunks to followers), then
   * the core compacts. The disk's log and recovered snapshot stay as they were, so a restart
   * recovers the whole log, as it always has here.
   */
  compact(id: string, meta: SnapshotMeta, data: Uint8Array): void {
    const node = this.node(id);
    node.disk.snapshots.set(meta.index, data);
    node.raft.compact(meta, data.length);
  }

  /**
   * `id` loses its disk and starts again empty under its old id and member list: what an
   * operator does who restarts a voter on a new disk with its old command line.
   */
  wipe(id: string): void {
    const node = this.node(id);
    this.crash(id);
    node.disk = emptyDisk();
    node.raft = createRaft(node.config, { hardState: node.disk.hardState, snapshot: null,
      snapshotDataBytes: null, entries: [] });
    node.applied = [];
    node.appliedIndex = 0;
    node.up = true;
  }

  /** Recreates the core of `id` from its disk, as a process restart would. */
  restart(id: string): void {
    const node = this.node(id);
    node.disk.incoming = null;
    node.raft = createRaft(node.config, {
      hardState: node.disk.hardState,
      snapshot: node.disk.snapshot?.meta ?? null,
      snapshotDataBytes: node.disk.snapshot?.dataBytes ?? null,
      entries: node.disk.entries,
    });
    node.applied = [];
    node.appliedIndex = node.disk.snapshot?.meta.index ?? 0;
    node.up = true;
  }

  private apply(node: Node, ready: Ready): void {
    if (ready.snapshot !== null) {
      node.applied = [];
      node.appliedIndex = ready.snapshot.meta.index;
    }
    for (const entry of ready.committedEntries) {
      if (entry.index !== node.appliedIndex + 1) {
        throw new Error(`${node.id} applies ${entry.index} after ${node.appliedIndex}`);
      }
      const seen = this.appliedTerms.get(entry.index);
      if (seen !== undefined && seen !== entry.term) {
        throw new Error(`state machine safety: index ${entry.index} applied with terms ` +
          `${seen} and ${entry.term}`);
      }
      this.appliedTerms.set(entry.index, entry.term);
      node.applied.push(entry);
      node.appliedIndex = entry.index;
    }
  }
}

/**
 * The driver's part for a leader's snapshot chunks: the bytes come from the disk. A chunk
 * of a snapshot the disk no longer holds is not sent (the core sends a newer one later).
 */
function fillChunks(disk: Disk, messages: readonly Message[]): Message[] {
  const out: Message[] = [];
  for (const m of messages) {
    if (m.type !== 'snapshotChunk') {
      out.push(m);
      continue;
    }
    const data = disk.snapshots.get(m.meta.index);
    if (data !== undefined) {
      out.push({ ...m, data: data.subarray(m.offset, m.offset + m.chunkBytes) });
    }
  }
  return out;
}

/** Writes a follower's received chunks in order; returns the whole snapshot once complete. */
function writeReceived(disk: Disk, ready: Ready): void {
  for (const step of ready.receivedSnapshot) {
    if (step.type === 'abandon') {
      disk.incoming = null;
    } else if (step.offset === 0) {
      disk.incoming = { meta: step.meta, parts: [step.data], bytes: step.data.length,
        totalBytes: step.totalBytes };
    } else {
      const incoming = disk.incoming;
      if (incoming === null || incoming.meta.index !== step.meta.index ||
        incoming.bytes !== step.offset) {
        throw new Error(`chunk at ${step.offset} of ${step.meta.index} out of order`);
      }
      incoming.parts.push(step.data);
      incoming.bytes += step.data.length;
    }
  }
}

/** Writes a Ready to a disk: snapshot (log restarts after it), entries, hard state. */
export function persist(disk: Disk, ready: Ready): void {
  writeReceived(disk, ready);
  if (ready.snapshot !== null) {
    const incoming = disk.incoming;
    if (incoming === null || incoming.meta.index !== ready.snapshot.meta.index ||
      incoming.bytes !== ready.snapshot.dataBytes) {
      throw new Error(`snapshot ${ready.snapshot.meta.index} installed before it was received`);
    }
    const data = new Uint8Array(incoming.bytes);
    let at = 0;
    for (const part of incoming.parts) {
      data.set(part, at);
      at += part.length;
    }
    disk.incoming = null;
    disk.snapshot = ready.snapshot;
    disk.snapshotData = data;
    disk.snapshots.set(ready.snapshot.meta.index, data);
    disk.entries = [];
  }
  const first = ready.entries[0];
  if (first !== undefined) {
    const offset = (disk.snapshot?.meta.index ?? 0) + 1;
    disk.entries = disk.entries.slice(0, first.index - offset).concat(ready.entries);
  }
  if (ready.hardState !== null) disk.hardState = ready.hardState;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

export function bytes(text: string): Uint8Array {
  return encoder.encode(text);
}

export function text(data: Uint8Array): string {
  return decoder.decode(data);
}

/** One compact line per message, for transcripts. */
export function formatMessage(m: Message): string {
  const head = `${m.from}->${m.to} ${m.type} t${m.term}`;
  switch (m.type) {
    case 'preVote':
    case 'vote': return `${head} last=${m.lastLogIndex}/${m.lastLogTerm}`;
    case 'preVoteResponse':
    case 'voteResponse': return `${head} ${m.granted ? 'granted' : 'rejected'}`;
    case 'append': {
      const entries = m.entries.map(formatEntry).join(',');
      return `${head} prev=${m.prevLogIndex}/${m.prevLogTerm} commit=${m.commitIndex} ` +
        `[${entries}]`;
    }
    case 'appendResponse': return m.success ? `${head} ok match=${m.matchIndex}` :
      `${head} reject at=${m.rejectedIndex} hint=${m.hintIndex}/${m.hintTerm}`;
    case 'heartbeat': return `${head} commit=${m.commitIndex} ctx=${m.readContext}`;
    case 'heartbeatResponse': return `${head} ctx=${m.readContext}`;
    case 'propose': return `${head} ${text(m.data)} now=${m.nowMs}`;
    case 'readIndex': return `${head} req=${m.requestId}`;
    case 'readIndexResponse': return `${head} req=${m.requestId} index=${m.readIndex}`;
    case 'snapshotChunk': return `${head} snap=${m.meta.index}/${m.meta.term} ` +
      `bytes=${m.offset}+${m.data.length}/${m.totalBytes}`;
    case 'snapshotChunkResponse': return `${head} snap=${m.snapshotIndex} next=${m.nextOffset}`;
    case 'timeoutNow': return head;
    case 'membershipRequest': return `${head} req=${m.requestId} ${describeChange(m.change)}`;
    case 'membershipResponse': return m.refusal === null
      ? `${head} req=${m.requestId} proposed at ${m.index}/${m.entryTerm}`
      : `${head} req=${m.requestId} refused ${m.refusal}`;
  }
}

/** One entry as transcripts show it: `3/2:data`, `3/2:empty`, `3/2:config(addLearner n4)`. */
export function formatEntry(e: Entry): string {
  const head = `${e.index}/${e.term}`;
  if (e.type === 'empty') return `${head}:empty`;
  if (e.type === 'normal') return `${head}:${text(e.data)}`;
  const decoded = decodeConfigEntry(e.data);
  return `${head}:config(${decoded === null ? '?' : describeChange(decoded.change)})`;
}

export function describeChange(change: MembershipChange): string {
  return change.kind === 'addLearner' ? `addLearner ${change.id} ${change.peer}`
    : `${change.kind} ${change.id}`;
}
