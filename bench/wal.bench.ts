/**
 * WAL micro benchmark: append + sync (one write and one fdatasync) of 1, 16 and 256 entries
 * of 100 bytes, on real files in a fresh directory under os.tmpdir(); one entry also with its
 * fdatasync on the calling thread (FileStorage.sync's `onLoop`); plus 16 concurrent
 * callers of one entry each, to show group commit sharing one fsync. Reports entries/s,
 * fsyncs/s and p50/p99 sync latency as a markdown table for bench/RESULTS.md.
 *
 * Run: npm run build:ts && node dist/bench/wal.bench.js   (BENCH_TIME_MS to change the budget,
 * BENCH_CASE to run only the cases whose name contains it)
 */
import { execSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';

import { Bench } from 'tinybench';

import type { Entry } from '../host/core/raft/types.js';
import { FileStorage } from '../host/storage/file-storage.js';
import { writeMicroJson } from './micro-json.js';

const ENTRY_DATA_BYTES = 100;
const TIME_MS = Number(process.env.BENCH_TIME_MS ?? 3_000);
const WARMUP_MS = Math.min(300, TIME_MS);
const CONCURRENT_CALLERS = 16;

interface Case {
  readonly name: string;
  readonly batchEntries: number;
  readonly concurrency: number;
  /** Written through, then fdatasynced on this thread (as a node syncs a lone call). */
  readonly onLoop?: boolean;
}

const CASES: readonly Case[] = [
  { name: 'append+sync 1 entry', batchEntries: 1, concurrency: 1 },
  { name: 'append+sync 1 entry on the loop', batchEntries: 1, concurrency: 1, onLoop: true },
  { name: 'append+sync 16 entries', batchEntries: 16, concurrency: 1 },
  { name: 'append+sync 256 entries', batchEntries: 256, concurrency: 1 },
  { name: `${CONCURRENT_CALLERS} callers x 1 entry`, batchEntries: 1,
    concurrency: CONCURRENT_CALLERS },
];

interface Row {
  readonly name: string;
  readonly entriesPerSecond: number;
  readonly fsyncsPerSecond: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly rmePercent: number;
  readonly samples: number;
}

function batch(firstIndex: number, count: number, data: Uint8Array): Entry[] {
  return Array.from({ length: count }, (_, i) => ({
    term: 1, index: firstIndex + i, timeMs: firstIndex + i, type: 'normal' as const, data,
  }));
}

async function runCase(spec: Case): Promise<Row> {
  const dir = await mkdtemp(join(tmpdir(), 'hivekv-wal-bench-'));
  let fsyncs = 0;
  const storage = new FileStorage(dir, { onFsyncSeconds: () => { fsyncs += 1; } });
  await storage.recover();
  const data = new Uint8Array(ENTRY_DATA_BYTES).fill(7);
  let nextIndex = 1;
  let calls = 0;
  const bench = new Bench({
    time: TIME_MS, warmupTime: WARMUP_MS, throws: true,
    ...(spec.concurrency > 1 ? { concurrency: 'task' as const, threshold: spec.concurrency } : {}),
  });
  bench.add(spec.name, async () => {
    storage.append(batch(nextIndex, spec.batchEntries, data));
    nextIndex += spec.batchEntries;
    calls += 1;
    if (spec.onLoop === true) {
      storage.startWrite();
      await storage.sync({ onLoop: true });
    } else {
      await storage.sync();
    }
  });
  const startMs = performance.now();
  await bench.run();
  const wallSeconds = (performance.now() - startMs) / 1000;
  await storage.close();
  await rm(dir, { recursive: true, force: true });
  const result = bench.tasks[0]?.result;
  if (result === undefined || result.state !== 'completed') throw new Error('bench failed');
  return {
    name: spec.name,
    entriesPerSecond: (calls * spec.batchEntries) / wallSeconds,
    fsyncsPerSecond: fsyncs / wallSeconds,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    rmePercent: result.latency.rme,
    samples: result.latency.samplesCount,
  };
}

function commit(): string {
  try {
    return execSync('git rev-parse --short HEAD', { encoding: 'utf8' }).trim();
  } catch {
    return 'unknown';
  }
}

function render(rows: readonly Row[]): string {
  const fixed = (n: number, digits: number): string => n.toFixed(digits);
  const lines = [
    `Node ${process.version}, ${cpus()[0]?.model ?? 'unknown CPU'} x${cpus().length}, ` +
      `commit ${commit()}, ${TIME_MS} ms per case after ${WARMUP_MS} ms warm-up, ` +
      `dir under ${tmpdir()}`,
    '',
    '| case | entries/s | fsyncs/s | sync p50 ms | sync p99 ms | ± (rme) | samples |',
    '|---|---:|---:|---:|---:|---:|---:|',
    ...rows.map((row) => `| ${row.name} | ${fixed(row.entriesPerSecond, 0)} | ` +
      `${fixed(row.fsyncsPerSecond, 0)} | ${fixed(row.p50Ms, 3)} | ${fixed(row.p99Ms, 3)} | ` +
      `${fixed(row.rmePercent, 1)}% | ${row.samples} |`),
  ];
  return lines.join('\n');
}

// BENCH_CASE runs only the cases whose name contains it (bench:node times one): such a
// partial run prints its table and leaves the saved figures of the full run alone.
const only = process.env.BENCH_CASE;
const rows: Row[] = [];
for (const spec of CASES) {
  if (only === undefined || spec.name.includes(only)) rows.push(await runCase(spec));
}
console.log(render(rows));
if (only === undefined) {
  writeMicroJson(rows.map((row) => ({ name: row.name, perSecond: row.entriesPerSecond,
    unit: 'entries/s', p50us: row.p50Ms * 1000, p99us: row.p99Ms * 1000,
    rmePercent: row.rmePercent })), rows.map((row) => `${row.name}: ` +
    `${row.fsyncsPerSecond.toFixed(0)} fsyncs/s, ${row.samples} samples`));
}
