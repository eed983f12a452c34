/**
 * The simulated cluster: 3 or 5 production `Replica`s (Raft core, driver, WebAssembly
 * machine) in one process over the simulated clock, network and disks, with crashes and
 * restarts, and nodes that join later (`serve --join`). A crashed node's Replica is dropped
 * with its timers; a restart builds a fresh Replica, machine and core over the same disk.
 *
 * The model of operations (what runs the cluster besides the nodes): a supervisor restarts a
 * node that stopped (a crash, a failed fsync) after a short delay; a node whose files are
 * damaged refuses to start and stays down until the operator replaces it through membership
 * changes (operator.ts), with a new id and an empty disk; a removed node is shut down by the
 * operator and never started again (`retired`).
 *
 * The runner is an async loop that runs one event, then lets every pending microtask run
 * (`setImmediate` comes after them), so the driver's promise chains settle at the simulated
 * time of the event that resolved them, and the same seed replays the same run.
 */
import { decodeMessage } from '../../host/core/raft/message-codec.js';
import type { CallOutcome, KvCall } from '../../host/machine/commands.js';
import { outcomeOf } from '../model/answers.js';
import { execute } from '../../host/node/service.js';
import { StateMachine } from '../../host/machine/state-machine.js';
import { Replica, type ReplicaDeps, type ReplicaOptions } from '../../host/node/replica.js';
import type { TimerHandle } from '../../host/node/scheduler.js';
import type { ServiceResult } from '../../host/node/service.js';
import { StorageCorruptionError } from '../../host/storage/storage.js';
import { Checkers } from './checkers.js';
import type { Faults } from './faults.js';
import {
  type MemorySpells, SIM_RESTORE_ROOM_BYTES, SPELL_STATE_BYTES,
} from './memory-spells.js';
import { SimNetwork } from './network.js';
import type { GracefulStops } from './graceful-stops.js';
import type { SpaceSpells } from './space-spells.js';
import type { StateBudgets } from './state-budgets.js';
import type { SimRandom } from './random.js';
import { NodeClock, SimScheduler } from './scheduler.js';
import { SimDisk, SimStorage } from './storage.js';
import type { Trace } from './trace.js';

/** Entries between two checkpoints in the simulation. */
const SIM_DIGEST_EVERY = 25;

/** What a call through the cluster ended as: an outcome, or null when it is unknown. */
export type CallEnd = { readonly outcome: CallOutcome | null; readonly node: string };

interface Incarnation {
  readonly replica: Replica;
  readonly clock: NodeClock;
  readonly storage: SimStorage;
  readonly machine: StateMachine;
  running: boolean;
}

export class SimNode {
  inc: Incarnation | null = null;
  /** Its disk failed a checksum: it stays down until the operator replaces it. */
  lost = false;
  /** Removed from the cluster and shut down by the operator: never started again. */
  retired = false;
  restartTimer: TimerHandle | null = null;
  starts = 0;
  lastRole = 'follower';
  /** This incarnation's memory budget (state-budgets.ts); null: the default. */
  stateBudget: number | null = null;
  /** Since when, as a learner past its budget or low on space, it does not hold back. */
  unheldSinceUs: number | null = null;
  /** The newest term in which the checkers saw it lead. */
  ledTerm = 0;
  /** Its commit index when first seen leading its newest term; -1 once that advanced. */
  ledCommit = 0;

  /** `joined`: started with `--join` (an empty node that knows no members). */
  constructor(readonly id: string, readonly disk: SimDisk, readonly joined: boolean) {}

  running(): Incarnation | null {
    return this.inc !== null && this.inc.running ? this.inc : null;
  }
}

/** Settings of the replicas, the same on every node (a real cluster's config). */
export interface ClusterSettings {
  readonly tickMs: number;
  readonly electionTicks: number;
  readonly requestTimeoutMs: number;
  readonly snapshotEveryEntries: number;
  /** Digest after every `digestEveryEntries`-th applied index (1: every entry). */
  readonly digestEveryEntries: number;
  /** TEST ONLY: the core commits without §5.4.2's rule (the simulator's own test). */
  readonly commitWithoutCurrentTermRule: boolean;
  /** Entry bytes per append: small ones split a catch-up into many acknowledgements. */
  readonly maxEntriesBytesPerAppend: number;
  /** Appends in flight per follower: few make a catch-up take many round trips. */
  readonly maxInflightAppends: number;
  /** Bytes per snapshot chunk: small ones split a snapshot into many. */
  readonly maxSnapshotChunkBytes: number;
  /** How long `isolate` cuts a node off: [min, max] milliseconds. */
  readonly isolateMs: readonly [number, number];
}

/** `net.isolate-new-leader` strikes within this long of the leader's election. */
const NEW_LEADER_ISOLATE_AFTER_US_MAX = 20_000;
/** How long the supervisor waits before it restarts a node that stopped. */
const SUPERVISOR_RESTART_MS_MIN = 100;
const SUPERVISOR_RESTART_MS_MAX = 2_000;

/** Ticks a learner past its budget or low on space may take to hold back. */
const LEARNER_HOLD_TICKS = 2;
/** Driver steps (reads of appliedIndex) one event may cause before it is a livelock. */
export const WORK_PER_EVENT_MAX = 200_000;

export class SimCluster {
  readonly scheduler = new SimScheduler();
  private workThisEvent = 0;
  readonly network: SimNetwork;
  readonly checkers: Checkers;
  readonly nodes: SimNode[] = [];
  /** Fired when a node crashes, so clients waiting on it learn the outcome is unknown. */
  onCrash: ((id: string) => void) | null = null;
  /** Nodes the supervisor restarted after they stopped (a crash after an append, a fatal). */
  supervisorRestarts = 0;
  /** Checkpoint entries that passed on some replica (a divergence is a fatal failure). */
  checkpointsPassed = 0;
  /** Snapshots from a leader that a follower refused for want of room (`disk.no-room`). */
  snapshotsRefused = 0;
  /** Spells of too little memory for the state (memory-spells.ts); none when null. */
  memorySpells: MemorySpells | null = null;
  /** Times a node began to hold back from catching up, in a spell of too little memory. */
  catchUpHolds = 0;
  /** Graceful stops the nemesis makes (graceful-stops.ts); none when null. */
  gracefulStops: GracefulStops | null = null;
  /** Spells of a volume below its free-space floor (space-spells.ts); none when null. */
  spaceSpells: SpaceSpells | null = null;
  /** Times a learner began to hold back from catching up, low on space. */
  spaceHolds = 0;
  /** Small memory budgets some starts draw (state-budgets.ts); none when null. */
  stateBudgets: StateBudgets | null = null;
  /** Fired when a node refuses to start on damaged files (the operator replaces it). */
  onLost: ((node: SimNode) => void) | null = null;
  /** May this node's next recovery find damaged files? The operator's budget decides. */
  mayDamage: (node: SimNode) => boolean = () => false;
  /** The starting voters; a node that joins later starts with none. */
  readonly initialIds: readonly string[];

  constructor(readonly ids: readonly string[], private readonly rng: SimRandom,
    private readonly faults: Faults, readonly trace: Trace,
    private readonly settings: ClusterSettings) {
    this.checkers = new Checkers(trace);
    this.network = new SimNetwork(ids, rng, this.scheduler, faults, trace);
    this.network.describe = describeFrame;
    this.network.onSend = (from, to, frame) => this.onSend(from, to, frame);
    this.initialIds = [...ids];
    for (const id of ids) this.nodes.push(new SimNode(id, new SimDisk(id, rng), false));
  }

  /**
   * What a node learns of the others' states and holds, as their statuses would say, but at
   * once: in a spell some member holds more than it can restore; as leader, the running
   * nodes that hold back are sent heartbeats only; the voters low on space refuse writes
   * on every member.
   */
  private memberDeps(node: SimNode): Pick<ReplicaDeps, 'largestMemberState' |
    'membersHoldingCatchUp' | 'onCatchUpHeld' | 'onReplicationPaused' |
    'membersStorageFull' | 'memberStateBudget'> {
    return {
      largestMemberState: () => {
        const inSpell = this.memorySpells?.inSpell(node.id, this.scheduler.elapsedUs(),
          (lengthUs) => this.trace.log(node.id, `too little memory for the state for ` +
            `${Math.ceil(lengthUs / 1000)} ms`)) ?? false;
        return inSpell ? { member: 'sim', bytes: SPELL_STATE_BYTES } : this.largestState(node);
      },
      memberStateBudget: () => this.smallestVoterBudget(node),
      membersHoldingCatchUp: () => this.nodes.filter((other) => other !== node &&
        other.inc?.running === true && other.inc.replica.catchUpHeldFor() !== null)
        .map((n) => n.id),
      onCatchUpHeld: (hold) => {
        if (hold?.want === 'memory') this.catchUpHolds++;
        if (hold?.want === 'space') this.spaceHolds++;
        this.trace.log(node.id, hold === null ? 'catches up again'
          : `holds back from catching up: ${hold.detail}`);
      },
      onReplicationPaused: (member, paused) => this.trace.log(node.id, paused
        ? `sends ${member} heartbeats only` : `sends ${member} the log again`),
      // The other voters of this node's configuration that are low on space now.
      membersStorageFull: () => {
        const voters = node.running()?.replica.configuration().voters ?? [];
        return voters.filter((id) => id !== node.id &&
          this.node(id).running()?.replica.storageFull() === true);
      },
    };
  }

  /** The largest state another running node holds, with its applied index; null: none. */
  private largestState(node: SimNode):
    { readonly member: string; readonly bytes: number; readonly appliedIndex: number } | null {
    let found: { member: string; bytes: number; appliedIndex: number } | null = null;
    for (const other of this.nodes) {
      const inc = other === node ? null : other.running();
      if (inc === null) continue;
      const bytes = inc.machine.memoryUse().stateBytes;
      if (found === null || bytes > found.bytes) {
        found = { member: other.id, bytes, appliedIndex: inc.machine.appliedIndex };
      }
    }
    return found;
  }

  /** The smallest budget drawn for another running voter of `node`'s configuration. */
  private smallestVoterBudget(node: SimNode):
    { readonly member: string; readonly bytes: number } | null {
    const voters = node.running()?.replica.configuration().voters ?? [];
    let found: { member: string; bytes: number } | null = null;
    for (const id of voters) {
      const other = this.node(id);
      const bytes = other.stateBudget;
      if (other === node || bytes === null || other.running() === null) continue;
      if (found === null || bytes < found.bytes) found = { member: id, bytes };
    }
    return found;
  }

  /** A new empty node that waits to be added (`serve --join`); not started yet. */
  addNode(id: string): SimNode {
    if (this.nodes.some((n) => n.id === id)) throw new Error(`node ${id} exists`);
    const node = new SimNode(id, new SimDisk(id, this.rng), true);
    this.nodes.push(node);
    this.network.addNode(id);
    this.trace.log('sim', `new node ${id} (--join)`);
    return node;
  }

  /** The operator shuts a removed node down for good. */
  retire(node: SimNode): void {
    this.crash(node, 'retired by the operator');
    node.retired = true;
    node.restartTimer?.cancel();
    node.restartTimer = null;
  }

  node(id: string): SimNode {
    const node = this.nodes.find((n) => n.id === id);
    if (node === undefined) throw new Error(`no node ${id}`);
    return node;
  }

  settingsTimeoutMs(): number {
    return this.settings.requestTimeoutMs;
  }

  /** Starts a fresh incarnation over the node's disk. */
  start(node: SimNode): void {
    if (node.inc !== null || node.lost || node.retired) return;
    node.restartTimer?.cancel();
    node.restartTimer = null;
    node.starts++;
    const clock = new NodeClock(this.scheduler);
    const storage = new SimStorage(node.disk, this.scheduler, this.rng, this.faults, this.trace,
      { mayCorrupt: () => this.mayDamage(node), onAppend: () => this.afterAppend(node),
        lowOnSpace: () => this.spaceSpells?.inSpellNow(node.id,
          this.scheduler.elapsedUs()) ?? false });
    const machine = StateMachine.create();
    const voters = node.joined ? [] : this.initialIds;
    node.stateBudget = this.stateBudgets?.draw(this.largestState(node)?.bytes ?? 0) ?? null;
    if (node.stateBudget !== null) {
      this.trace.log(node.id, `starts with a memory budget of ${node.stateBudget} bytes`);
    }
    const options: ReplicaOptions = {
      id: node.id, voters, seed: this.rng.seed31(), incarnation: this.rng.nextU32(),
      peers: voters.map((id) => ({ id, host: `sim-${id}`, port: 7000 })), peerLink: true,
      tickMs: this.settings.tickMs, electionTicks: this.settings.electionTicks,
      requestTimeoutMs: this.settings.requestTimeoutMs, requireGrant: false,
      expireEveryMs: 1000, expireBatch: 100,
      snapshotEveryEntries: this.settings.snapshotEveryEntries,
      snapshotEveryBytes: 64 * 1024 * 1024,
      // Checkpoints often: a replica whose state parts from the leader's stops (a failure).
      digestEvery: SIM_DIGEST_EVERY,
      testOnlyCommitWithoutCurrentTermRule: this.settings.commitWithoutCurrentTermRule,
      maxEntriesBytesPerAppend: this.settings.maxEntriesBytesPerAppend,
      maxInflightAppends: this.settings.maxInflightAppends,
      maxSnapshotChunkBytes: this.settings.maxSnapshotChunkBytes,
      restoreRoomBytes: SIM_RESTORE_ROOM_BYTES,
      ...(node.stateBudget !== null ? { maxStateBytes: node.stateBudget } : {}),
    };
    let inc: Incarnation | null = null;
    const replica = new Replica(options, {
      storage, transport: this.network.transportFor(node.id), machine, scheduler: clock,
      onFatal: (error) => { if (inc !== null && node.inc === inc) this.onFatal(node, error); },
      onCheckpoint: (verdict) => { if (verdict === 'passed') this.checkpointsPassed++; },
      onSnapshot: (event) => {
        if (event.kind !== 'refused' && event.kind !== 'no_room') return;
        if (event.kind === 'refused') this.snapshotsRefused++;
        this.trace.log(node.id, `snapshot ${event.index} ${event.kind}: ${event.detail ?? ''}`);
      },
      ...this.memberDeps(node),
    });
    inc = { replica, clock, storage, machine, running: false };
    node.inc = inc;
    this.observeMachine(node, inc);
    this.trace.log(node.id, `start #${node.starts}`);
    const started = inc;
    replica.start().then(() => {
      if (node.inc !== started) return;
      started.running = true;
      this.checkers.observeRecovered(node.id, storage.logView());
      this.trace.log(node.id, `running, applied ${machine.appliedIndex}`);
    }, (error: unknown) => {
      if (node.inc !== started) return;
      this.onStartFailed(node, error);
    });
  }

  /**
   * SIGTERM: a leader hands leadership over (up to `transferMs`), then the replica stops,
   * answering every call still waiting on it; what it wrote reaches its disk; the
   * supervisor starts it again later.
   */
  async stopGracefully(node: SimNode, transferMs: number): Promise<void> {
    const inc = node.running();
    if (inc === null) return;
    this.trace.log(node.id, 'SIGTERM: stops gracefully');
    await inc.replica.transferLeadership(transferMs);
    if (node.inc !== inc) return;
    await inc.replica.stop();
    if (node.inc !== inc) return;
    node.inc = null;
    inc.clock.kill();
    inc.storage.exitCleanly();
    this.network.detach(node.id);
    this.trace.log(node.id, 'stopped gracefully');
    this.restartLater(node);
  }

  /** The process dies: timers, unsynced writes and in-flight frames to it are gone. */
  crash(node: SimNode, why: string): void {
    const inc = node.inc;
    if (inc === null) return;
    node.inc = null;
    inc.clock.kill();
    inc.storage.crash();
    this.network.detach(node.id);
    this.trace.log(node.id, `CRASH (${why})`);
    this.onCrash?.(node.id);
  }

  /**
   * Runs a call on `node`; the promise settles with the outcome (the machine's answer read
   * back, test/model/answers.ts) or null (unknown).
   */
  execute(node: SimNode, call: KvCall):
    Promise<ServiceResult<CallOutcome>> | null {
    const inc = node.running();
    if (inc === null) return null;
    return execute(inc.replica, call, undefined, growthOf(call)).then((result) =>
      (result.kind === 'done' ? { kind: 'done', value: outcomeOf(call, result.value) } : result));
  }

  /** Nodes whose replica is running now. */
  runningNodes(): SimNode[] {
    return this.nodes.filter((n) => n.running() !== null);
  }

  /**
   * Right after a leader appends: `node.crash-after-append` kills it before its write is
   * durable; `net.isolate-after-append` cuts it off (what it sends is lost) for a moment.
   * Both run as the next event, not inside the driver's call, before any fsync ends.
   */
  private afterAppend(node: SimNode): void {
    const inc = node.running();
    if (inc === null || inc.replica.raftStatus().role !== 'leader') return;
    if (this.faults.maybe('node.crash-after-append')) {
      this.scheduler.atDelayUs(0, '', () => {
        if (node.inc !== inc) return;
        this.crash(node, 'right after an append');
        this.restartLater(node);
      });
    } else if (this.faults.maybe('net.isolate-after-append')) {
      this.scheduler.atDelayUs(0, '', () => this.isolate(node.id));
    }
  }

  /** `net.isolate-new-leader`: cut a new leader off while it catches its followers up. */
  private maybeIsolateNewLeader(node: SimNode): void {
    if (!this.faults.maybe('net.isolate-new-leader')) return;
    // Half the time at once: its first appends, already on their way, are lost.
    if (this.rng.chance(0.5)) return this.isolate(node.id);
    const delayUs = this.rng.between(0, NEW_LEADER_ISOLATE_AFTER_US_MAX);
    this.scheduler.atDelayUs(delayUs, '', () => this.isolate(node.id));
  }

  /** Cuts `id` off from everyone for a moment (a leader whose appends go nowhere). */
  isolate(id: string, withId: string | null = null): void {
    const lift = this.network.partition(withId === null ? [id] : [id, withId]);
    const ms = this.rng.between(this.settings.isolateMs[0], this.settings.isolateMs[1]);
    this.scheduler.atDelayUs(ms * 1000, '', lift);
  }

  /** The supervisor: a node that stopped is started again after a short delay. */
  restartLater(node: SimNode): void {
    if (node.retired || node.lost || node.restartTimer !== null) return;
    const delayMs = this.rng.between(SUPERVISOR_RESTART_MS_MIN, SUPERVISOR_RESTART_MS_MAX);
    node.restartTimer = this.scheduler.atDelayUs(delayMs * 1000, '', () => {
      node.restartTimer = null;
      this.supervisorRestarts++;
      this.start(node);
    });
  }

  /**
   * A learner holds back within LEARNER_HOLD_TICKS ticks (replica.ts, `refreshCatchUpHold`)
   * once the state passes its own budget, or its volume is low on space: it may have applied
   * a batch that crossed its budget, or taken entries as the spell began, and the next
   * tick's check stops it. The state is judged at the newest index a running node has
   * applied: a learner behind deletes that brought the state back under its budget may
   * catch up through them. One that went on catching up otherwise would, on a real machine,
   * grow past the memory it was given or run its volume out.
   */
  private checkLearnerHold(node: SimNode, inc: Incarnation): void {
    const budget = node.stateBudget;
    const lowOnSpace = inc.replica.storageFull();
    // Cheapest first: this runs for every node after every event.
    const unheld = (budget !== null || lowOnSpace) && inc.replica.catchUpHeldFor() === null &&
      inc.replica.health().role === 'learner';
    const stateBytes = unheld && budget !== null ? this.newestStateBytes() : 0;
    const want = !unheld ? null : budget !== null && stateBytes > budget
      ? `is behind a state of ${stateBytes} bytes, past its budget of ${budget},`
      : lowOnSpace ? 'is low on space' : null;
    if (want === null) {
      node.unheldSinceUs = null;
      return;
    }
    const nowUs = this.scheduler.elapsedUs();
    node.unheldSinceUs ??= nowUs;
    if (nowUs - node.unheldSinceUs > LEARNER_HOLD_TICKS * this.settings.tickMs * 1000) {
      this.checkers.fail(`learner ${node.id} ${want} and has not held back for ` +
        `${LEARNER_HOLD_TICKS} ticks`);
    }
  }

  /** The state's bytes at the newest index a running node has applied. */
  private newestStateBytes(): number {
    let index = -1;
    let bytes = 0;
    for (const other of this.nodes) {
      const inc = other.running();
      if (inc === null || inc.machine.appliedIndex <= index) continue;
      index = inc.machine.appliedIndex;
      bytes = inc.machine.memoryUse().stateBytes;
    }
    return bytes;
  }

  /** Checks after every event: leaders per term, role changes for the trace. */
  afterEvent(): void {
    for (const node of this.nodes) {
      const inc = node.running();
      if (inc === null) continue;
      this.checkLearnerHold(node, inc);
      const status = inc.replica.raftStatus();
      if (status.role !== node.lastRole) {
        if (this.trace.on) this.trace.log(node.id, `${status.role} t${status.term}`);
        node.lastRole = status.role;
      }
      if (status.role === 'leader') {
        this.checkers.observeLeader(node.id, status.term, inc.storage.logView());
        if (node.ledTerm !== status.term) {
          node.ledTerm = status.term;
          this.checkers.observeLeaderConfiguration(node.id, status.term,
            inc.replica.configuration());
          node.ledCommit = status.commitIndex;
          this.maybeIsolateNewLeader(node);
        } else if (node.ledCommit >= 0 && status.commitIndex > node.ledCommit) {
          node.ledCommit = -1;
          if (this.faults.maybe('net.isolate-after-first-commit')) this.isolate(node.id);
        }
      }
    }
  }

  /** Log matching between every pair of running nodes. */
  checkLogs(): void {
    const running = this.runningNodes();
    for (let i = 0; i < running.length; i++) {
      for (let j = i + 1; j < running.length; j++) {
        const a = running[i] as SimNode;
        const b = running[j] as SimNode;
        this.checkers.checkLogMatching(a.id, (a.inc as Incarnation).storage.logView(),
          b.id, (b.inc as Incarnation).storage.logView());
      }
    }
  }

  private onFatal(node: SimNode, error: Error): void {
    this.trace.log(node.id, `fatal: ${error.message}`);
    if (error.message !== 'simulated fsync failure') {
      this.checkers.fail(`${node.id} stopped on an unexpected error: ${error.stack ?? error}`);
    }
    this.crash(node, 'fatal error');
    this.restartLater(node);
  }

  private onStartFailed(node: SimNode, error: unknown): void {
    if (error instanceof StorageCorruptionError) {
      this.trace.log(node.id, `refuses to start: ${error.message}; down until replaced`);
      node.inc?.clock.kill();
      node.inc = null;
      this.network.detach(node.id);
      node.lost = true;
      this.onLost?.(node);
      return;
    }
    const text = error instanceof Error ? error.stack ?? error.message : String(error);
    this.checkers.fail(`${node.id} failed to start: ${text}`);
    this.crash(node, 'start failed');
  }

  /** Resets the per-event work budget (called by the runner after each event). */
  resetWorkBudget(): void {
    this.workThisEvent = 0;
  }

  /** Wraps the machine's apply and restore to observe them; decisions stay the machine's. */
  private observeMachine(node: SimNode, inc: Incarnation): void {
    const { machine, storage } = inc;
    // A driver that loops on Readies without ever waiting would starve the event loop and
    // hang the run. Every drain iteration reads appliedIndex, so a bound on those reads per
    // event turns such a livelock into a reported failure.
    const appliedIndex = Object.getOwnPropertyDescriptor(StateMachine.prototype, 'appliedIndex');
    Object.defineProperty(machine, 'appliedIndex', {
      get: () => {
        if (++this.workThisEvent > WORK_PER_EVENT_MAX) {
          throw new Error(`livelock: ${node.id} did ${WORK_PER_EVENT_MAX} driver steps in ` +
            'one event without waiting');
        }
        return appliedIndex?.get?.call(machine) as number;
      },
    });
    const applyEntries = machine.applyEntries.bind(machine);
    const every = this.settings.digestEveryEntries;
    // Batches are split where an index is a multiple of `every`, so the digest is compared
    // at the same indexes on every replica however the driver batches its entries.
    machine.applyEntries = (entries, sink) => {
      let from = 0;
      for (let i = 0; i < entries.length; i++) {
        const index = entries[i]!.index;
        if (index % every !== 0 && i < entries.length - 1) continue;
        applyEntries(entries.slice(from, i + 1), sink);
        from = i + 1;
        if (node.inc !== inc) continue;
        if (index % every === 0) this.checkers.observeDigest(node.id, index, machine.digest());
      }
      if (node.inc !== inc) return;
      for (const { index, timeMs } of entries) {
        const entry = storage.volatileEntry(index) ?? node.disk.durableEntry(index);
        this.checkers.observeApply(node.id, index, timeMs, entry, node.disk);
      }
    };
    const restoreEnd = machine.restoreEnd.bind(machine);
    machine.restoreEnd = () => {
      restoreEnd();
      if (node.inc !== inc) return;
      this.trace.log(node.id, `machine restored at ${machine.appliedIndex}`);
      this.checkers.observeDigest(node.id, machine.appliedIndex, machine.digest());
    };
  }

  private onSend(from: string, to: string, frame: Uint8Array): void {
    const message = decodeMessage(frame);
    if (message === null) {
      this.checkers.fail(`${from} sent an undecodable frame to ${to}`);
      return;
    }
    const sender = this.node(from);
    this.checkers.observeSend(from, message, sender.disk);
    const granted = (message.type === 'voteResponse' || message.type === 'preVoteResponse') &&
      message.granted;
    const config = sender.running()?.replica.committedConfiguration();
    if (granted && config !== undefined) this.checkers.observeVoteGranted(from, config);
  }
}

/**
 * A call's growth as the memory budget sees it: a byte for every call with a put or an
 * `incr`. A request's parse estimates it exactly (a put over an equal value adds nothing);
 * the simulator errs on the side of refusing, which takes nothing from what it checks: a
 * refused call must take no effect, and the states must never part, whatever each budget.
 */
function growthOf(call: KvCall): number {
  return call.ops.some((op) => op.op === 'put' || op.op === 'incr') ? 1 : 0;
}

/** A compact description of a peer frame for the trace. */
export function describeFrame(frame: Uint8Array): string {
  const m = decodeMessage(frame);
  if (m === null) return 'garbage';
  switch (m.type) {
    case 'append':
      return `append t${m.term} prev=${m.prevLogIndex}/${m.prevLogTerm} n=${m.entries.length}` +
        ` commit=${m.commitIndex}`;
    case 'appendResponse':
      return `appendResp t${m.term} ${m.success ? `ok match=${m.matchIndex}`
        : `reject ${m.rejectedIndex} hint=${m.hintIndex}/${m.hintTerm}`}`;
    case 'vote':
    case 'preVote':
      return `${m.type} t${m.term} last=${m.lastLogIndex}/${m.lastLogTerm}` +
        (m.selfRemoved === true ? ' self-removed' : '');
    case 'voteResponse':
    case 'preVoteResponse':
      return `${m.type} t${m.term} ${m.granted ? 'granted' : 'denied'}`;
    case 'heartbeat':
      return `heartbeat t${m.term} commit=${m.commitIndex} ctx=${m.readContext}`;
    case 'snapshotChunk':
      return `snapshotChunk t${m.term} at=${m.meta.index} ${m.offset}/${m.totalBytes}`;
    default:
      return `${m.type} t${m.term}`;
  }
}
