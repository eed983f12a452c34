/**
 * The log reading worker (host/storage/segment-reader.ts) against the same reads in this
 * thread: the built module (dist/, where the worker's compiled file is) and the sources
 * (where it is not, so they read here) must give the same scans of the same segments, sound
 * or damaged, and a refusal must stop the worker without leaving a read behind.
 */
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';

import type { Entry } from '../../host/core/raft/types.js';
import { FileStorage } from '../../host/storage/file-storage.js';
import { readSegments as readHere, type SegmentSource } from
  '../../host/storage/segment-reader.js';

type ReadSegments = typeof readHere;
const BUILT_URL = new URL('../../dist/host/storage/segment-reader.js', import.meta.url);
const built = await import(BUILT_URL.href) as {
  readSegments: (...args: [...Parameters<ReadSegments>, URL?]) => SegmentSource;
};

const dirs: string[] = [];
afterEach(async () => {
  for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
});

function entries(from: number, count: number, term: number): Entry[] {
  return Array.from({ length: count }, (_, i) => ({
    // Times past 2^32 ms, so both words of every u64 field are read back.
    term, index: from + i, timeMs: 2 ** 41 + 7_000 * i, type: 'normal' as const,
    data: Uint8Array.from({ length: 40 + ((from + i) * 13) % 90 }, (_, j) => (i + j) & 0xff),
  }));
}

/** A log of several small segments (terms 1 then 2); returns its segment paths in order. */
async function writeLog(): Promise<{ paths: string[]; firstIndexes: number[] }> {
  const dir = await mkdtemp(join(tmpdir(), 'hivekv-segread-'));
  dirs.push(dir);
  // Files end at their last record (no zero-filled room), so a tail appended is garbage.
  const storage = new FileStorage(dir, { segmentBytesMax: 4096, preallocate: false });
  await storage.recover();
  storage.append(entries(1, 60, 1));
  storage.append(entries(61, 50, 2));
  await storage.sync();
  await storage.close();
  const names = (await readdir(join(dir, 'wal'))).filter((n) => n.endsWith('.wal')).sort();
  return { paths: names.map((n) => join(dir, 'wal', n)),
    firstIndexes: names.map((n) => Number.parseInt(n, 10)) };
}

/** Every scan in order, as plain data (entries by index, term and payload). */
async function scans(source: SegmentSource, count: number): Promise<unknown[]> {
  const out: unknown[] = [];
  try {
    for (let i = 0; i < count; i++) {
      const { bytes, scan } = await source.next(i);
      out.push({ bytes: bytes.byteLength, ...scan,
        entries: 'entries' in scan ? scan.entries.map((e) => [e.index, e.term, e.timeMs, e.type,
          Buffer.from(e.data).toString('hex')]) : undefined });
      if (scan.kind !== 'ok') break;
    }
  } finally {
    await source.close();
  }
  return out;
}

it('reads a sound log in the worker exactly as in this thread', async () => {
  const work = await writeLog();
  expect(work.paths.length).toBeGreaterThan(3);
  const here = await scans(readHere(work, 30), work.paths.length);
  const worker = await scans(built.readSegments(work, 30), work.paths.length);
  expect(worker).toEqual(here);
  const kept = here.flatMap((s) => (s as { entries?: unknown[] }).entries ?? []);
  expect(kept.length).toBe(110 - 30);
});

it('gives the same verdict on a damaged segment, a torn tail and a torn header', async () => {
  const same = async (work: { paths: string[]; firstIndexes: number[] }): Promise<unknown[]> => {
    const here = await scans(readHere(work, 0), work.paths.length);
    expect(await scans(built.readSegments(work, 0), work.paths.length)).toEqual(here);
    return here;
  };
  const damaged = await writeLog();
  const middle = damaged.paths[1] as string;
  const bytes = await readFile(middle);
  bytes[200] = (bytes[200] ?? 0) ^ 0x01;
  await writeFile(middle, bytes);
  const refused = await same(damaged);
  expect(refused.map((s) => (s as { kind: string }).kind)).toEqual(['ok', 'corrupt']);

  const torn = await writeLog();
  const newest = torn.paths.at(-1) as string;
  const tail = await readFile(newest);
  await writeFile(newest, Buffer.concat([tail, Buffer.from('a write cut short')]));
  const cut = (await same(torn)).at(-1) as { kind: string; validBytes: number };
  expect(cut.kind).toBe('ok');
  expect(cut.validBytes).toBe(tail.byteLength);

  await writeFile(newest, Buffer.alloc(64));
  expect(((await same(torn)).at(-1) as { kind: string }).kind).toBe('torn-header');
});

it('stops on a missing file with the same error, and a refusal leaves no read behind',
  async () => {
    const work = await writeLog();
    await rm(work.paths[2] as string);
    const failure = async (source: SegmentSource): Promise<string> => {
      try {
        for (let i = 0; i < work.paths.length; i++) await source.next(i);
        return 'no failure';
      } catch (error) {
        return `${(error as NodeJS.ErrnoException).code}`;
      } finally {
        await source.close();
      }
    };
    expect(await failure(built.readSegments(work, 0))).toBe('ENOENT');
    expect(await failure(readHere(work, 0))).toBe('ENOENT');
    // Closed after the first segment: the worker is stopped, nothing is left pending.
    const early = built.readSegments(work, 0);
    await early.next(0);
    await early.close();
  });

it('reads in this thread what a failed worker did not post, with the same result', async () => {
  const work = await writeLog();
  const here = await scans(readHere(work, 10), work.paths.length);
  const dir = await mkdtemp(join(tmpdir(), 'hivekv-segworker-'));
  dirs.push(dir);
  const worker = async (name: string, body: string): Promise<URL> => {
    const path = join(dir, name);
    await writeFile(path, body);
    return new URL(`file://${path}`);
  };
  const throwsAtOnce = await worker('throws.mjs', "throw new Error('no worker today');\n");
  const exitsAtOnce = await worker('exits.mjs', 'process.exit(0);\n');
  // Posts the first segment as the real worker does, then dies.
  const diesAfterOne = await worker('dies.mjs', `
    import { parentPort, workerData } from 'node:worker_threads';
    import { readWholeFileSync, scanInTurn } from ${JSON.stringify(BUILT_URL.href)};
    const bytes = readWholeFileSync(workerData.paths[0]);
    const { entries: _none, ...verdict } = scanInTurn(workerData, 0, bytes, 0,
      Number.MAX_SAFE_INTEGER);
    parentPort.postMessage({ i: 0, verdict, bytes: bytes.buffer }, [bytes.buffer]);
    throw new Error('died after one segment');
  `);
  for (const url of [throwsAtOnce, exitsAtOnce, diesAfterOne]) {
    expect(await scans(built.readSegments(work, 10, url), work.paths.length), url.pathname)
      .toEqual(here);
  }
});
