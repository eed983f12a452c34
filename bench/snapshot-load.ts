/**
 * `npm run bench:snapshot-load`: the latency of puts while snapshots of a 1M-key state are
 * being written. One node, preloaded with 1M keys of 100-byte values, takes a snapshot after
 * every 10 entries (so one is always under way) while wrk puts at 64 connections; the same
 * run without snapshots is the control. Prints calls/s, p50, p99 and the slowest call, and the
 * snapshots completed during the run, and writes them to bench/RESULTS.md under
 * "## Puts while a snapshot is written".
 *
 * `node dist/bench/snapshot-load.js [--root <checkout>] [--label <text>] [--no-write]` runs the
 * node of another built checkout (to compare with an earlier commit). Needs `wrk`. Everything
 * listens on 127.0.0.1; processes are stopped by their PID.
 */
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';

const execFileAsync = promisify(execFile);

const HERE = new URL('../../', import.meta.url).pathname;
const WRK_DIR = join(HERE, 'bench', 'wrk');
const KEYS = 1_000_000;
const SECONDS = Number(process.env['HIVEKV_BENCH_SECONDS'] ?? '20');

function arg(name: string): string | undefined {
  const at = process.argv.indexOf(name);
  return at >= 0 ? process.argv[at + 1] : undefined;
}

const ROOT = resolve(arg('--root') ?? HERE);
const LABEL = arg('--label') ?? execFileSync('git', ['rev-parse', '--short', 'HEAD'],
  { cwd: ROOT, encoding: 'utf8' }).trim();

interface Row {
  readonly mode: string;
  readonly callsPerSec: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
  readonly snapshots: number;
}

interface RunningNode {
  readonly child: ChildProcess;
  readonly port: number;
  /** Snapshots the node has logged as taken so far. */
  readonly snapshotsTaken: () => number;
}

/**
 * Starts a node and keeps reading its log while it runs (a log pipe nobody drains would
 * block the node on its own writes), counting the snapshots it reports as taken.
 */
function startNode(dataDir: string, env: Record<string, string>): Promise<RunningNode> {
  const child = spawn(process.execPath, ['bin/hivekv.js', 'serve', '--port', '0', '--data',
    dataDir], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env,
    QUEEN_KV_READ_RATE: '0', QUEEN_KV_WRITE_RATE: '0', HIVEKV_LOG_LEVEL: 'info', ...env } });
  let taken = 0;
  let port = 0;
  let partial = '';
  return new Promise((resolvePort, reject) => {
    child.stdout?.on('data', (chunk: Buffer) => {
      const lines = (partial + chunk.toString()).split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) {
        if (line.includes('"msg":"snapshot taken"')) taken++;
        const match = port === 0 ? /"port":(\d+)/.exec(line) : null;
        if (match) {
          port = Number(match[1]);
          resolvePort({ child, port, snapshotsTaken: () => taken });
        }
      }
      if (partial.length > 100_000) partial = '';
    });
    child.once('exit', (code) => reject(new Error(`node exited with ${code}`)));
  });
}

async function preload(port: number): Promise<void> {
  const value = 'v'.repeat(98);
  const workers = Array.from({ length: 4 }, async (_, w) => {
    for (let start = 1 + w * 256; start <= KEYS; start += 4 * 256) {
      const operations = [];
      for (let k = start; k < Math.min(start + 256, KEYS + 1); k++) {
        operations.push({ op: 'put', ns: 'bench', key: `k${k}`, value, forever: true });
      }
      const response = await fetch(`http://127.0.0.1:${port}/api/v1/kv`, { method: 'POST',
        headers: { 'content-type': 'application/json' }, body: JSON.stringify({ operations }) });
      if (response.status !== 200) throw new Error(`preload: ${response.status}`);
      await response.text();
    }
  });
  await Promise.all(workers);
}

function millis(text: string): number {
  const match = /([\d.]+)(us|ms|s)/.exec(text);
  if (!match) return NaN;
  const value = Number(match[1]);
  return match[2] === 'us' ? value / 1000 : match[2] === 's' ? value * 1000 : value;
}

async function run(mode: 'snapshots' | 'none'): Promise<Row> {
  const dataDir = mkdtempSync(join(tmpdir(), 'hivekv-snapload-'));
  const every = mode === 'snapshots' ? '10' : '100000000';
  // No floor of log between snapshots (HIVEKV_SNAPSHOT_LOG_PERCENT): one is always written.
  const node = await startNode(dataDir, { HIVEKV_SNAPSHOT_EVERY_ENTRIES: every,
    HIVEKV_SNAPSHOT_EVERY_BYTES: String(64 * 1024 ** 3), HIVEKV_SNAPSHOT_LOG_PERCENT: '0' });
  try {
    await preload(node.port);
    const takenBefore = node.snapshotsTaken();
    // Asynchronous, so this process keeps draining the node's log while wrk runs.
    const { stdout: output } = await execFileAsync('wrk', ['-t', '2', '-c', '64', '-d',
      `${SECONDS}s`, '--latency', '-s', join(WRK_DIR, 'put.lua'),
      `http://127.0.0.1:${node.port}`], {
      env: { ...process.env, HIVEKV_BENCH_DIR: WRK_DIR, HIVEKV_BENCH_KEYS: String(KEYS) },
      encoding: 'utf8', timeout: (SECONDS + 60) * 1000 });
    const snapshots = node.snapshotsTaken() - takenBefore;
    return {
      mode,
      callsPerSec: Number(/Requests\/sec:\s+([\d.]+)/.exec(output)?.[1] ?? NaN),
      p50Ms: millis(/\s50%\s+(\S+)/.exec(output)?.[1] ?? ''),
      p99Ms: millis(/\s99%\s+(\S+)/.exec(output)?.[1] ?? ''),
      maxMs: millis(/Latency\s+\S+\s+\S+\s+(\S+)/.exec(output)?.[1] ?? ''),
      snapshots,
    };
  } finally {
    node.child.kill('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  }
}

function writeResults(rows: readonly Row[]): void {
  const path = join(HERE, 'bench', 'RESULTS.md');
  let text = readFileSync(path, 'utf8');
  const heading = '## Puts while a snapshot is written';
  const lines = rows.map((r) => `| ${LABEL} | ${r.mode} | ${r.callsPerSec.toFixed(0)} | ` +
    `${r.p50Ms.toFixed(2)} | ${r.p99Ms.toFixed(2)} | ${r.maxMs.toFixed(1)} | ${r.snapshots} |`);
  const pattern = new RegExp(`${heading}\\n[\\s\\S]*?(?=\\n## |$)`);
  const existing = pattern.exec(text)?.[0];
  const kept = (existing ?? '').split('\n')
    .filter((l) => l.startsWith('| ') && !l.startsWith('| build') && !l.startsWith(`| ${LABEL} `));
  const section = `${heading}\n\n\`npm run bench:snapshot-load\`: one node, 1M keys of ` +
    `100-byte values, wrk puts at 64 connections for ${SECONDS} s, Node ${process.version}; ` +
    '`snapshots`: a snapshot after every 10 entries, so one is always being written; `none`: ' +
    'no snapshot.\n\n| build | mode | calls/s | p50 ms | p99 ms | max ms | snapshots done |\n' +
    `|---|---|---|---|---|---|---|\n${[...kept, ...lines].join('\n')}\n`;
  text = existing !== undefined ? text.replace(pattern, section)
    : `${text.trimEnd()}\n\n${section}`;
  writeFileSync(path, text);
}

async function main(): Promise<void> {
  const rows: Row[] = [];
  for (const mode of ['none', 'snapshots'] as const) {
    const row = await run(mode);
    console.log(JSON.stringify(row));
    rows.push(row);
  }
  if (!process.argv.includes('--no-write')) writeResults(rows);
}

await main();
