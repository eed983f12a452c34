// Process crash: a child process appends and syncs in a loop, printing each synced index; it
// is SIGKILLed at a seeded moment, ten times over one data directory. After every kill,
// every entry the child saw synced must recover intact, in order, with its hard state.
// The child runs the storage sources transpiled on the fly (no build step needed).
// Prints its seed; replay with SEED=...
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import ts from 'typescript';
import { afterAll, expect, it } from 'vitest';

import type { Entry } from '../../host/core/raft/types.js';
import { FileStorage } from '../../host/storage/file-storage.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const SOURCES = [
  'host/core/raft/types.ts', 'host/core/raft/configuration.ts', 'host/core/slabs.ts',
  'host/core/little-endian.ts',
  'host/storage/storage.ts', 'host/storage/record.ts',
  'host/storage/wal.ts', 'host/storage/wal-prealloc.ts', 'host/storage/segment-scan.ts',
  'host/storage/segment-reader.ts', 'host/storage/segment-reader-worker.ts',
  'host/storage/hard-state-file.ts', 'host/storage/snapshot-files.ts',
  'host/storage/file-storage.ts', 'host/storage/descriptors.ts',
];
const KILLS = 10;
const SEGMENT_BYTES = 8192;
const READY_TIMEOUT_MS = 15_000;
const KILL_DELAY_MS_MAX = 120;
const dirs: string[] = [];

afterAll(async () => {
  for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
});

/** The payload of an entry; the child gets this function's compiled text, so both agree. */
function payload(index: number, term: number): Uint8Array {
  const bytes = new Uint8Array(1 + (index * 37) % 300);
  for (let i = 0; i < bytes.length; i += 1) bytes[i] = (index * 7 + term * 13 + i) & 0xff;
  return bytes;
}

const CHILD_SOURCE = `import { FileStorage } from './host/storage/file-storage.js';
${payload.toString()}
const storage = new FileStorage(process.argv[2], { segmentBytesMax: ${SEGMENT_BYTES} });
const state = await storage.recover();
let last = state.entries.at(-1)?.index ?? state.snapshot?.meta.index ?? 0;
const term = state.hardState.term + 1;
storage.setHardState({ term, votedFor: 'n1', commitIndex: 0 });
await storage.sync();
process.stdout.write('ready ' + last + '\\n');
for (let round = 1; round < 1000000; round += 1) {
  const batch = [];
  for (let i = 1; i <= 1 + (round % 7); i += 1) {
    batch.push({ term, index: last + i, timeMs: last + i, type: 'normal',
      data: payload(last + i, term) });
  }
  storage.append(batch);
  await storage.sync();
  last += batch.length;
  process.stdout.write('synced ' + last + ' ' + term + '\\n');
  if (round % 40 === 0) {
    const index = last - 5;
    const data = payload(index, 99);
    const sink = await storage.createSnapshot({ index, term, timeMs: index, voters: ['n1'],
      learners: [], peers: [{ id: 'n1', address: '' }], removed: [] },
      data.length);
    for (let at = 0; at < data.length; at += 37) await sink.write(data.subarray(at, at + 37));
    await sink.commit();
  }
}`;

async function writeChildTree(): Promise<string> {
  const tree = await mkdtemp(join(tmpdir(), 'hivekv-crash-tree-'));
  dirs.push(tree);
  await writeFile(join(tree, 'package.json'), '{"type":"module"}');
  for (const source of SOURCES) {
    const text = await readFile(join(ROOT, source), 'utf8');
    const output = ts.transpileModule(text, {
      compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
    }).outputText;
    const target = join(tree, source.replace(/\.ts$/, '.js'));
    await mkdir(dirname(target), { recursive: true });
    await writeFile(target, output);
  }
  await writeFile(join(tree, 'child.mjs'), CHILD_SOURCE);
  return tree;
}

function prng(seed: number): (bound: number) => number {
  let state = seed >>> 0 || 1;
  return (bound) => {
    state ^= state << 13; state >>>= 0;
    state ^= state >>> 17;
    state ^= state << 5; state >>>= 0;
    return state % bound;
  };
}

/** Runs one child until it has synced for `delayMs` after start-up, then SIGKILLs it. */
function runAndKill(tree: string, dataDir: string, delayMs: number):
  Promise<{ index: number; term: number }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(tree, 'child.mjs'), dataDir],
      { stdio: ['ignore', 'pipe', 'pipe'] });
    let acked = { index: 0, term: 0 };
    let buffered = '';
    let stderr = '';
    const readyTimer = setTimeout(() => child.kill('SIGKILL'), READY_TIMEOUT_MS);
    child.stderr.on('data', (chunk: Buffer) => { stderr += chunk.toString(); });
    child.stdout.on('data', (chunk: Buffer) => {
      buffered += chunk.toString();
      const lines = buffered.split('\n');
      buffered = lines.pop() ?? '';
      for (const line of lines) {
        const [word, index, term] = line.split(' ');
        if (word === 'ready') {
          clearTimeout(readyTimer);
          setTimeout(() => child.kill('SIGKILL'), delayMs);
        } else if (word === 'synced') acked = { index: Number(index), term: Number(term) };
      }
    });
    child.on('exit', (code, signal) => {
      clearTimeout(readyTimer);
      if (signal === 'SIGKILL') resolve(acked);
      else reject(new Error(`child exited ${code} ${signal}: ${stderr}`));
    });
  });
}

function checkEntries(recovered: readonly Entry[], firstIndex: number): void {
  let previousTerm = 0;
  recovered.forEach((entry, i) => {
    expect(entry.index).toBe(firstIndex + i);
    expect(entry.term).toBeGreaterThanOrEqual(previousTerm);
    expect(entry.data).toEqual(payload(entry.index, entry.term));
    previousTerm = entry.term;
  });
}

it('every synced entry survives SIGKILL mid-append, ten times over', async () => {
  const seed = Number(process.env.SEED ?? Date.now() % 1_000_000);
  console.log(`storage-crash seed=${seed} (replay with SEED=${seed})`);
  const next = prng(seed);
  const tree = await writeChildTree();
  const dataDir = join(tree, 'data');
  let totalAcked = 0;
  for (let kill = 0; kill < KILLS; kill += 1) {
    const acked = await runAndKill(tree, dataDir, 10 + next(KILL_DELAY_MS_MAX));
    const storage = new FileStorage(dataDir, { segmentBytesMax: SEGMENT_BYTES });
    const state = await storage.recover();
    const snapshotIndex = state.snapshot?.meta.index ?? 0;
    if (state.snapshot !== null) {
      const parts: Uint8Array[] = [];
      for await (const chunk of storage.snapshotChunks(snapshotIndex, 50)) parts.push(chunk);
      expect(Buffer.concat(parts)).toEqual(Buffer.from(payload(snapshotIndex, 99)));
    }
    await storage.close();
    checkEntries(state.entries, snapshotIndex + 1);
    const lastIndex = state.entries.at(-1)?.index ?? snapshotIndex;
    expect(lastIndex, `seed=${seed} kill=${kill}`).toBeGreaterThanOrEqual(acked.index);
    expect(state.hardState.term).toBeGreaterThanOrEqual(acked.term);
    console.log(`kill ${kill}: acked ${acked.index} (term ${acked.term}), recovered ` +
      `snapshot ${snapshotIndex} + ${state.entries.length} entries to ${lastIndex}`);
    totalAcked += acked.index > 0 ? 1 : 0;
  }
  expect(totalAcked).toBeGreaterThan(KILLS / 2);
}, 120_000);
