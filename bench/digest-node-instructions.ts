/**
 * `bench:digest`'s node-instructions part (HIVEKV_BENCH_PARTS=node-instructions): what the
 * digest costs a node's put, counted rather than timed. A `hivekv serve` of each module
 * (digest-module.ts: `full`, and `nodigest` without the digest upkeep of every write) runs
 * under callgrind with its instrumentation off; this process loads 10,000 keys through it
 * and warms it with 2,000 puts, one connection, one call at a time, then turns the
 * instrumentation on (`callgrind_control -i on`) for HIVEKV_BENCH_NODE_PUTS puts (2,000) to
 * random keys among them, and off again. The count is everything the node's process ran in
 * that window, its threads included (the fdatasync of every put, the collector), divided by
 * the puts. Modules take turns, HIVEKV_BENCH_NODE_RUNS (3) runs each.
 *
 * What this can and cannot show: a node's count per put moves by a few percent between runs
 * (timers and event-loop turns depend on the wall clock, which the simulation stretches), so
 * the side-by-side difference of two modules resolves about a percent, not the digest's few
 * hundred instructions. The machine-level part (digest-instructions.ts) counts those exactly;
 * this part gives the denominator a node's put has, and bounds the difference by its spread.
 *
 * Needs valgrind (Debian: `apt-get install valgrind`). About a minute a run.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { Agent } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { callNode, serveUnderCallgrind, stopNode, waitUntilServing } from './callgrind-node.js';
import type { DigestModules } from './digest-module.js';
import { instructionsOf } from './digest-instructions.js';

const ROOT = new URL('../../', import.meta.url).pathname;
const PUTS = Number(process.env['HIVEKV_BENCH_NODE_PUTS'] ?? '2000');
const RUNS = Number(process.env['HIVEKV_BENCH_NODE_RUNS'] ?? '3');
const KEYS = 10_000;
const WARMUP_PUTS = 2_000;
const PORT = 7361;
const VALUE = JSON.stringify('x'.repeat(98));
const VARIANTS = ['full', 'nodigest'] as const;

const putBody = (key: number): string => '{"operations":[{"op":"put","ns":"bench","key":' +
  `"user:${String(key).padStart(8, '0')}","value":${VALUE},"forever":true}]}`;

const put = (agent: Agent, key: number): Promise<void> =>
  callNode(agent, PORT, 'POST', '/api/v1/kv', putBody(key));

/** One node of the module `wasm` under callgrind: its instructions per measured put. */
async function countOne(wasm: string): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'hivekv-bench-digest-node-cg-'));
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const child = serveUnderCallgrind(ROOT, PORT, dir, { HIVEKV_WASM_PATH: wasm });
  try {
    await waitUntilServing(agent, PORT, child);
    for (let k = 0; k < KEYS; k++) await put(agent, k);
    let seed = 12345;
    const nextKey = (): number => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return seed % KEYS;
    };
    for (let i = 0; i < WARMUP_PUTS; i++) await put(agent, nextKey());
    const pid = String(child.pid);
    execFileSync('callgrind_control', ['-i', 'on', pid], { stdio: 'ignore' });
    for (let i = 0; i < PUTS; i++) await put(agent, nextKey());
    execFileSync('callgrind_control', ['-i', 'off', pid], { stdio: 'ignore' });
  } finally {
    agent.destroy();
    await stopNode(child);
  }
  try {
    let ir = 0;
    for (const file of readdirSync(dir).filter((f) => f.startsWith('cg.'))) {
      ir += instructionsOf(readFileSync(join(dir, file), 'utf8'));
    }
    return ir / PUTS;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function nodeInstructionsSideBySide(modules: DigestModules): Promise<void> {
  const counts: Record<(typeof VARIANTS)[number], number[]> = { full: [], nodigest: [] };
  for (let run = 0; run < RUNS; run++) {
    for (let i = 0; i < VARIANTS.length; i++) {
      const variant = VARIANTS[(i + run) % VARIANTS.length]!;
      counts[variant].push(await countOne(modules[variant]));
    }
  }
  const mean = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;
  const row = (variant: (typeof VARIANTS)[number]): string => {
    const xs = counts[variant];
    return `| ${variant} | ${xs.map((x) => x.toFixed(0)).join(', ')} | ` +
      `${mean(xs).toFixed(0)} | ${Math.min(...xs).toFixed(0)} to ${Math.max(...xs).toFixed(0)} |`;
  };
  const full = mean(counts.full);
  const none = mean(counts.nodigest);
  process.stdout.write(`\nnode instructions per put (callgrind, one connection, ${PUTS} puts ` +
    `to random keys of ${KEYS} after ${WARMUP_PUTS} to warm up, ${RUNS} runs a module):\n` +
    '| module | runs | mean | range |\n|---|---|---:|---:|\n' +
    `${row('full')}\n${row('nodigest')}\n` +
    `difference of the means: ${(full - none).toFixed(0)} instructions a put ` +
    `(${(100 * (full - none) / full).toFixed(2)}% of full)\n`);
}
