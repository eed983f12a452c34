/**
 * State machine micro benchmark (tinybench, one process): applied writes/s for put, CAS,
 * incr and a mix in entries of 1, 16 and 256 ops with 100-byte values over a store of
 * BENCH_KEYS keys (default 1M); get and getPrefix page reads/s; snapshot and restore time and
 * size; bytes per key beyond key and value. The same write workloads run on the TypeScript
 * reference model at BENCH_MODEL_KEYS keys (it copies its map per call, by design), and the
 * ratio is printed. Entries are encoded before timing (the log carries bytes), except CAS,
 * whose expect comes from the previous result, so its figure includes encoding. The "wasm"
 * rows apply one command at a time and decode its outcome into objects (the API of tests and
 * tools); the "wasm entries" rows take the node's own path: the command in its envelope,
 * `applyEntries`, the answer rendered as JSON inside the machine.
 *
 * Run: npm run bench:machine   (BENCH_TIME_MS, BENCH_KEYS, BENCH_MODEL_KEYS to change it)
 */
import { execSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { cpus } from 'node:os';

import { Bench } from 'tinybench';

import { encodeCommand } from '../host/machine/codec.js';
import type { CallOutcome, Command, KvCall, KvOp } from '../host/machine/commands.js';
import { outcomeOf } from '../test/model/answers.js';
import { DEFAULT_TENANT } from '../host/machine/commands.js';
import { StateMachine, type AppliedEntrySink } from '../host/machine/state-machine.js';
import type { Entry } from '../host/core/raft/types.js';
import { encodeEnvelope } from '../host/node/envelope.js';
import { ReferenceModel } from '../test/model/reference-model.js';
import { createUnitRandom } from '../host/core/prng.js';
import { writeMicroJson } from './micro-json.js';
import { restoreFromBytes, snapshotToBytes } from '../host/machine/snapshot-bytes.js';

const KEYS = Number(process.env.BENCH_KEYS ?? 1_000_000);
const MODEL_KEYS = Number(process.env.BENCH_MODEL_KEYS ?? 10_000);
const TIME_MS = Number(process.env.BENCH_TIME_MS ?? 1_000);
const WARMUP_MS = Math.min(200, TIME_MS);
const VALUE_BYTES = 100;
const VALUE = `"${'x'.repeat(VALUE_BYTES - 2)}"`;
const NS = 'bench';
const CEILING = 4 * 1024 * 1024;
const LOAD_BATCH = 256;
/**
 * Ops pre-encoded per workload: enough distinct keys to leave the caches cold over a task's
 * budget (131,072 from a budget of one second; fewer for the suite's short smoke runs).
 */
const POOL_OPS = Math.min(131_072, Math.max(8_192, TIME_MS * 132));
const BATCHES = [1, 16, 256] as const;
const PAGE_ROWS = 100;

const keyOf = (i: number): string => `user:${i.toString().padStart(8, '0')}`;


/** One side of the comparison; a call's outcome is read back from the machine's answer. */
interface Target {
  apply(command: Command, bytes: Uint8Array): CallOutcome | null;
  /** What the timed loops run: the machine's answer as it is, unread. */
  read(call: KvCall): unknown;
  readOutcome(call: KvCall): CallOutcome;
}

function wasmTarget(m: StateMachine, clock: { index: number; now: number }): Target {
  return {
    apply: (c, bytes) => {
      const out = m.apply(++clock.index, ++clock.now, bytes);
      if (out.kind !== 'call' || out.answer === null || c.kind !== 'call') return null;
      return outcomeOf(c.call, out.answer);
    },
    read: (call) => m.read(call, clock.now),
    readOutcome: (call) => outcomeOf(call, m.read(call, clock.now)),
  };
}

function modelTarget(m: ReferenceModel, clock: { index: number; now: number }): Target {
  return {
    apply: (c) => {
      const out = m.apply(++clock.index, ++clock.now, c);
      return out.kind === 'call' ? out.outcome : null;
    },
    read: (call) => m.read(call, clock.now),
    readOutcome: (call) => m.read(call, clock.now),
  };
}

const call = (ops: KvOp[]): Command => ({ kind: 'call', flags: { requireGrant: false },
  call: { tenant: DEFAULT_TENANT, ops, readBytesCeiling: CEILING } });
const putOp = (key: string, expect: number | null = null): KvOp => ({ op: 'put', sentAs: 'put',
  ns: NS, key, valueJson: VALUE, expiry: { kind: 'ttl', ttlSeconds: 86_400 }, expect,
  required: false });
const incrOp = (key: string): KvOp => ({ op: 'incr', ns: NS, key: `ctr:${key}`, delta: '1',
  min: null, max: '1000000000', expiry: { kind: 'forever' }, required: false });

function load(t: Target, keys: number): void {
  for (let i = 0; i < keys; i += LOAD_BATCH) {
    const ops: KvOp[] = [];
    for (let k = i; k < Math.min(keys, i + LOAD_BATCH); k++) ops.push(putOp(keyOf(k)));
    const c = call(ops);
    t.apply(c, encodeCommand(c));
  }
}

/** Distinct keys for one entry: a random start and a prime stride. */
function entryKeys(rand: () => number, keys: number, batch: number): number[] {
  const start = Math.floor(rand() * keys);
  return Array.from({ length: batch }, (_, j) => (start + j * 7919) % keys);
}

type Kind = 'put' | 'incr' | 'mixed';

function pool(kind: Kind, keys: number, batch: number, seed: number):
  Array<{ c: Command; b: Uint8Array }> {
  const rand = createUnitRandom(seed);
  const entries = Math.max(64, Math.floor(Math.min(POOL_OPS, keys * 4) / batch));
  const out: Array<{ c: Command; b: Uint8Array }> = [];
  for (let e = 0; e < entries; e++) {
    const ops = entryKeys(rand, keys, batch).map((k, j): KvOp => {
      if (kind === 'put') return putOp(keyOf(k));
      if (kind === 'incr') return incrOp(keyOf(k));
      const r = (j * 2654435761 + e) % 10;
      return r < 5 ? putOp(keyOf(k)) : r < 8 ? incrOp(keyOf(k)) : { op: 'get', ns: NS,
        key: keyOf(k) };
    });
    const c = call(ops);
    out.push({ c, b: encodeCommand(c) });
  }
  return out;
}

interface Figure { name: string; perSecond: number; unit: string; p50us: number; p99us: number;
  rme: number }

async function measure(name: string, unitsPerCall: number, unit: string, fn: () => void):
  Promise<Figure> {
  const bench = new Bench({ time: TIME_MS, warmupTime: WARMUP_MS });
  bench.add(name, fn);
  await bench.run();
  const r = bench.tasks[0]!.result;
  if (r.state !== 'completed') throw new Error(`${name}: ${r.state}`);
  return { name, perSecond: r.throughput.mean * unitsPerCall, unit,
    p50us: r.latency.p50 * 1000, p99us: r.latency.p99 * 1000, rme: r.latency.rme };
}

/** A figure per workload and entry size, `apply` taking the pre-encoded entries in turn. */
async function poolFigures(keys: number, label: string,
  apply: (entry: { c: Command; b: Uint8Array }) => void): Promise<Figure[]> {
  const out: Figure[] = [];
  for (const kind of ['put', 'incr', 'mixed'] as const) {
    for (const batch of BATCHES) {
      const entries = pool(kind, keys, batch, batch * 31 + kind.length);
      let i = 0;
      out.push(await measure(`${label} ${kind} x${batch}`, batch, 'writes/s',
        () => apply(entries[i++ % entries.length]!)));
    }
  }
  return out;
}

async function writeFigures(t: Target, keys: number, label: string, cas: boolean):
  Promise<Figure[]> {
  const out = await poolFigures(keys, label, (e) => {
    t.apply(e.c, e.b);
  });
  if (cas) {
    const versions = versionsOf(t, keys);
    for (const batch of BATCHES) {
      const rand = createUnitRandom(batch);
      out.push(await measure(`${label} CAS x${batch}`, batch, 'writes/s', () => {
        const ks = entryKeys(rand, keys, batch);
        const ops = ks.map((k) => putOp(keyOf(k), versions[k]!));
        const c = call(ops);
        const res = t.apply(c, encodeCommand(c));
        if (res === null || res.status !== 'ok') throw new Error('CAS call');
        res.results.forEach((r, j) => {
          if (r.kind !== 'write' || !r.applied) throw new Error('CAS lost');
          versions[ks[j]!] = r.version;
        });
      }));
    }
  }
  return out;
}

/** This benchmark's node: the origin the machine answers for, as a leader's does. */
const ORIGIN = { nodeId: 'n1', incarnation: 7 };

/** Counts the answers `applyEntries` renders; a refusal is a bug in the benchmark. */
class CountingSink implements AppliedEntrySink {
  answers = 0;
  answer(): void {
    this.answers++;
  }
  done(): void {}
  admin(): void {}
  swept(): void {}
  checkpoint(): void {}
  invalid(entryIndex: number, detail: string): void {
    throw new Error(`entry ${entryIndex} refused: ${detail}`);
  }
}

/**
 * The node's own apply path: each command in its envelope (a fresh sequence number, as a
 * proposal gets), applied by `applyEntries` with the answer rendered as JSON in the machine
 * for this node's own entries, as on a leader. The figures the node's throughput rests on.
 */
async function entryFigures(m: StateMachine, keys: number, label: string): Promise<Figure[]> {
  m.setOrigin(ORIGIN.nodeId, ORIGIN.incarnation);
  const sink = new CountingSink();
  let index = m.appliedIndex;
  let timeMs = m.lastTimeMs;
  let seq = 0;
  const out = await poolFigures(keys, label, (e) => {
    const entry: Entry = { term: 1, index: ++index, timeMs: ++timeMs, type: 'normal',
      data: encodeEnvelope(ORIGIN, ++seq, e.b) };
    m.applyEntries([entry], sink);
  });
  if (sink.answers !== seq) throw new Error(`${seq} entries applied, ${sink.answers} answered`);
  return out;
}

/** Every key's current version, read once through getPrefix pages (not timed). */
function versionsOf(t: Target, keys: number): Float64Array {
  const v = new Float64Array(keys);
  let after = '';
  for (let pages = 0; pages <= keys / 1000 + 1; pages++) {
    const res = t.readOutcome({ tenant: DEFAULT_TENANT, readBytesCeiling: CEILING, ops: [{
      op: 'getPrefix', ns: NS, prefix: 'user:', after, limit: 1000, keysOnly: true }] });
    if (res.status !== 'ok') throw new Error('versions read');
    const page = res.results[0]!;
    if (page.kind !== 'getPrefix') throw new Error('versions page');
    for (const row of page.rows) v[Number(row.key.slice(5))] = row.version;
    if (page.nextAfter === null) break;
    after = page.nextAfter;
  }
  return v;
}

async function readFigures(t: Target, keys: number, label: string): Promise<Figure[]> {
  const rand = createUnitRandom(7);
  const gets: KvCall[] = Array.from({ length: 65_536 }, () => ({ tenant: DEFAULT_TENANT,
    readBytesCeiling: CEILING,
    ops: [{ op: 'get', ns: NS, key: keyOf(Math.floor(rand() * keys)) }] }));
  const pages: KvCall[] = Array.from({ length: 4096 }, () => ({ tenant: DEFAULT_TENANT,
    readBytesCeiling: CEILING, ops: [{ op: 'getPrefix', ns: NS, prefix: 'user:',
      after: keyOf(Math.floor(rand() * (keys - PAGE_ROWS))), limit: PAGE_ROWS,
      keysOnly: false }] }));
  let i = 0, j = 0;
  return [
    await measure(`${label} get`, 1, 'reads/s', () => { t.read(gets[i++ % gets.length]!); }),
    await measure(`${label} getPrefix page of ${PAGE_ROWS}`, 1, 'pages/s',
      () => { t.read(pages[j++ % pages.length]!); }),
  ];
}

function timed<T>(fn: () => T): { value: T; ms: number } {
  const start = process.hrtime.bigint();
  const value = fn();
  return { value, ms: Number(process.hrtime.bigint() - start) / 1e6 };
}

function environment(): string {
  const cpu = /model name\s*:\s*(.*)/.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1] ?? '?';
  const load = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
  let commit = '?';
  try { commit = execSync('git rev-parse --short HEAD').toString().trim(); } catch { /* none */ }
  return `node ${process.version}, ${cpu} (${cpus().length} cores, load average ${load}), ` +
    `commit ${commit}`;
}

const fmt = (n: number): string => Math.round(n).toLocaleString('en-US');

async function main(): Promise<void> {
  console.log(`# Machine benchmark: ${environment()}`);
  console.log(`keys ${fmt(KEYS)}, values ${VALUE_BYTES} B, model keys ${fmt(MODEL_KEYS)}, ` +
    `${TIME_MS} ms per task`);
  const clock = { index: 0, now: 1_700_000_000_000 };
  const m = StateMachine.create();
  const memEmpty = m.memoryBytes();
  const loadT = timed(() => load(wasmTarget(m, clock), KEYS));
  console.log(`load ${fmt(KEYS)} keys in entries of ${LOAD_BATCH}: ${loadT.ms.toFixed(0)} ms ` +
    `(${fmt(KEYS / loadT.ms * 1000)} inserts/s)`);
  const memLoaded = m.memoryBytes();
  const snap = timed(() => snapshotToBytes(m));
  const fresh = StateMachine.create();
  const restore = timed(() => restoreFromBytes(fresh, snap.value));
  const keyBytes = keyOf(0).length + 5 + 4 + 1; // user key + namespace, NUL, tenant id
  const perKey = fresh.structureBytes() / KEYS;
  console.log(`snapshot ${snap.ms.toFixed(0)} ms, ${fmt(snap.value.length)} bytes; restore ` +
    `${restore.ms.toFixed(0)} ms; digest equal ${fresh.digest() === m.digest()}`);
  console.log(`bytes per key after restore: ${perKey.toFixed(1)} structure (of which user key ` +
    `${keyOf(0).length} + value ${VALUE_BYTES}); overhead beyond key and value ` +
    `${(perKey - keyOf(0).length - VALUE_BYTES).toFixed(1)} (store-key prefix ` +
    `${keyBytes - keyOf(0).length} B included); wasm memory after load ` +
    `${((memLoaded - memEmpty) / KEYS).toFixed(1)} B/key (memory grows by doubling and holds ` +
    `garbage until the GC frees it)`);
  const wasmClock = { index: fresh.appliedIndex, now: fresh.lastTimeMs };
  const wt = wasmTarget(fresh, wasmClock);
  const figures = [...await readFigures(wt, KEYS, 'wasm'),
    ...await writeFigures(wt, KEYS, 'wasm', true),
    ...await entryFigures(fresh, KEYS, 'wasm entries')];
  const model = new ReferenceModel();
  const mclock = { index: 0, now: 1_700_000_000_000 };
  const mt = modelTarget(model, mclock);
  load(mt, MODEL_KEYS);
  const small = StateMachine.create();
  const sclock = { index: 0, now: 1_700_000_000_000 };
  const st = wasmTarget(small, sclock);
  load(st, MODEL_KEYS);
  const modelFigures = await writeFigures(mt, MODEL_KEYS, 'model', false);
  const smallFigures = await writeFigures(st, MODEL_KEYS, `wasm@${MODEL_KEYS}`, false);
  console.log('\n| workload | per second | p50 µs | p99 µs | rme % |\n|---|---:|---:|---:|---:|');
  for (const f of [...figures, ...smallFigures, ...modelFigures]) {
    console.log(`| ${f.name} | ${fmt(f.perSecond)} ${f.unit} | ${f.p50us.toFixed(1)} | ` +
      `${f.p99us.toFixed(1)} | ${f.rme.toFixed(1)} |`);
  }
  console.log(`\n| workload at ${fmt(MODEL_KEYS)} keys | wasm / model |\n|---|---:|`);
  smallFigures.forEach((f, i) => {
    const g = modelFigures[i]!;
    console.log(`| ${g.name.slice(6)} | ${(f.perSecond / g.perSecond).toFixed(1)}x |`);
  });
  writeMicroJson([...figures, ...smallFigures, ...modelFigures].map((f) => ({ name: f.name,
    perSecond: f.perSecond, unit: f.unit, p50us: f.p50us, p99us: f.p99us, rmePercent: f.rme })),
  [`${fmt(KEYS)} keys: load ${loadT.ms.toFixed(0)} ms, snapshot ${snap.ms.toFixed(0)} ms ` +
    `(${fmt(snap.value.length)} bytes), restore ${restore.ms.toFixed(0)} ms, ` +
    `${(perKey - keyOf(0).length - VALUE_BYTES).toFixed(1)} bytes of overhead per key`]);
}

await main();
