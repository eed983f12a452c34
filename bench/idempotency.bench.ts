/**
 * What an Idempotency-Key costs the state machine (tinybench, one process): applied entries/s
 * of a one-op `incr` entry without a key, with a fresh key per entry (recorded: the answer
 * rendered and kept), and as a retry of a recorded key (replayed: nothing applied). Entries
 * are encoded before timing, as the log carries bytes. BENCH_TIME_MS changes the budget.
 *
 * Run: npm run build && node dist/bench/idempotency.bench.js   (BENCH_PLAIN_ONLY=1 runs the
 * first figure only, which also runs against a build of the machine without idempotency)
 */
import { Bench } from 'tinybench';

import { encodeCommand } from '../host/machine/codec.js';
import type { Command, KvOp } from '../host/machine/commands.js';
import { DEFAULT_TENANT } from '../host/machine/commands.js';
import { StateMachine } from '../host/machine/state-machine.js';

const TIME_MS = Number(process.env.BENCH_TIME_MS ?? 2_000);
const POOL = 65_536;
const FRESH = Number(process.env.BENCH_FRESH ?? 1_500_000);

const incrOp = (i: number): KvOp => ({ op: 'incr', ns: 'bench', key: `ctr:${i % 4096}`,
  delta: '1', min: null, max: null, expiry: { kind: 'forever' }, required: false });

function command(i: number, key: string | null): Uint8Array {
  const c: Command = { kind: 'call', flags: { requireGrant: false },
    call: { tenant: DEFAULT_TENANT, ops: [incrOp(i)], readBytesCeiling: 4 * 1024 * 1024 },
    ...(key === null ? {} : { idempotency: { key, ttlSeconds: 86_400 } }) };
  return encodeCommand(c);
}

async function run(name: string, entries: Uint8Array[], m: StateMachine,
  clock: { index: number }): Promise<void> {
  let i = 0;
  const bench = new Bench({ time: TIME_MS, warmupTime: Math.min(300, TIME_MS) });
  bench.add(name, () => {
    clock.index++;
    m.apply(clock.index, 1_000_000 + clock.index, entries[i++ % entries.length]!);
  });
  await bench.run();
  const r = bench.tasks[0]!.result;
  if (r.state !== 'completed') throw new Error(`${name}: ${r.state}`);
  console.log(`${name.padEnd(34)} ${Math.round(r.throughput.mean).toLocaleString('en-US')
    .padStart(10)} entries/s  p50 ${(r.latency.p50 * 1000).toFixed(2)} us  p99 ` +
    `${(r.latency.p99 * 1000).toFixed(2)} us`);
}

async function main(): Promise<void> {
  const plain = Array.from({ length: POOL }, (_, i) => command(i, null));
  const m = StateMachine.create();
  const clock = { index: 0 };
  await run('incr, no key', plain, m, clock);
  if (process.env.BENCH_PLAIN_ONLY === '1') return;
  // Fresh keys: every entry records, none repeats within FRESH entries (more than a run
  // applies); past 250,000 records each also evicts the tenant's oldest, the steady state.
  const keyed = Array.from({ length: FRESH }, (_, i) => command(i, `key-${i}`));
  const m2 = StateMachine.create();
  const clock2 = { index: 0 };
  await run('incr, fresh key (recorded)', keyed, m2, clock2);
  // Entries whose keys are still recorded: every one is a retry that applies nothing.
  const recorded = keyed.slice(keyed.length - POOL);
  for (const entry of recorded) m2.apply(++clock2.index, 1_000_000 + clock2.index, entry);
  await run('incr, recorded key (replayed)', recorded, m2, clock2);
  const stats = m2.idempotencyStats();
  console.log(`records ${stats.records}, bytes ${stats.bytes}, evictions ${stats.evictions}`);
}

await main();
