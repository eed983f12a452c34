/**
 * `npm run bench:machine-versus -- BEFORE.wasm AFTER.wasm`: two builds of the machine side by
 * side in one process (side-by-side.ts), for a change to the machine whose effect is smaller
 * than the swing of whole runs on a shared machine. Each build gets its own machine loaded
 * with HIVEKV_BENCH_KEYS keys (1M) of 100-byte values; then, for each shape (puts in entries
 * of 256 and of one), the two take turns on HIVEKV_BENCH_SLICES (30) pairs of slices of
 * 16,384 puts. Prints each build's median µs per put and the pairs' median ratio.
 *
 * A build comes from `node scripts/build-wasm.mjs assembly/index.ts --target release
 * --outFile FILE` (on a checkout of the commit to compare). Run it alone (`flock -x`).
 */
import { interleaved, loadedFeeder, SLICE_OPS } from './side-by-side.js';

const KEYS = Number(process.env['HIVEKV_BENCH_KEYS'] ?? '1000000');
const SLICES = Number(process.env['HIVEKV_BENCH_SLICES'] ?? '30');
const SHAPES = [256, 1] as const;

const median = (xs: readonly number[]): number => {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
};

const [before, after] = process.argv.slice(2);
if (before === undefined || after === undefined) {
  throw new Error('usage: machine-versus.js BEFORE.wasm AFTER.wasm');
}
const feeders = { before: await loadedFeeder(before, 'before', KEYS),
  after: await loadedFeeder(after, 'after', KEYS) };
process.stdout.write(`${KEYS} keys loaded in each; Node ${process.version}\n`);
for (const ops of SHAPES) {
  const rounds = interleaved(feeders, ops, KEYS, SLICES);
  const usPerPut = (ms: number): number => (ms * 1000) / SLICE_OPS;
  const ratios = rounds.map((r) => r.after / r.before).sort((a, b) => a - b);
  const quartile = (q: number): string => ratios[Math.floor(q * (ratios.length - 1))]!.toFixed(3);
  process.stdout.write(`puts in entries of ${ops}: before ` +
    `${usPerPut(median(rounds.map((r) => r.before))).toFixed(3)} µs a put, after ` +
    `${usPerPut(median(rounds.map((r) => r.after))).toFixed(3)}; after/before per pair: ` +
    `median ${median(ratios).toFixed(3)} (quartiles ${quartile(0.25)} to ${quartile(0.75)}), ` +
    `${SLICES} pairs of ${SLICE_OPS} puts\n`);
}
