/**
 * The byte layout of the write-ahead log: the segment header and the record frame around one
 * Raft entry, with a CRC-32 over every byte of both (zlib.crc32, no dependency).
 *
 * Pure: encodes and decodes buffers only; no file I/O, no clock. Decoding never throws on bad
 * bytes: a damaged record is an outcome (`RecordDecode`) that the recovery scan classifies as
 * a torn tail or as corruption.
 *
 * Segment header (SEGMENT_HEADER_BYTES, little-endian):
 *   0 magic u32 | 4 formatVersion u32 | 8 firstIndex u64 | 16 reserved u32 (0) | 20 crc u32
 *   (the crc covers bytes 0..20).
 * Record (RECORD_HEADER_BYTES + dataBytes, little-endian):
 *   0 crc u32 (covers bytes 4..end) | 4 dataBytes u32 | 8 term u64 | 16 index u64
 *   | 24 timeMs u64 | 32 type u8 | 33 reserved 3 bytes (0) | 36 data
 * A zero-filled tail decodes as a bad checksum (crc32 of zeros is not zero), never as a record.
 */
import { crc32 } from 'node:zlib';

import type { Entry, EntryType } from '../core/raft/types.js';
import { putU32, putU64 } from '../core/little-endian.js';
import { Slabs } from '../core/slabs.js';

/** 'HWAL' read as a little-endian u32. */
export const SEGMENT_MAGIC = 0x4c41_5748;
/** Bump when the segment or record layout changes; old files then refuse to load. */
export const SEGMENT_FORMAT_VERSION = 1;
export const SEGMENT_HEADER_BYTES = 24;
export const RECORD_HEADER_BYTES = 36;
/** The largest entry payload one record may carry (64 MiB). */
export const ENTRY_DATA_BYTES_MAX = 64 * 1024 * 1024;
/** The largest record frame: header plus the largest payload. */
export const RECORD_BYTES_MAX = RECORD_HEADER_BYTES + ENTRY_DATA_BYTES_MAX;

const U32_RANGE = 0x1_0000_0000;
/** Numbers above 2^53 - 1 lose precision; its high word is at most this. */
const U64_HIGH_WORD_SAFE_MAX = 0x1f_ffff;

const TYPE_CODE_NORMAL = 1;
const TYPE_CODE_EMPTY = 2;
const TYPE_CODE_CONFIG = 3;

/** Writes a safe non-negative integer as a little-endian u64. */
export function writeU64(view: DataView, offset: number, value: number): void {
  assertSafeU64(value, 'u64 field');
  view.setUint32(offset, value % U32_RANGE, true);
  view.setUint32(offset + 4, Math.floor(value / U32_RANGE), true);
}

/** Reads a little-endian u64; null when it does not fit a safe integer. */
export function readU64(view: DataView, offset: number): number | null {
  const low = view.getUint32(offset, true);
  const high = view.getUint32(offset + 4, true);
  if (high > U64_HIGH_WORD_SAFE_MAX) return null;
  return high * U32_RANGE + low;
}

export function assertSafeU64(value: number, what: string): void {
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new Error(`assertion failed: ${what} must be a safe non-negative integer: ${value}`);
  }
}

/** A DataView over exactly the bytes of `bytes`. */
export function viewOf(bytes: Uint8Array): DataView {
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

export function encodeSegmentHeader(firstIndex: number): Buffer {
  const header = Buffer.alloc(SEGMENT_HEADER_BYTES);
  const view = viewOf(header);
  view.setUint32(0, SEGMENT_MAGIC, true);
  view.setUint32(4, SEGMENT_FORMAT_VERSION, true);
  writeU64(view, 8, firstIndex);
  view.setUint32(20, crc32(header.subarray(0, 20)), true);
  return header;
}

/** The segment's first index, or a reason the header is not valid. */
export type SegmentHeaderDecode =
  | { readonly kind: 'ok'; readonly firstIndex: number }
  | { readonly kind: 'bad'; readonly reason: string };

export function decodeSegmentHeader(bytes: Uint8Array): SegmentHeaderDecode {
  if (bytes.byteLength < SEGMENT_HEADER_BYTES) {
    return { kind: 'bad', reason: `segment header is short (${bytes.byteLength} bytes)` };
  }
  const view = viewOf(bytes);
  if (view.getUint32(20, true) !== crc32(bytes.subarray(0, 20))) {
    return { kind: 'bad', reason: 'segment header checksum mismatch' };
  }
  if (view.getUint32(0, true) !== SEGMENT_MAGIC) {
    return { kind: 'bad', reason: 'not a hivekv WAL segment (bad magic)' };
  }
  const formatVersion = view.getUint32(4, true);
  if (formatVersion !== SEGMENT_FORMAT_VERSION) {
    return { kind: 'bad', reason: `unsupported segment formatVersion ${formatVersion}` };
  }
  const firstIndex = readU64(view, 8);
  if (firstIndex === null || firstIndex < 1) {
    return { kind: 'bad', reason: 'segment first index out of range' };
  }
  return { kind: 'ok', firstIndex };
}

function typeCode(type: EntryType): number {
  switch (type) {
    case 'normal':
      return TYPE_CODE_NORMAL;
    case 'empty':
      return TYPE_CODE_EMPTY;
    case 'config':
      return TYPE_CODE_CONFIG;
    default: {
      const never: never = type;
      throw new Error(`assertion failed: unknown entry type ${String(never)}`);
    }
  }
}

function typeOfCode(code: number): EntryType | null {
  if (code === TYPE_CODE_NORMAL) return 'normal';
  if (code === TYPE_CODE_EMPTY) return 'empty';
  if (code === TYPE_CODE_CONFIG) return 'config';
  return null;
}

/** The size of an entry's record frame on disk. */
export function recordBytes(entry: Entry): number {
  return RECORD_HEADER_BYTES + entry.data.byteLength;
}

/**
 * A record's frame lives until the WAL writes it to the page cache, most often in the same
 * turn: frames are cut from slabs of their own (slabs.ts), not Node's shared pool.
 */
const recordSlabs = new Slabs();

/** A record's header after its checksum (bytes 4 to 36), built here for each record. */
const checkedHead = new Uint8Array(RECORD_HEADER_BYTES - 4);

/**
 * Frames one entry. Asserts the entry is well formed (safe integers, index >= 1, payload at
 * most ENTRY_DATA_BYTES_MAX); a violation is a caller bug and throws.
 */
export function encodeRecord(entry: Entry): Uint8Array {
  assertSafeU64(entry.term, 'entry term');
  assertSafeU64(entry.index, 'entry index');
  assertSafeU64(entry.timeMs, 'entry timeMs');
  if (entry.index < 1) throw new Error('assertion failed: entry index starts at 1');
  const data = entry.data;
  // `length`, not `byteLength`: this Node's compiler inlines the one and makes a generic
  // property load of the other (and of `buffer` and `byteOffset`) on every typed array.
  const dataBytes = data.length;
  if (dataBytes > ENTRY_DATA_BYTES_MAX) {
    throw new Error(`assertion failed: entry data ${dataBytes} > ${ENTRY_DATA_BYTES_MAX} bytes`);
  }
  // By hand (little-endian.ts): a DataView per record costs a call into C++ to make. The
  // checksum runs over the head, then continues over the data: no view of the record.
  const head = checkedHead;
  putU32(head, 0, dataBytes);
  putU64(head, 4, entry.term);
  putU64(head, 12, entry.index);
  putU64(head, 20, entry.timeMs);
  putU32(head, 28, typeCode(entry.type) & 0xff);
  const record = recordSlabs.take(RECORD_HEADER_BYTES + dataBytes);
  record.set(head, 4);
  record.set(data, RECORD_HEADER_BYTES);
  putU32(record, 0, crc32(data, crc32(head)));
  return record;
}

/**
 * One decode attempt at a byte offset. `short`: the bytes end inside the frame (a torn
 * write, or a damaged length). `bad`: the frame is complete but does not verify.
 */
export type RecordDecode =
  | { readonly kind: 'ok'; readonly entry: Entry; readonly frameBytes: number }
  | { readonly kind: 'short'; readonly reason: string }
  | { readonly kind: 'bad'; readonly reason: string };

/**
 * Decodes the record at `offset`. The entry's data is a view into `bytes`: the caller must
 * not reuse `bytes` while the entry lives. `view` spans the whole of `bytes`: a scan makes
 * one for a segment rather than one per record.
 */
export function decodeRecordAt(bytes: Uint8Array, offset: number,
  view: DataView = viewOf(bytes)): RecordDecode {
  const available = bytes.byteLength - offset;
  if (available < RECORD_HEADER_BYTES) {
    return { kind: 'short', reason: `record header is short (${available} bytes left)` };
  }
  const dataBytes = view.getUint32(offset + 4, true);
  if (dataBytes > ENTRY_DATA_BYTES_MAX) {
    return { kind: 'bad', reason: `record length ${dataBytes} exceeds ${ENTRY_DATA_BYTES_MAX}` };
  }
  const frameBytes = RECORD_HEADER_BYTES + dataBytes;
  if (available < frameBytes) {
    return { kind: 'short', reason: `record payload is short (${available} of ${frameBytes})` };
  }
  const expected = view.getUint32(offset, true);
  // Plain Uint8Array views: Buffer#subarray is several times slower per call.
  const start = bytes.byteOffset + offset;
  if (crc32(new Uint8Array(bytes.buffer, start + 4, frameBytes - 4)) !== expected) {
    return { kind: 'bad', reason: 'record checksum mismatch' };
  }
  return decodeVerifiedFields(view, offset, bytes.buffer, start, frameBytes);
}

function decodeVerifiedFields(
  view: DataView,
  offset: number,
  buffer: ArrayBufferLike,
  start: number,
  frameBytes: number,
): RecordDecode {
  const term = readU64(view, offset + 8);
  const index = readU64(view, offset + 16);
  const timeMs = readU64(view, offset + 24);
  const type = typeOfCode(view.getUint8(offset + 32));
  const reserved = view.getUint8(offset + 33) | view.getUint8(offset + 34) |
    view.getUint8(offset + 35);
  if (term === null || index === null || timeMs === null || index < 1) {
    return { kind: 'bad', reason: 'record field out of range' };
  }
  if (type === null || reserved !== 0) {
    return { kind: 'bad', reason: 'record type or reserved bytes invalid' };
  }
  // A view, not a copy: copying costs an allocation per entry (about 2 µs, most of recovery),
  // and every recovered entry is held by the driver anyway, so the segment buffer it keeps
  // alive is no extra memory.
  const dataBytes = frameBytes - RECORD_HEADER_BYTES;
  const data = new Uint8Array(buffer, start + RECORD_HEADER_BYTES, dataBytes);
  return { kind: 'ok', entry: { term, index, timeMs, type, data }, frameBytes };
}

/**
 * The entry of a record that a scan has verified already (checksum and fields): what a
 * recovery builds from the offsets a scan in another thread found, without checking the
 * checksum twice. Throws if the fields do not decode after all (a caller bug).
 */
export function decodeVerifiedRecordAt(bytes: Uint8Array, offset: number, view: DataView):
  Entry {
  // The scan checked every field (safe integers, a known type, zero reserved bytes), so
  // this builds the entry and nothing else: it runs a million times in a large start.
  const type = typeOfCode(view.getUint8(offset + 32));
  if (type === null) throw new Error('assertion failed: a verified record has no type');
  return new RecordEntry(
    view.getUint32(offset + 12, true) * U32_RANGE + view.getUint32(offset + 8, true),
    view.getUint32(offset + 20, true) * U32_RANGE + view.getUint32(offset + 16, true),
    view.getUint32(offset + 28, true) * U32_RANGE + view.getUint32(offset + 24, true),
    type, bytes.buffer, bytes.byteOffset + offset + RECORD_HEADER_BYTES,
    view.getUint32(offset + 4, true));
}

/**
 * An entry read back from a segment: its data is a view of the segment's bytes made when it
 * is asked for. A recovered log holds its entries until they are compacted, and a view kept
 * per entry would cost the heap an object (about a hundred bytes) for each of them.
 */
class RecordEntry implements Entry {
  constructor(
    readonly term: number,
    readonly index: number,
    readonly timeMs: number,
    readonly type: EntryType,
    private readonly buffer: ArrayBufferLike,
    private readonly dataOffset: number,
    private readonly dataBytes: number,
  ) {}

  get data(): Uint8Array {
    return new Uint8Array(this.buffer, this.dataOffset, this.dataBytes);
  }
}

/**
 * The offset of the first record that verifies in `bytes` at or after `from`, or -1. Used to
 * tell a torn tail (nothing valid after the damage) from damage in the middle of the log.
 * Bounded by the buffer length; cheap pre-checks keep the checksum work to plausible frames.
 */
export function nextValidRecordOffset(bytes: Uint8Array, from: number): number {
  const view = viewOf(bytes);
  const last = bytes.byteLength - RECORD_HEADER_BYTES;
  for (let offset = from; offset <= last; offset += 1) {
    const dataBytes = view.getUint32(offset + 4, true);
    if (dataBytes > bytes.byteLength - offset - RECORD_HEADER_BYTES) continue;
    if (view.getUint32(offset + 20, true) > U64_HIGH_WORD_SAFE_MAX) continue;
    if (typeOfCode(view.getUint8(offset + 32)) === null) continue;
    if (decodeRecordAt(bytes, offset, view).kind === 'ok') return offset;
  }
  return -1;
}

/** True when a record that verifies starts anywhere in `bytes` at or after `from`. */
export function anyValidRecordFrom(bytes: Uint8Array, from: number): boolean {
  return nextValidRecordOffset(bytes, from) >= 0;
}

/** The unit a disk writes whole (a sector); a write torn by power loss tears between them. */
export const SECTOR_BYTES = 512;

/** True when every byte of `bytes` from `from` to `to` (exclusive) is zero. */
export function isZeroRange(bytes: Uint8Array, from: number, to: number): boolean {
  let offset = from;
  // Word-sized steps where the view is aligned; the ends byte by byte.
  while (offset < to && (bytes.byteOffset + offset) % 4 !== 0) {
    if (bytes[offset++] !== 0) return false;
  }
  if (offset >= to) return true;
  const words = new Uint32Array(bytes.buffer, bytes.byteOffset + offset,
    Math.max(0, Math.floor((to - offset) / 4)));
  for (let i = 0; i < words.length; i++) if (words[i] !== 0) return false;
  for (offset += words.length * 4; offset < to; offset++) if (bytes[offset] !== 0) return false;
  return true;
}

/**
 * True when some whole sector inside [from, to) is all zeros. Segments are zero-filled
 * before use, so such a sector is one a write never reached: the mark of a write torn by a
 * crash before its fsync, as opposed to damage to bytes that were once written.
 */
export function holdsUnwrittenSector(bytes: Uint8Array, from: number, to: number): boolean {
  let sector = Math.ceil(from / SECTOR_BYTES) * SECTOR_BYTES;
  for (; sector + SECTOR_BYTES <= to; sector += SECTOR_BYTES) {
    if (isZeroRange(bytes, sector, sector + SECTOR_BYTES)) return true;
  }
  return false;
}
