/**
 * What an Idempotency-Key costs the state machine (tinybench, one process): applied entries/s
 * of a one-op `incr` entry without a key, with a fresh key per entry (recorded: the answer
 * rendered and kept), and as a retry of a recorded key (replayed: nothing applied). Entries
 * are encoded before timing, as the log carries bytes. BENCH_TIME_MS changes the budget.
 *
 * Run: npm run build && node dist/bench/idempotency.bench.js
 */
import { Bench } from 'tinybench';

import { encodeCommand } from '../host/machine/codec.js';
import type { Command, KvOp } from '../host/machine/commands.js';
import { DEFAULT_TENANT } from '../host/machine/commands.js';
import { StateMachine } from '../host/machine/state-machine.js';

const TIME_MS = Number(process.env.BENCH_TIME_MS ?? 2_000);
const POOL = 65_536;

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
  // Fresh keys: every entry records. The pool repeats keys only after POOL entries, and the
  // run's count is far below the per-tenant bound, so none is evicted mid-run.
  let serial = 0;
  const fresh = (): Uint8Array[] => Array.from({ length: POOL }, (_, i) =>
    command(i, `key-${serial++}-${i}`));
  const keyed = fresh();
  const m2 = StateMachine.create();
  const clock2 = { index: 0 };
  await run('incr, fresh key (recorded)', keyed, m2, clock2);
  // The same entries again: every one is a retry of a recorded key.
  await run('incr, recorded key (replayed)', keyed, m2, clock2);
  const stats = m2.idempotencyStats();
  console.log(`records ${stats.records}, bytes ${stats.bytes}, evictions ${stats.evictions}`);
}

await main();
