/**
 * One segment's bytes checked against the recovery rules of storage.ts, and the entries of
 * the records that verified. Pure: the caller reads the file and acts on the verdict (cut a
 * torn tail, refuse damage). Used by the WAL's recovery, in this thread or in the reading
 * worker (segment-reader.ts), and by read-only tools (host/replay/data-dir.ts).
 */
import type { Entry } from '../core/raft/types.js';
import {
  anyValidRecordFrom,
  decodeRecordAt,
  decodeSegmentHeader,
  decodeVerifiedRecordAt,
  holdsUnwrittenSector,
  isZeroRange,
  nextValidRecordOffset,
  SEGMENT_HEADER_BYTES,
  viewOf,
} from './record.js';

export type SegmentScan =
  | {
      readonly kind: 'ok';
      readonly entries: Entry[];
      readonly offsets: number[];
      readonly validBytes: number;
      readonly lastTerm: number;
    }
  | { readonly kind: 'torn-header' }
  | { readonly kind: 'corrupt'; readonly offset: number; readonly reason: string };

/** A scan whose records were verified and whose entries are yet to be built. */
export type SegmentVerdict = Exclude<SegmentScan, { kind: 'ok' }> | (Omit<Extract<SegmentScan,
  { kind: 'ok' }>, 'entries'>);

function corruptAt(offset: number, reason: string): SegmentScan {
  return { kind: 'corrupt', offset, reason };
}

/**
 * Pure classification of one segment's bytes (recovery rules of storage.ts): damage in the
 * newest segment with no verifying record after it is a torn tail; anything else is corrupt.
 * `keepAfter`: entries at or below it are checked but not returned.
 */
export function scanSegmentBytes(
  bytes: Uint8Array,
  nameIndex: number,
  isNewest: boolean,
  previousTerm: number,
  keepAfter: number,
): SegmentScan {
  const header = decodeSegmentHeader(bytes);
  if (header.kind === 'bad') {
    if (isZeroRange(bytes, 0, bytes.byteLength)) return { kind: 'torn-header' };
    if (isNewest && !anyValidRecordFrom(bytes, 0)) return { kind: 'torn-header' };
    return corruptAt(0, header.reason);
  }
  if (header.firstIndex !== nameIndex) {
    return corruptAt(0, `header first index ${header.firstIndex} does not match the file name`);
  }
  const entries: Entry[] = [];
  const offsets: number[] = [];
  const view = viewOf(bytes);
  let offset = SEGMENT_HEADER_BYTES;
  let lastTerm = previousTerm;
  while (offset < bytes.byteLength) {
    const decoded = decodeRecordAt(bytes, offset, view);
    if (decoded.kind !== 'ok') {
      const damage = classifyEnd(bytes, offset, isNewest);
      if (damage === null) return { kind: 'ok', entries, offsets, validBytes: offset, lastTerm };
      return corruptAt(offset, `${decoded.reason}; ${damage}`);
    }
    const expectedIndex = nameIndex + offsets.length;
    const { entry } = decoded;
    if (entry.index !== expectedIndex) {
      return corruptAt(offset, `record index ${entry.index} where ${expectedIndex} was expected`);
    }
    if (entry.term < lastTerm) {
      return corruptAt(offset, `record term ${entry.term} is below the previous ${lastTerm}`);
    }
    lastTerm = entry.term;
    offsets.push(offset);
    if (entry.index > keepAfter) entries.push(entry);
    offset += decoded.frameBytes;
  }
  return { kind: 'ok', entries, offsets, validBytes: offset, lastTerm };
}

/**
 * Where the records of a segment stop at `offset`: null when the rest is the end of the log
 * (the zero-filled room of a segment, or in the newest segment a write torn by a crash before
 * its fsync), else why it is damage. A torn write shows as nothing valid after it, or as a
 * sector of zeros before the next valid record: bytes a write never reached. A record found
 * after such a hole was written after it, so its fsync (which covers the hole too) never
 * returned, and it was never acknowledged.
 */
function classifyEnd(bytes: Uint8Array, offset: number, isNewest: boolean): string | null {
  if (isZeroRange(bytes, offset, bytes.byteLength)) return null;
  if (!isNewest) return 'not in the newest segment';
  const next = nextValidRecordOffset(bytes, offset + 1);
  if (next < 0 || holdsUnwrittenSector(bytes, offset, next)) return null;
  return `a valid record follows it at byte ${next}`;
}

/**
 * The entries of records a scan verified, at `offsets` of `bytes` (the first has index
 * `firstIndex`), keeping those with an index above `keepAfter`. Their data are views into
 * `bytes`.
 */
export function entriesAt(bytes: Uint8Array, offsets: ArrayLike<number>, firstIndex: number,
  keepAfter: number): Entry[] {
  const view = viewOf(bytes);
  const entries: Entry[] = [];
  for (let i = Math.max(0, keepAfter + 1 - firstIndex); i < offsets.length; i++) {
    entries.push(decodeVerifiedRecordAt(bytes, offsets[i] as number, view));
  }
  return entries;
}
