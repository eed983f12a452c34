/**
 * The simulator's command line:
 *
 *   npm run sim -- --seed 42 [--nodes 3|5] [--trace]
 *   npm run sim -- --seeds 1..500 [--nodes 3|5] [--safety-ms 8000] [--record]
 *   npm run sim -- --minutes 15            (random seeds, both sizes, until time is up)
 *
 * Without --nodes, even seeds run 3 nodes and odd seeds 5. It prints one line per failed
 * seed (and per seed with --trace), ends with `N passed, M failed`, and exits 1 if any
 * failed. `--record` appends failed seeds to test/sim/regression-seeds.json.
 */
import { randomInt } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DEFAULT_RUN, runSeed, type RunResult } from './run.js';

interface CliArgs {
  seeds: number[];
  nodes: 3 | 5 | null;
  trace: boolean;
  safetyMs: number;
  record: boolean;
  minutes: number | null;
}

/** Seeds one `--seeds A..B` may list. */
const SEEDS_PER_RANGE_MAX = 1_000_000;
const REGRESSION_FILE = join('test', 'sim', 'regression-seeds.json');

function parseArgs(argv: readonly string[]): CliArgs {
  const args: CliArgs = { seeds: [], nodes: null, trace: false, safetyMs: DEFAULT_RUN.safetyMs,
    record: false, minutes: null };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    const value = (): string => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${flag} needs a value`);
      return v;
    };
    if (flag === '--seed') args.seeds.push(int(value()));
    else if (flag === '--seeds') args.seeds.push(...range(value()));
    else if (flag === '--nodes') {
      const n = int(value());
      if (n !== 3 && n !== 5) throw new Error('--nodes must be 3 or 5');
      args.nodes = n;
    } else if (flag === '--trace') args.trace = true;
    else if (flag === '--record') args.record = true;
    else if (flag === '--safety-ms') args.safetyMs = int(value());
    else if (flag === '--minutes') args.minutes = Number(value());
    else throw new Error(`unknown flag ${flag}`);
  }
  if (args.seeds.length === 0 && args.minutes === null) args.seeds.push(randomInt(2 ** 31));
  return args;
}

function int(text: string): number {
  const n = Number(text);
  if (!Number.isSafeInteger(n) || n < 0) throw new Error(`not a non-negative integer: ${text}`);
  return n;
}

function range(text: string): number[] {
  const match = /^(\d+)\.\.(\d+)$/.exec(text);
  if (match === null) throw new Error(`--seeds takes A..B, got ${text}`);
  const from = int(match[1] as string);
  const to = int(match[2] as string);
  if (to < from || to - from >= SEEDS_PER_RANGE_MAX) throw new Error(`bad range ${text}`);
  return Array.from({ length: to - from + 1 }, (_, i) => from + i);
}

async function runOne(args: CliArgs, seed: number, nodes: 3 | 5): Promise<RunResult> {
  const result = await runSeed({
    ...DEFAULT_RUN, seed, nodeCount: nodes, safetyMs: args.safetyMs, trace: args.trace,
    traceSink: (line) => console.log(line),
  });
  const summary = `seed ${seed} nodes ${nodes}: ${result.simulatedMs} ms simulated, ` +
    `${result.events} events, ${result.committedEntries} committed, ` +
    `${result.checkpointsPassed} checkpoints passed, ` +
    `${result.callsAnswered} answered / ${result.callsUnknown} unknown, ` +
    `${result.crashes} crashes, ${result.membershipChanges} membership changes, ` +
    `${result.nodesReplaced} replaced, ${result.profile}`;
  if (result.inconclusiveKeys.length > 0) {
    console.log(`note seed ${seed} nodes ${nodes}: linearizability search gave up on ` +
      `${result.inconclusiveKeys.join(', ')}`);
  }
  if (result.failure !== null) {
    console.log(`FAIL ${summary}\n  faults: ${result.faults}\n  ${result.failure}\n` +
      `  replay: npm run sim -- --seed ${seed} --nodes ${nodes} --trace`);
  } else if (args.trace || args.seeds.length === 1) {
    console.log(`ok   ${summary}`);
  }
  return result;
}

function record(failed: readonly RunResult[]): void {
  const list = JSON.parse(readFileSync(REGRESSION_FILE, 'utf8')) as Array<
    { seed: number; nodes: number; note: string }>;
  for (const r of failed) {
    if (list.some((e) => e.seed === r.seed && e.nodes === r.nodeCount)) continue;
    list.push({ seed: r.seed, nodes: r.nodeCount, note: (r.failure ?? '').split('\n')[0] ?? '' });
  }
  writeFileSync(REGRESSION_FILE, `${JSON.stringify(list, null, 2)}\n`);
}

async function main(): Promise<number> {
  const args = parseArgs(process.argv.slice(2));
  const results: RunResult[] = [];
  const startedMs = Date.now();
  const endMs = args.minutes === null ? Infinity : startedMs + args.minutes * 60_000;
  const seeds = args.minutes === null ? args.seeds : null;
  for (let i = 0; seeds === null ? Date.now() < endMs : i < seeds.length; i++) {
    const seed = seeds === null ? randomInt(2 ** 31) : seeds[i] as number;
    const nodes = args.nodes ?? (seed % 2 === 0 ? 3 : 5);
    results.push(await runOne(args, seed, nodes));
  }
  const failed = results.filter((r) => r.failure !== null);
  if (args.record && failed.length > 0) record(failed);
  const wallS = (Date.now() - startedMs) / 1000;
  const simS = results.reduce((sum, r) => sum + r.simulatedMs, 0) / 1000;
  console.log(`${simS.toFixed(0)} simulated s in ${wallS.toFixed(1)} wall s ` +
    `(${(simS / Math.max(wallS, 0.001)).toFixed(0)}x)`);
  const changes = results.reduce((sum, r) => sum + r.membershipChanges, 0);
  const replaced = results.reduce((sum, r) => sum + r.nodesReplaced, 0);
  const churn = results.filter((r) => r.profile === 'churn').length;
  const refused = results.reduce((sum, r) => sum + r.snapshotsRefused, 0);
  const holds = results.reduce((sum, r) => sum + r.catchUpHolds, 0);
  const spaceSpells = results.reduce((sum, r) => sum + r.spaceSpells, 0);
  const spaceHolds = results.reduce((sum, r) => sum + r.spaceHolds, 0);
  const callsRefused = results.reduce((sum, r) => sum + r.callsRefused, 0);
  const budgets = results.reduce((sum, r) => sum + r.smallBudgets, 0);
  const stops = results.reduce((sum, r) => sum + r.gracefulStops, 0);
  console.log(`${changes} membership changes, ${replaced} damaged nodes replaced, ` +
    `${churn} churn-profile seeds, ${refused} snapshots refused for want of room, ` +
    `${holds} catch-ups held for want of memory`);
  console.log(`${spaceSpells} volumes low on space, ${spaceHolds} learners held back for ` +
    `space, ${budgets} starts with a small memory budget, ${stops} graceful stops; ` +
    `${callsRefused} calls refused before the log (a 503 other than timeout)`);
  console.log(`${results.length - failed.length} passed, ${failed.length} failed`);
  return failed.length > 0 ? 1 : 0;
}

main().then((code) => { process.exitCode = code; }, (error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exitCode = 2;
});
