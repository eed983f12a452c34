/**
 * `npm run bench:digest`: what keeping the state digest costs puts, measured side by side.
 * Two modules are compiled from copies of assembly/ (digest-module.ts): `full`, and
 * `nodigest` without the digest upkeep of every write (no row hashes, no digest inputs kept
 * for checkpoints). Then, in rounds that alternate the two (so drift
 * on a shared machine falls on both alike):
 *   1. machine: a child process per module (HIVEKV_WASM_PATH) loads HIVEKV_BENCH_KEYS keys
 *      (1M) and applies put entries of 1 and of 256 operations through `applyEntries`, as a
 *      node's leader does (its own entries: answers rendered); applied puts/s;
 *   2. node: a real `hivekv serve` per module on a fresh data directory, wrk puts at 64
 *      connections for HIVEKV_BENCH_SECONDS (10); calls/s, and the node's CPU per call.
 *      Three runs a round: what ships (`full`, a checkpoint every HIVEKV_DIGEST_EVERY entries
 *      by default), `full` with HIVEKV_DIGEST_EVERY=0, and `nodigest` with it 0.
 * The cost is the share of throughput lost (or of CPU added) within each round's pair; the
 * median over the rounds is reported, with every round's figures. The machine part counts
 * CPU time, not wall time, so other work on a shared machine skews it less.
 *
 * HIVEKV_BENCH_ROUNDS (4), HIVEKV_BENCH_MACHINE_SECONDS (2 per shape), HIVEKV_BENCH_PARTS
 * (`machine,node`). Needs wrk for the node part. Everything listens on 127.0.0.1, every run is
 * bounded by its duration, processes are stopped by their PID, temp directories removed.
 * Run it alone (`flock -x` on a shared machine).
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

import type { Entry } from '../host/core/raft/types.js';
import { encodeCommand } from '../host/machine/codec.js';
import { DEFAULT_TENANT, type KvOp } from '../host/machine/commands.js';
import { StateMachine, type AppliedEntrySink } from '../host/machine/state-machine.js';
import { encodeEnvelope, type Origin } from '../host/node/envelope.js';
import { buildDigestModules, type DigestModules } from './digest-module.js';

const execFileAsync = promisify(execFile);
const ROOT = new URL('../../', import.meta.url).pathname;
const WRK_DIR = join(ROOT, 'bench', 'wrk');
const KEYS = Number(process.env['HIVEKV_BENCH_KEYS'] ?? '1000000');
const ROUNDS = Number(process.env['HIVEKV_BENCH_ROUNDS'] ?? '4');
const MACHINE_SECONDS = Number(process.env['HIVEKV_BENCH_MACHINE_SECONDS'] ?? '2');
const NODE_SECONDS = Number(process.env['HIVEKV_BENCH_SECONDS'] ?? '10');
const PARTS = (process.env['HIVEKV_BENCH_PARTS'] ?? 'machine,node').split(',');
const NODE_KEYS = 100_000;
const SHAPES = [1, 256] as const;
const POOL_OPS = 131_072;
const OPS_PER_CROSSING = 256;
const CHILD_TIMEOUT_MS = 600_000;
const ORIGIN: Origin = { nodeId: 'bench', incarnation: 1 };
const VALUE = `"${'x'.repeat(98)}"`;
const VARIANTS = ['full', 'nodigest'] as const;
type Variant = (typeof VARIANTS)[number];

const keyOf = (i: number): string => `user:${i.toString().padStart(8, '0')}`;

function putOp(key: string): KvOp {
  return { op: 'put', sentAs: 'put', ns: 'bench', key, valueJson: VALUE,
    expiry: { kind: 'forever' }, expect: null, required: false };
}

function commandOf(ops: KvOp[]): Uint8Array {
  return encodeCommand({ kind: 'call', flags: { requireGrant: false },
    call: { tenant: DEFAULT_TENANT, shape: 'batch', ops, readBytesCeiling: 4 << 20 } });
}

const SINK: AppliedEntrySink = {
  answer: () => undefined, done: () => undefined, admin: () => undefined,
  swept: () => undefined,
  checkpoint: () => undefined,
  invalid: (index, detail) => {
    throw new Error(`entry ${index} refused: ${detail}`);
  },
};

/** Applies entries with fresh indexes and proposal numbers (a reused seq would be skipped). */
class Feeder {
  index = 0;
  constructor(private readonly machine: StateMachine) {}
  apply(envelopes: readonly Uint8Array[]): void {
    const entries: Entry[] = envelopes.map((data) => {
      this.index++;
      // The envelope's seq: after u8 version, u8 id length, the id, u32 incarnation.
      new DataView(data.buffer, data.byteOffset).setBigUint64(2 + ORIGIN.nodeId.length + 4,
        BigInt(this.index), true);
      return { term: 1, index: this.index, timeMs: this.index, type: 'normal', data };
    });
    this.machine.applyEntries(entries, SINK);
  }
}

function envelopesOf(opsPerEntry: number, count: number, keyAt: (i: number) => number):
  Uint8Array[] {
  return Array.from({ length: count }, (_, e) => encodeEnvelope(ORIGIN, 1, commandOf(
    Array.from({ length: opsPerEntry }, (_, j) => putOp(keyOf(keyAt(e * opsPerEntry + j)))))));
}

/** The child: one module (HIVEKV_WASM_PATH), applied puts/s by entry shape, as JSON. */
function machineChild(): void {
  const machine = StateMachine.create();
  machine.setOrigin(ORIGIN.nodeId, ORIGIN.incarnation);
  const feeder = new Feeder(machine);
  const load = envelopesOf(256, Math.ceil(KEYS / 256), (i) => i % KEYS);
  for (let i = 0; i < load.length; i += 16) feeder.apply(load.slice(i, i + 16));
  const result: Record<string, number | string> = {};
  for (const ops of SHAPES) {
    // A prime stride: no two neighbouring puts touch neighbouring keys.
    const pool = envelopesOf(ops, POOL_OPS / ops, (i) => (i * 7_919_071) % KEYS);
    const perCrossing = Math.max(1, OPS_PER_CROSSING / ops);
    let applied = 0;
    // CPU time, not wall time: other processes on a shared machine take turns with this one.
    const cpu0 = process.cpuUsage();
    let busyMs = 0;
    for (let at = 0; busyMs < MACHINE_SECONDS * 1000; at = (at + perCrossing) % pool.length) {
      const batch = pool.slice(at, at + perCrossing);
      feeder.apply(batch);
      applied += batch.length * ops;
      const cpu = process.cpuUsage(cpu0);
      busyMs = (cpu.user + cpu.system) / 1000;
    }
    result[`x${ops}`] = applied / (busyMs / 1000);
  }
  result['digest'] = machine.digest();
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

async function machineRun(wasm: string): Promise<Record<string, number>> {
  const { stdout } = await execFileAsync(process.execPath, [join(ROOT, 'dist', 'bench',
    'digest-cost.bench.js'), '--machine-child'], { env: { ...process.env,
    HIVEKV_WASM_PATH: wasm }, timeout: CHILD_TIMEOUT_MS, maxBuffer: 1 << 20 });
  return JSON.parse(stdout.trim().split('\n').at(-1) ?? '{}') as Record<string, number>;
}

function cpuMsOf(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

function startNode(dataDir: string, wasm: string, env: Record<string, string>):
  Promise<{ child: ChildProcess; port: number }> {
  const child = spawn(process.execPath, ['bin/hivekv.js', 'serve', '--host', '127.0.0.1',
    '--port', '0', '--data', dataDir], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, QUEEN_KV_READ_RATE: '0', QUEEN_KV_WRITE_RATE: '0',
      HIVEKV_LOG_LEVEL: 'info', HIVEKV_WASM_PATH: wasm, ...env } });
  return new Promise((resolve, reject) => {
    let seen = '';
    // Read the log for as long as the node runs: an undrained pipe would block it.
    child.stdout?.on('data', (chunk: Buffer) => {
      if (seen.length > 100_000) return;
      seen += chunk.toString();
      const match = /"port":(\d+)/.exec(seen);
      if (match) {
        seen = ' '.repeat(100_001);
        resolve({ child, port: Number(match[1]) });
      }
    });
    child.once('exit', (code) => reject(new Error(`the node exited with ${code}`)));
  });
}

async function stopNode(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
  await exited;
  clearTimeout(timer);
}

interface NodeFigures { readonly callsPerSec: number; readonly cpuUsPerCall: number;
  readonly p99Ms: number }

async function nodeRun(wasm: string, env: Record<string, string>): Promise<NodeFigures> {
  const dataDir = mkdtempSync(join(tmpdir(), 'hivekv-bench-digest-'));
  const { child, port } = await startNode(dataDir, wasm, env);
  try {
    const cpu0 = cpuMsOf(child.pid ?? -1);
    const { stdout } = await execFileAsync('wrk', ['-t', '2', '-c', '64', '-d',
      `${NODE_SECONDS}s`, '--latency', '-s', join(WRK_DIR, 'put.lua'),
      `http://127.0.0.1:${port}`], { env: { ...process.env, HIVEKV_BENCH_DIR: WRK_DIR,
      HIVEKV_BENCH_KEYS: String(NODE_KEYS) }, timeout: (NODE_SECONDS + 60) * 1000 });
    const cpuMs = cpuMsOf(child.pid ?? -1) - cpu0;
    const calls = Number(/(\d+) requests in/.exec(stdout)?.[1] ?? NaN);
    const p99 = /\s99%\s+([\d.]+)(us|ms|s)/.exec(stdout);
    const scale = p99?.[2] === 'us' ? 0.001 : p99?.[2] === 's' ? 1000 : 1;
    if (/Non-2xx/.test(stdout)) throw new Error(`wrk saw refusals:\n${stdout}`);
    return { callsPerSec: Number(/Requests\/sec:\s+([\d.]+)/.exec(stdout)?.[1] ?? NaN),
      cpuUsPerCall: (cpuMs * 1000) / calls, p99Ms: Number(p99?.[1] ?? NaN) * scale };
  } finally {
    await stopNode(child);
    rmSync(dataDir, { recursive: true, force: true });
  }
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

const pct = (v: number): string => `${(v * 100).toFixed(1)}%`;
const fmt = (v: number): string => Math.round(v).toLocaleString('en-US');

/**
 * Prints each round's pair and the median of the paired costs: the share of throughput
 * `measured` loses against `base` (or, lower being better, the share of CPU it adds).
 */
function reportPairs(label: string, pairs: ReadonlyArray<{ base: number; measured: number }>,
  higherIsBetter: boolean, show: (v: number) => string = fmt): void {
  const costs = pairs.map((p) => higherIsBetter ? (p.base - p.measured) / p.base
    : (p.measured - p.base) / p.measured);
  process.stdout.write(`${label}: median ${pct(median(costs))} (rounds: ${pairs.map((p, i) =>
    `${show(p.measured)} vs ${show(p.base)}, ${pct(costs[i]!)}`).join('; ')})\n`);
}

/** The node runs: what ships, the same without checkpoints, and no digest upkeep at all. */
const NODE_VARIANTS = [
  { name: 'shipped', module: 'full', env: {} },
  { name: 'no checkpoints', module: 'full', env: { HIVEKV_DIGEST_EVERY: '0' } },
  { name: 'no digest', module: 'nodigest', env: { HIVEKV_DIGEST_EVERY: '0' } },
] as const;
type NodeVariant = (typeof NODE_VARIANTS)[number]['name'];

async function machineRounds(modules: DigestModules): Promise<void> {
  const rounds: Array<Record<Variant, Record<string, number>>> = [];
  for (let round = 0; round < ROUNDS; round++) {
    // Alternate which module goes first, so a trend in the machine's load favours neither.
    const order = round % 2 === 0 ? VARIANTS : [...VARIANTS].reverse();
    const r = {} as Record<Variant, Record<string, number>>;
    for (const variant of order) r[variant] = await machineRun(modules[variant]);
    rounds.push(r);
  }
  for (const ops of SHAPES) {
    reportPairs(`machine, applied puts/s per CPU second in entries of ${ops} at ${fmt(KEYS)} ` +
      'keys, full vs no digest upkeep', rounds.map((r) => ({ base: r.nodigest[`x${ops}`]!,
      measured: r.full[`x${ops}`]! })), true);
  }
}

async function nodeRounds(modules: DigestModules): Promise<void> {
  const rounds: Array<Record<NodeVariant, NodeFigures>> = [];
  for (let round = 0; round < ROUNDS; round++) {
    const r = {} as Record<NodeVariant, NodeFigures>;
    for (let i = 0; i < NODE_VARIANTS.length; i++) {
      const variant = NODE_VARIANTS[(i + round) % NODE_VARIANTS.length]!;
      r[variant.name] = await nodeRun(modules[variant.module], variant.env);
    }
    rounds.push(r);
  }
  const pairs = (measured: NodeVariant, base: NodeVariant, of: keyof NodeFigures) =>
    rounds.map((r) => ({ base: r[base][of], measured: r[measured][of] }));
  const us = (v: number): string => v.toFixed(1);
  reportPairs('node, put calls/s (wrk, 64 connections), shipped vs no digest',
    pairs('shipped', 'no digest', 'callsPerSec'), true);
  reportPairs('node, CPU µs per put call, shipped vs no digest',
    pairs('shipped', 'no digest', 'cpuUsPerCall'), false, us);
  reportPairs('node, put calls/s, shipped vs no checkpoints',
    pairs('shipped', 'no checkpoints', 'callsPerSec'), true);
  reportPairs('node, CPU µs per put call, shipped vs no checkpoints',
    pairs('shipped', 'no checkpoints', 'cpuUsPerCall'), false, us);
}

async function main(): Promise<void> {
  const work = mkdtempSync(join(tmpdir(), 'hivekv-bench-digest-modules-'));
  try {
    const modules = buildDigestModules(ROOT, work);
    process.stdout.write(`modules compiled; ${ROUNDS} rounds, Node ${process.version}, ` +
      `${cpus().length} x ${cpus()[0]?.model ?? 'unknown CPU'}\n`);
    if (PARTS.includes('machine')) await machineRounds(modules);
    if (PARTS.includes('node')) await nodeRounds(modules);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

if (process.argv.includes('--machine-child')) machineChild();
else await main();
