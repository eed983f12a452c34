/**
 * One simulated run from a seed: the safety phase (clients, faults, checkers on every
 * event), then the liveness phase (heal everything, a majority must elect a leader and
 * commit a fresh write within a bound), then the history checks (linearizability per key,
 * counters counted once, one putIfAbsent winner per key).
 *
 * The seed decides everything: fault rates, replica seeds, delays, client calls. A failing
 * seed replays bit for bit, with `--trace` to read it as a story.
 */
import type { CallOutcome } from '../../host/machine/commands.js';
import type { ServiceResult } from '../../host/node/service.js';
import { SimCluster, type SimNode } from './cluster.js';
import { Faults, FAULT_NAMES, type FaultName } from './faults.js';
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
  readonly faults: string;
  readonly faultHits: ReadonlyMap<FaultName, number>;
  /** Keys whose linearizability search gave up; not a failure, but reported. */
  readonly inconclusiveKeys: readonly string[];
}

/** A majority must elect, commit a fresh write and answer the final reads within this. */
export const LIVENESS_DEADLINE_MS = 30_000;
/** The nemesis draws its faults this often. */
const NEMESIS_STEP_MS = 250;
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
  private readonly faults: Faults;
  private readonly cluster: SimCluster;
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
    this.faults = new Faults(this.rng, options.faultKinds);
    let cluster: SimCluster | null = null;
    this.trace = new Trace(options.trace, options.traceSink,
      () => cluster?.scheduler.elapsedUs() ?? 0);
    const ids = Array.from({ length: options.nodeCount }, (_, i) => `n${i + 1}`);
    cluster = new SimCluster(ids, this.rng, this.faults, this.trace, {
      tickMs: 50, electionTicks: 10, requestTimeoutMs: 2_000,
      snapshotEveryEntries: this.rng.between(20, 400), digestEveryEntries: 1,
    });
    this.cluster = cluster;
    cluster.onCrash = (id) => this.onCrash(id);
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
    this.record(client.id, waiting.planned, outcome, waiting.call);
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
    const ids = cluster.ids;
    if (faults.maybe('node.crash')) {
      const up = cluster.nodes.filter((n) => n.inc !== null);
      if (up.length > 0) this.crashFor(rng.pick(up), rng.between(100, 4_000));
    }
    if (faults.maybe('net.partition')) {
      const side = rng.shuffle([...ids]).slice(0, rng.between(1, ids.length - 1));
      cluster.network.partition(side);
      this.later(rng.between(200, 4_000), () => cluster.network.clearBlocks());
    }
    if (faults.maybe('net.partition-asym')) {
      const [from, to] = rng.shuffle([...ids]) as [string, string];
      cluster.network.blockOneWay(from, to);
      this.later(rng.between(200, 4_000), () => cluster.network.clearBlocks());
    }
    if (faults.maybe('net.clog')) this.clogSome();
    this.later(NEMESIS_STEP_MS, () => this.nemesis());
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
    const ids = this.cluster.ids;
    const count = this.rng.between(1, 3);
    for (let i = 0; i < count; i++) {
      const [from, to] = this.rng.shuffle([...ids]) as [string, string];
      network.clog(from, to);
      this.later(this.rng.between(100, 3_000), () => network.unclog(from, to));
    }
  }

  // ------------------------------------------------------------------ liveness

  private async liveness(): Promise<void> {
    const { cluster } = this;
    this.faults.active = false;
    this.clientsStopped = true;
    this.trace.log('sim', 'liveness phase: heal everything');
    cluster.network.heal();
    for (const node of cluster.nodes) cluster.start(node);
    const deadlineUs = cluster.scheduler.elapsedUs() + LIVENESS_DEADLINE_MS * 1000;
    const fresh = `"fresh-${this.options.seed}"`;
    const probe = putCall('r-live', fresh, false);
    const outcome = await this.callUntil(probe, deadlineUs);
    if (outcome === null || outcome.status !== 'ok') {
      this.failure ??= `liveness: no fresh write committed within ${LIVENESS_DEADLINE_MS} ms ` +
        `of healing (running: ${cluster.runningNodes().map((n) => n.id).join(',')})`;
      return;
    }
    this.trace.log('sim', 'liveness: a fresh write committed');
    // Calls still waiting settle by the client deadline, so acknowledged increments are all
    // acknowledged before the final read.
    await this.runUntil(() => this.clients.every((c) => c.waiting === null),
      cluster.settingsTimeoutMs() + 2_000);
    const keys = [...REGISTER_KEYS, ...RACE_KEYS, ...COUNTER_KEYS, EXACT_KEY, ...this.markers];
    const read = await this.callUntil(getCall(keys), deadlineUs);
    if (read === null) this.failure ??= 'liveness: the final read did not finish in time';
  }

  /** Calls through random running nodes until one answers; records it; null at deadline. */
  private async callUntil(planned: PlannedCall, deadlineUs: number):
    Promise<CallOutcome | null> {
    const { cluster } = this;
    while (cluster.scheduler.elapsedUs() < deadlineUs && this.failed() === null) {
      const running = cluster.runningNodes();
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
