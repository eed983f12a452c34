/**
 * `npm run bench:node`: one durable node under wrk load, beside the bare hyper-express ceiling
 * measured in the same run. 100-byte values over 100k keys; put, get, CAS, incr with `max`
 * and batches of 16 puts, at 64 connections and at 1, after 3 s of unmeasured load on each
 * server. Each node row is bracketed by two turns of the bare server (half a row long each,
 * one turn shared by neighbouring rows), and its ratio is to the mean of its two brackets:
 * this machine's speed moves from minute to minute, so a ceiling measured once at the start
 * of the run could be a minute away from the row it divides. Just before the one-connection
 * rows it times the disk's part of a put (the WAL bench's single-entry append + fdatasync)
 * and checks the one-connection target against it, saying beside it on which vCPU the node's
 * thread ran during the put row and which vCPU took the disk's interrupts (Linux only).
 * Prints a table and writes it to bench/RESULTS.md under "## Node", with the run it replaces
 * kept below it as "### The run before" (the rest of the file is kept).
 *
 * Needs `wrk` (Debian: `apt-get install wrk`). Everything listens on 127.0.0.1, every run is
 * bounded by its duration, and the processes started here are stopped by their PID.
 */
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';

import { haltPollingWords, readHaltPolling } from '../host/node/halt-polling.js';
import { previousRunOf } from './results-section.js';
import { PlacementSampler } from './vcpu-placement.js';

const execFileAsync = promisify(execFile);

const ROOT = new URL('../../', import.meta.url).pathname;
const WRK_DIR = join(ROOT, 'bench', 'wrk');
const KEYS = 100_000;
const DURATION_S = Number(process.env['HIVEKV_BENCH_SECONDS'] ?? '10');
/**
 * Unmeasured load on both servers before the first row: otherwise the first row of each
 * pays for compiling the hot paths and the node's first snapshot, and reads low.
 */
const WARMUP_S = 3;
/** Each turn of the bare server beside the node's rows: half a row. */
const BARE_TURN_S = Math.max(1, Math.round(DURATION_S / 2));
/** The pause before each turn of the bare server. */
const SETTLE_MS = 1000;
const WORKLOADS = ['bare', 'put', 'get', 'cas', 'incr', 'batch16'] as const;
type Workload = (typeof WORKLOADS)[number];
const OPS_PER_CALL: Record<Workload, number> = {
  bare: 1, put: 1, get: 1, cas: 1, incr: 1, batch16: 16,
};

interface Row {
  readonly workload: Workload;
  readonly connections: number;
  readonly callsPerSec: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly non2xx: number;
}

/** A node row with the bare server's rate in the turns just before and just after it. */
interface BracketedRow extends Row {
  readonly bareBeside: number;
}

function startChild(args: string[], env: Record<string, string>): Promise<{ child: ChildProcess;
  port: number }> {
  const child = spawn(process.execPath, args, { cwd: ROOT, env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    let buffered = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      buffered += chunk.toString();
      const match = /"port":(\d+)/.exec(buffered);
      if (match) resolve({ child, port: Number(match[1]) });
    });
    child.once('exit', (code) => reject(new Error(`${args.join(' ')} exited with ${code}`)));
  });
}

function millis(text: string): number {
  const match = /([\d.]+)(us|ms|s)/.exec(text);
  if (!match) return NaN;
  const value = Number(match[1]);
  return match[2] === 'us' ? value / 1000 : match[2] === 's' ? value * 1000 : value;
}

/** Asynchronous, so that a `PlacementSampler` can read /proc while wrk runs. */
async function runWrk(port: number, workload: Workload, connections: number,
  seconds = DURATION_S): Promise<Row> {
  // The bare server answers any body the same way; it is driven with the get requests.
  const script = join(WRK_DIR, `${workload === 'bare' ? 'get' : workload}.lua`);
  const threads = connections === 1 ? 1 : 2;
  const { stdout: output } = await execFileAsync('wrk', ['-t', String(threads),
    '-c', String(connections), '-d', `${seconds}s`, '--latency', '-s', script,
    `http://127.0.0.1:${port}`], {
    env: { ...process.env, HIVEKV_BENCH_DIR: WRK_DIR, HIVEKV_BENCH_KEYS: String(KEYS) },
    encoding: 'utf8', timeout: (seconds + 30) * 1000,
  });
  const rate = Number(/Requests\/sec:\s+([\d.]+)/.exec(output)?.[1] ?? NaN);
  const p50 = millis(/\s50%\s+(\S+)/.exec(output)?.[1] ?? '');
  const p99 = millis(/\s99%\s+(\S+)/.exec(output)?.[1] ?? '');
  const non2xx = Number(/Non-2xx or 3xx responses:\s+(\d+)/.exec(output)?.[1] ?? 0);
  return { workload, connections, callsPerSec: rate, p50Ms: p50, p99Ms: p99, non2xx };
}

/** The p50s in ms of the WAL bench's single-entry append + fdatasync: the disk's part of a put. */
interface FdatasyncP50 {
  /** Through the thread pool. */
  readonly pool: number;
  /** On the calling thread, as a node syncs a lone call (FileStorage.sync's `onLoop`). */
  readonly onLoop: number;
}

function fdatasyncP50Ms(): FdatasyncP50 {
  const output = execFileSync(process.execPath, [join(ROOT, 'dist', 'bench', 'wal.bench.js')], {
    env: { ...process.env, BENCH_TIME_MS: '3000', BENCH_CASE: 'append+sync 1 entry' },
    encoding: 'utf8', timeout: 60_000,
  });
  const p50Of = (name: string): number => {
    const row = output.split('\n').find((line) => line.startsWith(`| ${name} |`));
    return Number(row?.split('|')[4]?.trim() ?? NaN);
  };
  return { pool: p50Of('append+sync 1 entry'), onLoop: p50Of('append+sync 1 entry on the loop') };
}

/**
 * The one-connection target: put p50 at most the same run's fdatasync p50 + 0.1 ms, against
 * the lower of the two ways to fdatasync (the disk's own cost, the stricter bar).
 */
function oneConnectionLine(rows: readonly Row[], fdatasync: FdatasyncP50,
  placement = '', haltPolling = ''): string {
  const put = rows.find((r) => r.workload === 'put' && r.connections === 1);
  const putMs = put?.p50Ms ?? NaN;
  const fdatasyncMs = Math.min(fdatasync.pool, fdatasync.onLoop);
  const above = putMs - fdatasyncMs;
  return `One connection: put p50 ${putMs.toFixed(3)} ms; an append + fdatasync of one entry ` +
    `(the WAL bench, this run, just before) p50 ${fdatasync.onLoop.toFixed(3)} ms on the ` +
    `calling thread, ${fdatasync.pool.toFixed(3)} ms through the thread pool; the put is ` +
    `${above.toFixed(3)} ms above the lower (target: at most 0.100, ` +
    `${above <= 0.1 ? 'met' : 'not met'}).` +
    (placement === '' ? '' : ` During the put row, ${placement}`) +
    (haltPolling === '' ? '' : ` This machine: ${haltPolling}.`);
}

async function preload(port: number): Promise<void> {
  const value = 'v'.repeat(98);
  for (let start = 1; start <= KEYS; start += 256) {
    const operations = [];
    for (let k = start; k < Math.min(start + 256, KEYS + 1); k++) {
      operations.push({ op: 'put', ns: 'bench', key: `k${k}`, value, forever: true });
    }
    const response = await fetch(`http://127.0.0.1:${port}/api/v1/kv`, { method: 'POST',
      headers: { 'content-type': 'application/json' }, body: JSON.stringify({ operations }) });
    if (response.status !== 200) throw new Error(`preload: ${response.status}`);
    await response.text();
  }
}

/** The middle of `values` (the mean of the two middle ones for an even count). */
function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/**
 * One "bare" line per connection count (the mean rate of its turns, the median of their p50s
 * and p99s), then the node's rows, each against the bare turns beside it.
 */
function render(bareTurns: readonly Row[], rows: readonly BracketedRow[]): string {
  const lines = [
    '| workload | conns | calls/s | ops/s | bare beside | x bare | p50 ms | p99 ms | non-2xx |',
    '|---|---|---|---|---|---|---|---|---|'];
  for (const connections of [64, 1]) {
    const turns = bareTurns.filter((t) => t.connections === connections);
    if (turns.length > 0) {
      const rate = turns.reduce((sum, t) => sum + t.callsPerSec, 0) / turns.length;
      lines.push(`| bare (${turns.length} turns) | ${connections} | ${rate.toFixed(0)} | ` +
        `${rate.toFixed(0)} | | 1.00 | ${median(turns.map((t) => t.p50Ms)).toFixed(3)} | ` +
        `${median(turns.map((t) => t.p99Ms)).toFixed(3)} | ` +
        `${turns.reduce((sum, t) => sum + t.non2xx, 0)} |`);
    }
    for (const r of rows.filter((row) => row.connections === connections)) {
      lines.push(`| ${r.workload} | ${r.connections} | ${r.callsPerSec.toFixed(0)} | ` +
        `${(r.callsPerSec * OPS_PER_CALL[r.workload]).toFixed(0)} | ${r.bareBeside.toFixed(0)} | ` +
        `${(r.callsPerSec / r.bareBeside).toFixed(2)} | ${r.p50Ms.toFixed(3)} | ` +
        `${r.p99Ms.toFixed(3)} | ${r.non2xx} |`);
    }
  }
  return lines.join('\n');
}

function writeResults(table: string): void {
  const path = join(ROOT, 'bench', 'RESULTS.md');
  let text = '';
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    text = '# Benchmark results\n';
  }
  const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT,
    encoding: 'utf8' }).trim();
  const pattern = /## Node\n[\s\S]*?(?=\n## |$)/;
  const existing = pattern.exec(text)?.[0];
  // The run this one replaces stays below it: a run on a slow day must not silently erase
  // the one it would be compared with.
  const previous = existing === undefined ? '' : previousRunOf(existing);
  const section = `## Node\n\n\`npm run bench:node\`, commit ${commit}, Node ${process.version}, ` +
    `${cpus().length} x ${cpus()[0]?.model ?? 'unknown CPU'}, wrk ${DURATION_S} s per row, ` +
    `100-byte values over ${KEYS} keys, fsync on every acknowledged write. "bare beside": ` +
    `the mean rate of the bare server's ${BARE_TURN_S} s turns ` +
    `just before and just after the row, which its "x bare" divides by.\n\n${table}\n` +
    (previous === '' ? '' : `\n${previous}`);
  text = existing !== undefined ? text.replace(pattern, section)
    : `${text.trimEnd()}\n\n${section}`;
  writeFileSync(path, text);
}

async function main(): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'hivekv-bench-'));
  const bareServer = await startChild(['dist/bench/bare-server.js'], {});
  const node = await startChild(['bin/hivekv.js', 'serve', '--port', '0', '--data', dataDir], {
    QUEEN_KV_READ_RATE: '0', QUEEN_KV_WRITE_RATE: '0', HIVEKV_LOG_LEVEL: 'info',
  });
  const rows: BracketedRow[] = [];
  const bareTurns: Row[] = [];
  let fdatasync: FdatasyncP50 = { pool: NaN, onLoop: NaN };
  let placement = '';
  // A lone call's wake-ups of idle vCPUs cost what this machine setting says (halt-polling.ts).
  let haltPolling = '';
  try {
    await preload(node.port);
    await runWrk(bareServer.port, 'bare', 64, WARMUP_S);
    await runWrk(node.port, 'put', 64, WARMUP_S);
    for (const connections of [64, 1]) {
      if (connections === 1) {
        fdatasync = fdatasyncP50Ms();
        haltPolling = haltPollingWords(readHaltPolling());
      }
      const bareTurn = async (): Promise<Row> => {
        // The node finishes what a row left it (a snapshot being written) before the bare
        // server is measured beside it, so the ceiling is not measured against that work.
        await sleep(SETTLE_MS);
        const turn = await runWrk(bareServer.port, 'bare', connections, BARE_TURN_S);
        bareTurns.push(turn);
        console.log(JSON.stringify(turn));
        return turn;
      };
      let before = await bareTurn();
      for (const workload of WORKLOADS) {
        if (workload === 'bare') continue;
        // Where the node's thread slept decides a lone put's fdatasync (vcpu-placement.ts).
        const pid = node.child.pid;
        const sampler = workload === 'put' && connections === 1 && pid !== undefined
          ? new PlacementSampler(pid) : null;
        const row = await runWrk(node.port, workload, connections);
        if (sampler !== null) placement = sampler.stop();
        const after = await bareTurn();
        const bracketed = { ...row, bareBeside: (before.callsPerSec + after.callsPerSec) / 2 };
        rows.push(bracketed);
        console.log(JSON.stringify(bracketed));
        before = after;
      }
    }
  } finally {
    bareServer.child.kill('SIGTERM');
    node.child.kill('SIGTERM');
    rmSync(dataDir, { recursive: true, force: true });
  }
  const table = `${render(bareTurns, rows)}\n\n${oneConnectionLine(rows, fdatasync, placement,
    haltPolling)}`;
  console.log(table);
  writeResults(table);
}

await main();
