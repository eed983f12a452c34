/**
 * A load generator thread: `connections` sockets to one target, each with at most one request
 * in flight, running one workload for a warm-up and a measured window.
 *
 * - Closed loop: each connection starts its next logical operation when the last one ends;
 *   this finds the peak throughput.
 * - Open loop: operations are due at fixed intended times (rate R: one every 1/R s). A due
 *   operation takes an idle connection, or waits in a backlog when none is idle; its latency
 *   runs from its intended time, so a stalled server is charged for every operation it
 *   delayed (no coordinated omission). A clock thread (`clock-worker.ts`) wakes this one at
 *   sub-millisecond intervals. A backlog past `BACKLOG_SECONDS_MAX` of load marks the rate as
 *   not sustained and stops scheduling.
 *
 * Everything a check needs afterwards is counted over the whole run, warm-up included
 * (`check*`); the figures count the measured window only.
 */
import { MessageChannel, Worker, parentPort, workerData } from 'node:worker_threads';

import hdr from 'hdr-histogram-js';

import { createUnitRandom } from '../../host/core/prng.js';
import { etcdCodec, hivekvCodec, redisCodec, type Codec, type TargetKind,
  type WriteOutcome } from './codecs.js';
import { Conn } from './conn.js';
import type { Reply } from './wire.js';
import { BATCH_SIZE, COUNTER_TTL_SECONDS, makeValue, valueNumber, zipfianChooser,
  type OpKind, type Workload } from './workloads.js';

export interface PointSpec {
  readonly codec: { readonly kind: TargetKind; readonly shas?: { cas: string; incr: string } };
  readonly host: string;
  /** Connections are spread over these ports in turn (a cluster's members). */
  readonly ports: readonly number[];
  readonly connections: number;
  readonly mode: 'closed' | 'open';
  /** Open loop: logical operations per second this thread offers. */
  readonly ratePerSecond: number;
  readonly warmupMs: number;
  readonly durationMs: number;
  readonly workload: Workload;
  readonly seed: number;
  /** Written into every value, to tell this run's writes from any other's. */
  readonly tag: string;
  /** Key names are `${keyPrefix}${index}`. */
  readonly keyPrefix: string;
  /** Bytes of a value as the codec sends it. */
  readonly valueBytes: number;
}

export interface Counts {
  logical: number;
  requests: number;
  /** Requests that failed: transport, non-2xx, or a reply the codec could not read. */
  failed: number;
  statuses: Record<string, number>;
  notFound: number;
  applied: number;
  refused: number;
  conflicts: number;
  retries: number;
  gaveUp: number;
}

export interface WorkerResult {
  readonly histogram: string;
  readonly lagHistogram: string;
  readonly window: Counts;
  readonly all: Counts;
  /** Requests sent per primitive, and key writes applied (a batch applies 16). */
  readonly checkRequests: Record<string, number>;
  readonly checkKeyWrites: number;
  /** Requests that applied at least one write (etcd's revision moves once per such request). */
  readonly checkWriteRequests: number;
  /** Logical CAS or increments applied per touched key index (fresh key spaces). */
  readonly checkAppliedByKey: Record<string, number>;
  /** Keys this run wrote (a sample, the latest last), to read back. */
  readonly writtenKeys: string[];
  readonly stuck: number;
  readonly saturated: boolean;
  /** Open loop: operations that were due but never found a connection before the end. */
  readonly unsent: number;
  readonly windowMs: number;
}

const LATENCY_MICROS_MAX = 120_000_000;
const BACKLOG_SECONDS_MAX = 2;
/** Due indexes shared with the clock thread are int32. */
const DUE_INDEX_MAX = 0x7fff_ffff;
const DRAIN_TIMEOUT_MS = 10_000;
const WRITTEN_SAMPLE_MAX = 256;
/** A prime: `BATCH_SIZE` multiples of it fall on distinct keys of any key space it does
 * not divide. */
const BATCH_KEY_STRIDE = 7919;
/** A CAS loop (etcd's bounded increment) gives up after this many lost races. */
const CAS_ATTEMPTS_MAX = 64;

function newCounts(): Counts {
  return { logical: 0, requests: 0, failed: 0, statuses: {}, notFound: 0, applied: 0,
    refused: 0, conflicts: 0, retries: 0, gaveUp: 0 };
}

function newHistogram(): hdr.Histogram {
  return hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: LATENCY_MICROS_MAX,
    numberOfSignificantValueDigits: 3 });
}

function codecFor(spec: PointSpec): Codec {
  if (spec.codec.kind === 'hivekv') return hivekvCodec();
  if (spec.codec.kind === 'etcd') return etcdCodec();
  if (spec.codec.shas === undefined) throw new Error('redis: script digests missing');
  return redisCodec(spec.codec.shas);
}

/** One logical operation in flight on a connection. */
interface Op {
  kind: OpKind;
  key: number;
  startMs: number;
  /** For multi-request operations: which step, and how many CAS attempts so far. */
  step: number;
  attempts: number;
  primitive: string;
  /** The number a CAS request carries (the key's next count), kept for its answer. */
  sentNumber: number;
}

class Generator {
  readonly codec: Codec;
  readonly hist = newHistogram();
  readonly lag = newHistogram();
  window = newCounts();
  readonly all = newCounts();
  readonly checkRequests: Record<string, number> = {};
  checkKeyWrites = 0;
  checkWriteRequests = 0;
  readonly appliedByKey = new Map<number, number>();
  readonly written: string[] = [];
  /** Per key: the version and number the last answer gave (CAS, the etcd increment loop). */
  readonly versions: Float64Array;
  readonly numbers: Float64Array;
  readonly random: () => number;
  readonly chooseKey: () => number;
  readonly kinds: OpKind[] = [];
  readonly cumulative: number[] = [];
  measuring = false;
  stopping = false;
  /** Open loop: sends every operation due by now that finds a free connection. */
  dispatchDue: () => void = () => undefined;
  inFlight = 0;
  sequence = 0;

  constructor(readonly spec: PointSpec) {
    this.codec = codecFor(spec);
    this.random = createUnitRandom(spec.seed);
    const n = spec.workload.keyCount;
    this.versions = new Float64Array(n);
    this.numbers = new Float64Array(n);
    this.chooseKey = spec.workload.distribution === 'zipfian'
      ? zipfianChooser(n, this.random) : () => Math.floor(this.random() * n);
    let sum = 0;
    for (const [kind, share] of Object.entries(spec.workload.mix)) {
      sum += share;
      this.kinds.push(kind as OpKind);
      this.cumulative.push(sum);
    }
  }

  keyName(index: number): string {
    return `${this.spec.keyPrefix}${index}`;
  }

  nextOp(startMs: number): Op {
    const r = this.random() * this.cumulative[this.cumulative.length - 1]!;
    let i = 0;
    while (i < this.kinds.length - 1 && r >= this.cumulative[i]!) i++;
    return { kind: this.kinds[i]!, key: this.chooseKey(), startMs, step: 0, attempts: 0,
      primitive: '', sentNumber: 0 };
  }

  count(field: 'notFound' | 'applied' | 'refused' | 'conflicts' | 'retries' | 'gaveUp' |
    'failed' | 'logical' | 'requests'): void {
    this.all[field]++;
    if (this.measuring) this.window[field]++;
  }

  noteStatus(status: number): void {
    const key = String(status);
    this.all.statuses[key] = (this.all.statuses[key] ?? 0) + 1;
    if (this.measuring) this.window.statuses[key] = (this.window.statuses[key] ?? 0) + 1;
  }

  /** The first (or next) request of `op`, or null when the operation is complete. */
  request(op: Op): Buffer | null {
    const key = this.keyName(op.key);
    const value = (n: number) => makeValue(this.spec.tag, n, this.spec.valueBytes);
    switch (op.kind) {
      case 'get': return this.send(op, 'get', this.codec.get(key));
      case 'put': return this.send(op, 'put', this.codec.put(key, value(++this.sequence)));
      case 'batch': {
        // Distinct keys (a call names a key once): a random first key and a prime stride.
        // op.key is the first, the one the read-back check samples.
        const n = this.spec.workload.keyCount;
        const keys = Array.from({ length: BATCH_SIZE }, (_, i) =>
          this.keyName((op.key + i * BATCH_KEY_STRIDE) % n));
        return this.send(op, 'putMany', this.codec.putMany(keys, value(++this.sequence)));
      }
      case 'rmw': return op.step === 0 ? this.send(op, 'get', this.codec.get(key))
        : this.send(op, 'put', this.codec.put(key, value(++this.sequence)));
      case 'cas':
        op.sentNumber = this.numbers[op.key]! + 1;
        return this.send(op, 'cas', this.codec.cas(key, this.versions[op.key]!,
          value(op.sentNumber)));
      case 'incr': return this.incrRequest(op, key);
    }
  }

  incrRequest(op: Op, key: string): Buffer {
    const w = this.spec.workload;
    const native = this.codec.incr(key, 1, w.incrMax, COUNTER_TTL_SECONDS);
    if (native !== null) return this.send(op, 'incr', native);
    // No bounded increment: read when the cached count says "full" (it may be stale), else
    // compare-and-swap the next count against the cached version.
    if (op.step === 0 && this.numbers[op.key]! + 1 > w.incrMax) {
      return this.send(op, 'get', this.codec.get(key));
    }
    op.sentNumber = this.numbers[op.key]! + 1;
    return this.send(op, 'cas', this.codec.cas(key, this.versions[op.key]!,
      String(op.sentNumber)));
  }

  send(op: Op, primitive: string, bytes: Buffer): Buffer {
    op.primitive = primitive;
    this.checkRequests[primitive] = (this.checkRequests[primitive] ?? 0) + 1;
    this.count('requests');
    return bytes;
  }

  /** Reads the answer to `op`'s last request; true when `op` is complete. */
  answer(op: Op, reply: Reply): boolean {
    this.noteStatus(reply.status);
    switch (op.primitive) {
      case 'get': return this.answerGet(op, reply);
      case 'put': case 'putMany': {
        const outcome = this.codec.readWrite(reply, false);
        if (!outcome.ok) return this.fail();
        this.wrote(op, op.primitive === 'putMany' ? BATCH_SIZE : 1);
        return true;
      }
      case 'cas': return this.answerCas(op, this.codec.readWrite(reply, true));
      case 'incr': return this.answerIncr(op, this.codec.readWrite(reply, true));
      default: throw new Error(`unknown primitive ${op.primitive}`);
    }
  }

  fail(): boolean {
    this.count('failed');
    return true;
  }

  wrote(op: Op, keyWrites: number): void {
    this.checkKeyWrites += keyWrites;
    this.checkWriteRequests++;
    this.written.push(this.keyName(op.key));
    if (this.written.length > WRITTEN_SAMPLE_MAX) this.written.shift();
  }

  answerGet(op: Op, reply: Reply): boolean {
    const wantValue = op.kind === 'incr';
    const outcome = this.codec.readRead(reply, wantValue);
    if (!outcome.ok) return this.fail();
    if (!outcome.found && this.spec.workload.space === 'preloaded') this.count('notFound');
    if (op.kind === 'rmw') {
      op.step = 1;
      return false;
    }
    if (op.kind !== 'incr') return true;
    // etcd's increment loop re-read a counter its cache called full.
    const n = outcome.found ? Number(outcome.value) : 0;
    if (outcome.version >= this.versions[op.key]!) {
      this.numbers[op.key] = n;
      this.versions[op.key] = outcome.version;
    }
    op.step = 1;
    if (n + 1 > this.spec.workload.incrMax) {
      this.count('refused');
      return true;
    }
    return false;
  }

  answerCas(op: Op, outcome: WriteOutcome): boolean {
    if (!outcome.ok) return this.fail();
    if (outcome.applied) {
      // Answers to racing requests may arrive in any order: keep the newest version.
      if (outcome.version > this.versions[op.key]!) {
        this.versions[op.key] = outcome.version;
        this.numbers[op.key] = op.sentNumber;
      }
      this.wrote(op, 1);
      this.count('applied');
      this.appliedByKey.set(op.key, (this.appliedByKey.get(op.key) ?? 0) + 1);
      return true;
    }
    // Lost the race: the answer carries the key's current version and value.
    if (outcome.version >= this.versions[op.key]!) {
      this.versions[op.key] = outcome.version;
      this.numbers[op.key] = outcome.value === null ? 0 : valueNumber(outcome.value);
    }
    if (op.kind === 'cas') {
      this.count('conflicts');
      return true;
    }
    this.count('retries');
    op.attempts++;
    if (op.attempts >= CAS_ATTEMPTS_MAX) {
      this.count('gaveUp');
      return true;
    }
    op.step = 0;
    return false;
  }

  answerIncr(op: Op, outcome: WriteOutcome): boolean {
    if (!outcome.ok) return this.fail();
    if (outcome.applied) {
      this.wrote(op, 1);
      this.count('applied');
      this.appliedByKey.set(op.key, (this.appliedByKey.get(op.key) ?? 0) + 1);
    } else {
      this.count('refused');
    }
    return true;
  }
}

/** Intended start times waiting for a connection, oldest first. */
class Backlog {
  private items: number[] = [];
  private head = 0;

  get length(): number {
    return this.items.length - this.head;
  }

  push(intendedMs: number): void {
    this.items.push(intendedMs);
  }

  shift(): number {
    const value = this.items[this.head++]!;
    if (this.head > 4096 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return value;
  }

  clear(): number {
    const dropped = this.length;
    this.items = [];
    this.head = 0;
    return dropped;
  }
}

/** Per-connection driver: runs logical operations one after another. */
class Lane {
  op: Op | null = null;

  constructor(readonly conn: Conn, readonly gen: Generator, readonly idle: Lane[],
    readonly backlog: Backlog) {
    conn.onReply = (reply) => this.onReply(reply);
    conn.onClose = () => {
      if (this.op !== null && !gen.stopping) gen.count('failed');
    };
  }

  start(intendedMs: number): void {
    const op = this.gen.nextOp(intendedMs);
    this.op = op;
    this.gen.inFlight++;
    const now = performance.now();
    if (this.gen.measuring && this.gen.spec.mode === 'open') {
      this.gen.lag.recordValue(Math.max(1, Math.round((now - intendedMs) * 1000)));
    }
    this.conn.send(this.gen.request(op)!);
  }

  onReply(reply: Reply): void {
    const op = this.op;
    if (op === null) throw new Error('a reply nobody asked for');
    const done = this.gen.answer(op, reply);
    if (!done) {
      this.conn.send(this.gen.request(op)!);
      return;
    }
    const now = performance.now();
    this.gen.count('logical');
    if (this.gen.measuring) {
      this.gen.hist.recordValue(Math.max(1, Math.round((now - op.startMs) * 1000)));
    }
    this.op = null;
    this.gen.inFlight--;
    if (this.gen.stopping) return;
    if (this.gen.spec.mode === 'closed') {
      this.start(now);
    } else if (this.backlog.length > 0) {
      this.start(this.backlog.shift()!);
    } else {
      this.idle.push(this);
      // Replies wake this thread often under load: send what fell due since the last tick.
      this.gen.dispatchDue();
    }
  }
}

export { Generator, Lane };

async function run(spec: PointSpec): Promise<WorkerResult> {
  const gen = new Generator(spec);
  const conns: Conn[] = [];
  for (let i = 0; i < spec.connections; i++) {
    const port = spec.ports[i % spec.ports.length]!;
    conns.push(await Conn.open(spec.host, port, spec.codec.kind === 'redis' ? 'resp' : 'http'));
  }
  const idle: Lane[] = [];
  const backlog = new Backlog();
  const lanes = conns.map((conn) => new Lane(conn, gen, idle, backlog));
  const t0 = performance.now();
  let windowStart = t0;
  const saturated = spec.mode === 'closed' ? runClosed(lanes, t0) :
    runOpen(gen, lanes, idle, backlog, t0, spec);
  await sleep(spec.warmupMs);
  gen.measuring = true;
  gen.window = newCounts();
  windowStart = performance.now();
  parentPort?.postMessage({ type: 'measuring' });
  await sleep(spec.durationMs);
  gen.measuring = false;
  const windowMs = performance.now() - windowStart;
  gen.stopping = true;
  const isSaturated = await saturated.stop();
  const unsent = backlog.clear();
  const stuck = await drain(gen);
  for (const conn of conns) conn.close();
  return { histogram: hdr.encodeIntoCompressedBase64(gen.hist),
    lagHistogram: hdr.encodeIntoCompressedBase64(gen.lag), window: gen.window, all: gen.all,
    checkRequests: gen.checkRequests, checkKeyWrites: gen.checkKeyWrites,
    checkWriteRequests: gen.checkWriteRequests,
    checkAppliedByKey: Object.fromEntries([...gen.appliedByKey].map(([k, v]) =>
      [gen.keyName(k), v])),
    writtenKeys: gen.written, stuck, saturated: isSaturated, unsent, windowMs };
}

interface Schedule { stop(): Promise<boolean> }

function runClosed(lanes: Lane[], t0: number): Schedule {
  for (const lane of lanes) lane.start(t0);
  return { stop: () => Promise.resolve(false) };
}

function runOpen(gen: Generator, lanes: Lane[], idle: Lane[], backlog: Backlog, t0: number,
  spec: PointSpec): Schedule {
  idle.push(...lanes);
  const intervalMs = 1000 / spec.ratePerSecond;
  let due = 0;
  let saturated = false;
  const backlogMax = Math.max(1000, spec.ratePerSecond * BACKLOG_SECONDS_MAX);
  const dispatch = () => {
    if (gen.stopping || saturated) return;
    const now = performance.now();
    while (t0 + due * intervalMs <= now) {
      const intended = t0 + due * intervalMs;
      due++;
      const lane = idle.pop();
      if (lane !== undefined) lane.start(intended);
      else backlog.push(intended);
    }
    if (backlog.length > backlogMax) saturated = true;
    Atomics.store(dispatched, 0, Math.min(due, DUE_INDEX_MAX));
  };
  // How far this thread has dispatched, read by the clock: it skips a tick that is not needed.
  const dispatched = new Int32Array(new SharedArrayBuffer(4));
  gen.dispatchDue = dispatch;
  const channel = new MessageChannel();
  channel.port1.on('message', dispatch);
  const clock = new Worker(new URL('./clock-worker.js', import.meta.url), {
    workerData: { port: channel.port2, startMs: performance.timeOrigin + t0, intervalMs,
      dispatched }, transferList: [channel.port2] });
  return {
    async stop() {
      await clock.terminate();
      channel.port1.close();
      return saturated;
    },
  };
}

async function drain(gen: Generator): Promise<number> {
  const deadline = performance.now() + DRAIN_TIMEOUT_MS;
  while (gen.inFlight > 0 && performance.now() < deadline) await sleep(5);
  return gen.inFlight;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

if (parentPort !== null && workerData !== null) {
  const port = parentPort;
  run(workerData as PointSpec).then(
    (result) => port.postMessage({ type: 'result', result }),
    (error: unknown) => port.postMessage({ type: 'error',
      message: error instanceof Error ? error.stack ?? error.message : String(error) }));
}
