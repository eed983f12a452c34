/**
 * Simulator throughput: simulated cluster-seconds per wall second for a 3-node cluster under
 * client load (4 clients, and 1), without faults and with the full fault mix. The wall figure
 * suffers from other processes on the machine, so CPU seconds are reported beside it.
 *
 *   npm run bench:sim [-- --seconds 30 --runs 5]
 */
import { DEFAULT_RUN, runSeed } from '../test/sim/run.js';
import { FAULT_NAMES, type FaultName } from '../test/sim/faults.js';

interface Sample {
  readonly simulatedS: number;
  readonly wallS: number;
  readonly cpuS: number;
  readonly events: number;
  readonly committed: number;
  readonly answered: number;
}

function flag(name: string, fallback: number): number {
  const at = process.argv.indexOf(name);
  const value = at >= 0 ? Number(process.argv[at + 1]) : fallback;
  if (!Number.isFinite(value) || value <= 0) throw new Error(`${name} must be a positive number`);
  return value;
}

async function sample(seed: number, safetyMs: number, faultKinds: readonly FaultName[],
  clientCount: number): Promise<Sample> {
  const cpu0 = process.cpuUsage();
  const wall0 = performance.now();
  const result = await runSeed({ ...DEFAULT_RUN, seed, nodeCount: 3, safetyMs, faultKinds,
    clientCount });
  const cpu = process.cpuUsage(cpu0);
  if (result.failure !== null) throw new Error(`seed ${seed} failed: ${result.failure}`);
  return {
    simulatedS: result.simulatedMs / 1000, wallS: (performance.now() - wall0) / 1000,
    cpuS: (cpu.user + cpu.system) / 1e6, events: result.events,
    committed: result.committedEntries, answered: result.callsAnswered,
  };
}

function report(label: string, samples: readonly Sample[]): void {
  const perWall = samples.map((s) => s.simulatedS / s.wallS);
  const perCpu = samples.map((s) => s.simulatedS / s.cpuS);
  const mean = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  const spread = (xs: readonly number[]) => `${Math.min(...xs).toFixed(0)}..${Math.max(...xs)
    .toFixed(0)}`;
  const simS = samples.reduce((a, s) => a + s.simulatedS, 0);
  const events = samples.reduce((a, s) => a + s.events, 0);
  const answered = samples.reduce((a, s) => a + s.answered, 0);
  console.log(`${label}: ${mean(perWall).toFixed(0)} simulated s per wall s (${spread(perWall)}),` +
    ` ${mean(perCpu).toFixed(0)} per CPU s (${spread(perCpu)}); ` +
    `${(events / simS).toFixed(0)} events and ${(answered / simS).toFixed(1)} client calls ` +
    `answered per simulated s`);
}

async function main(): Promise<void> {
  const seconds = flag('--seconds', 30);
  const runs = flag('--runs', 5);
  console.log(`node ${process.version}, ${runs} runs of ${seconds} simulated s, 3 nodes`);
  await sample(1, 2_000, [], 4); // warm-up: compiles the wasm module and JITs the hot paths
  const configs = [
    ['4 clients, no faults', [], 4], ['1 client, no faults', [], 1],
    ['4 clients, all faults', FAULT_NAMES, 4],
  ] as const;
  for (const [label, kinds, clients] of configs) {
    const samples: Sample[] = [];
    for (let run = 1; run <= runs; run++) {
      samples.push(await sample(run, seconds * 1000, kinds, clients));
    }
    report(label, samples);
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
