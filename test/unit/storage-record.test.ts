// The WAL's byte layout (record.ts) as tables, and FileStorage's edges: a failed write
// refuses every later call, and the free-space floor.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterEach, expect, it } from 'vitest';

import type { Entry } from '../../host/core/raft/types.js';
import {
  FileStorage, SPACE_CHECK_INTERVAL_MS, type SpaceChange,
} from '../../host/storage/file-storage.js';
import {
  anyValidRecordFrom,
  decodeRecordAt,
  decodeSegmentHeader,
  encodeRecord,
  encodeSegmentHeader,
  ENTRY_DATA_BYTES_MAX,
  RECORD_HEADER_BYTES,
} from '../../host/storage/record.js';

const dirs: string[] = [];

afterEach(async () => {
  for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
});

function entry(fields: Partial<Entry> = {}): Entry {
  return { term: 3, index: 7, timeMs: 1_700_000_000_123, type: 'normal',
    data: Uint8Array.of(1, 2, 3), ...fields };
}

it.each([
  ['a small normal entry', entry()],
  ['an empty entry with no data', entry({ type: 'empty', data: new Uint8Array(0) })],
  ['u64 fields past 2^32', entry({ term: 2 ** 40 + 5, index: 2 ** 33 + 1, timeMs: 2 ** 52 })],
  ['the largest safe integers', entry({ term: Number.MAX_SAFE_INTEGER,
    index: Number.MAX_SAFE_INTEGER, timeMs: Number.MAX_SAFE_INTEGER })],
])('a record round-trips: %s', (_name, value) => {
  const frame = encodeRecord(value);
  expect(frame.byteLength).toBe(RECORD_HEADER_BYTES + value.data.byteLength);
  const decoded = decodeRecordAt(frame, 0);
  expect(decoded).toEqual({ kind: 'ok', entry: value, frameBytes: frame.byteLength });
});

it.each([
  ['index 0', entry({ index: 0 })],
  ['a fractional term', entry({ term: 1.5 })],
  ['a negative timeMs', entry({ timeMs: -1 })],
  ['an unsafe index', entry({ index: 2 ** 53 })],
])('encoding refuses %s', (_name, value) => {
  expect(() => encodeRecord(value)).toThrow(/assertion failed/);
});

it('encoding refuses data over ENTRY_DATA_BYTES_MAX', () => {
  expect(() => encodeRecord(entry({ data: new Uint8Array(ENTRY_DATA_BYTES_MAX + 1) })))
    .toThrow(/assertion failed/);
});

it('every single flipped bit of a record is caught by its checksum or its bounds', () => {
  const frame = encodeRecord(entry({ data: Uint8Array.of(9, 8, 7, 6, 5) }));
  for (let bit = 0; bit < frame.byteLength * 8; bit += 1) {
    const damaged = Buffer.from(frame);
    damaged[bit >> 3] = (damaged[bit >> 3] ?? 0) ^ (1 << (bit & 7));
    expect(decodeRecordAt(damaged, 0).kind, `bit ${bit}`).not.toBe('ok');
  }
});

it.each([
  ['zeros', Buffer.alloc(RECORD_HEADER_BYTES + 10), 'bad'],
  ['a short header', Buffer.alloc(RECORD_HEADER_BYTES - 1), 'short'],
])('decoding %s is not a record', (_name, bytes, kind) => {
  expect(decodeRecordAt(bytes, 0).kind).toBe(kind);
  expect(anyValidRecordFrom(bytes, 0)).toBe(false);
});

it('a valid record is found after leading garbage', () => {
  const bytes = Buffer.concat([Buffer.from([1, 2, 3, 4, 5]), encodeRecord(entry())]);
  expect(anyValidRecordFrom(bytes, 0)).toBe(true);
  expect(anyValidRecordFrom(bytes, 6)).toBe(false);
});

it('a segment header round-trips and rejects damage', () => {
  const header = encodeSegmentHeader(2 ** 40);
  expect(decodeSegmentHeader(header)).toEqual({ kind: 'ok', firstIndex: 2 ** 40 });
  const damaged = Buffer.from(header);
  damaged[9] = (damaged[9] ?? 0) ^ 1;
  expect(decodeSegmentHeader(damaged).kind).toBe('bad');
  expect(decodeSegmentHeader(header.subarray(0, 10)).kind).toBe('bad');
});

it('a failed write rejects sync with the OS error, then every call is refused', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'hivekv-fail-'));
  dirs.push(dir);
  const storage = new FileStorage(dir, {});
  await storage.recover();
  // Replace the WAL directory with a plain file: creating the first segment must fail.
  await rm(join(dir, 'wal'), { recursive: true });
  await writeFile(join(dir, 'wal'), 'not a directory');
  storage.append([entry({ index: 1 })]);
  await expect(storage.sync()).rejects.toMatchObject({ code: 'ENOTDIR' });
  expect(() => storage.append([entry({ index: 2 })])).toThrow(/refused/);
  expect(() => storage.setHardState({ term: 1, votedFor: null, commitIndex: 0 }))
    .toThrow(/refused/);
  await expect(storage.sync()).rejects.toThrow(/refused/);
  await expect(storage.createSnapshot({ index: 1, term: 1, timeMs: 0, voters: [], learners: [],
    peers: [], removed: [] }, 1))
    .rejects.toThrow(/refused/);
  await storage.close();
});

it('setHardState refuses what it cannot encode, and keeps the last good one', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'hivekv-hard-'));
  dirs.push(dir);
  const storage = new FileStorage(dir, {});
  await storage.recover();
  storage.setHardState({ term: 2, votedFor: 'n1', commitIndex: 0 });
  expect(() => storage.setHardState({ term: -1, votedFor: null, commitIndex: 0 }))
    .toThrow(/hard state term/);
  expect(() => storage.setHardState({ term: 2 ** 53, votedFor: null, commitIndex: 0 }))
    .toThrow(/hard state term/);
  expect(() => storage.setHardState({ term: 2, votedFor: null, commitIndex: 1.5 }))
    .toThrow(/hard state commitIndex/);
  // 255 UTF-8 bytes fit; 256 do not, however few characters they take.
  storage.setHardState({ term: 2, votedFor: 'é'.repeat(127) + 'x', commitIndex: 0 });
  expect(() => storage.setHardState({ term: 2, votedFor: 'é'.repeat(128), commitIndex: 0 }))
    .toThrow(/votedFor is 256 bytes/);
  await storage.sync();
  await storage.close();
  const reopened = new FileStorage(dir, {});
  const recovered = await reopened.recover();
  expect(recovered.hardState).toEqual({ term: 2, votedFor: 'é'.repeat(127) + 'x', commitIndex: 0 });
  await reopened.close();
});

it('isLowOnSpace compares free bytes on the data directory with minFreeBytes', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'hivekv-space-'));
  dirs.push(dir);
  const roomy = new FileStorage(dir, { minFreeBytes: 0 });
  await roomy.recover();
  expect(roomy.isLowOnSpace()).toBe(false);
  await roomy.close();
  const starved = new FileStorage(dir, { minFreeBytes: Number.MAX_SAFE_INTEGER });
  await starved.recover();
  expect(starved.isLowOnSpace()).toBe(true);
  expect(starved.isLowOnSpace()).toBe(true);
  await starved.close();
});

const MIB = 1024 * 1024;

it('reports a shortage of space when it begins and when it ends, and nothing with room',
  async () => {
    const dir = await mkdtemp(join(tmpdir(), 'hivekv-space-'));
    dirs.push(dir);
    let free = 100 * MIB;
    const changes: SpaceChange[] = [];
    const storage = new FileStorage(dir, { minFreeBytes: 64 * MIB, preallocate: false,
      readFreeBytes: () => free, onSpaceChange: (change) => changes.push(change) });
    await storage.recover();
    expect(storage.isLowOnSpace()).toBe(false);
    expect(storage.freeBytes()).toBe(100 * MIB);
    expect(changes).toEqual([]);
    free = 10 * MIB;
    // Read again only after SPACE_CHECK_INTERVAL_MS.
    expect(storage.isLowOnSpace()).toBe(false);
    await new Promise((resolve) => setTimeout(resolve, SPACE_CHECK_INTERVAL_MS + 20));
    expect(storage.isLowOnSpace()).toBe(true);
    expect(storage.isLowOnSpace()).toBe(true);
    free = 70 * MIB;
    await new Promise((resolve) => setTimeout(resolve, SPACE_CHECK_INTERVAL_MS + 20));
    expect(storage.isLowOnSpace()).toBe(false);
    expect(changes).toEqual([
      { low: true, freeBytes: 10 * MIB, minFreeBytes: 64 * MIB },
      { low: false, freeBytes: 70 * MIB, minFreeBytes: 64 * MIB },
    ]);
    await storage.close();
    // A storage that starts short reports it at its first reading.
    const starved: SpaceChange[] = [];
    const short = new FileStorage(dir, { minFreeBytes: 64 * MIB, preallocate: false,
      readFreeBytes: () => MIB, onSpaceChange: (change) => starved.push(change) });
    await short.recover();
    expect(short.isLowOnSpace()).toBe(true);
    expect(starved).toEqual([{ low: true, freeBytes: MIB, minFreeBytes: 64 * MIB }]);
    await short.close();
  });
