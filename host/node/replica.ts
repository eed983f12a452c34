/**
 * The node driver: the only asynchronous code between the pure Raft core, the durable log,
 * the peer transport and the WebAssembly machine. It implements `KvService` for HTTP.
 *
 * The order of one Ready is fixed (etcd's raft and DESIGN.md):
 *   1. send `earlyMessages` (the leader's appends: it counts its own copy only after step 6),
 *   2. write the chunks of a snapshot being received; install a received snapshot (durable,
 *      then the machine restored from it by streaming), then entries and hard state, one
 *      fsync for all of them,
 *   3. send `messages` (votes and acknowledgements promise what step 2 made durable),
 *   4. apply `committedEntries` in order, in WebAssembly, at each entry's stamp,
 *   5. answer the read states whose index is applied,
 *   6. `advance()`.
 * Only one Ready is in flight. Proposals that arrive while it is being persisted wait in the
 * core and go out together in the next one: that is the group commit.
 *
 * Errors: a failed write or fsync crashes the node (`onFatal`) and is never retried; a
 * machine trap is a bug and crashes it too, naming the entry. Everything the driver queues is
 * bounded, and every client wait ends by `requestTimeoutMs` at the latest.
 */
import { createRaft, type RaftCore, type Ready } from '../core/raft/raft.js';
import type { Message } from '../core/raft/messages.js';
import { decodeMessage, encodeMessage } from '../core/raft/message-codec.js';
import type { Entry, Snapshot, SnapshotMeta } from '../core/raft/types.js';
import {
  isWriteOp, type CallOutcome, type Command, type KvCall, type QuotaSettings,
} from '../machine/commands.js';
import { encodeCommand } from '../machine/codec.js';
import { MAX_STATE_BYTES_DEFAULT, memoryFull } from '../machine/memory-budget.js';
import type { StateMachine } from '../machine/state-machine.js';
import type { Storage } from '../storage/storage.js';
import type { Transport } from '../transport/transport.js';
import {
  DedupTable, decodeEnvelope, encodeEnvelope, encodeSnapshotPrefix, type Origin,
} from './envelope.js';
import { ChunkSender, restoreMachine, SnapshotReceiver, Snapshotter } from './snapshotter.js';
import type { Scheduler, TimerHandle } from './scheduler.js';
import type {
  KvService, NodeHealth, QuotaView, ServiceResult, Unavailable, UnavailableReason,
} from './service.js';

/** Client requests waiting on this node at once; past it, 503 `overloaded`. */
export const PENDING_REQUESTS_MAX = 100_000;
/** Tenants whose quota row is cached; past it the cache starts over. */
const QUOTA_CACHE_TENANTS_MAX = 10_000;
const RETRY_AFTER_SECONDS = 1;

export interface ReplicaOptions {
  readonly id: string;
  readonly voters: readonly string[];
  readonly seed: number;
  readonly incarnation: number;
  readonly tickMs: number;
  readonly electionTicks: number;
  readonly requestTimeoutMs: number;
  readonly requireGrant: boolean;
  readonly expireEveryMs: number;
  readonly expireBatch: number;
  readonly snapshotEveryEntries: number;
  readonly snapshotEveryBytes: number;
  /** The state's memory budget in bytes (memory-budget.ts); default MAX_STATE_BYTES_DEFAULT. */
  readonly maxStateBytes?: number;
}

export interface ReplicaDeps {
  readonly storage: Storage;
  readonly transport: Transport;
  readonly machine: StateMachine;
  readonly scheduler: Scheduler;
  /** Called once with the error that makes this node unable to go on; it must stop it. */
  readonly onFatal: (error: Error) => void;
  readonly onApplied?: (index: number) => void;
  /** Called with the number of expired keys a sweep entry removed. */
  readonly onSwept?: (removedKeys: number) => void;
  /** Called when a snapshot was taken, installed from the leader, or restored at start. */
  readonly onSnapshot?: (event: SnapshotEvent) => void;
}

/**
 * A snapshot this node began (and then took, durably, or abandoned), installed from its
 * leader, or restored from at start-up.
 */
export interface SnapshotEvent {
  readonly kind: 'begun' | 'taken' | 'abandoned' | 'installed' | 'restored';
  readonly index: number;
  readonly dataBytes: number;
  /** From its start to its end (taken: until durable; installed: receipt complete to restored). */
  readonly ms: number;
}

type Settle<T> = (result: ServiceResult<T>) => void;

interface PendingWrite {
  readonly command: Command;
  readonly settle: Settle<CallOutcome | null>;
  /** Scheduler time after which the caller gets a 503 (outcome unknown). */
  readonly deadlineMs: number;
  /** Set once the core accepted (or forwarded) it; null while waiting for a leader. */
  seq: number | null;
}

interface PendingRead<T> {
  readonly run: () => T;
  readonly settle: Settle<T>;
  readonly deadlineMs: number;
  /** The index this node must apply before answering; -1 while the core has not said. */
  readIndex: number;
}

function unavailable(reason: UnavailableReason, detail: string): Unavailable {
  return { kind: 'unavailable', reason, detail, retryAfterSeconds: RETRY_AFTER_SECONDS };
}

const NOOP_COMMAND = encodeCommand({ kind: 'noop' });

export class Replica implements KvService {
  private core!: RaftCore;
  private dedup = new DedupTable();
  private readonly origin: Origin;
  private nextSeq = 1;
  private nextReadId = 1;
  private readonly writesBySeq = new Map<number, PendingWrite>();
  /** Writes waiting for a leader to be known, in arrival order. */
  private readonly writesAwaitingLeader: PendingWrite[] = [];
  private readonly reads = new Map<number, PendingRead<unknown>>();
  private readonly readsAwaitingLeader: number[] = [];
  private pumping = false;
  private state: 'starting' | 'running' | 'stopping' | 'stopped' = 'starting';
  private tickTimer: TimerHandle | null = null;
  private sweepTimer: TimerHandle | null = null;
  private snapshotIndex = 0;
  /** The term of the last applied entry, for the meta of the next snapshot. */
  private appliedTerm = 0;
  private logBytesSinceSnapshot = 0;
  /** This node's snapshots, sliced beside the Ready loop; at most one at a time. */
  private readonly snapshotter: Snapshotter;
  /** The snapshot file being written, if any. */
  private snapshotSaving: Promise<void> | null = null;
  /** Chunks of a snapshot a leader sends, written to storage as they arrive. */
  private readonly receiver: SnapshotReceiver;
  /** Snapshot chunks to followers, filled from storage before they go out. */
  private readonly chunkSender: ChunkSender;
  /** A snapshot now durable on disk, waiting to be handed to the core between Readies. */
  private pendingCompaction: Snapshot | null = null;
  /**
   * The pause switch and quota rows as last read from the machine. Every request consults
   * them (refusal order, rate overrides), and they change only with admin entries.
   */
  private paused: boolean | null = null;
  private readonly quotas = new Map<string, QuotaSettings | null>();
  /** The last log index this node has synced; committed entries up to it may be applied. */
  private durableIndex = 0;

  constructor(
    private readonly options: ReplicaOptions,
    private readonly deps: ReplicaDeps,
  ) {
    this.origin = { nodeId: options.id, incarnation: options.incarnation };
    this.snapshotter = new Snapshotter(deps.machine, deps.storage);
    this.receiver = new SnapshotReceiver(deps.storage);
    this.chunkSender = new ChunkSender(deps.storage,
      (message) => this.deps.transport.send(message.to, encodeMessage(message)),
      () => undefined);
  }

  /** Recovers the log and the machine, joins the cluster and starts the timers. */
  async start(): Promise<void> {
    const recovered = await this.deps.storage.recover();
    if (recovered.snapshot !== null) {
      const startMs = this.deps.scheduler.nowMs();
      await this.restoreSnapshot(recovered.snapshot);
      this.noteSnapshot('restored', recovered.snapshot, startMs);
    }
    this.durableIndex = recovered.entries.at(-1)?.index ?? recovered.snapshot?.meta.index ?? 0;
    this.core = createRaft({
      id: this.options.id,
      voters: this.options.voters,
      electionTicks: this.options.electionTicks,
      heartbeatTicks: 1,
      seed: this.options.seed,
      maxInflightAppends: 64,
      maxEntriesBytesPerAppend: 1024 * 1024,
      maxSnapshotChunkBytes: 1024 * 1024,
      preVote: true,
      checkQuorum: true,
    }, {
      hardState: recovered.hardState,
      snapshot: recovered.snapshot?.meta ?? null,
      snapshotDataBytes: recovered.snapshot?.dataBytes ?? null,
      entries: recovered.entries,
    });
    await this.deps.transport.start((from, frame) => this.onFrame(from, frame));
    this.state = 'running';
    this.scheduleTick();
    this.scheduleSweep();
    this.core.tick();
    this.pump();
  }

  // ---------------------------------------------------------------- KvService

  execute(call: KvCall): Promise<ServiceResult<CallOutcome>> {
    if (!call.ops.some(isWriteOp)) {
      return this.linearizableRead(() => this.deps.machine.read(call, this.readTimeMs()));
    }
    // Until calls carry their growth estimate, any put or incr counts as growing the state.
    if (call.ops.some((op) => op.op === 'put' || op.op === 'incr') && this.memoryFull(1)) {
      return Promise.resolve(unavailable('memory_full', 'the state is at its memory budget ' +
        '(HIVEKV_MAX_STATE_BYTES): writes that grow it are refused; deletes and reads work'));
    }
    const flags = { requireGrant: this.options.requireGrant };
    return this.write({ kind: 'call', call, flags }).then((result) => {
      if (result.kind !== 'done') return result;
      const outcome = result.value;
      if (outcome === null) {
        return { kind: 'done', value: { status: 'invalid', detail: 'entry applied no call' } };
      }
      return { kind: 'done', value: outcome };
    });
  }

  async setPaused(paused: boolean): Promise<ServiceResult<void>> {
    const result = await this.write({ kind: 'setPaused', paused });
    return result.kind === 'done' ? { kind: 'done', value: undefined } : result;
  }

  async setQuota(tenant: string, quota: QuotaSettings): Promise<ServiceResult<void>> {
    const result = await this.write({ kind: 'setQuota', tenant, quota });
    return result.kind === 'done' ? { kind: 'done', value: undefined } : result;
  }

  getQuota(tenant: string): Promise<ServiceResult<QuotaView>> {
    return this.linearizableRead(() => ({
      tenant,
      quota: this.deps.machine.quota(tenant),
      usage: this.deps.machine.usage(tenant),
    }));
  }

  isPausedLocally(): boolean {
    this.paused ??= this.deps.machine.isPaused();
    return this.paused;
  }

  quotaLocally(tenant: string): QuotaSettings | null {
    let quota = this.quotas.get(tenant);
    if (quota === undefined) {
      quota = this.deps.machine.quota(tenant);
      if (this.quotas.size >= QUOTA_CACHE_TENANTS_MAX) this.quotas.clear();
      this.quotas.set(tenant, quota);
    }
    return quota;
  }

  /** Admin entries and snapshots change the pause and quota rows: drop what was cached. */
  private forgetAdminState(): void {
    this.paused = null;
    this.quotas.clear();
  }

  /** The state's memory budget, in bytes. */
  get maxStateBytes(): number {
    return this.options.maxStateBytes ?? MAX_STATE_BYTES_DEFAULT;
  }

  /**
   * True when a call that would change the state by `growthBytes` (negative: shrink) must
   * be refused because the state is at its memory budget (memory-budget.ts).
   */
  memoryFull(growthBytes: number): boolean {
    return memoryFull(this.deps.machine.memoryUse(), this.maxStateBytes, growthBytes);
  }

  health(): NodeHealth {
    const status = this.core?.status();
    return {
      status: this.state === 'running' ? 'ok' : this.state === 'starting' ? 'starting' : 'stopping',
      id: this.options.id,
      role: status?.role ?? 'follower',
      leader: status?.leader ?? null,
      term: status?.term ?? 0,
      commitIndex: status?.commitIndex ?? 0,
      appliedIndex: this.deps.machine.appliedIndex,
      stateBytes: this.deps.machine.memoryUse().stateBytes,
      stateBytesMax: this.maxStateBytes,
    };
  }

  /** The consensus core's view: role, leader, term, commit and last log index. */
  raftStatus(): ReturnType<RaftCore['status']> {
    return this.core.status();
  }

  /** Hands leadership to another member if this node leads; resolves once it does not. */
  async transferLeadership(waitMs: number): Promise<void> {
    const status = this.core.status();
    if (status.role !== 'leader' || this.options.voters.length < 2) return;
    const target = this.options.voters.find((v) => v !== this.options.id);
    if (target === undefined) return;
    this.core.transferLeadership(target);
    this.pump();
    const deadline = this.deps.scheduler.nowMs() + waitMs;
    while (this.core.status().role === 'leader' && this.deps.scheduler.nowMs() < deadline) {
      await new Promise<void>((resolve) => this.deps.scheduler.after(this.options.tickMs, resolve));
    }
  }

  /** Stops timers, fails what still waits, lets the current Ready finish, closes adapters. */
  async stop(): Promise<void> {
    if (this.state === 'stopped') return;
    this.state = 'stopping';
    this.tickTimer?.cancel();
    this.sweepTimer?.cancel();
    this.failEverything('shutting_down', 'the node is shutting down');
    for (let i = 0; i < 200 && this.pumping; i++) {
      await new Promise<void>((resolve) => this.deps.scheduler.after(5, resolve));
    }
    // A snapshot being written stops (the log still holds what it covers), before the
    // storage closes under it.
    await this.snapshotter.abort();
    await this.snapshotSaving;
    await this.chunkSender.drain();
    this.state = 'stopped';
    await this.deps.transport.close();
    await this.deps.storage.close();
  }

  pendingCount(): number {
    return this.writesBySeq.size + this.writesAwaitingLeader.length + this.reads.size;
  }

  // ---------------------------------------------------------------- requests

  private write(command: Command): Promise<ServiceResult<CallOutcome | null>> {
    return new Promise((resolve) => {
      const refusal = this.admissionRefusal(true);
      if (refusal !== null) return resolve(refusal);
      const pending: PendingWrite = {
        command,
        settle: resolve,
        seq: null,
        deadlineMs: this.deps.scheduler.nowMs() + this.options.requestTimeoutMs,
      };
      this.proposeOrQueue(pending);
      this.pump();
    });
  }

  private linearizableRead<T>(run: () => T): Promise<ServiceResult<T>> {
    return new Promise((resolve) => {
      const refusal = this.admissionRefusal(false);
      if (refusal !== null) return resolve(refusal);
      if (this.isSoleLeaderCaughtUp()) return resolve({ kind: 'done', value: run() });
      const requestId = this.nextReadId++;
      const pending: PendingRead<T> = {
        run,
        settle: resolve,
        readIndex: -1,
        deadlineMs: this.deps.scheduler.nowMs() + this.options.requestTimeoutMs,
      };
      this.reads.set(requestId, pending as PendingRead<unknown>);
      if (this.core.status().leader === null) this.readsAwaitingLeader.push(requestId);
      else this.core.readIndex(requestId);
      this.pump();
    });
  }

  /**
   * A single-voter leader cannot be deposed, so once it has applied an entry of its own term
   * and everything it committed, its state already reflects every acknowledged write: a read
   * needs no read-index round (§6.4 answers the same index at once).
   */
  private isSoleLeaderCaughtUp(): boolean {
    if (this.options.voters.length !== 1) return false;
    const status = this.core.status();
    return status.role === 'leader' && this.appliedTerm === status.term &&
      this.deps.machine.appliedIndex >= status.commitIndex;
  }

  private admissionRefusal(isWrite: boolean): Unavailable | null {
    if (this.state !== 'running') return unavailable('shutting_down', 'the node is not serving');
    if (this.pendingCount() >= PENDING_REQUESTS_MAX) {
      return unavailable('overloaded', 'too many requests waiting on this node');
    }
    if (isWrite && this.deps.storage.isLowOnSpace()) {
      return unavailable('storage_full', 'the data directory is low on free space');
    }
    return null;
  }

  private proposeOrQueue(pending: PendingWrite): void {
    const seq = this.nextSeq++;
    const data = encodeEnvelope(this.origin, seq, encodeCommand(pending.command));
    const result = this.core.propose(data, this.deps.scheduler.nowMs());
    if (result.kind === 'dropped') {
      this.nextSeq--;
      if (result.reason === 'no-leader' || result.reason === 'transferring') {
        this.writesAwaitingLeader.push(pending);
        return;
      }
      pending.settle(unavailable('overloaded', result.reason === 'busy'
        ? 'too many uncommitted entries: the cluster is behind' : 'the entry is too large'));
      return;
    }
    pending.seq = seq;
    this.writesBySeq.set(seq, pending);
  }

  /**
   * Answers 503 to every request past its deadline. Runs on the tick, so a request costs no
   * timer of its own; a deadline is honoured within one tick.
   */
  private expireOverdue(): void {
    const now = this.deps.scheduler.nowMs();
    const timedOut = unavailable('timeout', 'no answer in time: the outcome is unknown');
    for (const [seq, pending] of this.writesBySeq) {
      if (pending.deadlineMs > now) continue;
      this.writesBySeq.delete(seq);
      pending.settle(timedOut);
    }
    for (let i = this.writesAwaitingLeader.length - 1; i >= 0; i--) {
      const pending = this.writesAwaitingLeader[i];
      if (pending === undefined || pending.deadlineMs > now) continue;
      this.writesAwaitingLeader.splice(i, 1);
      pending.settle(unavailable('no_leader', 'no leader was elected in time'));
    }
    for (const [requestId, pending] of this.reads) {
      if (pending.deadlineMs > now) continue;
      this.reads.delete(requestId);
      pending.settle(unavailable('timeout', 'the cluster did not confirm a read index in time'));
    }
  }

  /** Once a leader is known, proposals and reads that waited for one go out. */
  private releaseAwaitingLeader(): void {
    if (this.core.status().leader === null) return;
    const writes = this.writesAwaitingLeader.splice(0);
    for (const pending of writes) this.proposeOrQueue(pending);
    const reads = this.readsAwaitingLeader.splice(0);
    for (const requestId of reads) {
      if (this.reads.has(requestId)) this.core.readIndex(requestId);
    }
  }

  private failEverything(reason: UnavailableReason, detail: string): void {
    const writes = [...this.writesBySeq.values(), ...this.writesAwaitingLeader];
    this.writesBySeq.clear();
    this.writesAwaitingLeader.length = 0;
    for (const pending of writes) pending.settle(unavailable(reason, detail));
    const reads = [...this.reads.values()];
    this.reads.clear();
    this.readsAwaitingLeader.length = 0;
    for (const pending of reads) pending.settle(unavailable(reason, detail));
  }

  /** A read evaluates expiry at max(local clock, last applied stamp) (DESIGN.md). */
  private readTimeMs(): number {
    return Math.max(this.deps.scheduler.nowMs(), this.deps.machine.lastTimeMs);
  }

  // ---------------------------------------------------------------- the loop

  private onFrame(from: string, frame: Uint8Array): void {
    if (this.state !== 'running') return;
    const message = decodeMessage(frame);
    if (message === null || message.from !== from) return;
    this.core.step(message);
    this.pump();
  }

  private scheduleTick(): void {
    this.tickTimer = this.deps.scheduler.after(this.options.tickMs, () => {
      if (this.state !== 'running') return;
      this.core.tick();
      this.expireOverdue();
      this.pump();
      this.scheduleTick();
    });
  }

  private scheduleSweep(): void {
    this.sweepTimer = this.deps.scheduler.after(this.options.expireEveryMs, () => {
      if (this.state !== 'running') return;
      const status = this.core.status();
      if (status.role === 'leader' && this.deps.machine.liveKeyCount() > 0 &&
        this.pendingCount() < PENDING_REQUESTS_MAX) {
        const command = encodeCommand({ kind: 'sweep', maxKeys: this.options.expireBatch });
        const seq = this.nextSeq++;
        this.core.propose(encodeEnvelope(this.origin, seq, command), this.deps.scheduler.nowMs());
        this.pump();
      }
      this.scheduleSweep();
    });
  }

  /** Starts draining Readies unless a drain is already running. */
  private pump(): void {
    if (this.pumping || this.state === 'stopped' || !this.core.hasReady()) return;
    this.pumping = true;
    this.drainReadies().then(
      () => {
        this.pumping = false;
        if (this.state === 'running') this.pump();
      },
      (error: unknown) => {
        this.pumping = false;
        this.state = 'stopped';
        this.deps.onFatal(error instanceof Error ? error : new Error(String(error)));
      },
    );
  }

  private async drainReadies(): Promise<void> {
    while (this.state !== 'stopped' && this.core.hasReady()) {
      const ready = this.core.ready();
      this.sendAll(ready.earlyMessages);
      // Committed entries that are already durable here are applied, and their callers
      // answered, before this Ready's fsync: otherwise every batch would wait for the next
      // batch's fsync too. Entries persisted by this Ready still apply only after it.
      const durableCount = this.durablePrefix(ready);
      this.applyCommitted(ready.committedEntries.slice(0, durableCount));
      this.serveReads();
      await this.persist(ready);
      this.sendAll(ready.messages);
      this.applyCommitted(ready.committedEntries.slice(durableCount));
      this.noteReadStates(ready);
      this.core.advance(ready);
      this.noteSoftState(ready);
      this.serveReads();
      this.compactWhenIdle();
      this.maybeSnapshot();
    }
  }

  /**
   * How many of the Ready's committed entries this node already holds durably. An entry this
   * Ready overwrites is not durable in its new form yet, even below `durableIndex`.
   */
  private durablePrefix(ready: Ready): number {
    const overwrittenFrom = ready.entries[0]?.index ?? Infinity;
    const bound = Math.min(this.durableIndex, overwrittenFrom - 1);
    const entries = ready.committedEntries;
    let count = 0;
    while (count < entries.length && (entries[count]?.index ?? Infinity) <= bound) count++;
    return count;
  }

  private async persist(ready: Ready): Promise<void> {
    const { storage } = this.deps;
    if (ready.receivedSnapshot.length > 0) await this.receiver.write(ready.receivedSnapshot);
    if (ready.snapshot !== null) await this.installSnapshot(ready.snapshot);
    if (ready.entries.length > 0) {
      storage.append(ready.entries);
      for (const entry of ready.entries) this.logBytesSinceSnapshot += entry.data.length + 32;
    }
    if (ready.hardState !== null) storage.setHardState(ready.hardState);
    if (ready.entries.length > 0 || ready.hardState !== null) await storage.sync();
    const last = ready.entries[ready.entries.length - 1];
    if (last !== undefined) this.durableIndex = last.index;
  }

  private sendAll(messages: readonly Message[]): void {
    for (const message of messages) {
      // The core leaves a snapshot chunk's bytes to the driver: they come from storage.
      if (message.type === 'snapshotChunk') this.chunkSender.post(message);
      else this.deps.transport.send(message.to, encodeMessage(message));
    }
  }

  /**
   * A snapshot from the leader is whole: made durable first, then this node's own snapshot
   * (of a state about to go) is dropped, and so is the machine's state, so the restore that
   * streams in from the file never needs two states in memory.
   */
  private async installSnapshot(snapshot: Snapshot): Promise<void> {
    const startMs = this.deps.scheduler.nowMs();
    await this.receiver.complete(snapshot);
    await this.snapshotter.abort();
    this.deps.machine.clearState();
    await this.restoreSnapshot(snapshot);
    // The core installs a snapshot only over a log that disagrees with it at its index,
    // so what follows it here was discarded with it.
    this.durableIndex = snapshot.meta.index;
    this.noteSnapshot('installed', snapshot, startMs);
  }

  private noteSnapshot(kind: SnapshotEvent['kind'], snapshot: Snapshot, startMs: number): void {
    this.deps.onSnapshot?.({ kind, index: snapshot.meta.index, dataBytes: snapshot.dataBytes,
      ms: this.deps.scheduler.nowMs() - startMs });
  }

  private async restoreSnapshot(snapshot: Snapshot): Promise<void> {
    this.dedup = await restoreMachine(this.deps.storage, this.deps.machine, snapshot);
    this.forgetAdminState();
    this.snapshotIndex = snapshot.meta.index;
    this.appliedTerm = snapshot.meta.term;
    this.logBytesSinceSnapshot = 0;
  }

  private applyCommitted(entries: readonly Entry[]): void {
    const { machine } = this.deps;
    for (const entry of entries) {
      if (entry.index <= machine.appliedIndex) continue;
      this.appliedTerm = entry.term;
      const envelope = entry.type === 'normal' ? decodeEnvelope(entry.data) : null;
      if (envelope === null || !this.dedup.admit(envelope, entry.index)) {
        machine.apply(entry.index, entry.timeMs, NOOP_COMMAND);
        continue;
      }
      const outcome = machine.apply(entry.index, entry.timeMs, envelope.command);
      if (outcome.kind === 'admin') this.forgetAdminState();
      if (outcome.kind === 'sweep' && outcome.removedKeys > 0) {
        this.deps.onSwept?.(outcome.removedKeys);
      }
      if (outcome.kind === 'invalid') {
        throw new Error(`entry ${entry.index} was refused by the machine: ${outcome.detail}`);
      }
      const mine = envelope.origin.nodeId === this.origin.nodeId &&
        envelope.origin.incarnation === this.origin.incarnation;
      const pending = mine ? this.writesBySeq.get(envelope.seq) : undefined;
      if (pending !== undefined) {
        this.writesBySeq.delete(envelope.seq);
        pending.settle({ kind: 'done', value: outcome.kind === 'call' ? outcome.outcome : null });
      }
    }
    if (entries.length > 0) this.deps.onApplied?.(machine.appliedIndex);
  }

  private noteReadStates(ready: Ready): void {
    for (const { requestId, readIndex } of ready.readStates) {
      const pending = this.reads.get(requestId);
      if (pending === undefined) continue;
      if (readIndex < 0) {
        this.reads.delete(requestId);
        const detail = 'leadership changed before the read was confirmed';
        pending.settle(unavailable('no_leader', detail));
        continue;
      }
      pending.readIndex = readIndex;
    }
  }

  private serveReads(): void {
    const applied = this.deps.machine.appliedIndex;
    for (const [requestId, pending] of this.reads) {
      if (pending.readIndex < 0 || pending.readIndex > applied) continue;
      this.reads.delete(requestId);
      pending.settle({ kind: 'done', value: pending.run() });
    }
  }

  private noteSoftState(ready: Ready): void {
    if (ready.softState !== null && ready.softState.leader !== null) {
      this.releaseAwaitingLeader();
    }
  }

  /**
   * Takes a snapshot when one is due. It begins here, between Readies, so it holds the state
   * at `appliedIndex`; its slices are cut and written beside the Ready loop (snapshotter.ts),
   * entries applying in between, so client writes keep flowing. The core drops its log only
   * once the file is durable, and only between Readies (`compactWhenIdle`).
   */
  private maybeSnapshot(): void {
    const { machine } = this.deps;
    const applied = machine.appliedIndex;
    const due = applied - this.snapshotIndex >= this.options.snapshotEveryEntries ||
      this.logBytesSinceSnapshot >= this.options.snapshotEveryBytes;
    if (!due || applied <= this.snapshotIndex || this.snapshotSaving !== null) return;
    const meta: SnapshotMeta = {
      index: applied,
      term: this.appliedTerm,
      timeMs: machine.lastTimeMs,
      voters: this.options.voters,
    };
    const startMs = this.deps.scheduler.nowMs();
    const taken = this.snapshotter.take(meta, encodeSnapshotPrefix(this.dedup));
    const begun = { meta, dataBytes: this.snapshotter.dataBytes };
    this.noteSnapshot('begun', begun, startMs);
    this.snapshotSaving = taken.then((snapshot) => {
      this.snapshotSaving = null;
      if (snapshot === null) this.noteSnapshot('abandoned', begun, startMs);
      if (snapshot === null || this.state === 'stopped') return;
      this.noteSnapshot('taken', snapshot, startMs);
      this.pendingCompaction = snapshot;
      if (!this.pumping) this.compactWhenIdle();
    }, (error: unknown) => {
      this.snapshotSaving = null;
      this.state = 'stopped';
      this.deps.onFatal(error instanceof Error ? error : new Error(String(error)));
    });
    this.snapshotIndex = applied;
    this.logBytesSinceSnapshot = 0;
  }

  /** Hands a durable snapshot to the core; never while a Ready is outstanding. */
  private compactWhenIdle(): void {
    const pending = this.pendingCompaction;
    if (pending === null) return;
    this.pendingCompaction = null;
    // A snapshot installed from the leader meanwhile is newer: the core already has it.
    if (pending.meta.index < this.snapshotIndex) return;
    this.core.compact(pending.meta, pending.dataBytes);
  }
}
