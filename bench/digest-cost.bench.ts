/**
 * `npm run bench:digest`: what keeping the state digest costs puts, measured side by side.
 * Two modules are compiled from copies of assembly/ (digest-module.ts): `full`, and
 * `nodigest` without the digest upkeep of every write (no row hashes, no digest inputs kept
 * for checkpoints). Then, side by side, so that whatever else a shared machine is doing
 * falls on every variant alike:
 *   1. machine: one machine per module in this process, each loaded with HIVEKV_BENCH_KEYS
 *      keys (1M), apply put entries of 1 and of 256 operations through `applyEntries`, as a
 *      node's leader does (its own entries: answers rendered), taking turns in slices of
 *      16,384 puts (HIVEKV_BENCH_SLICES pairs per shape, 40); the cost of each pair of
 *      slices, median and quartiles;
 *   2. node: what ships (`full`, a checkpoint every HIVEKV_DIGEST_EVERY entries by default),
 *      `full` with HIVEKV_DIGEST_EVERY=0, and `nodigest` with it 0 take turns under wrk puts
 *      at 64 connections, HIVEKV_BENCH_SECONDS (4) each, in HIVEKV_BENCH_ROUNDS (8) rounds
 *      whose order rotates, each turn on a `hivekv serve` started for it on a fresh data
 *      directory; calls/s and the node's CPU per call (from /proc), the cost within each
 *      round, median over the rounds.
 *
 *   3. instructions (only when HIVEKV_BENCH_PARTS names it; needs valgrind, and takes an
 *      hour): the same puts counted under callgrind instead of timed (digest-instructions.ts).
 *   4. node-instructions (only when HIVEKV_BENCH_PARTS names it; needs valgrind, about ten
 *      minutes): a node's instructions per put at one connection, each module's node under
 *      callgrind (digest-node-instructions.ts): the whole of what a put costs a node, against
 *      which part 3's count of the digest is read.
 *
 * HIVEKV_BENCH_PARTS
 * (`machine,node`). Needs wrk for the node part. Everything listens on 127.0.0.1, every run is
 * bounded by its duration, processes are stopped by their PID, temp directories removed.
 * Run it alone (`flock -x` on a shared machine).
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

import { instructionsSideBySide } from './digest-instructions.js';
import { nodeInstructionsSideBySide } from './digest-node-instructions.js';
import { buildDigestModules, type DigestModules } from './digest-module.js';
import { interleaved, loadedFeeder, SLICE_OPS } from './side-by-side.js';

const execFileAsync = promisify(execFile);
const ROOT = new URL('../../', import.meta.url).pathname;
const WRK_DIR = join(ROOT, 'bench', 'wrk');
const KEYS = Number(process.env['HIVEKV_BENCH_KEYS'] ?? '1000000');
const NODE_ROUNDS = Number(process.env['HIVEKV_BENCH_ROUNDS'] ?? '8');
const SLICES = Number(process.env['HIVEKV_BENCH_SLICES'] ?? '40');
const NODE_SECONDS = Number(process.env['HIVEKV_BENCH_SECONDS'] ?? '4');
const PARTS = (process.env['HIVEKV_BENCH_PARTS'] ?? 'machine,node').split(',');
const NODE_KEYS = 100_000;
const SHAPES = [1, 256] as const;
type Variant = 'full' | 'nodigest';

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

/** One wrk run of HIVEKV_BENCH_SECONDS on a running node; its CPU over the run from /proc. */
async function wrkSlice(pid: number, port: number): Promise<NodeFigures> {
  const cpu0 = cpuMsOf(pid);
  const { stdout } = await execFileAsync('wrk', ['-t', '2', '-c', '64', '-d',
    `${NODE_SECONDS}s`, '--latency', '-s', join(WRK_DIR, 'put.lua'),
    `http://127.0.0.1:${port}`], { env: { ...process.env, HIVEKV_BENCH_DIR: WRK_DIR,
    HIVEKV_BENCH_KEYS: String(NODE_KEYS) }, timeout: (NODE_SECONDS + 60) * 1000 });
  const cpuMs = cpuMsOf(pid) - cpu0;
  const calls = Number(/(\d+) requests in/.exec(stdout)?.[1] ?? NaN);
  const p99 = /\s99%\s+([\d.]+)(us|ms|s)/.exec(stdout);
  const scale = p99?.[2] === 'us' ? 0.001 : p99?.[2] === 's' ? 1000 : 1;
  if (/Non-2xx/.test(stdout)) throw new Error(`wrk saw refusals:\n${stdout}`);
  return { callsPerSec: Number(/Requests\/sec:\s+([\d.]+)/.exec(stdout)?.[1] ?? NaN),
    cpuUsPerCall: (cpuMs * 1000) / calls, p99Ms: Number(p99?.[1] ?? NaN) * scale };
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

async function machineSideBySide(modules: DigestModules): Promise<void> {
  const feeders = { full: await loadedFeeder(modules.full, 'full', KEYS),
    nodigest: await loadedFeeder(modules.nodigest, 'nodigest', KEYS) };
  for (const ops of SHAPES) {
    const pairs = interleaved(feeders, ops, KEYS, SLICES);
    const rate = (v: Variant): number => (SLICE_OPS * pairs.length) /
      (pairs.reduce((sum, p) => sum + p[v], 0) / 1000);
    const costs = pairs.map((p) => (p.full - p.nodigest) / p.full).sort((a, b) => a - b);
    const quartile = (q: number): number => costs[Math.floor(q * (costs.length - 1))]!;
    process.stdout.write(`machine, puts in entries of ${ops} at ${fmt(KEYS)} keys: full ` +
      `${fmt(rate('full'))}/s, no digest upkeep ${fmt(rate('nodigest'))}/s; cost per pair of ` +
      `slices: median ${pct(median(costs))} (quartiles ${pct(quartile(0.25))} .. ` +
      `${pct(quartile(0.75))}, ${pairs.length} pairs of ${fmt(SLICE_OPS)} puts)\n`);
  }
}

/**
 * The three node variants take turns under load in short slices, the order rotating, each
 * slice on a node started for it on a fresh directory and stopped after it: a change in what
 * else the machine is doing falls on all three alike, and no variant carries a state, log or
 * snapshot schedule the others do not. (Three long-lived nodes taking turns once put one
 * variant 12% ahead, a gap that fresh nodes did not reproduce.)
 */
async function nodeSideBySide(modules: DigestModules): Promise<void> {
  const work = mkdtempSync(join(tmpdir(), 'hivekv-bench-digest-nodes-'));
  try {
    const rounds: Array<Record<NodeVariant, NodeFigures>> = [];
    for (let round = 0; round < NODE_ROUNDS; round++) {
      const r = {} as Record<NodeVariant, NodeFigures>;
      for (let i = 0; i < NODE_VARIANTS.length; i++) {
        const variant = NODE_VARIANTS[(i + round) % NODE_VARIANTS.length]!;
        const dir = join(work, `${round}-${i}`);
        mkdirSync(dir);
        const node = await startNode(dir, modules[variant.module], variant.env);
        try {
          r[variant.name] = await wrkSlice(node.child.pid ?? -1, node.port);
        } finally {
          await stopNode(node.child);
          rmSync(dir, { recursive: true, force: true });
        }
      }
      rounds.push(r);
    }
    reportNode(rounds);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

function reportNode(rounds: ReadonlyArray<Record<NodeVariant, NodeFigures>>): void {
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
    process.stdout.write(`modules compiled; Node ${process.version}, ` +
      `${cpus().length} x ${cpus()[0]?.model ?? 'unknown CPU'}\n`);
    if (PARTS.includes('machine')) await machineSideBySide(modules);
    if (PARTS.includes('node')) await nodeSideBySide(modules);
    if (PARTS.includes('instructions')) await instructionsSideBySide(modules);
    if (PARTS.includes('node-instructions')) await nodeInstructionsSideBySide(modules);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

await main();
