/**
 * `bench:digest`'s instructions part (HIVEKV_BENCH_PARTS=instructions): the digest's cost in
 * counted work rather than time, for a machine too noisy to resolve a few percent. Each of
 * the two modules (digest-module.ts) runs digest-instructions-child.js under callgrind twice,
 * once loading 1M keys and once loading them and then applying the measured puts; the
 * difference between the two is the puts' own work. Counted: instructions, and, through
 * callgrind's cache simulation (32 KiB L1s and a 32 MiB last level, set here so that every
 * machine simulates the same), the misses; "cycles" is callgrind's usual estimate, an
 * instruction plus 10 per L1 miss and 100 per last-level miss. The counts repeat (to about
 * 1 in 60,000) for the same module and inputs, whatever else the machine does.
 *
 * Needs valgrind (Debian: `apt-get install valgrind`). Slow: each run takes 5 to 15 minutes
 * under the simulation; runs go two at a time on two cores.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

import type { DigestModules } from './digest-module.js';

const execFileAsync = promisify(execFile);
const CHILD = new URL('./digest-instructions-child.js', import.meta.url).pathname;
const KEYS = Number(process.env['HIVEKV_BENCH_KEYS'] ?? '1000000');
/** Measured puts per shape: enough entries that a collector cycle's share averages out. */
const OPS: Readonly<Record<number, number>> = { 256: 262_144, 1: 65_536 };
const CACHES = ['--I1=32768,8,64', '--D1=32768,8,64', '--LL=33554432,16,64'];
const RUN_TIMEOUT_MS = 90 * 60_000;

interface Counts {
  readonly ir: number;
  readonly cycles: number;
  readonly llMisses: number;
}

/**
 * The instructions of a callgrind output file: its `totals` line, which counts what ran while
 * instrumentation was on (its `summary` line can read 0 when it was turned on by a command).
 */
export function instructionsOf(callgrindOut: string): number {
  const events = /^events: (.+)$/m.exec(callgrindOut)?.[1]?.split(' ');
  const totals = /^totals: (.+)$/m.exec(callgrindOut)?.[1]?.split(' ').map(Number);
  const at = events?.indexOf('Ir') ?? -1;
  if (totals === undefined || at < 0 || totals[at] === undefined) {
    throw new Error('no callgrind instruction total');
  }
  return totals[at]!;
}

/** The totals of a callgrind output file. */
export function countsOf(callgrindOut: string): Counts {
  const events = /^events: (.+)$/m.exec(callgrindOut)?.[1]?.split(' ');
  const totals = /^(?:summary|totals): (.+)$/m.exec(callgrindOut)?.[1]?.split(' ').map(Number);
  if (events === undefined || totals === undefined) throw new Error('no callgrind totals');
  const at = (name: string): number => {
    const i = events.indexOf(name);
    if (i < 0 || totals[i] === undefined) throw new Error(`callgrind output lacks ${name}`);
    return totals[i]!;
  };
  const l1 = at('I1mr') + at('D1mr') + at('D1mw');
  const ll = at('ILmr') + at('DLmr') + at('DLmw');
  return { ir: at('Ir'), cycles: at('Ir') + 10 * l1 + 100 * ll, llMisses: ll };
}

async function run(dir: string, wasm: string, shape: number, measure: 0 | 1): Promise<Counts> {
  const out = join(dir, `${shape}-${measure}-${Date.now()}-${Math.random()}.out`);
  await execFileAsync('valgrind', ['--tool=callgrind', '--cache-sim=yes', ...CACHES,
    `--callgrind-out-file=${out}`, '--smc-check=all-non-file', process.execPath,
    // TurboFan only, no helper threads, and a collection schedule that does not depend on
    // the clock: the same work every run (counts then agree to about 1 in 60,000; without
    // the last two flags the V8 collector's timing moved them by more than the digest).
    '--no-liftoff', '--single-threaded', '--predictable', '--predictable-gc-schedule',
    CHILD, wasm, String(KEYS), String(OPS[shape]), String(shape), String(measure)],
  { timeout: RUN_TIMEOUT_MS, maxBuffer: 64 << 20 });
  return countsOf(readFileSync(out, 'utf8'));
}

/** Runs `tasks` at most `width` at a time. */
async function pooled<T>(tasks: ReadonlyArray<() => Promise<T>>, width: number): Promise<T[]> {
  const results: T[] = new Array<T>(tasks.length);
  let next = 0;
  await Promise.all(Array.from({ length: Math.min(width, tasks.length) }, async () => {
    for (let i = next++; i < tasks.length; i = next++) results[i] = await tasks[i]!();
  }));
  return results;
}

export async function instructionsSideBySide(modules: DigestModules): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'hivekv-bench-digest-callgrind-'));
  try {
    const shapes = [256, 1] as const;
    const variants = ['full', 'nodigest'] as const;
    const plan = shapes.flatMap((shape) => variants.flatMap((variant) =>
      ([0, 1] as const).map((measure) => ({ shape, variant, measure }))));
    const counts = await pooled(plan.map((p) => () => run(dir, modules[p.variant], p.shape,
      p.measure)), Math.max(1, cpus().length));
    const per = (shape: number, variant: string): Counts => {
      const load = counts[plan.findIndex((p) => p.shape === shape && p.variant === variant &&
        p.measure === 0)]!;
      const both = counts[plan.findIndex((p) => p.shape === shape && p.variant === variant &&
        p.measure === 1)]!;
      const ops = OPS[shape]!;
      return { ir: (both.ir - load.ir) / ops, cycles: (both.cycles - load.cycles) / ops,
        llMisses: (both.llMisses - load.llMisses) / ops };
    };
    const lines = ['| puts per entry | full: instructions / est. cycles / LL misses per put | ' +
      'nodigest | digest share of instructions | of est. cycles |', '|---|---:|---:|---:|---:|'];
    for (const shape of shapes) {
      const full = per(shape, 'full');
      const none = per(shape, 'nodigest');
      const fmt = (c: Counts): string =>
        `${c.ir.toFixed(0)} / ${c.cycles.toFixed(0)} / ${c.llMisses.toFixed(2)}`;
      lines.push(`| ${shape} | ${fmt(full)} | ${fmt(none)} | ` +
        `${(100 * (full.ir - none.ir) / full.ir).toFixed(2)}% | ` +
        `${(100 * (full.cycles - none.cycles) / full.cycles).toFixed(2)}% |`);
    }
    process.stdout.write(`\ninstructions (callgrind, ${KEYS} keys loaded, puts to random ` +
      `keys; per put, the measured run less the load alone):\n${lines.join('\n')}\n`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
