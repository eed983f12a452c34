/**
 * `npm run bench:machine-versus -- BEFORE.wasm AFTER.wasm`: two builds of the machine side by
 * side in one process, for a change to the machine whose effect is smaller than the swing
 * of whole runs on a shared machine. Each build gets its own machine (state-machine.js
 * imported afresh under its own URL, HIVEKV_WASM_PATH naming the build), loaded with
 * HIVEKV_BENCH_KEYS keys (1M) of 100-byte values; then, for each shape (puts in entries of
 * 256 and of one), the two take turns on slices of 16,384 puts to keys at a prime stride,
 * the order flipping each slice, after 4 untimed slices: whatever else the machine does falls
 * on both alike. Prints each build's median µs per put and the pairs' median ratio.
 *
 * A build comes from `node scripts/build-wasm.mjs assembly/index.ts --target release
 * --outFile FILE` (on a checkout of the commit to compare). Run it alone (`flock -x`).
 */
import { performance } from 'node:perf_hooks';

import type { StateMachine } from '../host/machine/state-machine.js';
import { Feeder, envelopesOf } from './digest-workload.js';

const KEYS = Number(process.env['HIVEKV_BENCH_KEYS'] ?? '1000000');
const SLICES = Number(process.env['HIVEKV_BENCH_SLICES'] ?? '30');
const WARMUP_SLICES = 4;
const SLICE_OPS = 16_384;
const POOL_OPS = 131_072;
const OPS_PER_CROSSING = 256;
const SHAPES = [256, 1] as const;
const BUILDS = ['before', 'after'] as const;
type Build = (typeof BUILDS)[number];

async function machineOf(wasm: string, build: Build): Promise<StateMachine> {
  const url = new URL('../host/machine/state-machine.js', import.meta.url);
  url.search = `?build=${build}`;
  const loaded = await import(url.href) as typeof import('../host/machine/state-machine.js');
  process.env['HIVEKV_WASM_PATH'] = wasm;
  try {
    return loaded.StateMachine.create();
  } finally {
    delete process.env['HIVEKV_WASM_PATH'];
  }
}

async function loadedFeeder(wasm: string, build: Build): Promise<Feeder> {
  const feeder = new Feeder(await machineOf(wasm, build));
  const load = envelopesOf(256, Math.ceil(KEYS / 256), (i) => i % KEYS);
  for (let i = 0; i < load.length; i += 16) feeder.apply(load.slice(i, i + 16));
  return feeder;
}

const median = (xs: readonly number[]): number => {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
};

function sideBySide(feeders: Record<Build, Feeder>, ops: number): void {
  // A prime stride: no two neighbouring puts touch neighbouring keys.
  const pool = envelopesOf(ops, POOL_OPS / ops, (i) => (i * 7_919_071) % KEYS);
  const perCrossing = Math.max(1, OPS_PER_CROSSING / ops);
  const cursor: Record<Build, number> = { before: 0, after: 0 };
  const slice = (build: Build): number => {
    const started = performance.now();
    for (let done = 0; done < SLICE_OPS; done += perCrossing * ops) {
      const at = cursor[build];
      feeders[build].apply(pool.slice(at, at + perCrossing));
      cursor[build] = (at + perCrossing) % pool.length;
    }
    return ((performance.now() - started) * 1000) / SLICE_OPS;
  };
  const times: Record<Build, number[]> = { before: [], after: [] };
  const ratios: number[] = [];
  for (let s = 0; s < WARMUP_SLICES + SLICES; s++) {
    const pair = {} as Record<Build, number>;
    for (const build of s % 2 === 0 ? BUILDS : [...BUILDS].reverse()) pair[build] = slice(build);
    if (s < WARMUP_SLICES) continue;
    times.before.push(pair.before);
    times.after.push(pair.after);
    ratios.push(pair.after / pair.before);
  }
  const sortedRatios = [...ratios].sort((a, b) => a - b);
  const quartile = (q: number): string =>
    sortedRatios[Math.floor(q * (sortedRatios.length - 1))]!.toFixed(3);
  process.stdout.write(`puts in entries of ${ops}: before ${median(times.before).toFixed(3)} ` +
    `µs a put, after ${median(times.after).toFixed(3)}; after/before per pair: median ` +
    `${median(ratios).toFixed(3)} (quartiles ${quartile(0.25)} to ${quartile(0.75)}), ` +
    `${SLICES} pairs of ${SLICE_OPS} puts\n`);
}

const [before, after] = process.argv.slice(2);
if (before === undefined || after === undefined) {
  throw new Error('usage: machine-versus.js BEFORE.wasm AFTER.wasm');
}
const feeders = { before: await loadedFeeder(before, 'before'),
  after: await loadedFeeder(after, 'after') };
process.stdout.write(`${KEYS} keys loaded in each; Node ${process.version}\n`);
for (const ops of SHAPES) sideBySide(feeders, ops);
