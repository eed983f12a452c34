/**
 * A node's data directory opened read-only, for `inspect`, `replay`, `diff` and the
 * `hivekv/replay` library: the hard state, the snapshots and the WAL segments, read with the
 * storage code's own readers (record.ts framing and checksums, wal.ts segment scan,
 * snapshot-files.ts) so a tool sees exactly what recovery would, and refuses exactly what
 * recovery would refuse, naming the file and the byte offset (StorageCorruptionError).
 *
 * Must never write: no torn tail is cut, no temp file removed, no segment unlinked; the
 * directory may belong to a running node.
 */
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';

import type { Entry, EntryType, HardState, Snapshot, SnapshotMeta } from '../core/raft/types.js';
import { readHardStateFile } from '../storage/hard-state-file.js';
import { isZeroRange, recordBytes } from '../storage/record.js';
import {
  checkSnapshotFile, listSnapshotIndexes, snapshotFileName, verifiedSnapshotChunks,
} from '../storage/snapshot-files.js';
import { StorageCorruptionError } from '../storage/storage.js';
import { scanSegmentBytes } from '../storage/segment-scan.js';
import { SEGMENT_BYTES_DEFAULT, segmentFileName, Wal } from '../storage/wal.js';
import {
  CMD_CALL, CMD_CALL_V1, CMD_CHECKPOINT, CMD_KEYED_CALL, CMD_NOOP, CMD_SET_PAUSED,
  CMD_SET_QUOTA, CMD_SWEEP,
} from '../machine/abi.js';
import { decodeEnvelope } from '../node/envelope.js';

/** Entries of one kind: how many, and their data bytes and record bytes on disk. */
export interface KindTally {
  count: number;
  dataBytes: number;
  recordBytes: number;
  largestDataBytes: number;
}

/** A run of consecutive entries of one term. */
export interface TermRun {
  readonly term: number;
  readonly firstIndex: number;
  lastIndex: number;
}

export interface SegmentInfo {
  readonly path: string;
  readonly firstIndex: number;
  /** Records the segment holds (0 for a torn, empty newest segment). */
  readonly records: number;
  /** firstIndex + records - 1 (firstIndex - 1 when empty). */
  readonly lastIndex: number;
  readonly fileBytes: number;
  /** Bytes up to the end of the last valid record (the rest is zero-filled room or a tail). */
  readonly usedBytes: number;
  /** True when non-zero bytes follow the last record: a torn tail recovery would cut. */
  readonly tornTail: boolean;
}

export type SnapshotInfo =
  | { readonly path: string; readonly index: number; readonly ok: true;
      readonly meta: SnapshotMeta; readonly dataBytes: number }
  | { readonly path: string; readonly index: number; readonly ok: false;
      readonly offset: number; readonly reason: string };

/** Everything `inspect` prints, gathered by one pass over the log. */
export interface LogSummary {
  readonly kinds: Record<EntryType, KindTally>;
  /**
   * Normal entries by the command they carry: call, keyedCall, sweep, setQuota, setPaused,
   * noop, checkpoint, or unreadable (no valid envelope, or an unknown kind).
   */
  readonly commands: Record<string, KindTally>;
  readonly terms: readonly TermRun[];
}

const COMMAND_NAMES = new Map<number, string>([
  [CMD_CALL, 'call'], [CMD_CALL_V1, 'call'], [CMD_KEYED_CALL, 'keyedCall'],
  [CMD_SWEEP, 'sweep'], [CMD_SET_QUOTA, 'setQuota'], [CMD_SET_PAUSED, 'setPaused'],
  [CMD_NOOP, 'noop'], [CMD_CHECKPOINT, 'checkpoint'],
]);

function commandName(entry: Entry): string {
  const envelope = decodeEnvelope(entry.data);
  const kind = envelope?.command[0];
  return (kind === undefined ? undefined : COMMAND_NAMES.get(kind)) ?? 'unreadable';
}

function emptyTally(): KindTally {
  return { count: 0, dataBytes: 0, recordBytes: 0, largestDataBytes: 0 };
}

/** A data directory opened read-only. Create it with `openDataDir`. */
export class DataDir {
  private constructor(
    readonly dir: string,
    /** null when the directory has no hard state file (a node that never voted or synced). */
    readonly hardState: HardState | null,
    /** Newest first; every one checked whole (header, meta, checksum). */
    readonly snapshots: readonly SnapshotInfo[],
    /** In index order, contiguous. */
    readonly segments: readonly SegmentInfo[],
    readonly summary: LogSummary,
  ) {}

  static async open(dir: string): Promise<DataDir> {
    const walDir = join(dir, 'wal');
    const snapDir = join(dir, 'snap');
    await requireDirectory(dir, 'data directory');
    await requireDirectory(walDir, 'WAL directory (is this a hivekv data directory?)');
    const hardState = await readHardStateFile(dir);
    const snapshots = await readSnapshots(snapDir);
    const summary: LogSummary = {
      kinds: { normal: emptyTally(), empty: emptyTally(), config: emptyTally() }, commands: {},
      terms: [],
    };
    const segments = await scanSegments(walDir, summary);
    return new DataDir(dir, hardState, snapshots, segments, summary);
  }

  /** The first index the log holds, or null when it holds none. */
  get firstIndex(): number | null {
    const first = this.segments.find((s) => s.records > 0);
    return first === undefined ? null : first.firstIndex;
  }

  /** The last index the log holds, or null when it holds none. */
  get lastIndex(): number | null {
    const last = this.segments.findLast((s) => s.records > 0);
    return last === undefined ? null : last.lastIndex;
  }

  /** The newest snapshot that verifies and is at or below `atMost`, or null. */
  usableSnapshot(atMost = Number.MAX_SAFE_INTEGER): Snapshot | null {
    for (const s of this.snapshots) {
      if (s.ok && s.index <= atMost) return { meta: s.meta, dataBytes: s.dataBytes };
    }
    return null;
  }

  /**
   * The log's entries with `from <= index <= to`, in order, read segment by segment (one
   * segment in memory at a time) and verified again as they are read.
   */
  async *entries(from: number, to: number = Number.MAX_SAFE_INTEGER): AsyncGenerator<Entry> {
    let previousTerm = 0;
    for (const [i, segment] of this.segments.entries()) {
      if (segment.records === 0 || segment.lastIndex < from) continue;
      if (segment.firstIndex > to) return;
      const bytes = await readFile(segment.path);
      const scan = scanSegmentBytes(bytes, segment.firstIndex, i === this.segments.length - 1,
        previousTerm, from - 1);
      if (scan.kind === 'corrupt') {
        throw new StorageCorruptionError(segment.path, scan.offset, scan.reason);
      }
      if (scan.kind !== 'ok') continue;
      previousTerm = scan.lastTerm;
      for (const entry of scan.entries) {
        if (entry.index > to) return;
        yield entry;
      }
    }
  }

  /** The entry at `index`, or null when the log does not hold it. */
  async entryAt(index: number): Promise<Entry | null> {
    for await (const entry of this.entries(index, index)) return entry;
    return null;
  }

  /** The snapshot's data in chunks, its checksum verified before the last (storage.ts). */
  snapshotChunks(index: number, chunkBytes: number, transient = false):
    AsyncGenerator<Uint8Array> {
    const snapDir = join(this.dir, 'snap');
    return writtenOverAsDataDirError(join(snapDir, snapshotFileName(index)),
      verifiedSnapshotChunks(snapDir, index, chunkBytes, transient));
  }
}

/**
 * `chunks`, but a snapshot that fails its check once its file has left its name is reported
 * as what it is, not as damage: a node serving from the directory renamed the file to its
 * spare and wrote a newer snapshot over it while this read it (snapshot-files.ts,
 * `pruneSnapshots`). A damaged file keeps its name, and its error stands.
 */
async function* writtenOverAsDataDirError(path: string, chunks: AsyncGenerator<Uint8Array>):
  AsyncGenerator<Uint8Array> {
  try {
    yield* chunks;
  } catch (error) {
    if (error instanceof StorageCorruptionError &&
      !(await stat(path).then(() => true, () => false))) {
      throw new DataDirError(`snapshot ${path} was written over while it was read: the node ` +
        'serving from this directory took its file for a newer snapshot; run the command ' +
        'again');
    }
    throw error;
  }
}

/** Opens a data directory read-only; rejects with StorageCorruptionError on a damaged log. */
export function openDataDir(dir: string): Promise<DataDir> {
  return DataDir.open(dir);
}

/** The path is no data directory (missing, or without a WAL directory). */
export class DataDirError extends Error {
  override readonly name = 'DataDirError';
}

async function requireDirectory(path: string, what: string): Promise<void> {
  const info = await stat(path).catch(() => null);
  if (info === null || !info.isDirectory()) throw new DataDirError(`no ${what} at ${path}`);
}

async function readSnapshots(snapDir: string): Promise<SnapshotInfo[]> {
  const exists = await stat(snapDir).catch(() => null);
  if (exists === null) return [];
  const out: SnapshotInfo[] = [];
  for (const index of await listSnapshotIndexes(snapDir, false)) {
    const path = join(snapDir, snapshotFileName(index));
    const check = await checkSnapshotFile(snapDir, index);
    out.push(check.kind === 'ok'
      ? { path, index, ok: true, meta: check.meta, dataBytes: check.dataBytes }
      : { path, index, ok: false, offset: check.offset, reason: check.reason });
  }
  return out;
}

/**
 * Every segment, verified as recovery verifies it (wal.ts `scanSegmentBytes`), contiguous
 * with the one before; tallies kinds and terms into `summary` and keeps no entry.
 */
async function scanSegments(walDir: string, summary: LogSummary): Promise<SegmentInfo[]> {
  const names = await new Wal(walDir, SEGMENT_BYTES_DEFAULT, undefined, false)
    .segmentFirstIndexes();
  const segments: SegmentInfo[] = [];
  let previousTerm = 0;
  let expected: number | null = null;
  for (const [i, firstIndex] of names.entries()) {
    const path = join(walDir, segmentFileName(firstIndex));
    if (expected !== null && firstIndex !== expected) {
      throw new StorageCorruptionError(path, 0,
        `segment starts at index ${firstIndex} but the log needs index ${expected} next`);
    }
    const bytes = await readFile(path);
    const isNewest = i === names.length - 1;
    const scan = scanSegmentBytes(bytes, firstIndex, isNewest, previousTerm, 0);
    if (scan.kind === 'corrupt') throw new StorageCorruptionError(path, scan.offset, scan.reason);
    if (scan.kind === 'torn-header') {
      segments.push({ path, firstIndex, records: 0, lastIndex: firstIndex - 1,
        fileBytes: bytes.byteLength, usedBytes: 0, tornTail: true });
      continue;
    }
    for (const entry of scan.entries) tally(summary, entry);
    previousTerm = scan.lastTerm;
    const records = scan.offsets.length;
    expected = firstIndex + records;
    segments.push({ path, firstIndex, records, lastIndex: firstIndex + records - 1,
      fileBytes: bytes.byteLength, usedBytes: scan.validBytes,
      tornTail: !isZeroRange(bytes, scan.validBytes, bytes.byteLength) });
  }
  return segments;
}

function count(kind: KindTally, entry: Entry): void {
  kind.count += 1;
  kind.dataBytes += entry.data.byteLength;
  kind.recordBytes += recordBytes(entry);
  kind.largestDataBytes = Math.max(kind.largestDataBytes, entry.data.byteLength);
}

function tally(summary: LogSummary, entry: Entry): void {
  count(summary.kinds[entry.type], entry);
  if (entry.type === 'normal') {
    const name = commandName(entry);
    count(summary.commands[name] ??= emptyTally(), entry);
  }
  const terms = summary.terms as TermRun[];
  const run = terms.at(-1);
  if (run !== undefined && run.term === entry.term && run.lastIndex === entry.index - 1) {
    run.lastIndex = entry.index;
  } else {
    terms.push({ term: entry.term, firstIndex: entry.index, lastIndex: entry.index });
  }
}
