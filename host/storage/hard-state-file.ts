/**
 * The hard state (term, votedFor, commitIndex) in `<dir>/hardstate`, replaced atomically:
 * written to `hardstate.tmp`, fsynced, renamed over the old file, directory fsynced. A reader
 * sees the old or the new file whole, never a mix (Raft §5.1: a vote must survive a crash).
 *
 * Layout (little-endian): 0 magic u32 | 4 formatVersion u32 | 8 term u64 | 16 commitIndex u64
 *   | 24 hasVote u8 | 25 reserved u8 (0) | 26 votedForBytes u16 | 28 votedFor UTF-8
 *   | crc u32 over every byte before it.
 * Must never: accept a file whose checksum fails (recovery refuses it, naming the file).
 */
import { open, readFile, rename, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { crc32 } from 'node:zlib';

import type { HardState } from '../core/raft/types.js';
import { assertSafeU64, readU64, writeU64 } from './record.js';
import { StorageCorruptionError } from './storage.js';
import { datasyncTimed, fsyncDirectory, writeFully, type FsyncObserver } from './wal.js';
import { openWith } from './descriptors.js';

export const HARD_STATE_FILE = 'hardstate';
export const HARD_STATE_TEMP_FILE = 'hardstate.tmp';
/** 'HKVH' read as a little-endian u32. */
export const HARD_STATE_MAGIC = 0x4856_4b48;
export const HARD_STATE_FORMAT_VERSION = 1;
/** The longest member id a vote may name, in UTF-8 bytes. */
export const VOTED_FOR_BYTES_MAX = 255;
const FIXED_BYTES = 28;
const CRC_BYTES = 4;

/**
 * Throws on values no valid Raft state can hold (a caller bug), as `encodeHardState` would,
 * without encoding: storage checks every hard state it is handed, and most are never written
 * (a commitIndex-only change waits for the next term or vote).
 */
export function assertEncodableHardState(hardState: HardState): void {
  assertSafeU64(hardState.term, 'hard state term');
  assertSafeU64(hardState.commitIndex, 'hard state commitIndex');
  const voteBytes = hardState.votedFor === null ? 0
    : Buffer.byteLength(hardState.votedFor, 'utf8');
  if (voteBytes > VOTED_FOR_BYTES_MAX) {
    throw new Error(`assertion failed: votedFor is ${voteBytes} bytes (> ${VOTED_FOR_BYTES_MAX})`);
  }
}

/** Encodes a hard state; throws on values no valid Raft state can hold (a caller bug). */
export function encodeHardState(hardState: HardState): Buffer {
  assertEncodableHardState(hardState);
  const vote = hardState.votedFor === null ? null : Buffer.from(hardState.votedFor, 'utf8');
  const voteBytes = vote?.byteLength ?? 0;
  const bytes = Buffer.alloc(FIXED_BYTES + voteBytes + CRC_BYTES);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  view.setUint32(0, HARD_STATE_MAGIC, true);
  view.setUint32(4, HARD_STATE_FORMAT_VERSION, true);
  writeU64(view, 8, hardState.term);
  writeU64(view, 16, hardState.commitIndex);
  view.setUint8(24, vote === null ? 0 : 1);
  view.setUint16(26, voteBytes, true);
  if (vote !== null) bytes.set(vote, FIXED_BYTES);
  const end = FIXED_BYTES + voteBytes;
  view.setUint32(end, crc32(bytes.subarray(0, end)), true);
  return bytes;
}

/** Decodes a hard state file's bytes; any damage is a StorageCorruptionError naming `path`. */
export function decodeHardState(bytes: Uint8Array, path: string): HardState {
  const fail = (offset: number, detail: string): never => {
    throw new StorageCorruptionError(path, offset,
      `${detail}; the hard state (term and vote) cannot be trusted, refusing to start`);
  };
  if (bytes.byteLength < FIXED_BYTES + CRC_BYTES) fail(0, `file is short (${bytes.byteLength})`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const voteBytes = view.getUint16(26, true);
  const end = FIXED_BYTES + voteBytes;
  if (bytes.byteLength !== end + CRC_BYTES) fail(0, `file length ${bytes.byteLength} is wrong`);
  if (view.getUint32(end, true) !== crc32(bytes.subarray(0, end))) fail(end, 'checksum mismatch');
  if (view.getUint32(0, true) !== HARD_STATE_MAGIC) fail(0, 'bad magic');
  const formatVersion = view.getUint32(4, true);
  if (formatVersion !== HARD_STATE_FORMAT_VERSION) fail(4, `formatVersion ${formatVersion}`);
  const term = readU64(view, 8);
  const commitIndex = readU64(view, 16);
  if (term === null || commitIndex === null) return fail(8, 'term or commitIndex out of range');
  const hasVote = view.getUint8(24);
  if (hasVote > 1 || (hasVote === 0 && voteBytes > 0)) fail(24, 'vote flag invalid');
  const votedFor = hasVote === 1
    ? Buffer.from(bytes.buffer, bytes.byteOffset + FIXED_BYTES, voteBytes).toString('utf8')
    : null;
  return { term, votedFor, commitIndex };
}

/** The stored hard state, or null when the file does not exist (a fresh directory). */
export async function readHardStateFile(dir: string): Promise<HardState | null> {
  const path = join(dir, HARD_STATE_FILE);
  let bytes: Buffer;
  try {
    bytes = await openWith(() => readFile(path));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
  return decodeHardState(bytes, path);
}

/** Replaces the hard state atomically and durably (temp file, fsync, rename, dir fsync). */
export async function writeHardStateFile(
  dir: string,
  hardState: HardState,
  observe?: FsyncObserver,
): Promise<void> {
  const bytes = encodeHardState(hardState);
  const temp = join(dir, HARD_STATE_TEMP_FILE);
  const handle = await openWith(() => open(temp, 'w'));
  try {
    await writeFully(handle, bytes, 0);
    await datasyncTimed(handle, observe);
  } finally {
    await handle.close();
  }
  await rename(temp, join(dir, HARD_STATE_FILE));
  await fsyncDirectory(dir, observe);
}

/** Removes a temp file a crash left behind; the real file is untouched. */
export async function removeHardStateTemp(dir: string): Promise<void> {
  await unlink(join(dir, HARD_STATE_TEMP_FILE)).catch((error: NodeJS.ErrnoException) => {
    if (error.code !== 'ENOENT') throw error;
  });
}
