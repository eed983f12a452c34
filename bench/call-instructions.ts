/**
 * `npm run bench:call-instructions`: what one call costs a node, counted rather than timed.
 * A `hivekv serve` runs under callgrind with its instrumentation off; this process loads
 * 1,000 keys through it and warms it (20,000 gets, then 5,000 puts, one connection, one call
 * at a time), then counts every instruction the node's process runs (its threads included:
 * the fdatasync of each put, the collector) over HIVEKV_BENCH_GETS gets (3,000) and
 * HIVEKV_BENCH_PUTS puts (2,000) and divides by the calls.
 *
 * Side by side: each argument is the root of a built checkout (`npm run build` done in it),
 * the current one when none is given; the roots take turns, HIVEKV_BENCH_RUNS (3) runs each.
 * A node's count moves by about a percent between runs (timers and turns of the event loop
 * follow the wall clock, which callgrind stretches), so this resolves changes of a few
 * hundred instructions a call, which no timed run on this machine can.
 *
 * HIVEKV_BENCH_KEEP=1 keeps each run's callgrind files (for `callgrind_annotate`) and
 * prints where. Needs valgrind (Debian: `apt-get install valgrind`). About
 * forty seconds a run.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { Agent } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

import { callNode, serveUnderCallgrind, stopNode, waitUntilServing } from './callgrind-node.js';
import { instructionsOf } from './digest-instructions.js';

const HERE = new URL('../../', import.meta.url).pathname;
const RUNS = Number(process.env['HIVEKV_BENCH_RUNS'] ?? '3');
const CALLS = { get: Number(process.env['HIVEKV_BENCH_GETS'] ?? '3000'),
  put: Number(process.env['HIVEKV_BENCH_PUTS'] ?? '2000') };
const WARMUP = { get: 20_000, put: 5_000 };
const KEYS = 1_000;
const PORT = 7371;
const VALUE = 'v'.repeat(98);
const KEEP = process.env['HIVEKV_BENCH_KEEP'] !== undefined;

type Kind = keyof typeof CALLS;

/** One call of `kind` to the key `k<key>`. */
function oneCall(agent: Agent, kind: Kind, key: number): Promise<void> {
  if (kind === 'get') return callNode(agent, PORT, 'GET', `/api/v1/kv/bench/k${key}`);
  return callNode(agent, PORT, 'POST', '/api/v1/kv', JSON.stringify({ operations: [{ op: 'put',
    ns: 'bench', key: `k${key}`, value: VALUE, forever: true }] }));
}

/** Instructions per call of each kind, for one node of the checkout at `root`. */
async function countOne(root: string): Promise<Record<Kind, number>> {
  const dir = mkdtempSync(join(tmpdir(), 'hivekv-bench-call-cg-'));
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const child = serveUnderCallgrind(root, PORT, dir);
  const pid = String(child.pid);
  const counts = { get: 0, put: 0 };
  try {
    await waitUntilServing(agent, PORT, child);
    for (let k = 0; k < KEYS; k++) await oneCall(agent, 'put', k);
    let seed = 12345;
    const next = (): number => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return seed % KEYS;
    };
    for (const kind of ['get', 'put'] as const) {
      for (let i = 0; i < WARMUP[kind]; i++) await oneCall(agent, kind, next());
      const before = totalOf(dir, pid);
      execFileSync('callgrind_control', ['-i', 'on', pid], { stdio: 'ignore' });
      for (let i = 0; i < CALLS[kind]; i++) await oneCall(agent, kind, next());
      execFileSync('callgrind_control', ['-i', 'off', pid], { stdio: 'ignore' });
      // A dump of this window's count (a dump zeroes the counters: totalOf sums them).
      execFileSync('callgrind_control', ['-d', pid], { stdio: 'ignore' });
      counts[kind] = (totalOf(dir, pid) - before) / CALLS[kind];
    }
  } finally {
    agent.destroy();
    await stopNode(child);
    if (KEEP) process.stderr.write(`callgrind files kept in ${dir}\n`);
    else rmSync(dir, { recursive: true, force: true });
  }
  return counts;
}

/**
 * The instructions counted in every dump the node `pid` has written to `dir` so far (each
 * `callgrind_control -d` writes `cg.<pid>.<n>` and zeroes the counters; the file without a
 * number is written at exit).
 */
function totalOf(dir: string, pid: string): number {
  const dump = new RegExp(`^cg\\.${pid}\\.\\d+$`);
  let total = 0;
  for (const file of readdirSync(dir)) {
    if (!dump.test(file)) continue;
    total += instructionsOf(readFileSync(join(dir, file), 'utf8'));
  }
  return total;
}

async function main(): Promise<void> {
  const given = process.argv.slice(2).map((root) => resolve(root));
  const roots = given.length > 0 ? given : [HERE];
  const runs = new Map<string, Record<Kind, number>[]>(roots.map((r) => [r, []]));
  for (let run = 0; run < RUNS; run++) {
    for (let i = 0; i < roots.length; i++) {
      const root = roots[(i + run) % roots.length]!;
      const counts = await countOne(root);
      runs.get(root)!.push(counts);
      process.stdout.write(`${JSON.stringify({ root, ...counts })}\n`);
    }
  }
  const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;
  process.stdout.write(`\ninstructions per call (callgrind, one connection, ${CALLS.get} gets ` +
    `and ${CALLS.put} puts counted, ${RUNS} runs a checkout):\n` +
    '| checkout | get (runs) | get mean | put (runs) | put mean |\n|---|---|---:|---|---:|\n');
  for (const [root, counts] of runs) {
    const cell = (kind: Kind): string => `${counts.map((c) => c[kind].toFixed(0)).join(', ')} | ` +
      mean(counts.map((c) => c[kind])).toFixed(0);
    process.stdout.write(`| ${root} | ${cell('get')} | ${cell('put')} |\n`);
  }
}

await main();
