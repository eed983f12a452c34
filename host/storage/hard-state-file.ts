/**
 * The hard state (term, votedFor, commitIndex) in `<dir>/hardstate`: a file of two 512-byte
 * slots, written in place. Each write goes to the slot not holding the newest state, with a
 * sequence one above it, and is fdatasynced. A crash mid-write tears at most that slot; the
 * other still holds the state before it, which is all that was promised (Raft §5.1: a vote
 * counts once it is durable). The reader takes the valid slot with the higher sequence.
 *
 * In place, because a node must start on a full disk: a write into blocks the file already
 * has needs no free space, where a temp file and a rename need a new block for every term.
 * The file is created once, whole, through a temp file and a rename.
 *
 * Slot layout (little-endian): 0 magic u32 | 4 formatVersion u32 (2) | 8 sequence u64
 *   | 16 term u64 | 24 commitIndex u64 | 32 hasVote u8 | 33 reserved u8 (0)
 *   | 34 votedForBytes u16 | 36 votedFor UTF-8 | crc u32 over every byte before it | zeros.
 *
 * Format 1 (a single record replaced by rename: magic | 1 | term | commitIndex | hasVote
 * | 0 | votedForBytes u16 | votedFor | crc) is still read. Its record fits in the first slot,
 * so the first write after it goes to the second slot, and the record stays whole until a
 * later write has landed there.
 * Must never: accept a state whose checksum fails, or start when no slot and no format-1
 * record is valid (recovery refuses, naming the file).
 */
import { open, readFile, rename, unlink, type FileHandle } from 'node:fs/promises';
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
export const HARD_STATE_FORMAT_VERSION = 2;
const LEGACY_FORMAT_VERSION = 1;
/** The longest member id a vote may name, in UTF-8 bytes. */
export const VOTED_FOR_BYTES_MAX = 255;
export const HARD_STATE_SLOT_BYTES = 512;
export const HARD_STATE_SLOTS = 2;
export const HARD_STATE_FILE_BYTES = HARD_STATE_SLOT_BYTES * HARD_STATE_SLOTS;
const SLOT_FIXED_BYTES = 36;
const LEGACY_FIXED_BYTES = 28;
const CRC_BYTES = 4;

/** A decoded file: the newest state, its sequence, and the slot holding it (null: format 1). */
export interface StoredHardState {
  readonly hardState: HardState;
  readonly sequence: number;
  readonly slot: number | null;
}

/**
 * Throws on values no valid Raft state can hold (a caller bug), as `encodeHardStateSlot`
 * would, without encoding: storage checks every hard state it is handed, and most are never
 * written (a commitIndex-only change waits for the next term or vote).
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

/** One slot's bytes; throws on values no valid Raft state can hold (a caller bug). */
export function encodeHardStateSlot(hardState: HardState, sequence: number): Buffer {
  assertEncodableHardState(hardState);
  assertSafeU64(sequence, 'hard state sequence');
  const vote = hardState.votedFor === null ? null : Buffer.from(hardState.votedFor, 'utf8');
  const voteBytes = vote?.byteLength ?? 0;
  const bytes = Buffer.alloc(HARD_STATE_SLOT_BYTES);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  view.setUint32(0, HARD_STATE_MAGIC, true);
  view.setUint32(4, HARD_STATE_FORMAT_VERSION, true);
  writeU64(view, 8, sequence);
  writeU64(view, 16, hardState.term);
  writeU64(view, 24, hardState.commitIndex);
  view.setUint8(32, vote === null ? 0 : 1);
  view.setUint16(34, voteBytes, true);
  if (vote !== null) bytes.set(vote, SLOT_FIXED_BYTES);
  const end = SLOT_FIXED_BYTES + voteBytes;
  view.setUint32(end, crc32(bytes.subarray(0, end)), true);
  return bytes;
}

interface VoteFields {
  readonly term: number | null;
  readonly commitIndex: number | null;
  readonly hasVote: number;
  readonly vote: Uint8Array;
}

/** The state of a checksummed record's fields, or a reason it is not one. */
function stateOf(fields: VoteFields): HardState | string {
  if (fields.term === null || fields.commitIndex === null) {
    return 'term or commitIndex out of range';
  }
  if (fields.hasVote > 1 || (fields.hasVote === 0 && fields.vote.byteLength > 0)) {
    return 'vote flag invalid';
  }
  const votedFor = fields.hasVote === 1 ? Buffer.from(fields.vote).toString('utf8') : null;
  return { term: fields.term, votedFor, commitIndex: fields.commitIndex };
}

/** A record at `bytes` with its vote at `fixed` and its crc after it, or why it is not one. */
function checkedRecord(bytes: Uint8Array, version: number, fixed: number, voteAt: number):
  DataView | string {
  if (bytes.byteLength < fixed + CRC_BYTES) return 'short';
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (view.getUint32(0, true) !== HARD_STATE_MAGIC) return 'bad magic';
  if (view.getUint32(4, true) !== version) return `formatVersion ${view.getUint32(4, true)}`;
  const end = fixed + view.getUint16(voteAt, true);
  if (end + CRC_BYTES > bytes.byteLength) return 'vote runs past the record';
  if (view.getUint32(end, true) !== crc32(bytes.subarray(0, end))) return 'checksum mismatch';
  return view;
}

/** One slot's state and sequence, or why the slot holds none. */
export function decodeHardStateSlot(slot: Uint8Array):
  { hardState: HardState; sequence: number } | string {
  const view = checkedRecord(slot, HARD_STATE_FORMAT_VERSION, SLOT_FIXED_BYTES, 34);
  if (typeof view === 'string') return view;
  const sequence = readU64(view, 8);
  if (sequence === null || sequence === 0) return 'sequence out of range';
  const voteBytes = view.getUint16(34, true);
  const hardState = stateOf({ term: readU64(view, 16), commitIndex: readU64(view, 24),
    hasVote: view.getUint8(32),
    vote: slot.subarray(SLOT_FIXED_BYTES, SLOT_FIXED_BYTES + voteBytes) });
  return typeof hardState === 'string' ? hardState : { hardState, sequence };
}

/** A format-1 record at the start of `bytes`, or why there is none. */
function decodeLegacyRecord(bytes: Uint8Array): HardState | string {
  const view = checkedRecord(bytes, LEGACY_FORMAT_VERSION, LEGACY_FIXED_BYTES, 26);
  if (typeof view === 'string') return view;
  const voteBytes = view.getUint16(26, true);
  return stateOf({ term: readU64(view, 8), commitIndex: readU64(view, 16),
    hasVote: view.getUint8(24),
    vote: bytes.subarray(LEGACY_FIXED_BYTES, LEGACY_FIXED_BYTES + voteBytes) });
}

/**
 * Decodes the file's bytes: the valid slot with the higher sequence, else a format-1 record
 * at the start (a file from before slots, or one whose first slotted write tore). Any other
 * content is a StorageCorruptionError naming `path`.
 */
export function decodeHardStateFile(bytes: Uint8Array, path: string): StoredHardState {
  const fail = (offset: number, detail: string): never => {
    throw new StorageCorruptionError(path, offset,
      `${detail}; the hard state (term and vote) cannot be trusted, refusing to start`);
  };
  if (bytes.byteLength > HARD_STATE_FILE_BYTES) fail(0, `file length ${bytes.byteLength}`);
  let newest: StoredHardState | null = null;
  const reasons: string[] = [];
  for (let slot = 0; slot < HARD_STATE_SLOTS; slot += 1) {
    const start = slot * HARD_STATE_SLOT_BYTES;
    if (bytes.byteLength < start + HARD_STATE_SLOT_BYTES) break;
    const decoded = decodeHardStateSlot(bytes.subarray(start, start + HARD_STATE_SLOT_BYTES));
    if (typeof decoded === 'string') {
      reasons.push(`slot ${slot}: ${decoded}`);
    } else if (newest === null || decoded.sequence > newest.sequence) {
      newest = { ...decoded, slot };
    } else if (decoded.sequence === newest.sequence) {
      fail(start + 8, `both slots hold sequence ${decoded.sequence}`);
    }
  }
  if (newest !== null) return newest;
  const legacy = decodeLegacyRecord(bytes);
  if (typeof legacy !== 'string') return { hardState: legacy, sequence: 0, slot: null };
  reasons.push(`format 1: ${legacy}`);
  return fail(0, `no valid hard state (${reasons.join('; ')})`);
}

/** The stored hard state, or null when the file does not exist (a fresh directory). */
export async function readStoredHardState(dir: string): Promise<StoredHardState | null> {
  const path = join(dir, HARD_STATE_FILE);
  let bytes: Buffer;
  try {
    bytes = await openWith(() => readFile(path));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
  return decodeHardStateFile(bytes, path);
}

/** The stored hard state, or null for a fresh directory. */
export async function readHardStateFile(dir: string): Promise<HardState | null> {
  return (await readStoredHardState(dir))?.hardState ?? null;
}

/**
 * Creates the file whole (temp file, fsync, rename, directory fsync), its first slot holding
 * `hardState` at `sequence`. Only for a directory without one: it needs a new block.
 */
async function createHardStateFile(
  dir: string,
  hardState: HardState,
  observe?: FsyncObserver,
  sequence = 1,
): Promise<void> {
  const bytes = Buffer.alloc(HARD_STATE_FILE_BYTES);
  bytes.set(encodeHardStateSlot(hardState, sequence), 0);
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

/**
 * The writer of one directory's hard state. Holds the file open from the first write on, so
 * a vote needs neither a descriptor nor a block when it is cast.
 */
export class HardStateFile {
  private handle: FileHandle | null = null;
  private sequence = 0;
  /** The slot the next write goes to; never the one holding the newest valid state. */
  private nextSlot = 1;
  /** False until the file exists: the first write creates it whole. */
  private exists = false;

  constructor(private readonly dir: string) {}

  /** Reads the stored state (null for a fresh directory); later writes follow it. */
  async read(): Promise<StoredHardState | null> {
    const stored = await readStoredHardState(this.dir);
    this.sequence = stored?.sequence ?? 0;
    // A format-1 record occupies the start of the first slot, so it is overwritten last.
    this.nextSlot = stored === null || stored.slot === null ? 1 : 1 - stored.slot;
    this.exists = stored !== null;
    return stored;
  }

  /** Writes `hardState` durably; on return it survives a crash. */
  async write(hardState: HardState, observe?: FsyncObserver): Promise<void> {
    const sequence = this.sequence + 1;
    if (!this.exists) {
      await createHardStateFile(this.dir, hardState, observe, sequence);
      this.exists = true;
      this.sequence = sequence;
      this.nextSlot = 1;
      return;
    }
    const slot = encodeHardStateSlot(hardState, sequence);
    if (this.handle === null) {
      const path = join(this.dir, HARD_STATE_FILE);
      this.handle = await openWith(() => open(path, 'r+'));
    }
    await writeFully(this.handle, slot, this.nextSlot * HARD_STATE_SLOT_BYTES);
    await datasyncTimed(this.handle, observe);
    this.sequence = sequence;
    this.nextSlot = 1 - this.nextSlot;
  }

  async close(): Promise<void> {
    const handle = this.handle;
    this.handle = null;
    await handle?.close();
  }
}

/** Removes a temp file a crash left behind; the real file is untouched. */
export async function removeHardStateTemp(dir: string): Promise<void> {
  await unlink(join(dir, HARD_STATE_TEMP_FILE)).catch((error: NodeJS.ErrnoException) => {
    if (error.code !== 'ENOENT') throw error;
  });
}
