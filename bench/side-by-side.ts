/**
 * Two or more builds of the machine in one process, taking turns on the same puts: what
 * `bench:digest` (its machine part) and `bench:machine-versus` measure with. A change worth a
 * few percent is smaller than the swing between whole runs on a shared machine; slices that
 * alternate see the same noise.
 */
import { performance } from 'node:perf_hooks';

import type { StateMachine } from '../host/machine/state-machine.js';
import { Feeder, envelopesOf } from './digest-workload.js';

export const SLICE_OPS = 16_384;
const WARMUP_SLICES = 4;
const POOL_OPS = 131_072;
const OPS_PER_CROSSING = 256;

/**
 * A machine of the module at `wasm`: state-machine.js imported afresh under its own URL
 * (tagged `name`), so it compiles its own module (HIVEKV_WASM_PATH is read on the first
 * create), and several modules live side by side in this process.
 */
async function machineOf(wasm: string, name: string): Promise<StateMachine> {
  const url = new URL('../host/machine/state-machine.js', import.meta.url);
  url.search = `?module=${name}`;
  const loaded = await import(url.href) as typeof import('../host/machine/state-machine.js');
  process.env['HIVEKV_WASM_PATH'] = wasm;
  try {
    return loaded.StateMachine.create();
  } finally {
    delete process.env['HIVEKV_WASM_PATH'];
  }
}

/** A machine of the module at `wasm` loaded with `keys` keys of 100-byte values. */
export async function loadedFeeder(wasm: string, name: string, keys: number): Promise<Feeder> {
  const feeder = new Feeder(await machineOf(wasm, name));
  const load = envelopesOf(256, Math.ceil(keys / 256), (i) => i % keys);
  for (let i = 0; i < load.length; i += 16) feeder.apply(load.slice(i, i + 16));
  return feeder;
}

/**
 * Milliseconds each machine took for each of `slices` slices of SLICE_OPS puts in entries of
 * `ops`, to keys at a prime stride over `keys` (no two neighbouring puts touch neighbouring
 * keys), the machines taking turns slice by slice, the order flipping each time, after
 * WARMUP_SLICES untimed ones: one record per round, each compared on its own.
 */
export function interleaved<V extends string>(feeders: Record<V, Feeder>, ops: number,
  keys: number, slices: number): Array<Record<V, number>> {
  const names = Object.keys(feeders) as V[];
  const pool = envelopesOf(ops, POOL_OPS / ops, (i) => (i * 7_919_071) % keys);
  const perCrossing = Math.max(1, OPS_PER_CROSSING / ops);
  const cursor = Object.fromEntries(names.map((n) => [n, 0])) as Record<V, number>;
  const slice = (name: V): number => {
    const started = performance.now();
    for (let done = 0; done < SLICE_OPS; done += perCrossing * ops) {
      const at = cursor[name];
      feeders[name].apply(pool.slice(at, at + perCrossing));
      cursor[name] = (at + perCrossing) % pool.length;
    }
    return performance.now() - started;
  };
  const rounds: Array<Record<V, number>> = [];
  for (let s = 0; s < WARMUP_SLICES + slices; s++) {
    const round = {} as Record<V, number>;
    for (const name of s % 2 === 0 ? names : [...names].reverse()) round[name] = slice(name);
    if (s >= WARMUP_SLICES) rounds.push(round);
  }
  return rounds;
}
