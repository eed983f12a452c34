/**
 * One simulated run from a seed: the safety phase (clients, faults, membership changes,
 * checkers on every event), then the liveness phase (heal everything; the voters of the
 * configuration in force must elect a leader and commit a fresh write within a bound, and
 * the operator must finish replacing damaged nodes), then the history checks
 * (linearizability per key, counters counted once, one putIfAbsent winner per key).
 *
 * The seed decides everything: fault rates, replica seeds, delays, client calls. A failing
 * seed replays bit for bit, with `--trace` to read it as a story.
 */
import type { CallOutcome } from '../../host/machine/commands.js';
import type { ServiceResult, UnavailableReason } from '../../host/node/service.js';
import { SimCluster, type ClusterSettings, type SimNode } from './cluster.js';
import { roleOf } from '../../host/core/raft/configuration.js';
import {
  CHURN_PROFILE_CHANCE, Faults, FAULT_NAMES, type FaultName, type FaultProfile,
} from './faults.js';
import { MemorySpells } from './memory-spells.js';
import { GracefulStops } from './graceful-stops.js';
import { SpaceSpells } from './space-spells.js';
import { StateBudgets } from './state-budgets.js';
import { Operator } from './operator.js';
import { checkHistory, describeOp, type HistoryOp } from './linearizability.js';
import { SimRandom } from './random.js';
import { Trace } from './trace.js';
import {
  COUNTER_KEYS, EXACT_KEY, MARKERS_MAX, REGISTER_KEYS, RACE_KEYS, exactCall, getCall,
  historyOf, nextCall, putCall, type PlannedCall,
} from './workload.js';

export interface RunOptions {
  readonly seed: number;
  readonly nodeCount: 3 | 5;
  /** Simulated length of the safety phase. */
  readonly safetyMs: number;
  readonly clientCount: number;
  readonly trace: boolean;
  /** Receives trace lines; null keeps them (tests). */
  readonly traceSink: ((line: string) => void) | null;
  /** Fault kinds this run may enable (each seed enables a random subset of them). */
  readonly faultKinds: readonly FaultName[];
  /**
   * TEST ONLY: run the core without §5.4.2's current-term commit rule (the Figure 8 case),
   * to prove that the simulator finds the loss it allows.
   */
  readonly commitWithoutCurrentTermRule?: boolean;
  /** The fault profile; drawn per seed when absent (faults.ts). */
  readonly profile?: FaultProfile;
  /** Exactly these fault rates (a test of one scenario), instead of a mix drawn per seed. */
  readonly faultRates?: Partial<Record<FaultName, number>>;
  /** Exactly this rate of memory spells per check (memory-spells.ts); drawn when absent. */
  readonly memorySpellRate?: number;
  /** Exactly this rate of low-space spells per node and step (space-spells.ts). */
  readonly spaceSpellRate?: number;
  /** Every start under faults draws a small memory budget (state-budgets.ts). */
  readonly smallBudgets?: boolean;
  /** Exactly this rate of graceful stops per nemesis step (graceful-stops.ts). */
  readonly gracefulStopRate?: number;
}

export const DEFAULT_RUN: Omit<RunOptions, 'seed' | 'nodeCount'> = {
  safetyMs: 8_000, clientCount: 4, trace: false, traceSink: null, faultKinds: FAULT_NAMES,
};

export interface RunResult {
  readonly seed: number;
  readonly nodeCount: number;
  readonly failure: string | null;
  readonly simulatedMs: number;
  readonly events: number;
  readonly committedEntries: number;
  readonly callsAnswered: number;
  readonly callsUnknown: number;
  readonly crashes: number;
  /** Membership changes that committed, and those refused or left unknown. */
  readonly membershipChanges: number;
  readonly membershipRefused: number;
  /** Damaged nodes replaced by the operator; stopped nodes the supervisor restarted. */
  readonly nodesReplaced: number;
  readonly supervisorRestarts: number;
  /** Checkpoint entries that passed on some replica. */
  readonly checkpointsPassed: number;
  /** Snapshots from a leader a follower refused for want of room (`disk.no-room`). */
  readonly snapshotsRefused: number;
  /** Times a node held back from catching up, in a spell of too little memory. */
  readonly catchUpHolds: number;
  /** Spells of a volume low on space; learners that held back in one. */
  readonly spaceSpells: number;
  readonly spaceHolds: number;
  /** Calls refused before the log (a 503 other than `timeout`): no effect. */
  readonly callsRefused: number;
  /** Starts with a small memory budget. */
  readonly smallBudgets: number;
  /** Graceful stops (SIGTERM) the nemesis made. */
  readonly gracefulStops: number;
  readonly profile: FaultProfile;
  readonly faults: string;
  readonly faultHits: ReadonlyMap<FaultName, number>;
  /** Keys whose linearizability search gave up; not a failure, but reported. */
  readonly inconclusiveKeys: readonly string[];
}

/** A majority must elect, commit a fresh write and answer the final reads within this. */
export const LIVENESS_DEADLINE_MS = 30_000;
/** Mixed into the seed for the second stream of draws (profile, settings, operator). */
const PLAN_STREAM_SALT = 0x6d65_6d62;
/**
 * The 503 reasons a node gives before the call's writes reach the log: the call took no
 * effect (docs/http.md). Only `timeout` leaves the outcome unknown.
 */
const REFUSED_BEFORE_LOG: readonly UnavailableReason[] = ['no_leader', 'storage_full',
  'memory_full', 'overloaded', 'shutting_down', 'not_a_member'];
/** How long a node stopped gracefully waits for its leadership to pass (host/node/main.ts). */
const SHUTDOWN_TRANSFER_MS = 2_000;
/** The nemesis draws its faults this often. */
const NEMESIS_STEP_MS = 250;
/** Entry bytes per append, drawn per seed: 1 MiB, or small enough to split a catch-up. */
const APPEND_BYTES_SMALL_MIN = 64;
const APPEND_BYTES_SMALL_MAX = 1_024;
const APPEND_BYTES_DEFAULT = 1024 * 1024;
/** Appends in flight per follower, drawn per seed: 64, or few (a slow, stepwise catch-up). */
const INFLIGHT_APPENDS_DEFAULT = 64;
const INFLIGHT_APPENDS_SMALL_MAX = 2;
/** How long a leader cut off by the isolate-* kinds stays cut off, by profile. */
const MIXED_ISOLATE_MS = [100, 1_500] as const;
const CHURN_ISOLATE_MS = [800, 3_000] as const;
/** How often log matching runs across all nodes. */
const LOG_CHECK_EVERY_MS = 500;
const THINK_MS_MAX = 60;
/** An exact-counter call is retried with the same marker at most this often. */
const EXACT_ATTEMPTS_MAX = 4;
const RETRY_MS = 100;
/** Events one run may execute; a run past it is stuck in a loop (a bug). */
const EVENTS_PER_RUN_MAX = 20_000_000;
/**
 * Events one simulated second may hold. Normal runs stay under ~10,000; far more means two
 * nodes answer each other in a loop without waiting for a timer (an event storm).
 */
const EVENTS_PER_SIMULATED_SECOND_MAX = 50_000;

interface Client {
  readonly id: string;
  unique: number;
  token: number;
  waiting: { token: number; node: string; planned: PlannedCall; call: number } | null;
  exact: { marker: string; attempts: number } | null;
}

export async function runSeed(options: RunOptions): Promise<RunResult> {
  const run = new Run(options);
  let failure: string | null = null;
  try {
    failure = await run.execute();
  } catch (error) {
    failure = `simulator error: ${error instanceof Error ? error.stack : String(error)}`;
  }
  return run.result(failure);
}

class Run {
  private readonly rng: SimRandom;
  private readonly planRng: SimRandom;
  private readonly faults: Faults;
  private readonly cluster: SimCluster;
  private readonly operator: Operator;
  private readonly trace: Trace;
  private readonly clients: Client[] = [];
  private readonly history: HistoryOp[] = [];
  private readonly markers = new Set<string>();
  private readonly incrAcked = new Map<string, number>();
  private readonly incrUnknown = new Map<string, number>();
  private readonly raceWinners = new Map<string, number>();
  private seq = 0;
  private answered = 0;
  private unknown = 0;
  private callsRefused = 0;
  private crashes = 0;
  private clientsStopped = false;
  private nextLogCheckUs = 0;
  private windowStartUs = 0;
  private windowEvents = 0;
  /** Keys whose linearizability search gave up (SEARCH_STEPS_MAX). */
  readonly inconclusive: string[] = [];
  private failure: string | null = null;

  constructor(private readonly options: RunOptions) {
    this.rng = new SimRandom(options.seed);
    // The profile, the replication settings and the operator draw from a stream of their
    // own, so a seed's other draws stay what they were before they existed.
    this.planRng = new SimRandom(options.seed ^ PLAN_STREAM_SALT);
    const profile = options.profile ??
      (this.planRng.chance(CHURN_PROFILE_CHANCE) ? 'churn' : 'mixed');
    this.faults = options.faultRates === undefined
      ? new Faults(this.rng, options.faultKinds, profile, this.planRng)
      : Faults.fixed(this.rng, options.faultRates);
    let cluster: SimCluster | null = null;
    this.trace = new Trace(options.trace, options.traceSink,
      () => cluster?.scheduler.elapsedUs() ?? 0);
    const ids = Array.from({ length: options.nodeCount }, (_, i) => `n${i + 1}`);
    cluster = new SimCluster(ids, this.rng, this.faults, this.trace, {
      tickMs: 50, electionTicks: 10, requestTimeoutMs: 2_000,
      snapshotEveryEntries: this.rng.between(20, 400), digestEveryEntries: 1,
      commitWithoutCurrentTermRule: options.commitWithoutCurrentTermRule === true,
      ...this.replicationSettings(),
    });
    this.cluster = cluster;
    cluster.memorySpells = new MemorySpells(options.seed, this.faults, options.memorySpellRate);
    cluster.spaceSpells = new SpaceSpells(options.seed, this.faults, options.spaceSpellRate);
    cluster.stateBudgets = new StateBudgets(options.seed, this.faults, options.smallBudgets);
    cluster.gracefulStops = new GracefulStops(options.seed, this.faults,
      options.gracefulStopRate);
    cluster.onCrash = (id) => this.onCrash(id);
    this.operator = new Operator(cluster, this.planRng, this.faults, this.trace);
  }

  /**
   * How replication is paced and how long a cut-off node stays cut off. Half the mixed seeds
   * and every churn seed send small appends, few in flight, so a catch-up is acknowledged
   * entry by entry; churn seeds cut leaders off for long enough that others elect meanwhile.
   */
  private replicationSettings(): Pick<ClusterSettings, 'maxEntriesBytesPerAppend' |
    'maxInflightAppends' | 'maxSnapshotChunkBytes' | 'isolateMs'> {
    const rng = this.planRng;
    const churn = this.faults.profile === 'churn';
    const small = churn || rng.chance(0.5);
    const appendBytes = small ? rng.between(APPEND_BYTES_SMALL_MIN, APPEND_BYTES_SMALL_MAX)
      : APPEND_BYTES_DEFAULT;
    return {
      maxEntriesBytesPerAppend: appendBytes,
      // The same bound, not a draw of its own (the operator's draws follow): a snapshot of a
      // few KB then goes in many chunks, so transfers are cut, resent and refused midway.
      maxSnapshotChunkBytes: appendBytes,
      maxInflightAppends: small ? rng.between(1, INFLIGHT_APPENDS_SMALL_MAX)
        : INFLIGHT_APPENDS_DEFAULT,
      isolateMs: churn ? CHURN_ISOLATE_MS : MIXED_ISOLATE_MS,
    };
  }

  async execute(): Promise<string | null> {
    const { cluster, options } = this;
    this.trace.log('sim',
      `seed ${options.seed} nodes ${options.nodeCount} ${this.faults.describe()}`);
    for (const node of cluster.nodes) cluster.start(node);
    for (let i = 0; i < options.clientCount; i++) {
      const client: Client = { id: `c${i + 1}`, unique: 0, token: 0, waiting: null, exact: null };
      this.clients.push(client);
      this.later(this.rng.between(0, 200), () => this.issue(client));
    }
    this.nemesis();
    await this.runUntil(() => false, options.safetyMs);
    if (this.failed()) return this.failed();
    await this.liveness();
    if (this.failed()) return this.failed();
    return this.finalChecks();
  }

  result(failure: string | null): RunResult {
    return {
      seed: this.options.seed, nodeCount: this.options.nodeCount, failure,
      simulatedMs: Math.round(this.cluster.scheduler.elapsedUs() / 1000),
      events: this.cluster.scheduler.eventsRun,
      committedEntries: this.cluster.checkers.committedCount(),
      callsAnswered: this.answered, callsUnknown: this.unknown, crashes: this.crashes,
      membershipChanges: this.operator.changesDone,
      membershipRefused: this.operator.changesRefused,
      nodesReplaced: this.operator.repairsDone,
      supervisorRestarts: this.cluster.supervisorRestarts,
      checkpointsPassed: this.cluster.checkpointsPassed,
      snapshotsRefused: this.cluster.snapshotsRefused,
      catchUpHolds: this.cluster.catchUpHolds,
      spaceSpells: this.cluster.spaceSpells?.begun ?? 0, spaceHolds: this.cluster.spaceHolds,
      callsRefused: this.callsRefused,
      smallBudgets: this.cluster.stateBudgets?.drawn ?? 0,
      gracefulStops: this.cluster.gracefulStops?.begun ?? 0,
      profile: this.faults.profile,
      faults: this.faults.describe(), faultHits: this.faults.hitCounts(),
      inconclusiveKeys: this.inconclusive,
    };
  }

  private failed(): string | null {
    return this.cluster.checkers.violation ?? this.failure;
  }

  private later(ms: number, work: () => void): void {
    this.cluster.scheduler.atDelayUs(ms * 1000, '', work);
  }

  /** Runs events until `done()`, a violation, or `forMs` of simulated time pass. */
  private async runUntil(done: () => boolean, forMs: number): Promise<void> {
    const { scheduler } = this.cluster;
    const endUs = scheduler.elapsedUs() + forMs * 1000;
    while (!done() && this.failed() === null) {
      const next = scheduler.peekTimeUs();
      if (next === null || next > endUs) break;
      if (scheduler.eventsRun >= EVENTS_PER_RUN_MAX) {
        this.failure = `more than ${EVENTS_PER_RUN_MAX} events: the run does not progress`;
        break;
      }
      scheduler.runNext();
      if (this.stormCheck()) break;
      await new Promise<void>((resolve) => setImmediate(resolve));
      this.cluster.resetWorkBudget();
      this.cluster.afterEvent();
      if (scheduler.elapsedUs() >= this.nextLogCheckUs) {
        this.nextLogCheckUs = scheduler.elapsedUs() + LOG_CHECK_EVERY_MS * 1000;
        this.cluster.checkLogs();
      }
    }
  }

  /** True (and a failure) when one simulated second holds too many events. */
  private stormCheck(): boolean {
    const { scheduler } = this.cluster;
    if (scheduler.elapsedUs() - this.windowStartUs >= 1_000_000) {
      this.windowStartUs = scheduler.elapsedUs();
      this.windowEvents = 0;
    }
    if (++this.windowEvents <= EVENTS_PER_SIMULATED_SECOND_MAX) return false;
    this.failure ??= `event storm: over ${EVENTS_PER_SIMULATED_SECOND_MAX} events in one ` +
      `simulated second from ${(this.windowStartUs / 1000).toFixed(3)} ms (replay with --trace)`;
    return true;
  }

  // ------------------------------------------------------------------ clients

  private issue(client: Client): void {
    if (this.clientsStopped || client.waiting !== null) return;
    const running = this.cluster.runningNodes();
    if (running.length === 0) {
      this.later(RETRY_MS, () => this.issue(client));
      return;
    }
    const node = this.rng.pick(running);
    client.unique++;
    const planned = client.exact !== null ? exactCall(client.exact.marker)
      : nextCall(this.rng, client.id, client.unique, this.markers.size < MARKERS_MAX);
    if (planned.marker !== null) {
      this.markers.add(planned.marker);
      client.exact ??= { marker: planned.marker, attempts: 0 };
      client.exact.attempts++;
    }
    const token = ++client.token;
    client.waiting = { token, node: node.id, planned, call: ++this.seq };
    if (this.trace.on) this.trace.log(client.id, `-> ${node.id} ${describeCall(planned)}`);
    const pending = this.cluster.execute(node, planned.call);
    pending?.then((result) => this.onAnswer(client, token, result));
    // A crashed node never answers; the crash hook settles it. This bounds the rest.
    this.later(this.cluster.settingsTimeoutMs() + 1_000, () => this.onAnswer(client, token, null));
  }

  private onAnswer(client: Client, token: number,
    result: ServiceResult<CallOutcome> | null): void {
    const waiting = client.waiting;
    if (waiting === null || waiting.token !== token) return;
    client.waiting = null;
    const outcome = result !== null && result.kind === 'done' ? result.value : null;
    if (result?.kind === 'unavailable' && REFUSED_BEFORE_LOG.includes(result.reason)) {
      // Refused before the log: it took no effect, so it has no place in the history. Were it
      // applied all the same, the final reads would find a value or a count it cannot explain.
      this.callsRefused++;
      if (this.trace.on) this.trace.log(client.id, `<- refused: ${result.reason}`);
    } else {
      this.record(client.id, waiting.planned, outcome, waiting.call);
    }
    if (client.exact !== null &&
      (outcome !== null || client.exact.attempts >= EXACT_ATTEMPTS_MAX)) client.exact = null;
    this.later(this.rng.between(1, THINK_MS_MAX), () => this.issue(client));
  }

  private record(client: string, planned: PlannedCall, outcome: CallOutcome | null,
    call: number): void {
    const ret = ++this.seq;
    if (this.trace.on) this.trace.log(client, `<- ${describeOutcome(outcome)}`);
    const isRead = planned.inputs.every((i) => i.input.kind === 'get');
    if (outcome === null) this.unknown++;
    else this.answered++;
    if (outcome === null && isRead) return; // an unanswered read has no effect to check
    const ops = historyOf(planned, client, outcome, call, ret);
    if (typeof ops === 'string') {
      this.failure ??= `${client}: ${ops}`;
      return;
    }
    this.history.push(...ops);
    for (const op of ops) this.tally(op);
  }

  private tally(op: HistoryOp): void {
    if (op.input.kind === 'incr' && COUNTER_KEYS.includes(op.key)) {
      const into = op.output === null ? this.incrUnknown : this.incrAcked;
      into.set(op.key, (into.get(op.key) ?? 0) + 1);
    }
    if (op.input.kind === 'putIfAbsent' && op.output?.kind === 'write' && op.output.applied) {
      this.raceWinners.set(op.key, (this.raceWinners.get(op.key) ?? 0) + 1);
    }
  }

  private onCrash(id: string): void {
    this.crashes++;
    for (const client of this.clients) {
      if (client.waiting?.node === id) this.onAnswer(client, client.waiting.token, null);
    }
  }

  // ------------------------------------------------------------------ nemesis

  private nemesis(): void {
    const { cluster, faults, rng } = this;
    if (!faults.active) return;
    const ids = cluster.network.nodeIds;
    if (faults.maybe('node.crash')) {
      const up = cluster.nodes.filter((n) => n.inc !== null);
      if (up.length > 0) this.crashFor(rng.pick(up), rng.between(100, 4_000));
    }
    if (faults.maybe('net.partition')) {
      const side = rng.shuffle([...ids]).slice(0, rng.between(1, ids.length - 1));
      this.later(rng.between(200, 4_000), cluster.network.partition(side));
    }
    if (faults.maybe('net.partition-asym')) {
      const [from, to] = rng.shuffle([...ids]) as [string, string];
      this.later(rng.between(200, 4_000), cluster.network.blockOneWay(from, to));
    }
    if (faults.maybe('net.clog')) this.clogSome();
    if (faults.maybe('net.isolate-leader')) this.isolateLeader();
    cluster.spaceSpells?.step(cluster.nodes.map((n) => n.id), cluster.scheduler.elapsedUs(),
      (id, lengthUs) => this.trace.log(id, `volume low on space for ` +
        `${Math.ceil(lengthUs / 1000)} ms`));
    const stopping = cluster.gracefulStops?.pick(cluster.runningNodes()) ?? null;
    if (stopping !== null) void cluster.stopGracefully(stopping, SHUTDOWN_TRANSFER_MS);
    this.operator.step();
    this.later(NEMESIS_STEP_MS, () => this.nemesis());
  }

  /**
   * Cuts the leader off, alone or with one follower, for a moment: it keeps appending what
   * nobody else holds while the others elect a leader of their own (the Figure 8 case).
   */
  private isolateLeader(): void {
    const { cluster, rng } = this;
    const leaders = cluster.runningNodes()
      .filter((n) => n.running()?.replica.raftStatus().role === 'leader');
    if (leaders.length === 0) return;
    const leader = rng.pick(leaders).id;
    const others = cluster.network.nodeIds.filter((id) => id !== leader);
    const withFollower = others.length > 0 && rng.chance(0.4);
    cluster.isolate(leader, withFollower ? rng.pick(others) : null);
  }

  private crashFor(node: SimNode, downMs: number): void {
    this.cluster.crash(node, 'nemesis');
    node.restartTimer = this.cluster.scheduler.atDelayUs(downMs * 1000, '', () => {
      node.restartTimer = null;
      this.cluster.start(node);
    });
  }

  /** Clogs a few links, then unclogs them one by one in a random order. */
  private clogSome(): void {
    const { network } = this.cluster;
    const ids = this.cluster.network.nodeIds;
    const count = this.rng.between(1, 3);
    for (let i = 0; i < count; i++) {
      const [from, to] = this.rng.shuffle([...ids]) as [string, string];
      network.clog(from, to);
      this.later(this.rng.between(100, 3_000), () => network.unclog(from, to));
    }
  }

  // ------------------------------------------------------------------ liveness

  /**
   * Heals the network and (the supervisor) restarts every node that may run; the operator
   * goes on replacing damaged nodes. The voters of the configuration in force, of which a
   * majority is never damaged (operator.ts), must then commit a fresh write, and the operator
   * must finish: every voter in force runs again.
   */
  private async liveness(): Promise<void> {
    const { cluster } = this;
    this.faults.active = false;
    this.clientsStopped = true;
    this.trace.log('sim', 'liveness phase: heal everything');
    cluster.network.heal();
    // The operator gives a node started with a small budget its memory: a restart.
    for (const node of cluster.nodes) {
      if (node.stateBudget !== null && node.inc !== null) {
        cluster.crash(node, 'restarted by the operator with the default memory budget');
      }
    }
    for (const node of cluster.nodes) cluster.start(node);
    this.operatorSteps();
    const deadlineUs = cluster.scheduler.elapsedUs() + LIVENESS_DEADLINE_MS * 1000;
    const fresh = `"fresh-${this.options.seed}"`;
    const probe = putCall('r-live', fresh, false);
    const outcome = await this.callUntil(probe, deadlineUs);
    if (outcome === null || outcome.status !== 'ok') {
      this.failure ??= `liveness: no fresh write committed within ${LIVENESS_DEADLINE_MS} ms ` +
        `of healing (${this.inForce()})`;
      return;
    }
    this.trace.log('sim', 'liveness: a fresh write committed');
    // The operator finishes its repairs and the supervisor restarts whatever stopped.
    const restored = (): boolean => this.operator.idle() && this.operator.configInForce()
      .voters.every((id) => cluster.node(id).running() !== null);
    await this.runUntil(restored, (deadlineUs - cluster.scheduler.elapsedUs()) / 1000);
    if (!restored()) {
      this.failure ??= `liveness: the configuration in force was not restored within ` +
        `${LIVENESS_DEADLINE_MS} ms (${this.inForce()})`;
      return;
    }
    // Calls still waiting settle by the client deadline, so acknowledged increments are all
    // acknowledged before the final read.
    await this.runUntil(() => this.clients.every((c) => c.waiting === null),
      cluster.settingsTimeoutMs() + 2_000);
    const keys = [...REGISTER_KEYS, ...RACE_KEYS, ...COUNTER_KEYS, EXACT_KEY, ...this.markers];
    const read = await this.callUntil(getCall(keys), deadlineUs);
    if (read === null) this.failure ??= 'liveness: the final read did not finish in time';
  }

  /** In the liveness phase the operator keeps working, faults off (repairs only). */
  private operatorSteps(): void {
    this.operator.step();
    this.later(NEMESIS_STEP_MS, () => this.operatorSteps());
  }

  /** The configuration in force and who runs, for a failure message. */
  private inForce(): string {
    const config = this.operator.configInForce();
    const running = this.cluster.runningNodes().map((n) => n.id);
    return `voters ${config.voters.join(',')}, learners ${config.learners.join(',') || '-'}, ` +
      `running ${running.join(',')}`;
  }

  /** Calls through random running nodes until one answers; records it; null at deadline. */
  private async callUntil(planned: PlannedCall, deadlineUs: number):
    Promise<CallOutcome | null> {
    const { cluster } = this;
    while (cluster.scheduler.elapsedUs() < deadlineUs && this.failed() === null) {
      const config = this.operator.configInForce();
      const everyone = cluster.runningNodes();
      const members = everyone.filter((n) => roleOf(config, n.id) !== null);
      const running = members.length > 0 ? members : everyone;
      if (running.length === 0) {
        await this.runUntil(() => false, RETRY_MS);
        continue;
      }
      const node = this.rng.pick(running);
      const call = ++this.seq;
      let answer: ServiceResult<CallOutcome> | null = null;
      cluster.execute(node, planned.call)?.then((result) => { answer = result; });
      await this.runUntil(() => answer !== null,
        Math.min(cluster.settingsTimeoutMs() + 500,
          (deadlineUs - cluster.scheduler.elapsedUs()) / 1000));
      const settled = answer as ServiceResult<CallOutcome> | null;
      if (settled !== null && settled.kind === 'done') {
        this.record('final', planned, settled.value, call);
        return settled.value;
      }
      if (planned.inputs.some((i) => i.input.kind !== 'get')) {
        this.record('final', planned, null, call);
      }
      await this.runUntil(() => false, RETRY_MS);
    }
    return null;
  }

  // ------------------------------------------------------------------ history

  private finalChecks(): string | null {
    const verdict = checkHistory(this.history);
    if (verdict.kind === 'violation') {
      const lines = verdict.ops.slice(-60).map(describeOp).join('\n  ');
      return `history of key ${verdict.key} is not linearizable:\n  ${lines}`;
    }
    // A key whose search gave up is neither proven nor refuted; counters are still held to
    // their bounds below, so the run reports it and goes on.
    this.inconclusive.push(...verdict.inconclusive);
    const finals = this.finalValues();
    for (const key of COUNTER_KEYS) {
      const value = Number(finals.get(key) ?? '0');
      const acked = this.incrAcked.get(key) ?? 0;
      const unknown = this.incrUnknown.get(key) ?? 0;
      if (value < acked || value > acked + unknown) {
        return `counter ${key} ends at ${value}, outside [${acked}, ${acked + unknown}] ` +
          '(acknowledged increments, plus unknown ones)';
      }
    }
    const markers = [...this.markers].filter((m) => finals.get(m) !== undefined).length;
    const exact = Number(finals.get(EXACT_KEY) ?? '0');
    if (exact !== markers) {
      return `exact counter ${EXACT_KEY} ends at ${exact} but ${markers} markers exist`;
    }
    for (const [key, winners] of this.raceWinners) {
      if (RACE_KEYS.includes(key) && winners > 1) {
        return `putIfAbsent on ${key} won ${winners} times`;
      }
    }
    return null;
  }

  /** The value each key had at the final reads (absent keys are missing). */
  private finalValues(): Map<string, string> {
    const out = new Map<string, string>();
    for (const op of this.history) {
      if (op.client !== 'final' || op.output?.kind !== 'get') continue;
      if (op.output.found && op.output.value !== null) out.set(op.key, op.output.value);
    }
    return out;
  }
}

function describeCall(planned: PlannedCall): string {
  return planned.inputs.map(({ key, input }) => {
    switch (input.kind) {
      case 'put':
      case 'putIfAbsent':
        return `${input.kind} ${key}=${input.value}`;
      case 'incr':
        return `incr ${key}`;
      default:
        return `${input.kind} ${key}`;
    }
  }).join(' + ');
}

function describeOutcome(outcome: CallOutcome | null): string {
  if (outcome === null) return 'unknown';
  if (outcome.status !== 'ok') return outcome.status;
  return outcome.results.map((r) => r.kind === 'get'
    ? (r.found ? `found ${r.valueJson}` : 'missing')
    : r.kind === 'write' ? `${r.applied ? 'applied' : r.reason} ${r.valueJson}` : r.kind)
    .join(', ');
}
