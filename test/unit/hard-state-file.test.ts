// The hard state's two slots, on real files: writes land in place in alternate slots, a torn
// write leaves the state before it, a format-1 file is read and kept whole until a slotted
// write has landed, and a file with no valid state refuses the start.
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { crc32 } from 'node:zlib';

import fc from 'fast-check';
import { afterEach, expect, it } from 'vitest';

import type { HardState } from '../../host/core/raft/types.js';
import {
  decodeHardStateFile,
  encodeHardStateSlot,
  HARD_STATE_FILE,
  HARD_STATE_FILE_BYTES,
  HARD_STATE_MAGIC,
  HARD_STATE_SLOT_BYTES,
  HardStateFile,
  readStoredHardState,
} from '../../host/storage/hard-state-file.js';
import { StorageCorruptionError } from '../../host/storage/storage.js';

const dirs: string[] = [];

afterEach(async () => {
  for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
});

async function freshDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'hivekv-hardstate-'));
  dirs.push(dir);
  return dir;
}

/** A format-1 file, laid out by hand: the format as nodes before the slots wrote it. */
function formatOneFile(hardState: HardState): Buffer {
  const vote = Buffer.from(hardState.votedFor ?? '', 'utf8');
  const bytes = Buffer.alloc(28 + vote.byteLength + 4);
  bytes.writeUInt32LE(HARD_STATE_MAGIC, 0);
  bytes.writeUInt32LE(1, 4);
  bytes.writeBigUInt64LE(BigInt(hardState.term), 8);
  bytes.writeBigUInt64LE(BigInt(hardState.commitIndex), 16);
  bytes.writeUInt8(hardState.votedFor === null ? 0 : 1, 24);
  bytes.writeUInt16LE(vote.byteLength, 26);
  vote.copy(bytes, 28);
  bytes.writeUInt32LE(crc32(bytes.subarray(0, 28 + vote.byteLength)), 28 + vote.byteLength);
  return bytes;
}

async function writeAll(dir: string, states: readonly HardState[]): Promise<void> {
  const file = new HardStateFile(dir);
  await file.read();
  for (const state of states) await file.write(state);
  await file.close();
}

const state = (term: number, votedFor: string | null = 'n1', commitIndex = 0): HardState =>
  ({ term, votedFor, commitIndex });

it('writes land in place, in alternate slots, each with the next sequence', async () => {
  const dir = await freshDir();
  await writeAll(dir, [state(1)]);
  const path = join(dir, HARD_STATE_FILE);
  const inode = (await stat(path)).ino;
  expect((await stat(path)).size).toBe(HARD_STATE_FILE_BYTES);
  expect(await readStoredHardState(dir)).toEqual({ hardState: state(1), sequence: 1, slot: 0 });
  await writeAll(dir, [state(2, null, 7)]);
  expect(await readStoredHardState(dir)).toEqual(
    { hardState: state(2, null, 7), sequence: 2, slot: 1 });
  await writeAll(dir, [state(3, 'n2', 9), state(4, 'n3', 9)]);
  expect(await readStoredHardState(dir)).toEqual(
    { hardState: state(4, 'n3', 9), sequence: 4, slot: 1 });
  expect((await stat(path)).ino).toBe(inode);
  expect(await readdir(dir)).toEqual([HARD_STATE_FILE]);
});

it('a torn newest slot gives the state before it, and the next write goes there', async () => {
  const dir = await freshDir();
  await writeAll(dir, [state(5), state(6)]);
  const path = join(dir, HARD_STATE_FILE);
  const bytes = await readFile(path);
  bytes.fill(0xee, HARD_STATE_SLOT_BYTES + 20, HARD_STATE_SLOT_BYTES + 30);
  await writeFile(path, bytes);
  expect(await readStoredHardState(dir)).toEqual({ hardState: state(5), sequence: 1, slot: 0 });
  await writeAll(dir, [state(7)]);
  expect(await readStoredHardState(dir)).toEqual({ hardState: state(7), sequence: 2, slot: 1 });
});

it('a format-1 file is read, and stays whole until a slotted write has landed', async () => {
  const dir = await freshDir();
  const path = join(dir, HARD_STATE_FILE);
  const old = formatOneFile(state(9, 'n2', 40));
  await writeFile(path, old);
  expect(await readStoredHardState(dir)).toEqual(
    { hardState: state(9, 'n2', 40), sequence: 0, slot: null });
  await writeAll(dir, [state(10, null, 40)]);
  const after = await readFile(path);
  expect(after.subarray(0, old.byteLength)).toEqual(old);
  expect(await readStoredHardState(dir)).toEqual(
    { hardState: state(10, null, 40), sequence: 1, slot: 1 });
  // The same write torn: the format-1 record is still the state.
  await writeFile(path, Buffer.concat([old, Buffer.alloc(HARD_STATE_FILE_BYTES - old.length)]));
  expect((await readStoredHardState(dir))?.hardState).toEqual(state(9, 'n2', 40));
  await writeAll(dir, [state(11), state(12)]);
  expect(await readStoredHardState(dir)).toEqual({ hardState: state(12), sequence: 2, slot: 0 });
});

it('a file with no valid state refuses the start, naming the file and each slot', async () => {
  const dir = await freshDir();
  await writeAll(dir, [state(1), state(2)]);
  const path = join(dir, HARD_STATE_FILE);
  const bytes = await readFile(path);
  bytes[16] = (bytes[16] ?? 0) ^ 1;
  bytes[HARD_STATE_SLOT_BYTES + 16] = (bytes[HARD_STATE_SLOT_BYTES + 16] ?? 0) ^ 1;
  await writeFile(path, bytes);
  const failure = await readStoredHardState(dir).then(() => null, (error: unknown) => error);
  expect(failure).toBeInstanceOf(StorageCorruptionError);
  expect(String(failure)).toContain(path);
  expect(String(failure)).toMatch(/slot 0: checksum mismatch; slot 1: checksum mismatch/);
  await writeFile(path, Buffer.concat([bytes, Buffer.alloc(1)]));
  await expect(readStoredHardState(dir)).rejects.toBeInstanceOf(StorageCorruptionError);
});

const voteArbitrary = fc.option(fc.string({ minLength: 1, maxLength: 64 }), { nil: null });
const stateArbitrary = fc.record({ term: fc.nat(), votedFor: voteArbitrary,
  commitIndex: fc.nat() });

it('whatever prefix of a write lands, the file reads as the state before it or after it',
  () => {
    fc.assert(fc.property(fc.array(stateArbitrary, { minLength: 1, maxLength: 6 }),
      stateArbitrary, fc.nat({ max: HARD_STATE_SLOT_BYTES }), (written, next, landed) => {
        // The file after `written`, as the writer lays it out: slot 0 first, then alternating.
        const bytes = Buffer.alloc(HARD_STATE_FILE_BYTES);
        written.forEach((hardState, i) => {
          bytes.set(encodeHardStateSlot(hardState, i + 1), (i % 2) * HARD_STATE_SLOT_BYTES);
        });
        const before = decodeHardStateFile(bytes, 'hardstate');
        expect(before.hardState).toEqual(written.at(-1));
        const target = (1 - (before.slot ?? 0)) * HARD_STATE_SLOT_BYTES;
        const slot = encodeHardStateSlot(next, before.sequence + 1);
        bytes.set(slot.subarray(0, landed), target);
        const after = decodeHardStateFile(bytes, 'hardstate').hardState;
        expect([written.at(-1), next]).toContainEqual(after);
        if (landed === HARD_STATE_SLOT_BYTES) expect(after).toEqual(next);
      }), { numRuns: 300 });
  });
