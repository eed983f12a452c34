/**
 * The node driver: the only asynchronous code between the pure Raft core, the durable log,
 * the peer transport and the WebAssembly machine. It implements `KvService` for HTTP.
 *
 * The order of one Ready is fixed (etcd's raft, DESIGN.md and host/core/raft/ready.ts):
 *   1. send `earlyMessages` (the leader's appends: it counts its own copy only once durable),
 *   2. apply `committedEntries` in order, in WebAssembly, at each entry's stamp (the core
 *      hands out only entries already durable here), and answer the read states now served,
 *   3. hand the hard state, then the entries, to storage, which writes them through to the
 *      page cache at once when nothing must be durable before them, and start the fsync
 *      when none is in flight,
 *   4. `advance()`, and take the next Ready at once;
 *   5. when the fsync covering step 3 returns: send the Ready's `messages` (votes and
 *      acknowledgements promise durable state), then `persisted()`.
 * One fsync is in flight at a time. Everything handed to storage while it runs (the next
 * batch of proposals, received, validated, appended and replicated meanwhile) is covered by
 * the next fsync, which starts as soon as the last one returns: that is the group commit, and
 * the disk never waits for the CPU. While an fsync runs, the calls and peer frames of one
 * turn of the event loop are taken in one Ready (`pumpSoon`), so a leader sends each follower
 * one append per turn, not one per call. The chunks of a snapshot being received are written to
 * a file of their own as they come (snapshotter.ts); a complete snapshot is a barrier: every
 * earlier write is made durable first, then the snapshot, then the machine restored from it
 * by streaming, then the rest of its Ready. This node's own snapshots are cut in slices
 * beside the Ready loop, while entries keep applying.
 *
 * Errors: a failed write or fsync crashes the node (`onFatal`) and is never retried; a
 * machine trap is a bug and crashes it too, naming the entry; so does a checkpoint entry
 * whose digest is not this replica's (checkpoints.ts: the state diverged). Everything the
 * driver queues is bounded, and every client wait ends by `requestTimeoutMs` at the latest.
 */
import type { MembershipChange } from '../core/raft/configuration.js';
import { entryBytes } from '../core/raft/log.js';
import { createRaft, type RaftCore, type Ready } from '../core/raft/raft.js';
import type { Message, ProposeMessage } from '../core/raft/messages.js';
import { decodeMessage, encodeMessage } from '../core/raft/message-codec.js';
import type { Configuration, Entry, Snapshot, SnapshotMeta } from '../core/raft/types.js';
import {
  isWriteOp, type Command, type KvCall, type QuotaSettings,
} from '../machine/commands.js';
import { SeqTable } from '../core/seq-table.js';
import { encodeCommand } from '../machine/codec.js';
import { catchUpHeldFor, MAX_STATE_BYTES_DEFAULT, memoryFull } from '../machine/memory-budget.js';
import type { StateMachine } from '../machine/state-machine.js';
import { SnapshotNoRoomError, type Storage } from '../storage/storage.js';
import type { Transport } from '../transport/transport.js';
import type { PeerAddress } from './config.js';
import {
  encodeEnvelope, type Origin,
} from './envelope.js';
import type { AppliedEntrySink } from '../machine/state-machine.js';
import type {
  ParseOutcome, RequestFrame, RequestLimits,
} from '../machine/request.js';
import type { AnswerHeader } from '../machine/codec.js';
import {
  type AwaitingSync, releaseAfterSync, thinAppendAnswers,
} from './append-answers.js';
import { Membership } from './membership.js';
import {
  CheckpointSchedule, DIGEST_EVERY_DEFAULT, DivergenceError,
} from './checkpoints.js';
import {
  ChunkSender, type RefusedSnapshot, restoreMachine, SNAPSHOT_SLICE_BYTES, snapshotDue,
  SnapshotReceiver, Snapshotter,
} from './snapshotter.js';
import { SyncPlacement } from './sync-placement.js';
import { LEADER_CLOCK_WAIT_MS, LeaderClockWait, type MajorityClock } from './leader-clock-wait.js';
import type { Scheduler, TimerHandle } from './scheduler.js';
import type {
  CallSink, KvService, MembersResult, MembersService, MembersView, NodeHealth, QuotaView,
  ServiceResult, SubmittedCall, Unavailable, UnavailableReason,
} from './service.js';

/** Entry bytes per append and bytes per snapshot chunk: the peer link's frame bound follows
 * from them (`assertFrameBound`). */
const NO_MEMBERS: readonly string[] = [];

/** Why a follower holds back from catching up (`Replica.refreshCatchUpHold`). */
export type CatchUpHold =
  | { readonly want: 'memory'; readonly stateBytes: number }
  | { readonly want: 'space' };

const LEARNER_SPACE_TEXT = 'this node is a learner and its data directory is below ' +
  'HIVEKV_MIN_FREE_BYTES free: the cluster\'s writes go on without it';

export const RAFT_FRAME_SETTINGS = {
  maxEntriesBytesPerAppend: 1024 * 1024,
  maxSnapshotChunkBytes: 1024 * 1024,
} as const;
/** Client requests waiting on this node at once; past it, 503 `overloaded`. */
export const PENDING_REQUESTS_MAX = 100_000;
/** Tenants whose quota row is cached; past it the cache starts over. */
const QUOTA_CACHE_TENANTS_MAX = 10_000;
const RETRY_AFTER_SECONDS = 1;

/** Bytes of a snapshot file read at a time for an export. */
const EXPORT_CHUNK_BYTES = 1024 * 1024;

export interface ReplicaOptions {
  readonly id: string;
  /** The starting voters (`--peers`); empty for a node started with `--join`. */
  readonly voters: readonly string[];
  /** Their peer addresses; members whose configuration holds no address are reached here. */
  readonly peers: readonly PeerAddress[];
  /** The node listens for peers; without it, membership changes are refused. */
  readonly peerLink: boolean;
  /** TEST ONLY: turns §5.4.2's commit rule off in the core (RaftConfig says why). */
  readonly testOnlyCommitWithoutCurrentTermRule?: boolean;
  /** Entry bytes one append carries (default 1 MiB); the simulator draws it per seed. */
  readonly maxEntriesBytesPerAppend?: number;
  /** Appends in flight per follower (default 64); the simulator draws it per seed. */
  readonly maxInflightAppends?: number;
  /** Bytes per snapshot chunk (default 1 MiB); the simulator sends small ones. */
  readonly maxSnapshotChunkBytes?: number;
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
  /** Bytes per second this node writes its own snapshots at most; 0 or absent: no limit. */
  readonly snapshotBytesPerSec?: number;
  /** Percent of the last snapshot's size the log must hold before the next; absent: 0. */
  readonly snapshotLogPercent?: number;
  /** Reported by `/health`; empty in tests that run no cluster. */
  readonly clusterId?: string;
  /** The limits the machine's request parser enforces (the node's QUEEN_KV_* settings). */
  readonly requestLimits?: RequestLimits;
  /** The state's memory budget in bytes (memory-budget.ts); default MAX_STATE_BYTES_DEFAULT. */
  readonly maxStateBytes?: number;
  /**
   * The largest snapshot from a leader this node's memory takes (memory-budget.ts,
   * `restoreRoomFor`); default: no bound but storage's room.
   */
  readonly restoreRoomBytes?: number;
  /** HIVEKV_DIGEST_EVERY: entries between checkpoints a leader proposes; 0 turns them off. */
  readonly digestEvery?: number;
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
  /** Called when a checkpoint entry passed, or could not be verified here. */
  readonly onCheckpoint?: (verdict: 'passed' | 'unverifiable') => void;
  /**
   * The clock entries are stamped and expiry judged by (cluster-clock.ts: the wall clock held
   * within what a majority of voters' clocks allow); the scheduler's wall clock without it.
   */
  readonly stampClock?: { nowMs(): number } & Partial<MajorityClock>;
  /** A new leader's wait for a majority of the voters' clocks ran out (leader-clock-wait.ts). */
  readonly onClockWaitedOut?: (waitedMs: number) => void;
  /**
   * The other members whose data directory is low on free space (cluster-status.ts): writes
   * are refused while any is, as while this node's own is.
   */
  readonly membersStorageFull?: () => readonly string[];
  /**
   * The smallest memory budget among the other members (cluster-status.ts): writes that grow
   * the state are admitted only up to it where it is smaller than this node's own.
   */
  readonly memberStateBudget?: () => { readonly member: string; readonly bytes: number } | null;
  /**
   * The largest state a member said it holds lately, with that member (cluster-status.ts);
   * null when none said.
   */
  readonly largestMemberState?: () => { readonly member: string; readonly bytes: number;
    readonly appliedIndex?: number } | null;
  /**
   * The other members that say they hold back from catching up (cluster-status.ts): as
   * leader, this node sends them heartbeats only.
   */
  readonly membersHoldingCatchUp?: () => readonly string[];
  /** As leader, this node began (true) or ended sending `member` heartbeats only. */
  readonly onReplicationPaused?: (member: string, paused: boolean) => void;
  /**
   * This node began to hold its leader's entries for want of memory or space (with why), or
   * ended (null): `refreshCatchUpHold`.
   */
  readonly onCatchUpHeld?: (hold: { readonly want: CatchUpHold['want'];
    readonly detail: string } | null) => void;
  /** Takes the peer frames that are not Raft's (member status); true when it took one. */
  readonly sideFrames?: { accept(from: string, frame: Uint8Array): boolean };
  /** Called when a snapshot was taken, installed from the leader, or restored at start. */
  readonly onSnapshot?: (event: SnapshotEvent) => void;
  /**
   * Called as `start()` ends a phase ('snapshot restored', 'raft log loaded', 'log applied':
   * the entries the recovered commit index covers): start-up timing.
   */
  readonly onStartPhase?: (phase: string) => void;
}

/**
 * A snapshot this node began (and then took, durably, or abandoned), installed from its
 * leader, or restored from at start-up.
 */
export interface SnapshotEvent {
  /**
   * no_room: not taken, for want of free space (storage.ts, SnapshotNoRoomError); refused:
   * one the leader sends, refused for want of free space (before its first byte, or when
   * the volume ran out midway) or of memory (`refusedFor`); the leader sends it again later.
   */
  readonly kind: 'begun' | 'taken' | 'abandoned' | 'no_room' | 'refused' | 'installed' |
    'restored';
  readonly index: number;
  readonly dataBytes: number;
  /** From its start to its end (taken: until durable; installed: receipt complete to restored). */
  readonly ms: number;
  /** Why, for no_room and refused. */
  readonly detail?: string;
  /** For refused: what this node has too little of to take it. */
  readonly refusedFor?: 'space' | 'memory';
}

type Settle<T> = (result: ServiceResult<T>) => void;

/** Whoever waits for a write: a call's sink, or an operator write's Promise (`applied`). */
type WriteWaiter = CallSink & { applied?(): void };

interface PendingWrite {
  /** The command the entry carries (docs/codec.md). */
  readonly command: Uint8Array;
  readonly waiter: WriteWaiter;
  /** Scheduler time after which the caller gets a 503 (outcome unknown). */
  readonly deadlineMs: number;
  /** Set once the core accepted (or forwarded) it; null while waiting for a leader. */
  seq: number | null;
}

/** A read waiting until this node has applied its read index (thesis §6.4). */
interface PendingRead {
  /** Answers it from the machine now. */
  serve(): void;
  unavailable(result: Unavailable): void;
  readonly deadlineMs: number;
  /** The index this node must apply before answering; -1 while the core has not said. */
  readIndex: number;
}

/** A KV read call: answered straight from the machine into the caller's sink. */
class CallRead implements PendingRead {
  readIndex = -1;
  constructor(private readonly replica: Replica, private readonly command: Uint8Array,
    private readonly sink: CallSink, readonly deadlineMs: number) {}
  serve(): void {
    this.replica.answerRead(this.command, this.sink);
  }
  unavailable(result: Unavailable): void {
    this.sink.unavailable(result);
  }
}

/** An operator read (a quota row, the tenants): its value settles a Promise. */
class ValueRead<T> implements PendingRead {
  readIndex = -1;
  constructor(private readonly run: () => T, private readonly settle: Settle<T>,
    readonly deadlineMs: number) {}
  serve(): void {
    this.settle({ kind: 'done', value: this.run() });
  }
  unavailable(result: Unavailable): void {
    this.settle(result);
  }
}

/** An operator write's waiter: settles a Promise once its entry applied. */
class SettleOnApply implements WriteWaiter {
  constructor(private readonly settle: Settle<void>) {}
  applied(): void {
    this.settle({ kind: 'done', value: undefined });
  }
  answered(): void {
    this.settle({ kind: 'done', value: undefined });
  }
  unavailable(result: Unavailable): void {
    this.settle(result);
  }
  refused(detail: string): void {
    throw new Error(`an operator entry was refused by the machine: ${detail}`);
  }
}

function unavailable(reason: UnavailableReason, detail: string): Unavailable {
  return { kind: 'unavailable', reason, detail, retryAfterSeconds: RETRY_AFTER_SECONDS };
}


/** Request ids an incarnation may take per millisecond of its life without reusing any. */
const REQUEST_IDS_PER_MS = 1024;

/**
 * The first id an incarnation started at `nowMs` gives its read-index and membership
 * requests. A leader may answer a request after the node that asked restarted (the answer
 * waited in an outbox or on a slow link); when every incarnation counted from 1, such an
 * answer matched a new request and a follower served a read at an index from before its
 * restart: a stale read. Counting from its start time, an incarnation never takes an id a
 * later one takes unless it asked more than 1,024 times per millisecond of its life (or the
 * clock was set back across the restart).
 */
export function firstRequestId(nowMs: number): number {
  return Math.max(0, Math.floor(nowMs)) * REQUEST_IDS_PER_MS + 1;
}

export class Replica implements KvService, MembersService {
  private core!: RaftCore;
  private readonly membership: Membership;
  private readonly origin: Origin;
  private nextSeq = 1;
  private nextReadId: number;
  private readonly writesBySeq = new SeqTable<PendingWrite>();
  /**
   * Writes waiting for a leader to be known, or for a new leader to know its voters' clocks
   * (`clockWait`), in arrival order.
   */
  private readonly writesAwaitingLeader: PendingWrite[] = [];
  private readonly reads = new SeqTable<PendingRead>();
  private readonly readsAwaitingLeader: number[] = [];
  private pumping = false;
  /** A pump waits for the end of this turn (`pumpSoon`). */
  private pumpScheduled = false;
  private state: 'starting' | 'running' | 'stopping' | 'stopped' = 'starting';
  private tickTimer: TimerHandle | null = null;
  private sweepTimer: TimerHandle | null = null;
  /** The last sweep this node proposed as leader: its log index and term (0, 0 before any). */
  private sweepProposed = { index: 0, term: 0 };
  private readonly checkpoints: CheckpointSchedule;
  private snapshotIndex = 0;
  /** The term of the last applied entry, for the meta of the next snapshot. */
  private appliedTerm = 0;
  private logBytesSinceSnapshot = 0;
  /** Bytes of the last snapshot begun, restored or installed (0: none yet). */
  private lastSnapshotBytes = 0;
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
  /** The last entry handed to storage: what the next fsync makes durable. */
  private lastWritten = { index: 0, term: 0 };
  /** Something was handed to storage since the last fsync started. */
  private storageDirty = false;
  /** The fsync in flight, if any. */
  private syncInFlight: Promise<void> | null = null;
  private syncsStarted = 0;
  private syncsDone = 0;
  /** The last index the last fsync started covers: the next one covers what follows. */
  private syncStartedThrough = 0;
  /** Whether each fsync runs on the event loop or the thread pool. */
  private readonly syncPlacement = new SyncPlacement();
  private readonly endSyncTurn = (): void => this.syncPlacement.endTurn();
  private readonly endSyncTurnSoon = (): void => this.deps.scheduler.soon(this.endSyncTurn);
  /** Messages of taken Readies waiting for the fsync numbered `afterSync`, oldest first. */
  private readonly messagesAwaitingSync: AwaitingSync[] = [];
  /** A received snapshot being installed: Readies wait until it is done. */
  private installing: Promise<void> | null = null;
  /** The newest durable snapshot, with the digest of the state it holds (for exports). */
  private exportable: { meta: SnapshotMeta; digest: string } | null = null;
  /** An export wants a snapshot now, due or not (`snapshotForExport`). */
  private exportWanted = false;
  /** The memory budget in force, and the member whose it is (null: this node's own). */
  private stateBudget: { member: string | null; bytes: number } = { member: null, bytes: 0 };
  /** Refusals of a leader's snapshot for want of room reported so far (the core counts). */
  private snapshotRefusalsSeen = 0;
  /** Storage's room for a snapshot from the leader, as last read (once a tick). */
  private volumeSnapshotRoom = Number.POSITIVE_INFINITY;
  /**
   * Why this node holds back from catching up, or null: it takes neither the leader's
   * entries (`onFrame`) nor its snapshots meanwhile. `memory`: a member holds more state
   * than this node's memory can restore, and this node less (that member's state), so
   * catching up would take it past its memory. `space`: this node is a learner below
   * HIVEKV_MIN_FREE_BYTES free, and writing the cluster's entries would run its volume out.
   */
  private catchUpHold: CatchUpHold | null = null;
  /**
   * Leader: the members it sends heartbeats only, as last told to the core. A node that
   * stops leading keeps it, as its core does (it sends appends only as leader); the first
   * tick of a later term brings both up to date.
   */
  private replicationPaused: ReadonlySet<string> = new Set();
  /** Why the last snapshot this node began was not taken for want of room; null if it was. */
  private snapshotNoRoom: string | null = null;
  /** A new leader stamps nothing until it knows a majority of the voters' clocks. */
  private readonly clockWait: LeaderClockWait;

  constructor(
    private readonly options: ReplicaOptions,
    private readonly deps: ReplicaDeps,
  ) {
    this.origin = { nodeId: options.id, incarnation: options.incarnation };
    const firstId = firstRequestId(deps.scheduler.nowMs());
    this.nextReadId = firstId;
    deps.machine.setOrigin(options.id, options.incarnation);
    if (options.requestLimits !== undefined) deps.machine.setRequestLimits(options.requestLimits);
    this.stateBudget = { member: null, bytes: this.maxStateBytes };
    deps.machine.setGrowthBudget(this.maxStateBytes);
    this.membership = new Membership({
      selfId: options.id, peerLink: options.peerLink, bootstrapPeers: options.peers,
      tickMs: options.tickMs, electionTicks: options.electionTicks,
      requestTimeoutMs: options.requestTimeoutMs, firstRequestId: firstId,
    }, { core: () => this.core, transport: deps.transport, scheduler: deps.scheduler,
      pump: () => this.pump(), isRunning: () => this.state === 'running' });
    this.checkpoints = new CheckpointSchedule(options.digestEvery ?? DIGEST_EVERY_DEFAULT);
    const clock = deps.stampClock;
    this.clockWait = new LeaderClockWait(
      clock?.knowsMajority === undefined ? undefined
        : { knowsMajority: () => clock.knowsMajority!() },
      Math.ceil(LEADER_CLOCK_WAIT_MS / options.tickMs),
      (ticks) => deps.onClockWaitedOut?.(ticks * options.tickMs));
    const bytesPerSecond = options.snapshotBytesPerSec ?? 0;
    this.snapshotter = new Snapshotter(deps.machine, deps.storage, SNAPSHOT_SLICE_BYTES,
      bytesPerSecond <= 0 ? null : {
        bytesPerSecond, scheduler: deps.scheduler,
        // Counted from the snapshot's begin: maybeSnapshot starts the count again there.
        logOutgrew: () => this.logBytesSinceSnapshot >= options.snapshotEveryBytes,
      });
    this.receiver = new SnapshotReceiver(deps.storage);
    this.chunkSender = new ChunkSender(deps.storage,
      (message) => this.deps.transport.send(message.to, encodeMessage(message)),
      () => undefined);
  }

  /** Recovers the log and the machine, joins the cluster and starts the timers. */
  async start(): Promise<void> {
    // The snapshot is restored while storage reads and checks the log (on another core when
    // it can): the two longest steps of a start overlap.
    const recovered = await this.deps.storage.recover(async (snapshot) => {
      if (snapshot === null) return;
      const startMs = this.deps.scheduler.nowMs();
      await this.restoreSnapshot(snapshot);
      this.noteSnapshot('restored', snapshot, startMs);
      this.deps.onStartPhase?.('snapshot restored');
    });
    // The log a restart replays counts toward the next snapshot, as it did before the stop.
    for (const entry of recovered.entries) this.logBytesSinceSnapshot += entryBytes(entry);
    const last = recovered.entries.at(-1);
    this.lastWritten = last !== undefined ? { index: last.index, term: last.term }
      : { index: recovered.snapshot?.meta.index ?? 0, term: recovered.snapshot?.meta.term ?? 0 };
    this.core = createRaft({
      id: this.options.id,
      voters: this.options.voters,
      peers: this.options.peers.map((p) => ({ id: p.id, address: `${p.host}:${p.port}` })),
      electionTicks: this.options.electionTicks,
      heartbeatTicks: 1,
      seed: this.options.seed,
      maxInflightAppends: this.options.maxInflightAppends ?? 64,
      maxEntriesBytesPerAppend: this.options.maxEntriesBytesPerAppend ??
        RAFT_FRAME_SETTINGS.maxEntriesBytesPerAppend,
      maxSnapshotChunkBytes: this.options.maxSnapshotChunkBytes ??
        RAFT_FRAME_SETTINGS.maxSnapshotChunkBytes,
      preVote: true,
      checkQuorum: true,
      testOnlyCommitWithoutCurrentTermRule: this.options.testOnlyCommitWithoutCurrentTermRule,
    }, {
      hardState: recovered.hardState,
      snapshot: recovered.snapshot?.meta ?? null,
      snapshotDataBytes: recovered.snapshot?.dataBytes ?? null,
      entries: recovered.entries,
    });
    this.deps.onStartPhase?.('raft log loaded');
    this.membership.syncPeers();
    await this.deps.transport.start((from, frame) => this.onFrame(from, frame));
    this.state = 'running';
    // Before the first frame is stepped: a leader's entries may come before the first tick.
    this.refreshCatchUpHold();
    this.scheduleTick();
    this.scheduleSweep();
    this.core.tick();
    this.pump();
    this.deps.onStartPhase?.('log applied');
  }

  // ---------------------------------------------------------------- KvService

  parse(frame: RequestFrame): ParseOutcome {
    return this.deps.machine.parseRequest(frame);
  }

  submit(call: SubmittedCall, sink: CallSink): void {
    const deadlineMs = this.deps.scheduler.nowMs() + this.options.requestTimeoutMs;
    if (!call.hasWrites) {
      this.read(new CallRead(this, call.command, sink, deadlineMs));
      return;
    }
    if (call.growthBytes > 0 && this.memoryFull(call.growthBytes)) {
      const member = this.stateBudget.member;
      sink.unavailable(unavailable('memory_full', `the state is at ${member === null ? 'its'
        : `member ${member}'s`} memory budget (HIVEKV_MAX_STATE_BYTES): writes that grow it ` +
        'are refused; deletes, shrinking writes and reads work'));
      return;
    }
    this.write(call.command, sink, deadlineMs);
  }

  /** Answers a read command from the machine now, into `sink` (a view of wasm memory). */
  answerRead(command: Uint8Array, sink: CallSink): void {
    this.deps.machine.readCommandInto(command, this.readTimeMs(), sink);
  }

  setPaused(paused: boolean): Promise<ServiceResult<void>> {
    return this.operatorWrite({ kind: 'setPaused', paused });
  }

  setQuota(tenant: string, quota: QuotaSettings): Promise<ServiceResult<void>> {
    return this.operatorWrite({ kind: 'setQuota', tenant, quota });
  }

  private operatorWrite(command: Command): Promise<ServiceResult<void>> {
    return new Promise((resolve) => this.write(encodeCommand(command), new SettleOnApply(resolve),
      this.deps.scheduler.nowMs() + this.options.requestTimeoutMs));
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

  /** The state's memory budget, in bytes: this node's own (HIVEKV_MAX_STATE_BYTES). */
  get maxStateBytes(): number {
    return this.options.maxStateBytes ?? MAX_STATE_BYTES_DEFAULT;
  }

  /**
   * Follows the smallest budget among the members (read once a tick): every replica holds
   * the same state, so a member with less memory would grow past its own budget on writes
   * admitted under this node's. The machine's growth estimate starts at the budget in force.
   */
  private refreshStateBudget(): void {
    const smallest = this.deps.memberStateBudget?.() ?? null;
    const next = smallest !== null && smallest.bytes < this.maxStateBytes ? smallest
      : { member: null, bytes: this.maxStateBytes };
    if (next.bytes === this.stateBudget.bytes && next.member === this.stateBudget.member) return;
    this.stateBudget = next;
    this.deps.machine.setGrowthBudget(next.bytes);
  }

  /**
   * Reads storage's room for a snapshot from the leader (once a tick), and reports each
   * snapshot the core refused: this node stays behind its leader until it has room, and says
   * so, instead of running its volume out midway and stopping, or being killed for memory at
   * the install and again at every restart.
   */
  private refreshSnapshotRoom(): void {
    if (this.core.leaderTerm() !== -1) return;
    this.volumeSnapshotRoom = this.readStorage(() => this.deps.storage.snapshotRoomBytes(), 0);
    if (this.state !== 'running') return;
    this.refreshCatchUpHold();
    const refusal = this.core.lastSnapshotRefusal();
    if (refusal === null || refusal.count === this.snapshotRefusalsSeen) return;
    this.snapshotRefusalsSeen = refusal.count;
    const hold = this.catchUpHold;
    const forMemory = hold !== null ? hold.want === 'memory'
      : refusal.totalBytes > this.restoreRoomBytes;
    const needs = `it needs ${refusal.totalBytes} bytes`;
    this.noteSnapshot('refused', { meta: refusal.meta, dataBytes: refusal.totalBytes },
      this.deps.scheduler.nowMs(), hold?.want === 'space' ? `${needs}; ${LEARNER_SPACE_TEXT}`
        : !forMemory ? `${needs}; the volume has room for ${refusal.roomBytes} (free space ` +
          'less 4 MiB kept spare)'
        : `${hold?.want === 'memory' ? `a member holds a state of ${hold.stateBytes} bytes`
          : needs}; ${this.restoreRoomText()}`, forMemory ? 'memory' : 'space');
  }

  /** The largest state from a leader this node's memory restores (memory-budget.ts). */
  private get restoreRoomBytes(): number {
    return this.options.restoreRoomBytes ?? Number.POSITIVE_INFINITY;
  }

  private restoreRoomText(): string {
    return `this node restores a state of at most ${this.restoreRoomBytes} (` +
      `${this.restoreRoomBytes === this.maxStateBytes ? 'its memory budget, ' +
        'HIVEKV_MAX_STATE_BYTES' : 'half the memory its process may use'})`;
  }

  /**
   * Holds the leader's entries and snapshots (`catchUpHold`) while a member holds more state
   * than this node's memory restores and this node less (memory-budget.ts
   * `catchUpHeldFor`), or while this node is a learner low on space; says when a hold starts,
   * changes its reason, and ends; tells the core the largest snapshot it takes. At start, on
   * each member status and once a tick: so before the first entry a leader sends, and within
   * a status of a change. A leader holds nothing.
   */
  private refreshCatchUpHold(): void {
    const memoryRoom = this.restoreRoomBytes;
    const following = this.core.leaderTerm() === -1;
    const learner = following && this.membership.localRole() === 'learner';
    // A learner's budget binds no member's writes (cluster-status.ts, `smallestStateBudget`),
    // so the state may outgrow it: a learner holds back past its budget, whatever it holds.
    const room = learner ? Math.min(memoryRoom, this.maxStateBytes) : memoryRoom;
    // Memory unknown (no bound): no member's state is too large, and nothing is read.
    const largest = following && Number.isFinite(room)
      ? this.deps.largestMemberState?.() ?? null : null;
    const held = learner ? this.learnerHeldAt(largest, room)
      : catchUpHeldFor(largest?.bytes ?? null, room,
        () => this.deps.machine.memoryUse().stateBytes);
    const hold: CatchUpHold | null = held !== null ? { want: 'memory', stateBytes: held }
      : learner && this.storageFull() ? { want: 'space' } : null;
    const was = this.catchUpHold;
    this.catchUpHold = hold;
    this.core.setSnapshotRoom(hold !== null ? 0 : Math.min(this.volumeSnapshotRoom, memoryRoom));
    if ((was?.want ?? null) === (hold?.want ?? null)) return;
    this.deps.onCatchUpHeld?.(hold === null ? null : hold.want === 'space'
      ? { want: 'space', detail: LEARNER_SPACE_TEXT }
      : { want: 'memory', detail: `member ${largest!.member} holds a state of ` +
        `${hold.stateBytes} bytes; ${learner ? `this node is a learner and its memory ` +
          `budget is ${room} (HIVEKV_MAX_STATE_BYTES): the cluster's writes go on without it`
          : this.restoreRoomText()}` });
  }

  /**
   * A learner's state past its budget, or null: the newer of its own state and the largest
   * a member said it holds. A member's status is up to a second old; a learner as far along
   * as that member knows the state better, so it stops within a tick of passing its budget
   * rather than a status later. Once it holds, the members move past it, and their statuses
   * say whether the state still passes its budget (deletes may have shrunk it).
   */
  private learnerHeldAt(largest: { readonly bytes: number; readonly appliedIndex?: number } |
    null, budget: number): number | null {
    const machine = this.deps.machine;
    const newer = largest === null || (largest.appliedIndex !== undefined &&
      machine.appliedIndex >= largest.appliedIndex)
      ? Math.max(machine.memoryUse().stateBytes, largest?.bytes ?? 0) : largest.bytes;
    return newer > budget ? newer : null;
  }

  /** What this node holds back from catching up for, or null (`refreshCatchUpHold`). */
  catchUpHeldFor(): CatchUpHold['want'] | null {
    return this.catchUpHold?.want ?? null;
  }

  /**
   * Leader, once a tick: the members that hold back from catching up are sent heartbeats
   * only. They would drop every entry and refuse every snapshot, and each heartbeat's answer
   * would bring them another probe of up to 1 MiB: 19 MB a second to one such member.
   */
  private refreshReplicationPaused(): void {
    if (this.core.leaderTerm() === -1) return;
    const holding = this.deps.membersHoldingCatchUp?.() ?? NO_MEMBERS;
    const paused = this.replicationPaused;
    const begun = holding.filter((member) => !paused.has(member));
    const ended = [...paused].filter((member) => !holding.includes(member));
    if (begun.length === 0 && ended.length === 0) return;
    this.replicationPaused = new Set(holding);
    this.core.setReplicationPaused(holding);
    for (const member of begun) this.deps.onReplicationPaused?.(member, true);
    for (const member of ended) this.deps.onReplicationPaused?.(member, false);
  }

  /**
   * Storage refused the bytes of snapshot `index` from the leader midway (its volume ran
   * out): nothing of it is left, and the core forgets it, so the leader sends it again from
   * the start. The core installs a snapshot only once every byte of it is written, so this
   * never comes too late.
   */
  private abandonRefusedSnapshot(refused: RefusedSnapshot): void {
    if (!this.core.abandonReceivedSnapshot(refused.index)) return;
    this.noteSnapshot('refused', { meta: { index: refused.index },
      dataBytes: refused.totalBytes }, this.deps.scheduler.nowMs(),
    'the volume ran out of room for it midway', 'space');
  }

  /**
   * True when a call that would change the state by `growthBytes` (negative: shrink) must
   * be refused because the state is at its memory budget (memory-budget.ts).
   */
  memoryFull(growthBytes: number): boolean {
    return memoryFull(this.deps.machine.memoryUse(), this.stateBudget.bytes, growthBytes);
  }

  health(): NodeHealth {
    const status = this.core?.status();
    const member = this.core === undefined ? 'voter' : this.membership.localRole();
    return {
      status: this.state === 'running' ? 'ok' : this.state === 'starting' ? 'starting' : 'stopping',
      id: this.options.id,
      role: member === 'voter' ? status?.role ?? 'follower' : member,
      leader: status?.leader ?? null,
      term: status?.term ?? 0,
      commitIndex: status?.commitIndex ?? 0,
      appliedIndex: this.deps.machine.appliedIndex,
      digest: this.deps.machine.digest(),
      clusterId: this.options.clusterId ?? '',
      stateBytes: this.deps.machine.memoryUse().stateBytes,
      stateBytesMax: this.maxStateBytes,
    };
  }

  /**
   * The members this node knows, itself included: the voters and learners of the
   * configuration in effect (thesis §4.1), which changes with membership changes.
   */
  members(): readonly string[] {
    if (this.core === undefined) return [this.options.id];
    const { config } = this.core.configuration();
    const ids = [...config.voters, ...config.learners];
    return ids.includes(this.options.id) ? ids : [...ids, this.options.id];
  }

  /** The voters of the configuration in effect (the starting voters before the core runs). */
  voters(): readonly string[] {
    if (this.core === undefined) return this.options.voters;
    return this.core.configuration().config.voters;
  }

  /** The consensus core's view: role, leader, term, commit and last log index. */
  raftStatus(): ReturnType<RaftCore['status']> {
    return this.core.status();
  }

  membersView(): MembersView {
    return this.membership.view();
  }

  /** The configuration in effect on this node: the newest in its log (thesis §4.1). */
  configuration(): Configuration {
    return this.core.configuration().config;
  }

  /** The configuration as of the commit index: what no new leader can take back. */
  committedConfiguration(): Configuration {
    return this.core.configurationAt(this.core.status().commitIndex);
  }

  changeMembers(change: MembershipChange): Promise<MembersResult> {
    return this.membership.change(change);
  }

  /** Hands leadership to another member if this node leads; resolves once it does not. */
  async transferLeadership(waitMs: number): Promise<void> {
    const status = this.core.status();
    if (status.role !== 'leader') return;
    const target = this.membership.transferTarget();
    if (target === null) return;
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
    this.failEverything();
    this.membership.failAll('the node is shutting down');
    for (let i = 0; i < 200 && (this.pumping || this.installing !== null ||
      this.syncInFlight !== null); i++) {
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

  private write(command: Uint8Array, waiter: WriteWaiter, deadlineMs: number): void {
    const refusal = this.admissionRefusal(true);
    if (refusal !== null) {
      waiter.unavailable(refusal);
      return;
    }
    this.proposeOrQueue({ command, waiter, seq: null, deadlineMs });
    this.pumpSoon();
  }

  /** Runs `run` once this node has applied everything committed when it was asked (§6.4). */
  linearizableRead<T>(run: () => T): Promise<ServiceResult<T>> {
    return new Promise((resolve) => this.read(new ValueRead(run, resolve,
      this.deps.scheduler.nowMs() + this.options.requestTimeoutMs)));
  }

  /** Serves `read` at once when this node may, else after a read-index round. */
  private read(read: PendingRead): void {
    const refusal = this.admissionRefusal(false);
    if (refusal !== null) {
      read.unavailable(refusal);
      return;
    }
    if (this.isSoleLeaderCaughtUp()) {
      read.serve();
      return;
    }
    const requestId = this.nextReadId++;
    this.reads.set(requestId, read);
    if (this.core.status().leader === null) this.readsAwaitingLeader.push(requestId);
    else this.core.readIndex(requestId);
    this.pumpSoon();
  }

  /**
   * A single-voter leader cannot be deposed, so once it has applied an entry of its own term
   * and everything it committed, its state already reflects every acknowledged write: a read
   * needs no read-index round (§6.4 answers the same index at once).
   */
  private isSoleLeaderCaughtUp(): boolean {
    if (this.core.configuration().config.voters.length !== 1) return false;
    const status = this.core.status();
    return status.role === 'leader' && this.appliedTerm === status.term &&
      this.deps.machine.appliedIndex >= status.commitIndex;
  }

  private admissionRefusal(isWrite: boolean): Unavailable | null {
    if (this.state !== 'running') return unavailable('shutting_down', 'the node is not serving');
    const member = this.membership.localRole();
    if (member === 'joining' || member === 'removed') {
      return unavailable('not_a_member', member === 'joining'
        ? 'this node waits to be added to the cluster (POST /api/v1/system/members)'
        : 'this node was removed from the cluster; it serves nothing');
    }
    if (this.pendingCount() >= PENDING_REQUESTS_MAX) {
      return unavailable('overloaded', 'too many requests waiting on this node');
    }
    if (isWrite && this.lowOnSpace()) {
      return unavailable('storage_full', 'the data directory is low on free space');
    }
    const full = isWrite ? this.deps.membersStorageFull?.() : undefined;
    if (full !== undefined && full.length > 0) {
      return unavailable('storage_full', `the data directory of member ${full.join(', ')} is ` +
        'low on free space: every member holds every entry');
    }
    return this.state === 'running' ? null
      : unavailable('shutting_down', 'the node stopped: its data directory failed');
  }

  /** Whether this node's data directory is below HIVEKV_MIN_FREE_BYTES (for its status). */
  storageFull(): boolean {
    return this.state === 'running' && this.lowOnSpace();
  }

  /**
   * The free-space check of an admitted write. A data directory that cannot even be checked
   * (deleted or unmounted under a running node) cannot keep what the node would acknowledge:
   * the node stops, as on any storage failure, instead of answering every write with a 500.
   */
  private lowOnSpace(): boolean {
    return this.readStorage(() => this.deps.storage.isLowOnSpace(), false);
  }

  /** A reading of the data directory's free space; `fallback` once the node stops on it. */
  private readStorage<T>(read: () => T, fallback: T): T {
    try {
      return read();
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      this.stopOnFatal(new Error(`the data directory cannot be checked (${reason}): the node ` +
        'stops rather than acknowledge writes it may not keep', { cause: error }));
      return fallback;
    }
  }

  private proposeOrQueue(pending: PendingWrite): void {
    if (!this.clockKnown()) {
      this.writesAwaitingLeader.push(pending);
      return;
    }
    const seq = this.nextSeq++;
    const data = encodeEnvelope(this.origin, seq, pending.command);
    const result = this.core.propose(data, this.stampMs());
    if (result.kind === 'dropped') {
      this.nextSeq--;
      if (result.reason === 'no-leader' || result.reason === 'transferring') {
        this.writesAwaitingLeader.push(pending);
        return;
      }
      pending.waiter.unavailable(unavailable('overloaded', result.reason === 'busy'
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
    for (const [seq, pending] of this.writesBySeq.entries()) {
      if (pending.deadlineMs > now) continue;
      this.writesBySeq.take(seq);
      pending.waiter.unavailable(timedOut);
    }
    for (let i = this.writesAwaitingLeader.length - 1; i >= 0; i--) {
      const pending = this.writesAwaitingLeader[i];
      if (pending === undefined || pending.deadlineMs > now) continue;
      this.writesAwaitingLeader.splice(i, 1);
      pending.waiter.unavailable(unavailable('no_leader', this.notProposedDetail()));
    }
    for (const [requestId, pending] of this.reads.entries()) {
      if (pending.deadlineMs > now) continue;
      this.reads.take(requestId);
      const detail = 'the cluster did not confirm a read index in time';
      pending.unavailable(unavailable('timeout', detail));
    }
  }

  /** Why a write that waited for a leader was not proposed by its deadline. */
  private notProposedDetail(): string {
    const leaderTerm = this.core.leaderTerm();
    if (leaderTerm < 0) return 'no leader was elected in time';
    return this.clockWait.waiting(leaderTerm)
      ? 'the new leader had not yet heard its voters\' clocks: the write was not proposed'
      : 'leadership was being handed over: the write was not proposed';
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

  /**
   * At stop, answers every call still waiting. A write already proposed may yet commit
   * through the other members, or be found in this node's log when it restarts: its outcome
   * is unknown (503 `timeout`), and a client must not send it again as a new write. A write
   * that waited for a leader was never proposed, and a read changes nothing: 503
   * `shutting_down`, which another node may be asked as it is.
   */
  private failEverything(): void {
    const unknown = unavailable('timeout', 'the node stopped before the write was answered: ' +
      'its outcome is unknown');
    for (const pending of this.writesBySeq.drain()) pending.waiter.unavailable(unknown);
    const refused = unavailable('shutting_down', 'the node is shutting down');
    const notProposed = this.writesAwaitingLeader.splice(0);
    for (const pending of notProposed) pending.waiter.unavailable(refused);
    const reads = this.reads.drain();
    this.readsAwaitingLeader.length = 0;
    for (const pending of reads) pending.unavailable(refused);
  }

  /** A read evaluates expiry at max(local clock, last applied stamp) (DESIGN.md). */
  private readTimeMs(): number {
    return Math.max(this.stampMs(), this.deps.machine.lastTimeMs);
  }

  /** Whether this node may stamp a proposal now (leader-clock-wait.ts). */
  private clockKnown(): boolean {
    return this.clockWait.mayStamp(this.core.leaderTerm());
  }

  /** The time a proposal is stamped with and expiry judged by (`ReplicaDeps.stampClock`). */
  private stampMs(): number {
    return this.deps.stampClock?.nowMs() ?? this.deps.scheduler.nowMs();
  }

  // ---------------------------------------------------------------- the loop

  private onFrame(from: string, frame: Uint8Array): void {
    if (this.state !== 'running') return;
    if (this.deps.sideFrames?.accept(from, frame) === true) {
      this.refreshCatchUpHold();
      return;
    }
    const message = decodeMessage(frame);
    if (message === null || message.from !== from) return;
    // Dropped as a lost frame would be: the leader sends them again once they are taken.
    if (this.catchUpHold !== null && message.type === 'append' && message.entries.length > 0) {
      return;
    }
    this.core.step(message.type === 'propose' ? this.ownClockAtMost(message) : message);
    this.pumpSoon();
  }

  /**
   * A proposal forwarded by a follower carries the follower's clock, which stamps the entry
   * (stamps never go back). A follower whose clock ran a year ahead would expire every key
   * with a lifetime on every node at once, and leave new lifetimes a year long: the stamp
   * takes this node's stamping clock where the follower's is ahead of it.
   */
  private ownClockAtMost(message: ProposeMessage): ProposeMessage {
    const nowMs = this.stampMs();
    return message.nowMs <= nowMs ? message : { ...message, nowMs };
  }

  private scheduleTick(): void {
    this.tickTimer = this.deps.scheduler.after(this.options.tickMs, () => {
      if (this.state !== 'running') return;
      this.core.tick();
      this.refreshStateBudget();
      this.refreshSnapshotRoom();
      this.refreshReplicationPaused();
      // Writes held for a new leader's clock go out the tick it knows its voters' clocks.
      if (this.clockWait.tick(this.core.leaderTerm()) && this.writesAwaitingLeader.length > 0) {
        this.releaseAwaitingLeader();
      }
      this.expireOverdue();
      this.proposeCheckpointWhenDue();
      this.pump();
      this.scheduleTick();
    });
  }

  private scheduleSweep(): void {
    this.sweepTimer = this.deps.scheduler.after(this.options.expireEveryMs, () => {
      if (this.state !== 'running') return;
      const status = this.core.status();
      if (status.role === 'leader' && this.clockKnown() && this.sweepDue() &&
        this.pendingCount() < PENDING_REQUESTS_MAX) {
        const command = encodeCommand({ kind: 'sweep', maxKeys: this.options.expireBatch });
        const seq = this.nextSeq++;
        const result = this.core.propose(encodeEnvelope(this.origin, seq, command),
          this.stampMs());
        if (result.kind === 'proposed') {
          this.sweepProposed = { index: result.index, term: result.term };
        }
        this.pump();
      }
      this.scheduleSweep();
    });
  }

  /** A leader's checkpoint: its digest at its applied index, for every replica to compare. */
  private proposeCheckpointWhenDue(): void {
    const status = this.core.status();
    const applied = this.deps.machine.appliedIndex;
    if (!this.checkpoints.due(status.role, status.term, applied, status.lastIndex)) return;
    if (!this.clockKnown()) return;
    const command = encodeCommand({ kind: 'checkpoint', index: applied,
      digest: this.deps.machine.digest() });
    const result = this.core.propose(encodeEnvelope(this.origin, this.nextSeq++, command),
      this.stampMs());
    if (result.kind === 'proposed') {
      this.checkpoints.noteProposed(applied, result.index, result.term);
    }
  }

  /**
   * A sweep is due once the clock reaches the machine's next expiry (an entry stamped
   * earlier would remove nothing), and once the last sweep this node proposed is applied
   * (a leader that cannot commit piles up no sweeps) or was proposed in an earlier term (its
   * index may never be reached if that term's tail was dropped).
   */
  private sweepDue(): boolean {
    const next = this.deps.machine.nextExpiryMs();
    const last = this.sweepProposed;
    const settled = this.deps.machine.appliedIndex >= last.index ||
      this.core.status().term !== last.term;
    return next !== null && this.stampMs() >= next && settled;
  }

  /**
   * Pumps now when the disk is idle (a lone call's fsync starts at once), else once the
   * calls and peer frames of this turn have all been stepped: their entries could not reach
   * the disk before the fsync in flight ends anyway. A Ready per call made a leader send each
   * follower one append per put (with `n` puts in a turn, `n` messages to decode, `n` WAL
   * appends and `n` answers on every follower, and `n` answers for the leader to step); one
   * Ready per turn carries them all in one.
   */
  private pumpSoon(): void {
    if (this.pumpScheduled) return;
    if (this.syncInFlight === null) {
      this.pump();
      return;
    }
    this.pumpScheduled = true;
    this.deps.scheduler.soon(this.pumpScheduledRun);
  }

  private readonly pumpScheduledRun = (): void => {
    this.pumpScheduled = false;
    this.pump();
  };

  /** Takes every Ready the core has, then starts an fsync if one is due. Never re-enters. */
  private pump(): void {
    if (this.pumping || this.state === 'stopped') return;
    this.pumping = true;
    try {
      // `running()` re-reads the state: taking a Ready can stop the node.
      while (this.running() && this.installing === null && this.core.hasReady()) {
        const ready = this.core.ready();
        this.membership.syncPeers();
        if (ready.snapshot !== null || ready.receivedSnapshot.length > 0) {
          this.takeSnapshotReady(ready);
        } else {
          this.takeReady(ready);
        }
      }
      this.startSync();
      this.compactWhenIdle();
      this.maybeSnapshot();
    } catch (error) {
      this.stopOnFatal(error);
    } finally {
      this.pumping = false;
    }
  }

  private running(): boolean {
    return this.state !== 'stopped';
  }

  private stopOnFatal(error: unknown): void {
    if (this.state === 'stopped') return;
    this.state = 'stopped';
    this.deps.onFatal(error instanceof Error ? error : new Error(String(error)));
  }

  /** Steps 1 to 4 of the Ready order (file comment); step 5 is `onSynced`. */
  private takeReady(ready: Ready, earlySent = false): void {
    if (!earlySent) this.sendAll(ready.earlyMessages);
    this.applyCommitted(ready.committedEntries);
    this.serveReads();
    this.handToStorage(ready);
    // The fsync starts before the rest of the Ready is taken: at one connection its hand-off
    // to the thread pool is on every put's path.
    this.startSync();
    // Every message waits for every write handed over before it, its own Ready's included:
    // a message carries the current term, which an earlier Ready may have just raised.
    const afterSync = this.storageDirty ? this.syncsStarted + 1
      : this.syncInFlight !== null ? this.syncsStarted : 0;
    if (ready.messages.length > 0) {
      if (afterSync <= this.syncsDone) this.sendAll(thinAppendAnswers(ready.messages));
      else this.messagesAwaitingSync.push({ messages: ready.messages, afterSync });
    }
    this.noteReadStates(ready);
    this.membership.onAnswers(ready.membershipAnswers);
    this.core.advance(ready);
    this.noteSoftState(ready);
    this.serveReads();
  }

  /** Hard state first, then entries (storage.ts). */
  private handToStorage(ready: Ready): void {
    const { storage } = this.deps;
    if (ready.hardState !== null) storage.setHardState(ready.hardState);
    const last = ready.entries.at(-1);
    if (last !== undefined) {
      storage.append(ready.entries);
      for (const entry of ready.entries) this.logBytesSinceSnapshot += entryBytes(entry);
      this.lastWritten = { index: last.index, term: last.term };
    }
    if (ready.hardState === null && last === undefined) return;
    this.storageDirty = true;
    storage.startWrite();
  }

  /** Starts the next fsync when something waits for one and none is in flight. */
  private startSync(): void {
    if (this.syncInFlight !== null || !this.storageDirty || this.state === 'stopped') return;
    this.storageDirty = false;
    const ticket = ++this.syncsStarted;
    const covered = this.lastWritten;
    const onLoop = this.syncPlacement.place(covered.index - this.syncStartedThrough,
      this.endSyncTurnSoon);
    this.syncStartedThrough = covered.index;
    // A leader's appends of this turn leave before an fsync blocks the loop, so that the
    // followers' fsyncs run beside its own; held to the end of the turn, they waited for it.
    if (onLoop) this.deps.transport.flush();
    this.syncInFlight = this.deps.storage.sync({ onLoop }).then(
      () => this.onSynced(ticket, covered),
      (error: unknown) => {
        this.syncInFlight = null;
        this.stopOnFatal(error);
      },
    );
  }

  /** Step 5: what the fsync `ticket` covered is durable. */
  private onSynced(ticket: number, covered: { index: number; term: number }): void {
    this.syncInFlight = null;
    this.syncsDone = ticket;
    if (this.state === 'stopped') return;
    // What this fsync released goes out together, a follower's answers thinned to the ones
    // that tell its leader something.
    this.sendAll(releaseAfterSync(this.messagesAwaitingSync, ticket));
    if (covered.index > 0) this.core.persisted(covered.index, covered.term);
    // Writes handed over while this fsync ran go to the disk now, before this one's calls
    // are applied and answered: the disk is the bottleneck, so it never waits for the CPU.
    this.startSync();
    this.pump();
  }

  /**
   * A Ready that carries chunks of a snapshot from the leader, or the whole of it: a barrier.
   * The chunks are written to their file first (so a leader's transfer never outruns this
   * disk: no later Ready, and so no answer to the next chunk, is taken meanwhile). A whole
   * snapshot then waits until every earlier write is durable, is made durable itself (it
   * drops the log it replaces), this node's own snapshot of a state about to go is dropped,
   * and so is the machine's state, so the restore streaming in from the file never needs two
   * states in memory. Then the rest of the Ready, before any later Ready is taken.
   */
  private takeSnapshotReady(ready: Ready): void {
    const snapshot = ready.snapshot;
    this.sendAll(ready.earlyMessages);
    this.installing = (async () => {
      if (ready.receivedSnapshot.length > 0) {
        const refused = await this.receiver.write(ready.receivedSnapshot);
        if (refused !== null) this.abandonRefusedSnapshot(refused);
      }
      if (snapshot !== null) {
        while (this.syncInFlight !== null || this.storageDirty) {
          this.startSync();
          await this.syncInFlight;
        }
        const startMs = this.deps.scheduler.nowMs();
        await this.receiver.complete(snapshot);
        await this.snapshotter.abort();
        this.deps.machine.clearState();
        await this.restoreSnapshot(snapshot);
        this.lastWritten = { index: snapshot.meta.index, term: snapshot.meta.term };
        this.noteSnapshot('installed', snapshot, startMs);
      }
      if (this.state === 'stopped') return;
      this.takeReady(ready, true);
      // All written: the core installs it once this Ready is done, and the next carries it.
      const whole = ready.receivedSnapshot.length > 0 ? this.receiver.wholeIndex() : -1;
      if (whole !== -1) this.core.snapshotWritten(whole);
    })().then(() => {
      this.installing = null;
      this.pump();
    }, (error: unknown) => {
      this.installing = null;
      this.stopOnFatal(error);
    });
  }

  private sendAll(messages: readonly Message[]): void {
    for (const message of messages) {
      // The core leaves a snapshot chunk's bytes to the driver: they come from storage.
      if (message.type === 'snapshotChunk') this.chunkSender.post(message);
      else this.deps.transport.send(message.to, encodeMessage(message));
    }
  }

  private noteSnapshot(kind: SnapshotEvent['kind'],
    snapshot: { meta: { readonly index: number }; dataBytes: number }, startMs: number,
    detail?: string, refusedFor?: SnapshotEvent['refusedFor']): void {
    this.deps.onSnapshot?.({ kind, index: snapshot.meta.index, dataBytes: snapshot.dataBytes,
      ms: this.deps.scheduler.nowMs() - startMs, ...(detail === undefined ? {} : { detail }),
      ...(refusedFor === undefined ? {} : { refusedFor }) });
  }

  private async restoreSnapshot(snapshot: Snapshot): Promise<void> {
    await restoreMachine(this.deps.storage, this.deps.machine, snapshot);
    this.exportable = { meta: snapshot.meta, digest: this.deps.machine.digest() };
    this.forgetAdminState();
    this.snapshotIndex = snapshot.meta.index;
    this.appliedTerm = snapshot.meta.term;
    this.logBytesSinceSnapshot = 0;
    this.lastSnapshotBytes = snapshot.dataBytes;
    this.membership.onSnapshotRestored(snapshot.meta.index);
  }

  /** Applies committed entries in one crossing; the sink hears what each decided. */
  private applyCommitted(entries: readonly Entry[]): void {
    const { machine } = this.deps;
    let first = 0;
    while (first < entries.length && entries[first]!.index <= machine.appliedIndex) first++;
    if (first === entries.length) return;
    const fresh = first === 0 ? entries : entries.slice(first);
    machine.applyEntries(fresh, this.appliedSink);
    this.appliedTerm = fresh[fresh.length - 1]!.term;
    this.membership.onApplied(fresh, machine.appliedIndex);
    this.deps.onApplied?.(machine.appliedIndex);
  }

  /** What `applyEntries` reports, turned into answers to this node's waiting callers. */
  private readonly appliedSink: AppliedEntrySink = {
    answer: (seq: number, header: AnswerHeader, body: Uint8Array) => {
      const pending = this.writesBySeq.take(seq);
      if (pending === undefined) return;
      pending.waiter.answered(header, body);
    },
    done: (seq: number) => {
      const pending = this.writesBySeq.take(seq);
      if (pending === undefined) return;
      if (pending.waiter.applied !== undefined) pending.waiter.applied();
      else pending.waiter.refused('the entry applied no call');
    },
    admin: () => this.forgetAdminState(),
    swept: (removedKeys: number) => this.deps.onSwept?.(removedKeys),
    checkpoint: (entryIndex, outcome) => {
      if (outcome.verdict === 'diverged') throw new DivergenceError(entryIndex, outcome);
      this.deps.onCheckpoint?.(outcome.verdict);
    },
    invalid: (entryIndex: number, detail: string) => {
      throw new Error(`entry ${entryIndex} was refused by the machine: ${detail}`);
    },
  };

  private noteReadStates(ready: Ready): void {
    for (const { requestId, readIndex } of ready.readStates) {
      const pending = this.reads.get(requestId);
      if (pending === undefined) continue;
      if (readIndex < 0) {
        this.reads.take(requestId);
        const detail = 'leadership changed before the read was confirmed';
        pending.unavailable(unavailable('no_leader', detail));
        continue;
      }
      pending.readIndex = readIndex;
    }
  }

  private serveReads(): void {
    if (this.reads.size === 0) return;
    const applied = this.deps.machine.appliedIndex;
    for (const [requestId, pending] of this.reads.entries()) {
      if (pending.readIndex < 0 || pending.readIndex > applied) continue;
      this.reads.take(requestId);
      pending.serve();
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
    const due = this.exportWanted || snapshotDue({
      everyEntries: this.options.snapshotEveryEntries,
      everyBytes: this.options.snapshotEveryBytes,
      logPercent: this.options.snapshotLogPercent ?? 0,
    }, applied - this.snapshotIndex, this.logBytesSinceSnapshot, this.lastSnapshotBytes);
    if (!due || applied <= this.snapshotIndex || this.snapshotSaving !== null) return;
    const meta: SnapshotMeta = {
      index: applied,
      term: this.appliedTerm,
      timeMs: machine.lastTimeMs,
      // The configuration at the snapshot's index travels with it (thesis §4.1, §7).
      ...this.core.configurationAt(applied),
    };
    const startMs = this.deps.scheduler.nowMs();
    const digest = machine.digest();
    // An export's client waits for this snapshot before its first byte: no pace then.
    const taken = this.snapshotter.take(meta, !this.exportWanted);
    const begun = { meta, dataBytes: this.snapshotter.dataBytes };
    this.noteSnapshot('begun', begun, startMs);
    this.snapshotSaving = taken.then((snapshot) => {
      this.snapshotSaving = null;
      if (snapshot === null) this.noteSnapshot('abandoned', begun, startMs);
      if (snapshot === null || this.state === 'stopped') return;
      this.snapshotNoRoom = null;
      this.noteSnapshot('taken', snapshot, startMs);
      this.exportable = { meta: snapshot.meta, digest };
      this.pendingCompaction = snapshot;
      if (!this.pumping) this.compactWhenIdle();
    }, (error: unknown) => {
      this.snapshotSaving = null;
      if (error instanceof SnapshotNoRoomError) {
        // The log keeps everything the snapshot would have; it is tried again after the
        // next interval, and the log is compacted once there is room.
        this.snapshotNoRoom = error.message;
        this.noteSnapshot('no_room', begun, startMs, error.message);
        return;
      }
      this.state = 'stopped';
      this.deps.onFatal(error instanceof Error ? error : new Error(String(error)));
    });
    this.snapshotIndex = applied;
    this.logBytesSinceSnapshot = 0;
    this.lastSnapshotBytes = begun.dataBytes;
  }

  /**
   * A durable snapshot of the state at `atLeast` or later, with its digest and its bytes,
   * for an export (host/backup/export.ts): the newest one when it is recent enough, else
   * one taken now (entries keep applying meanwhile). The file is read through one open
   * handle, so a newer snapshot pruning it does not cut the read short.
   */
  async snapshotForExport(atLeast: number): Promise<{ meta: SnapshotMeta; digest: string;
    chunks: AsyncIterable<Uint8Array> }> {
    for (let round = 0; round < 8; round++) {
      if (this.state !== 'running') throw new Error('the node is not running');
      const have = this.exportable;
      if (have !== null && have.meta.index >= atLeast) {
        return { ...have, chunks: this.deps.storage.snapshotChunks(have.meta.index,
          EXPORT_CHUNK_BYTES) };
      }
      if (this.installing !== null) {
        await this.installing;
      } else if (this.snapshotSaving !== null) {
        await this.snapshotSaving;
      } else {
        this.exportWanted = true;
        try {
          this.maybeSnapshot();
        } finally {
          this.exportWanted = false;
        }
        if (this.snapshotSaving === null) break;
      }
    }
    throw new Error(`no snapshot at or after index ${atLeast} could be taken` +
      (this.snapshotNoRoom === null ? '' : ` (the last one: ${this.snapshotNoRoom})`));
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
