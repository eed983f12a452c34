/**
 * What one fdatasync costs the event loop's thread, by the way it is made: through
 * `FileHandle.datasync` (a promise request), through `fs.fdatasync` with a callback (what the
 * WAL's `datasyncTimed` does), and on the calling thread (`fs.fdatasyncSync`, a lone call's
 * sync). The fsyncs run one after another on one 4 KiB file; the thread's own CPU time comes
 * from /proc/thread-self/schedstat (nanoseconds), so the thread pool's share is left out.
 * The ways take turns, round after round, so a drift of the machine touches each alike.
 *
 * On a disk the fsync's own wait dominates the wall time but not the loop's CPU: put the file
 * on tmpfs to see the dispatch alone.
 *
 * Run: npm run build:ts && BENCH_DIR=/dev/shm node dist/bench/fsync-dispatch.bench.js
 *      (BENCH_DIR defaults to os.tmpdir(); BENCH_FSYNCS per round, default 5,000; BENCH_ROUNDS,
 *      default 5). Linux only (schedstat).
 */
import { fdatasync, fdatasyncSync, readFileSync, writeSync } from 'node:fs';
import { mkdtemp, open, rm, type FileHandle } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const FSYNCS = Number(process.env.BENCH_FSYNCS ?? 5_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);

type Way = (handle: FileHandle) => Promise<void>;

const WAYS: ReadonlyArray<readonly [string, Way]> = [
  ['FileHandle.datasync (promise request)', (handle) => handle.datasync()],
  ['fs.fdatasync (callback, in a Promise)', (handle) => new Promise<void>((resolve, reject) => {
    fdatasync(handle.fd, (error) => (error === null ? resolve() : reject(error)));
  })],
  ['fs.fdatasyncSync (on the loop)', (handle) => {
    fdatasyncSync(handle.fd);
    return Promise.resolve();
  }],
];

/** This thread's time on a CPU so far, in nanoseconds. */
function threadCpuNs(): number {
  return Number(readFileSync('/proc/thread-self/schedstat', 'utf8').split(' ')[0]);
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

async function main(): Promise<void> {
  const dir = await mkdtemp(join(process.env.BENCH_DIR ?? tmpdir(), 'hivekv-fsync-'));
  const handle = await open(join(dir, 'file'), 'w');
  try {
    writeSync(handle.fd, Buffer.alloc(4096, 1));
    const cpu = WAYS.map(() => [] as number[]);
    const wall = WAYS.map(() => [] as number[]);
    for (let round = 0; round <= ROUNDS; round++) {
      for (const [i, [, way]] of WAYS.entries()) {
        const cpuStart = threadCpuNs();
        const wallStart = performance.now();
        for (let n = 0; n < FSYNCS; n++) await way(handle);
        const cpuUs = (threadCpuNs() - cpuStart) / 1000 / FSYNCS;
        const wallUs = ((performance.now() - wallStart) * 1000) / FSYNCS;
        // Round 0 warms the code up and is not counted.
        if (round > 0) {
          cpu[i]!.push(cpuUs);
          wall[i]!.push(wallUs);
        }
      }
    }
    console.log(`fdatasync of a 4 KiB file in ${dir}, ${FSYNCS} a round, median of ${ROUNDS} ` +
      'rounds taking turns\n');
    console.log('| way | event-loop thread CPU per fsync (µs) | wall per fsync (µs) |');
    console.log('|---|---:|---:|');
    for (const [i, [name]] of WAYS.entries()) {
      console.log(`| ${name} | ${median(cpu[i]!).toFixed(1)} | ${median(wall[i]!).toFixed(1)} |`);
    }
  } finally {
    await handle.close();
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
