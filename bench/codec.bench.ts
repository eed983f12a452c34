/**
 * Codec micro benchmark (tinybench): the two encodings on a write's path. The machine command
 * (`host/machine/codec.ts`: a validated call to the bytes that become the log entry) for
 * calls of 1, 16 and 256 puts of 100-byte values, and the Raft peer message
 * (`host/core/raft/message-codec.ts`) for an append of 1 and 16 such entries, encoded and
 * decoded.
 *
 * Run: npm run build:ts && node dist/bench/codec.bench.js   (BENCH_TIME_MS for the budget)
 */
import { cpus } from 'node:os';

import { Bench } from 'tinybench';

import { decodeMessage, encodeMessage } from '../host/core/raft/message-codec.js';
import type { Message } from '../host/core/raft/messages.js';
import { encodeCommand } from '../host/machine/codec.js';
import { DEFAULT_TENANT, type Command, type KvOp } from '../host/machine/commands.js';
import { writeMicroJson, type MicroRow } from './micro-json.js';

const TIME_MS = Number(process.env['BENCH_TIME_MS'] ?? 1_000);
const WARMUP_MS = Math.min(200, TIME_MS);
const VALUE = `"${'x'.repeat(98)}"`;

function putCall(ops: number): Command {
  const list: KvOp[] = Array.from({ length: ops }, (_, i) => ({ op: 'put', sentAs: 'put',
    ns: 'bench', key: `user:${String(i).padStart(8, '0')}`, valueJson: VALUE,
    expiry: { kind: 'forever' }, expect: null, required: false }));
  return { kind: 'call', flags: { requireGrant: false },
    call: { tenant: DEFAULT_TENANT, ops: list, readBytesCeiling: 4 * 1024 * 1024 } };
}

function append(entries: number): Message {
  const data = encodeCommand(putCall(1));
  return { type: 'append', from: 'n1', to: 'n2', term: 3, prevLogIndex: 1000, prevLogTerm: 3,
    commitIndex: 999, entries: Array.from({ length: entries }, (_, i) => ({ term: 3,
      index: 1001 + i, timeMs: 1_700_000_000_000 + i, type: 'normal' as const, data })) };
}

async function main(): Promise<void> {
  const bench = new Bench({ time: TIME_MS, warmupTime: WARMUP_MS });
  const perTask = new Map<string, { units: number; unit: string }>();
  for (const ops of [1, 16, 256]) {
    const command = putCall(ops);
    const name = `encode command, ${ops} put${ops > 1 ? 's' : ''}`;
    perTask.set(name, { units: ops, unit: 'ops/s' });
    bench.add(name, () => { encodeCommand(command); });
  }
  for (const entries of [1, 16]) {
    const message = append(entries);
    const bytes = encodeMessage(message);
    const encodeName = `encode append, ${entries} entr${entries > 1 ? 'ies' : 'y'}`;
    const decodeName = `decode append, ${entries} entr${entries > 1 ? 'ies' : 'y'}`;
    perTask.set(encodeName, { units: 1, unit: 'messages/s' });
    perTask.set(decodeName, { units: 1, unit: 'messages/s' });
    bench.add(encodeName, () => { encodeMessage(message); });
    bench.add(decodeName, () => {
      if (decodeMessage(bytes) === null) throw new Error('decode failed');
    });
  }
  await bench.run();
  const rows: MicroRow[] = [];
  for (const task of bench.tasks) {
    const r = task.result;
    const units = perTask.get(task.name)!;
    if (r.state !== 'completed') throw new Error(`${task.name}: ${r.state}`);
    rows.push({ name: task.name, perSecond: r.throughput.mean * units.units, unit: units.unit,
      p50us: r.latency.p50 * 1000, p99us: r.latency.p99 * 1000, rmePercent: r.latency.rme });
  }
  console.log(`node ${process.version}, ${cpus()[0]?.model ?? 'unknown cpu'}`);
  console.log('| task | per second | p50 µs | p99 µs | rme |\n|---|---:|---:|---:|---:|');
  for (const row of rows) {
    console.log(`| ${row.name} | ${Math.round(row.perSecond).toLocaleString('en-US')} ` +
      `${row.unit} | ${row.p50us?.toFixed(2)} | ${row.p99us?.toFixed(2)} | ` +
      `${row.rmePercent?.toFixed(1)}% |`);
  }
  writeMicroJson(rows);
}

await main();
