/**
 * The simulated cluster: 3 or 5 production `Replica`s (Raft core, driver, WebAssembly
 * machine) in one process over the simulated clock, network and disks, with crashes and
 * restarts. A crashed node's Replica is dropped with its timers; a restart builds a fresh
 * Replica, machine and core over the same disk.
 *
 * The runner is an async loop that runs one event, then lets every pending microtask run
 * (`setImmediate` comes after them), so the driver's promise chains settle at the simulated
 * time of the event that resolved them, and the same seed replays the same run.
 */
import { decodeMessage } from '../../host/core/raft/message-codec.js';
import type { CallOutcome } from '../../host/machine/commands.js';
import { StateMachine } from '../../host/machine/state-machine.js';
import { Replica, type ReplicaOptions } from '../../host/node/replica.js';
import type { TimerHandle } from '../../host/node/scheduler.js';
import type { ServiceResult } from '../../host/node/service.js';
import { StorageCorruptionError } from '../../host/storage/storage.js';
import { Checkers } from './checkers.js';
import type { Faults } from './faults.js';
import { SimNetwork } from './network.js';
import type { SimRandom } from './random.js';
import { NodeClock, SimScheduler } from './scheduler.js';
import { SimDisk, SimStorage } from './storage.js';
import type { Trace } from './trace.js';

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
  /** Its disk failed a checksum: it stays down for good. */
  lost = false;
  restartTimer: TimerHandle | null = null;
  starts = 0;
  lastRole = 'follower';

  constructor(readonly id: string, readonly disk: SimDisk) {}

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
}

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

  constructor(readonly ids: readonly string[], private readonly rng: SimRandom,
    private readonly faults: Faults, readonly trace: Trace,
    private readonly settings: ClusterSettings) {
    this.checkers = new Checkers(trace);
    this.network = new SimNetwork(ids, rng, this.scheduler, faults, trace);
    this.network.describe = describeFrame;
    this.network.onSend = (from, to, frame) => this.onSend(from, to, frame);
    for (const id of ids) this.nodes.push(new SimNode(id, new SimDisk(id, rng)));
  }

  node(id: string): SimNode {
    const node = this.nodes.find((n) => n.id === id);
    if (node === undefined) throw new Error(`no node ${id}`);
    return node;
  }

  settingsTimeoutMs(): number {
    return this.settings.requestTimeoutMs;
  }

  lostCount(): number {
    return this.nodes.filter((n) => n.lost).length;
  }

  /** Most nodes that may lose their disk while a majority still lives. */
  lossBudget(): number {
    return Math.floor((this.ids.length - 1) / 2);
  }

  /** Starts a fresh incarnation over the node's disk. */
  start(node: SimNode): void {
    if (node.inc !== null || node.lost) return;
    node.restartTimer?.cancel();
    node.restartTimer = null;
    node.starts++;
    const clock = new NodeClock(this.scheduler);
    const storage = new SimStorage(node.disk, this.scheduler, this.rng, this.faults, this.trace,
      { mayCorrupt: () => this.lostCount() < this.lossBudget() });
    const machine = StateMachine.create();
    const options: ReplicaOptions = {
      id: node.id, voters: this.ids, seed: this.rng.seed31(), incarnation: this.rng.nextU32(),
      tickMs: this.settings.tickMs, electionTicks: this.settings.electionTicks,
      requestTimeoutMs: this.settings.requestTimeoutMs, requireGrant: false,
      expireEveryMs: 1000, expireBatch: 100,
      snapshotEveryEntries: this.settings.snapshotEveryEntries,
      snapshotEveryBytes: 64 * 1024 * 1024,
    };
    let inc: Incarnation | null = null;
    const replica = new Replica(options, {
      storage, transport: this.network.transportFor(node.id), machine, scheduler: clock,
      onFatal: (error) => { if (inc !== null && node.inc === inc) this.onFatal(node, error); },
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

  /** Runs a call on `node`; the promise settles with the outcome or null (unknown). */
  execute(node: SimNode, call: Parameters<Replica['execute']>[0]):
    Promise<ServiceResult<CallOutcome>> | null {
    const inc = node.running();
    return inc === null ? null : inc.replica.execute(call);
  }

  /** Nodes whose replica is running now. */
  runningNodes(): SimNode[] {
    return this.nodes.filter((n) => n.running() !== null);
  }

  /** Checks after every event: leaders per term, role changes for the trace. */
  afterEvent(): void {
    for (const node of this.nodes) {
      const inc = node.running();
      if (inc === null) continue;
      const status = inc.replica.raftStatus();
      if (status.role !== node.lastRole) {
        if (this.trace.on) this.trace.log(node.id, `${status.role} t${status.term}`);
        node.lastRole = status.role;
      }
      if (status.role === 'leader') {
        this.checkers.observeLeader(node.id, status.term, inc.storage.logView());
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
  }

  private onStartFailed(node: SimNode, error: unknown): void {
    if (error instanceof StorageCorruptionError) {
      this.trace.log(node.id, `refuses to start: ${error.message}; stays down`);
      node.inc?.clock.kill();
      node.inc = null;
      this.network.detach(node.id);
      node.lost = true;
      if (this.lostCount() > this.lossBudget()) {
        this.checkers.fail('more disks lost than a minority (simulator bug)');
      }
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
    const apply = machine.apply.bind(machine);
    const every = this.settings.digestEveryEntries;
    machine.apply = (index, timeMs, command) => {
      const outcome = apply(index, timeMs, command);
      if (node.inc === inc) {
        const entry = storage.volatileEntry(index) ?? node.disk.durableEntry(index);
        this.checkers.observeApply(node.id, index, timeMs, entry, node.disk);
        if (index % every === 0) this.checkers.observeDigest(node.id, index, machine.digest());
      }
      return outcome;
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
    this.checkers.observeSend(from, message, this.node(from).disk);
  }
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
      return `${m.type} t${m.term} last=${m.lastLogIndex}/${m.lastLogTerm}`;
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
