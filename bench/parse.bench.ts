/**
 * Request parser micro benchmark (tinybench, one process): from a request body's bytes to
 * the command bytes a log entry carries, per call, two ways:
 * - wasm: StateMachine.parseRequest (the frame written into wasm memory, tokenizer,
 *   validation, the command written and copied out, the growth estimate looked up in a
 *   store of BENCH_KEYS keys);
 * - ts: what the HTTP layer did before (the body decoded as UTF-8, JSON.parse with the
 *   nesting check, validate.ts, encodeCommand).
 * Bodies are the load runs' (bench/wrk): a put of a 100-byte value, a get, batches of 16
 * and 256 puts, drawn round-robin from a pool so keys vary as under load.
 *
 * Run: npm run bench:parse   (BENCH_TIME_MS, BENCH_KEYS to change it; under
 * `flock -x /work/cpu.lock` on a shared machine)
 */
import { cpus } from 'node:os';
import { execSync } from 'node:child_process';

import { Bench } from 'tinybench';

import { encodeCommand } from '../host/machine/codec.js';
import { DEFAULT_TENANT, type KvOp } from '../host/machine/commands.js';
import type { RequestFrame } from '../host/machine/request.js';
import { StateMachine } from '../host/machine/state-machine.js';
import { loadConfig } from '../host/node/config.js';
import { isKvError } from '../host/http/errors.js';
import { parseJsonBody, validateKvBody } from '../host/http/validate.js';

const TIME_MS = Number(process.env['BENCH_TIME_MS'] ?? 2_000);
const WARMUP_MS = 300;
const KEYS = Number(process.env['BENCH_KEYS'] ?? 100_000);
/** Distinct bodies per workload, used round-robin. */
const POOL = 1024;
const VALUE = '"' + 'v'.repeat(98) + '"';
const LOAD_BATCH = 256;

const limits = loadConfig({}, {}).limits;

function putOp(key: number): string {
  return `{"op":"put","ns":"bench","key":"k${key}","value":${VALUE},"forever":true}`;
}

/** Bodies of `n` puts on consecutive keys from a varying base, as batch16.lua sends. */
function putBodies(n: number): Buffer[] {
  return Array.from({ length: POOL }, (_, i) => {
    const base = (i * 7919) % (KEYS - n);
    const ops = Array.from({ length: n }, (_, j) => putOp(base + j + 1));
    return Buffer.from(`{"operations":[${ops.join(',')}]}`);
  });
}

function getBodies(): Buffer[] {
  return Array.from({ length: POOL }, (_, i) => Buffer.from(
    `{"operations":[{"op":"get","ns":"bench","key":"k${(i * 7919) % KEYS + 1}"}]}`));
}

/** A machine holding KEYS rows of 100-byte values under ns `bench`, as a loaded node does. */
function loadedMachine(): StateMachine {
  const m = StateMachine.create();
  m.setRequestLimits(limits);
  let index = 0;
  for (let base = 0; base < KEYS; base += LOAD_BATCH) {
    const ops: KvOp[] = [];
    for (let k = base + 1; k <= Math.min(KEYS, base + LOAD_BATCH); k++) {
      ops.push({ op: 'put', sentAs: 'put', ns: 'bench', key: `k${k}`, valueJson: VALUE,
        expiry: { kind: 'forever' }, expect: null, required: false });
    }
    m.apply(++index, 1000, encodeCommand({ kind: 'call', flags: { requireGrant: false },
      call: { tenant: DEFAULT_TENANT, ops, readBytesCeiling: limits.maxReadBytes } }));
  }
  return m;
}

function viaTypeScript(body: Buffer): Uint8Array {
  const call = validateKvBody(parseJsonBody(body.toString('utf8')), DEFAULT_TENANT, limits);
  if (isKvError(call)) throw new Error(call.detail);
  return encodeCommand({ kind: 'call', call, flags: { requireGrant: false } });
}

function viaWasm(m: StateMachine, body: Buffer): Uint8Array {
  const frame: RequestFrame = { route: 'batch', body, tenant: DEFAULT_TENANT,
    requireGrant: false };
  const out = m.parseRequest(frame);
  if (out.kind !== 'command') throw new Error(out.detail);
  return out.command;
}

async function main(): Promise<void> {
  const m = loadedMachine();
  const workloads: Array<[string, Buffer[]]> = [
    ['put x1 (100 B value)', putBodies(1)], ['get x1', getBodies()],
    ['put x16', putBodies(16)], ['put x256', putBodies(256)],
  ];
  const bench = new Bench({ time: TIME_MS, warmupTime: WARMUP_MS });
  for (const [name, bodies] of workloads) {
    // Both sides must agree on every body before either is timed.
    for (const body of bodies.slice(0, 8)) {
      if (viaWasm(m, body).length === 0 || viaTypeScript(body).length === 0) {
        throw new Error('empty command');
      }
    }
    let i = 0;
    bench.add(`wasm ${name}`, () => { viaWasm(m, bodies[i++ % POOL]!); });
    let j = 0;
    bench.add(`ts   ${name}`, () => { viaTypeScript(bodies[j++ % POOL]!); });
  }
  await bench.run();
  const commit = execSync('git rev-parse --short HEAD').toString().trim();
  console.log(`node ${process.version}, ${cpus()[0]?.model ?? 'unknown cpu'}, commit ${commit}, ` +
    `${KEYS} keys held`);
  console.log('| task | body bytes | ns/call mean | p50 ns | p99 ns | calls/s | rme |');
  console.log('|---|---:|---:|---:|---:|---:|---:|');
  for (const task of bench.tasks) {
    const r = task.result;
    if (r === undefined || r.state !== 'completed') continue;
    const bodies = workloads.find(([name]) => task.name.endsWith(name))?.[1];
    const bytes = bodies?.[0]?.length ?? 0;
    const ns = (ms: number | undefined): string => ((ms ?? 0) * 1e6).toFixed(0);
    console.log(`| ${task.name} | ${bytes} | ${ns(r.latency.mean)} | ${ns(r.latency.p50)} | ` +
      `${ns(r.latency.p99)} | ${r.throughput.mean.toFixed(0)} | ${r.latency.rme.toFixed(1)}% |`);
  }
}

await main();
