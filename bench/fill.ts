/**
 * `npm run bench:fill`: fills one durable node over HTTP as a new user would, until its memory
 * budget refuses writes, and checks the node survives it.
 *
 * Two runs, each on a fresh node with its defaults (rates off):
 * - `big`: 60 KB values in batches of 16 puts;
 * - `many`: 100-byte values in batches of 256 puts (past 10M keys at the default budget).
 * Each: fills until 503 `memory_full`; keeps writing for a while (every write must be refused,
 * the node must stay up); waits for the snapshots under way; kills the node (SIGKILL), starts
 * it again and checks that every acknowledged key is back; stops it (SIGTERM) and starts it
 * once more. Reports RSS, wasm memory, state bytes, snapshot and restore times (from the
 * node's log) and start-up times, and writes them to bench/RESULTS.md under "## Fill".
 *
 * `node dist/bench/fill.js [big|many]...` runs some; HIVEKV_FILL_SECONDS bounds each fill
 * (default 900). Everything listens on 127.0.0.1; processes are stopped by their PID.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';

const ROOT = new URL('../../', import.meta.url).pathname;
const FILL_SECONDS = Number(process.env['HIVEKV_FILL_SECONDS'] ?? '900');
const PAST_BUDGET_SECONDS = 15;
const WORKERS = 8;
const START_TIMEOUT_MS = 600_000;
const GiB = 2 ** 30;

interface Shape {
  readonly name: 'big' | 'many';
  readonly valueBytes: number;
  readonly batch: number;
  /** Keys to stop at even if the budget never refuses (a bound on the run). */
  readonly keysMax: number;
}

const SHAPES: Record<Shape['name'], Shape> = {
  big: { name: 'big', valueBytes: 60_000, batch: 16, keysMax: 100_000 },
  many: { name: 'many', valueBytes: 100, batch: 256, keysMax: 20_000_000 },
};

interface Node {
  readonly child: ChildProcess;
  readonly port: number;
  readonly startMs: number;
  readonly log: () => string;
}

function startNode(dataDir: string): Promise<Node> {
  const started = performance.now();
  const child = spawn(process.execPath, ['bin/hivekv.js', 'serve', '--port', '0', '--data',
    dataDir], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env,
    QUEEN_KV_READ_RATE: '0', QUEEN_KV_WRITE_RATE: '0', HIVEKV_LOG_LEVEL: 'info' } });
  let log = '';
  child.stdout?.on('data', (chunk: Buffer) => { log += chunk.toString(); });
  child.stderr?.on('data', (chunk: Buffer) => { log += chunk.toString(); });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no start in time:\n${log}`)),
      START_TIMEOUT_MS);
    const poll = setInterval(() => {
      const match = /"port":(\d+)/.exec(log);
      if (match === null) return;
      clearInterval(poll);
      clearTimeout(timer);
      resolve({ child, port: Number(match[1]), startMs: performance.now() - started,
        log: () => log });
    }, 20);
    child.once('exit', (code) => {
      clearInterval(poll);
      clearTimeout(timer);
      reject(new Error(`node exited with ${code}:\n${log.slice(-4000)}`));
    });
  });
}

async function stopNode(node: Node, signal: 'SIGTERM' | 'SIGKILL'): Promise<number> {
  const started = performance.now();
  const exited = new Promise<void>((resolve) => node.child.once('exit', () => resolve()));
  if (node.child.exitCode === null && node.child.signalCode === null) node.child.kill(signal);
  await exited;
  return performance.now() - started;
}

async function post(port: number, path: string, body: unknown): Promise<{ status: number;
  json: { results?: Array<Record<string, unknown>>; reason?: string } }> {
  const response = await fetch(`http://127.0.0.1:${port}${path}`, { method: 'POST',
    headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: response.status, json: await response.json() as never };
}

async function getJson(port: number, path: string): Promise<string> {
  return (await fetch(`http://127.0.0.1:${port}${path}`)).text();
}

function rssBytes(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? NaN) * 1024;
}

function metric(text: string, name: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return Number(line?.split(' ')[1] ?? NaN);
}

/** A value that says which key it belongs to, `bytes` of compact JSON. */
function valueOf(key: number, bytes: number): string {
  const tag = `${key}:`;
  return tag + 'v'.repeat(bytes - 2 - tag.length);
}

interface FillResult {
  readonly ackedKeys: number;
  readonly acked: Uint8Array;
  readonly seconds: number;
  readonly refusedAtKeys: number;
}

/** Fills until a write is refused with memory_full (or the bound); acknowledged keys marked. */
async function fill(port: number, shape: Shape): Promise<FillResult> {
  const acked = new Uint8Array(shape.keysMax);
  let nextBatch = 0;
  let refused = false;
  let ackedKeys = 0;
  let refusedAtKeys = -1;
  const deadline = performance.now() + FILL_SECONDS * 1000;
  const started = performance.now();
  const worker = async (): Promise<void> => {
    while (!refused && performance.now() < deadline) {
      const first = nextBatch++ * shape.batch;
      if (first + shape.batch > shape.keysMax) return;
      const operations = Array.from({ length: shape.batch }, (_, i) => ({ op: 'put', ns: 'fill',
        key: `k${first + i}`, value: valueOf(first + i, shape.valueBytes), forever: true }));
      const r = await post(port, '/api/v1/kv', { operations });
      if (r.status === 200) {
        for (let i = 0; i < shape.batch; i++) acked[first + i] = 1;
        ackedKeys += shape.batch;
      } else if (r.status === 503 && r.json.reason === 'memory_full') {
        if (!refused) refusedAtKeys = ackedKeys;
        refused = true;
      } else {
        throw new Error(`fill: unexpected ${r.status} ${JSON.stringify(r.json)}`);
      }
      if (ackedKeys % (shape.batch * 2000) === 0) {
        console.log(`  ${ackedKeys} keys, ${((performance.now() - started) / 1000).toFixed(0)} s`);
      }
    }
  };
  await Promise.all(Array.from({ length: WORKERS }, worker));
  return { ackedKeys, acked, seconds: (performance.now() - started) / 1000, refusedAtKeys };
}

/** Writes on past the budget: every put must be refused, every delete of nothing answered. */
async function pastBudget(port: number, shape: Shape): Promise<{ refusals: number;
  deletes: number }> {
  let refusals = 0;
  let deletes = 0;
  const deadline = performance.now() + PAST_BUDGET_SECONDS * 1000;
  for (let n = 0; performance.now() < deadline; n++) {
    const operations = Array.from({ length: shape.batch }, (_, i) => ({ op: 'put', ns: 'fill',
      key: `past${n}-${i}`, value: valueOf(i, shape.valueBytes), forever: true }));
    const r = await post(port, '/api/v1/kv', { operations });
    if (r.status !== 503 || r.json.reason !== 'memory_full') {
      throw new Error(`past the budget: ${r.status} ${JSON.stringify(r.json)}`);
    }
    refusals++;
    const d = await post(port, '/api/v1/kv', { operations: [{ op: 'delete', ns: 'fill',
      key: `absent${n}` }] });
    if (d.status !== 200) throw new Error(`a delete past the budget: ${d.status}`);
    deletes++;
  }
  return { refusals, deletes };
}

/** Every acknowledged key is there (keys-only prefix pages), and sampled values are right. */
async function verify(port: number, shape: Shape, filled: FillResult): Promise<number> {
  const seen = new Uint8Array(shape.keysMax);
  let after = '';
  let found = 0;
  for (;;) {
    const r = await post(port, '/api/v1/kv', { operations: [{ op: 'getPrefix', ns: 'fill',
      prefix: 'k', after, limit: 1000, keysOnly: true }] });
    if (r.status !== 200) {
      throw new Error(`reading the keys back after "${after}": ${r.status} ` +
        JSON.stringify(r.json));
    }
    const rows = (r.json.results?.[0]?.['rows'] ?? []) as Array<{ key: string }>;
    for (const row of rows) {
      const n = Number(row.key.slice(1));
      if (Number.isInteger(n) && n < shape.keysMax) seen[n] = 1;
      found++;
    }
    // `truncated` says more rows follow the page.
    if (rows.length === 0 || r.json.results?.[0]?.['truncated'] !== true) break;
    after = rows[rows.length - 1]!.key;
  }
  for (let n = 0; n < shape.keysMax; n++) {
    if (filled.acked[n] === 1 && seen[n] !== 1) throw new Error(`acknowledged key k${n} lost`);
  }
  for (let n = 0; n < filled.ackedKeys; n += Math.max(1, Math.floor(filled.ackedKeys / 50))) {
    if (filled.acked[n] !== 1) continue;
    const r = await post(port, '/api/v1/kv', { operations: [{ op: 'get', ns: 'fill',
      key: `k${n}` }] });
    if (r.json.results?.[0]?.['value'] !== valueOf(n, shape.valueBytes)) {
      throw new Error(`k${n} came back with another value`);
    }
  }
  return found;
}

interface SnapshotLog { readonly kind: string; readonly bytes: number; readonly ms: number }

function snapshotsIn(log: string): SnapshotLog[] {
  const out: SnapshotLog[] = [];
  for (const line of log.split('\n')) {
    const match = /"msg":"snapshot (begun|taken|abandoned|installed|restored)"/.exec(line);
    if (match === null) continue;
    const record = JSON.parse(line) as { bytes: number; ms: number };
    out.push({ kind: match[1]!, bytes: record.bytes, ms: record.ms });
  }
  return out;
}

/** Waits until every snapshot the node began has ended (taken or abandoned). */
async function awaitSnapshots(node: Node, ms: number): Promise<void> {
  const deadline = performance.now() + ms;
  const open = (): boolean => {
    const events = snapshotsIn(node.log());
    const ended = events.filter((s) => s.kind === 'taken' || s.kind === 'abandoned').length;
    return events.filter((s) => s.kind === 'begun').length > ended;
  };
  while (open() && performance.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

async function figures(node: Node): Promise<Record<string, number>> {
  const metrics = await getJson(node.port, '/metrics');
  return {
    rssBytes: rssBytes(node.child.pid!),
    wasmBytes: metric(metrics, 'hivekv_machine_memory_bytes'),
    stateBytes: metric(metrics, 'hivekv_state_bytes'),
    stateBytesMax: metric(metrics, 'hivekv_state_bytes_max'),
    fullCollections: metric(metrics, 'hivekv_machine_full_collections'),
  };
}

const gib = (bytes: number): string => `${(bytes / GiB).toFixed(2)} GiB`;
const secs = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;

interface ShapeResult { readonly row: string; readonly notes: string[] }

async function runShape(shape: Shape): Promise<ShapeResult> {
  const dataDir = mkdtempSync(join(tmpdir(), `hivekv-fill-${shape.name}-`));
  const notes: string[] = [];
  let row = '';
  let node = await startNode(dataDir);
  try {
    console.log(`${shape.name}: filling with ${shape.valueBytes}-byte values, ` +
      `batches of ${shape.batch}`);
    const filled = await fill(node.port, shape);
    if (filled.refusedAtKeys < 0) throw new Error('the budget never refused a write');
    const past = await pastBudget(node.port, shape);
    // Let the snapshot under way (if any) finish, so the restart restores a large one.
    await awaitSnapshots(node, 600_000);
    const full = await figures(node);
    const snapshots = snapshotsIn(node.log());
    const valueBytes = filled.ackedKeys * shape.valueBytes;
    row = (`| ${shape.name} | ${shape.valueBytes} B x ${shape.batch} | ` +
      `${filled.ackedKeys.toLocaleString('en-US')} | ${gib(valueBytes)} | ` +
      `${filled.seconds.toFixed(0)} s | ${gib(full['stateBytes']!)} of ` +
      `${gib(full['stateBytesMax']!)} | ${gib(full['wasmBytes']!)} | ${gib(full['rssBytes']!)} | ` +
      `${past.refusals} refused, ${past.deletes} deletes | ${describeSnapshots(snapshots)} |`);
    console.log(row);
    const killMs = await stopNode(node, 'SIGKILL');
    node = await startNode(dataDir);
    const afterKill = await startupLine(node, 'after SIGKILL', killMs);
    const found = await verify(node.port, shape, filled).catch((error: unknown) => {
      throw new Error(`${String(error)}\nthe node's log, last lines:\n${node.log().slice(-3000)}`);
    });
    notes.push(`${afterKill}; ${found.toLocaleString('en-US')} keys found, every ` +
      'acknowledged one among them');
    const termMs = await stopNode(node, 'SIGTERM');
    node = await startNode(dataDir);
    notes.push(await startupLine(node, 'after SIGTERM', termMs));
    console.log(notes.join('\n'));
  } finally {
    await stopNode(node, 'SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  }
  return { row, notes: notes.map((n) => `- ${shape.name}: ${n}`) };
}

async function startupLine(node: Node, how: string, stopMs: number): Promise<string> {
  const restored = snapshotsIn(node.log()).find((s) => s.kind === 'restored');
  const f = await figures(node);
  return `restart ${how} (stopped in ${secs(stopMs)}): serving after ${secs(node.startMs)}, ` +
    `of which the snapshot restore (${gib(restored?.bytes ?? 0)}) ${secs(restored?.ms ?? 0)}; ` +
    `then RSS ${gib(f['rssBytes']!)}, wasm ${gib(f['wasmBytes']!)}`;
}

function describeSnapshots(snapshots: readonly SnapshotLog[]): string {
  const taken = snapshots.filter((s) => s.kind === 'taken');
  if (taken.length === 0) return 'none';
  const last = taken[taken.length - 1]!;
  return `${taken.length}, the last ${gib(last.bytes)} in ${secs(last.ms)}`;
}

function writeResults(results: readonly ShapeResult[]): void {
  const path = join(ROOT, 'bench', 'RESULTS.md');
  let text = readFileSync(path, 'utf8');
  const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT,
    encoding: 'utf8' }).trim();
  const section = `## Fill\n\n\`npm run bench:fill\`, commit ${commit}, Node ${process.version}, ` +
    `${cpus().length} x ${cpus()[0]?.model ?? 'unknown CPU'}: one node with its defaults, ` +
    `${WORKERS} clients, filled until the budget refuses, then ${PAST_BUDGET_SECONDS} s more ` +
    'of writes past it, then killed and restarted, stopped and restarted.\n\n' +
    '| run | writes | keys acknowledged | values | fill | state (budget) | wasm memory | RSS | ' +
    'past the budget | snapshots taken |\n|---|---|---|---|---|---|---|---|---|---|\n' +
    `${results.map((r) => r.row).join('\n')}\n\n${results.flatMap((r) => r.notes).join('\n')}\n`;
  const pattern = /## Fill\n[\s\S]*?(?=\n## |$)/;
  text = pattern.test(text) ? text.replace(pattern, section) : `${text.trimEnd()}\n\n${section}`;
  writeFileSync(path, text);
}

async function main(): Promise<void> {
  const asked = process.argv.slice(2).filter((a): a is Shape['name'] => a in SHAPES);
  const names = asked.length > 0 ? asked : (['big', 'many'] as const);
  const results: ShapeResult[] = [];
  for (const name of names) results.push(await runShape(SHAPES[name]));
  writeResults(results);
}

await main();
