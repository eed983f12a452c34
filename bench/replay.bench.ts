/**
 * `npm run bench:replay`: how fast `hivekv replay` rebuilds a state. Writes a data directory
 * with the storage code itself (FileStorage: real segments, real checksums), one of
 * single-put entries and one of 256-put entries, then times opening it (every segment
 * scanned and verified) and replaying it from index 1 through the machine in batches, as
 * `hivekv replay` does. Prints entries/s and operations/s of each phase; the targets are
 * 300,000 single-operation entries/s and 1,000,000 operations/s in entries of 256.
 *
 * `HIVEKV_BENCH_SINGLE` and `HIVEKV_BENCH_BATCHED` set the entry counts (300,000 and 4,000).
 * Run it alone: `flock -x` on a shared machine.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';

import type { Entry } from '../host/core/raft/types.js';
import { encodeCommand } from '../host/machine/codec.js';
import { DEFAULT_TENANT, type KvOp } from '../host/machine/commands.js';
import { encodeEnvelope } from '../host/node/envelope.js';
import { DataDir } from '../host/replay/data-dir.js';
import { Replayer } from '../host/replay/replay.js';
import { FileStorage } from '../host/storage/file-storage.js';

const SINGLE = Number(process.env['HIVEKV_BENCH_SINGLE'] ?? '300000');
const BATCHED = Number(process.env['HIVEKV_BENCH_BATCHED'] ?? '4000');
const KEYS = 100_000;
const APPEND_BATCH = 2000;
const T0 = 1_750_000_000_000;
const ORIGIN = { nodeId: 'n1', incarnation: 7 };

function putOp(i: number): KvOp {
  return { op: 'put', sentAs: 'put', ns: 'bench', key: `key-${i % KEYS}`,
    valueJson: `{"n":${i},"pad":"0123456789abcdef0123456789abcdef"}`,
    expiry: { kind: 'forever' }, expect: null, required: false };
}

function entryOf(index: number, opsPerEntry: number): Entry {
  const ops = Array.from({ length: opsPerEntry }, (_, j) => putOp(index * opsPerEntry + j));
  const command = encodeCommand({ kind: 'call', flags: { requireGrant: false },
    call: { tenant: DEFAULT_TENANT, shape: 'batch', ops, readBytesCeiling: 4 << 20 } });
  return { term: 1, index, timeMs: T0 + index, type: 'normal',
    data: encodeEnvelope(ORIGIN, index, command) };
}

async function writeDir(dir: string, entries: number, opsPerEntry: number): Promise<void> {
  const storage = new FileStorage(dir, { preallocate: false });
  await storage.recover();
  storage.setHardState({ term: 1, votedFor: 'n1', commitIndex: 0 });
  for (let from = 1; from <= entries; from += APPEND_BATCH) {
    const batch: Entry[] = [];
    for (let i = from; i < Math.min(from + APPEND_BATCH, entries + 1); i++) {
      batch.push(entryOf(i, opsPerEntry));
    }
    storage.append(batch);
    await storage.sync();
  }
  await storage.close();
}

interface Figures { readonly label: string; readonly entries: number; readonly ops: number;
  readonly openMs: number; readonly replayMs: number; readonly digest: string }

async function measure(label: string, entries: number, opsPerEntry: number): Promise<Figures> {
  const dir = mkdtempSync(join(tmpdir(), 'hivekv-bench-replay-'));
  try {
    await writeDir(dir, entries, opsPerEntry);
    const t0 = performance.now();
    const data = await DataDir.open(dir);
    const t1 = performance.now();
    const replayer = await Replayer.start(data, { fromStart: true });
    let digest = '';
    await replayer.run(() => false, (_i, _t, d) => { digest = d; });
    const t2 = performance.now();
    if (replayer.machine.appliedIndex !== entries) throw new Error('replay fell short');
    return { label, entries, ops: entries * opsPerEntry, openMs: t1 - t0, replayMs: t2 - t1,
      digest };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function report(f: Figures): void {
  const perSec = (n: number, ms: number) => Math.round(n / (ms / 1000)).toLocaleString('en-US');
  process.stdout.write(`${f.label}: ${f.entries} entries, ${f.ops} ops\n` +
    `  open (scan + verify): ${f.openMs.toFixed(0)} ms\n` +
    `  replay: ${f.replayMs.toFixed(0)} ms = ${perSec(f.entries, f.replayMs)} entries/s, ` +
    `${perSec(f.ops, f.replayMs)} ops/s (digest ${f.digest})\n` +
    `  open + replay: ${perSec(f.entries, f.openMs + f.replayMs)} entries/s, ` +
    `${perSec(f.ops, f.openMs + f.replayMs)} ops/s\n`);
}

report(await measure('single-op entries', SINGLE, 1));
report(await measure('256-op entries', BATCHED, 256));
