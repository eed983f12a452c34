/**
 * State machine snapshots in `<dir>/snap/`, one file per snapshot named by its index. A
 * snapshot is written as a stream of slices (it is never whole in memory): to a temp file
 * `<name>.<n>.tmp`, with its checksum computed as the bytes go, then fsynced, renamed into
 * place and the directory fsynced. It is read back the same way, in chunks, and the checksum
 * is verified before anything read is trusted: for restore (the last chunk comes only after
 * the check) and before chunks go to followers. The newest SNAPSHOTS_KEPT are kept, so a
 * damaged newest one can fall back to the one before it; the one before those becomes the
 * spare the next snapshot is written over, unless something still reads it (`pruneSnapshots`).
 *
 * Layout (little-endian): 0 magic u32 | 4 formatVersion u32 | 8 metaBytes u32
 *   | 12 reserved u32 (0) | 16 dataBytes u64 | 24 meta as JSON (UTF-8) | data
 *   | crc u32 over every byte before it.
 * Must never: hand out the last byte of a snapshot whose checksum or meta does not verify.
 */
import { open, readdir, rename, unlink, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { crc32 } from 'node:zlib';

import { bootstrapConfiguration, checkConfiguration } from '../core/raft/configuration.js';
import type { Configuration, PeerEntry, SnapshotMeta } from '../core/raft/types.js';
import { assertSafeU64, readU64, writeU64 } from './record.js';
import { StorageCorruptionError } from './storage.js';
import { datasyncTimed, fsyncDirectory, writeFully, type FsyncObserver } from './wal.js';
import { openWith } from './descriptors.js';

/** 'HKVS' read as a little-endian u32. */
export const SNAPSHOT_MAGIC = 0x5356_4b48;
export const SNAPSHOT_FORMAT_VERSION = 1;
export const SNAPSHOT_HEADER_BYTES = 24;
/**
 * The largest snapshot data (8 GiB): well above what a machine's 4 GiB memory can hold, so
 * only a damaged header reaches it.
 */
export const SNAPSHOT_DATA_BYTES_MAX = 8 * 1024 * 1024 * 1024;
/**
 * The largest encoded meta (256 KiB): room for a whole configuration, 32 members with their
 * addresses and 1,024 removed ids of 64 bytes each.
 */
export const SNAPSHOT_META_BYTES_MAX = 256 * 1024;
/** Snapshots kept on disk: the newest, and one to fall back to. */
export const SNAPSHOTS_KEPT = 2;
/** Bytes read at a time when a whole file is checked. */
export const SNAPSHOT_READ_CHUNK_BYTES = 4 * 1024 * 1024;
const CRC_BYTES = 4;
const SNAPSHOT_NAME = /^(\d{20})\.snap$/;
const INDEX_DIGITS = 20;

export function snapshotFileName(index: number): string {
  return `${String(index).padStart(INDEX_DIGITS, '0')}.snap`;
}

function encodeMeta(meta: SnapshotMeta): Buffer {
  assertSafeU64(meta.index, 'snapshot index');
  assertSafeU64(meta.term, 'snapshot term');
  assertSafeU64(meta.timeMs, 'snapshot timeMs');
  const json = JSON.stringify({
    index: meta.index, term: meta.term, timeMs: meta.timeMs, voters: meta.voters,
    learners: meta.learners, peers: meta.peers.map((p) => [p.id, p.address]),
    removed: meta.removed,
  });
  const bytes = Buffer.from(json, 'utf8');
  if (bytes.byteLength > SNAPSHOT_META_BYTES_MAX) {
    throw new Error(`assertion failed: snapshot meta is ${bytes.byteLength} bytes`);
  }
  return bytes;
}

/** Header plus meta, ready to be followed by the data and the checksum. */
function encodePrefix(meta: SnapshotMeta, dataBytes: number): Buffer {
  if (!Number.isSafeInteger(dataBytes) || dataBytes < 0 || dataBytes > SNAPSHOT_DATA_BYTES_MAX) {
    throw new Error(`assertion failed: snapshot data ${dataBytes} outside ` +
      `[0, ${SNAPSHOT_DATA_BYTES_MAX}]`);
  }
  const metaBytes = encodeMeta(meta);
  const prefix = Buffer.alloc(SNAPSHOT_HEADER_BYTES + metaBytes.byteLength);
  const view = new DataView(prefix.buffer, prefix.byteOffset, prefix.byteLength);
  view.setUint32(0, SNAPSHOT_MAGIC, true);
  view.setUint32(4, SNAPSHOT_FORMAT_VERSION, true);
  view.setUint32(8, metaBytes.byteLength, true);
  writeU64(view, 16, dataBytes);
  prefix.set(metaBytes, SNAPSHOT_HEADER_BYTES);
  return prefix;
}

function parseMeta(bytes: Uint8Array): SnapshotMeta | null {
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(bytes).toString('utf8'));
  } catch {
    return null;
  }
  if (typeof value !== 'object' || value === null) return null;
  const record = value as Record<string, unknown>;
  const { index, term, timeMs } = record;
  const safe = (n: unknown): n is number => Number.isSafeInteger(n) && (n as number) >= 0;
  if (!safe(index) || !safe(term) || !safe(timeMs)) return null;
  const config = parseConfiguration(record);
  return config === null ? null : { index, term, timeMs, ...config };
}

function strings(value: unknown): string[] | null {
  return Array.isArray(value) && value.every((v): v is string => typeof v === 'string')
    ? value : null;
}

/**
 * The configuration a meta carries. A meta written before membership changes holds only
 * `voters`: it reads as those voters, no learner, addresses unknown (the node takes them
 * from `--peers`), nothing removed.
 */
function parseConfiguration(record: Record<string, unknown>): Configuration | null {
  const voters = strings(record['voters']);
  if (voters === null) return null;
  const legacy = record['learners'] === undefined && record['peers'] === undefined &&
    record['removed'] === undefined;
  if (legacy) return bootstrapConfiguration(voters);
  const learners = strings(record['learners']);
  const removed = strings(record['removed']);
  const pairs = Array.isArray(record['peers']) ? record['peers'] : null;
  if (learners === null || removed === null || pairs === null) return null;
  const peers: PeerEntry[] = [];
  for (const pair of pairs) {
    const list = strings(pair);
    if (list === null || list.length !== 2) return null;
    peers.push({ id: list[0] as string, address: list[1] as string });
  }
  const config: Configuration = { voters, learners, peers, removed };
  return checkConfiguration(config) === null ? config : null;
}

/** A snapshot file that does not verify: where and why. */
export class SnapshotFileError extends Error {
  constructor(readonly path: string, readonly offset: number, readonly reason: string) {
    super(`snapshot ${path} at byte offset ${offset}: ${reason}`);
    this.name = 'SnapshotFileError';
  }
}

function badFile(path: string, offset: number, reason: string): never {
  throw new SnapshotFileError(path, offset, reason);
}

/**
 * Data a snapshot writer fdatasyncs in steps of, as it writes. Written whole and fdatasynced
 * once at the end, a snapshot of 1M keys (153 MiB) left that much dirty in the page cache for
 * one long flush, and the WAL's fdatasyncs queued behind it (the same reason the WAL's spare
 * segments are zeroed in steps: wal-prealloc.ts). Puts at 64 connections at 1M keys, by wrk:
 * p99 82 to 145 ms against 110 to 221 ms with the default snapshot interval, 192 to 292
 * against 340 to 388 ms with snapshots written back to back (bench/RESULTS.md, "Puts while a
 * snapshot is written"). A snapshot takes longer to write; its dirty pages stay bounded.
 */
export const SNAPSHOT_SYNC_STEP_BYTES = 1024 * 1024;

/** Distinguishes the temp files of one process; recovery removes every `.tmp` left over. */
let tempSequence = 0;

/**
 * Writes one snapshot as a stream: `write` the data in order (`dataBytes` in all, known up
 * front), then `finish` (checksum, fdatasync, close) and `publish` (rename into place,
 * directory fsync). Until `publish` nothing reads it; a crash leaves a temp file that
 * recovery removes. `abort` closes and removes it. One write at a time (each awaited).
 */
export class SnapshotFileWriter {
  private written = 0;
  /** Bytes written since the last fdatasync. */
  private unsynced = 0;
  private crc: number;
  private closed = false;
  /** Its bytes and checksum are durable (`finish` succeeded). */
  finished = false;

  private constructor(
    private readonly snapDir: string,
    readonly meta: SnapshotMeta,
    readonly dataBytes: number,
    private readonly tempName: string,
    private readonly handle: FileHandle,
    private readonly prefixBytes: number,
    prefixCrc: number,
    private readonly observe: FsyncObserver | undefined,
  ) {
    this.crc = prefixCrc;
  }

  /**
   * `spare` (from `pruneSnapshots`) is an old snapshot's file to write over in place, so
   * that the blocks it holds are neither freed nor allocated again; `finish` cuts it to
   * this snapshot's length.
   */
  static async create(snapDir: string, meta: SnapshotMeta, dataBytes: number,
    observe?: FsyncObserver, spare: string | null = null): Promise<SnapshotFileWriter> {
    const prefix = encodePrefix(meta, dataBytes);
    const tempName = `${snapshotFileName(meta.index)}.${tempSequence++}.tmp`;
    const tempPath = join(snapDir, tempName);
    // A spare someone removed is no reason to stop: the snapshot goes to a new file then.
    const reused = spare !== null && await rename(spare, tempPath).then(() => true,
      (error: NodeJS.ErrnoException) => {
        if (error.code === 'ENOENT') return false;
        throw error;
      });
    const handle = await openWith(() => open(tempPath, reused ? 'r+' : 'w'));
    try {
      await writeFully(handle, prefix, 0);
    } catch (error) {
      await handle.close();
      throw error;
    }
    return new SnapshotFileWriter(snapDir, meta, dataBytes, tempName, handle, prefix.byteLength,
      crc32(prefix), observe);
  }

  /** Bytes of data written so far. */
  get writtenBytes(): number {
    return this.written;
  }

  /** Closed: finished (its bytes durable) or aborted; it writes nothing more. */
  get isClosed(): boolean {
    return this.closed;
  }

  /** Appends the next bytes of data. Throws past `dataBytes` (a bug in the caller). */
  async write(chunk: Uint8Array): Promise<void> {
    if (this.closed) throw new Error('assertion failed: write to a closed snapshot file');
    if (this.written + chunk.byteLength > this.dataBytes) {
      throw new Error(`assertion failed: snapshot data passes ${this.dataBytes} bytes`);
    }
    const position = this.prefixBytes + this.written;
    this.written += chunk.byteLength;
    this.crc = crc32(chunk, this.crc);
    await writeFully(this.handle, chunk, position);
    this.unsynced += chunk.byteLength;
    if (this.unsynced >= SNAPSHOT_SYNC_STEP_BYTES) {
      this.unsynced = 0;
      await datasyncTimed(this.handle, this.observe);
    }
  }

  /** Writes the checksum and makes the temp file durable. Every data byte must be written. */
  async finish(): Promise<void> {
    if (this.written !== this.dataBytes) {
      throw new Error(`assertion failed: snapshot has ${this.written} of ${this.dataBytes} bytes`);
    }
    const checksum = Buffer.alloc(CRC_BYTES);
    checksum.writeUInt32LE(this.crc, 0);
    try {
      const end = this.prefixBytes + this.written;
      await writeFully(this.handle, checksum, end);
      // A spare written over may be longer; a new file is this long already.
      await this.handle.truncate(end + CRC_BYTES);
      await datasyncTimed(this.handle, this.observe);
      this.finished = true;
    } finally {
      this.closed = true;
      await this.handle.close();
    }
  }

  /** Renames the finished temp file into place and makes the rename durable. */
  async publish(): Promise<void> {
    await rename(join(this.snapDir, this.tempName),
      join(this.snapDir, snapshotFileName(this.meta.index)));
    await fsyncDirectory(this.snapDir, this.observe);
  }

  /** Closes and removes the temp file (nothing is left to recover). Safe to call twice. */
  async abort(): Promise<void> {
    if (!this.closed) {
      this.closed = true;
      await this.handle.close();
    }
    await unlink(join(this.snapDir, this.tempName)).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== 'ENOENT') throw error;
    });
  }
}

/**
 * Reads one snapshot file: `open` checks the header and meta against the file's length;
 * `read` returns any range of the data; `chunks` streams the data in order and checks the
 * checksum before it hands out the last chunk; `verify` checks the checksum alone. The
 * handle stays open until `close`, so a file pruned meanwhile can still be read.
 */
export class SnapshotFileReader {
  private constructor(
    readonly path: string,
    readonly meta: SnapshotMeta,
    readonly dataBytes: number,
    private readonly handle: FileHandle,
    private readonly dataStart: number,
  ) {}

  /** Opens and checks the header; throws SnapshotFileError when it does not verify. */
  static async open(snapDir: string, index: number): Promise<SnapshotFileReader> {
    const path = join(snapDir, snapshotFileName(index));
    const handle = await openWith(() => open(path, 'r'));
    try {
      const size = (await handle.stat()).size;
      if (size < SNAPSHOT_HEADER_BYTES + CRC_BYTES) badFile(path, 0, 'file is short');
      const header = await readExactly(handle, 0, SNAPSHOT_HEADER_BYTES);
      const view = new DataView(header.buffer, header.byteOffset, header.byteLength);
      if (view.getUint32(0, true) !== SNAPSHOT_MAGIC) badFile(path, 0, 'bad magic');
      const formatVersion = view.getUint32(4, true);
      if (formatVersion !== SNAPSHOT_FORMAT_VERSION) {
        badFile(path, 4, `formatVersion ${formatVersion}`);
      }
      const metaBytes = view.getUint32(8, true);
      const dataBytes = readU64(view, 16);
      if (dataBytes === null || metaBytes > SNAPSHOT_META_BYTES_MAX ||
        SNAPSHOT_HEADER_BYTES + metaBytes + dataBytes + CRC_BYTES !== size) {
        badFile(path, 8, 'meta and data lengths do not match the file length');
      }
      const meta = parseMeta(await readExactly(handle, SNAPSHOT_HEADER_BYTES, metaBytes));
      if (meta === null) badFile(path, SNAPSHOT_HEADER_BYTES, 'meta is not valid');
      if (meta.index !== index) {
        badFile(path, SNAPSHOT_HEADER_BYTES, `meta index ${meta.index} != file name`);
      }
      return new SnapshotFileReader(path, meta, dataBytes, handle,
        SNAPSHOT_HEADER_BYTES + metaBytes);
    } catch (error) {
      await handle.close();
      throw error;
    }
  }

  /** Data bytes [offset, offset + length), which must lie inside the data. */
  read(offset: number, length: number): Promise<Uint8Array> {
    if (!Number.isSafeInteger(offset) || !Number.isSafeInteger(length) || offset < 0 ||
      length < 0 || offset + length > this.dataBytes) {
      return Promise.reject(new Error(`assertion failed: read [${offset}, +${length}) outside ` +
        `${this.dataBytes} data bytes`));
    }
    return readExactly(this.handle, this.dataStart + offset, length);
  }

  /**
   * The data in order, `chunkBytes` at a time. The checksum over the whole file is checked
   * before the last chunk is handed out (an empty snapshot yields one empty chunk); a
   * mismatch throws SnapshotFileError instead. The next chunk is read while the consumer
   * works on this one. `transient`: the chunks take turns in two buffers, so a chunk is
   * valid only until the next is asked for; a consumer that copies what it keeps (a restore)
   * then allocates nothing per chunk, which with a large heap spares whole collections.
   */
  async *chunks(chunkBytes = SNAPSHOT_READ_CHUNK_BYTES, transient = false):
    AsyncGenerator<Uint8Array> {
    let crc = crc32(await readExactly(this.handle, 0, this.dataStart));
    const bufferBytes = Math.min(chunkBytes, this.dataBytes);
    const buffers = transient ? [Buffer.allocUnsafe(bufferBytes), Buffer.allocUnsafe(bufferBytes)]
      : null;
    let turn = 0;
    const readAt = (offset: number): Promise<Uint8Array> => {
      const length = Math.min(chunkBytes, this.dataBytes - offset);
      const into = buffers?.[turn++ % 2]?.subarray(0, length);
      const read = readExactly(this.handle, this.dataStart + offset, length, into);
      // Settled below or in `finally`; an abandoned read must not surface as unhandled.
      read.catch(() => undefined);
      return read;
    };
    let pending: Promise<Uint8Array> | null = readAt(0);
    let offset = 0;
    try {
      do {
        if (pending === null) throw new Error('assertion failed: no read for the next chunk');
        const chunk = await pending;
        offset += chunk.byteLength;
        pending = offset < this.dataBytes ? readAt(offset) : null;
        crc = crc32(chunk, crc);
        if (offset === this.dataBytes) await this.checkCrc(crc);
        yield chunk;
      } while (offset < this.dataBytes);
    } finally {
      // A consumer that stops early leaves a read in flight: the handle outlives it.
      if (pending !== null) await pending.catch(() => undefined);
    }
  }

  /** Checks the checksum of the whole file; throws SnapshotFileError when it does not match. */
  async verify(chunkBytes = SNAPSHOT_READ_CHUNK_BYTES): Promise<void> {
    let crc = 0;
    const end = this.dataStart + this.dataBytes;
    const buffer = Buffer.allocUnsafe(Math.min(chunkBytes, end));
    for (let at = 0; at < end; at += chunkBytes) {
      const length = Math.min(chunkBytes, end - at);
      crc = crc32(await readExactly(this.handle, at, length, buffer.subarray(0, length)), crc);
    }
    await this.checkCrc(crc);
  }

  private async checkCrc(crc: number): Promise<void> {
    const end = this.dataStart + this.dataBytes;
    const stored = await readExactly(this.handle, end, CRC_BYTES);
    if (Buffer.from(stored).readUInt32LE(0) !== crc) {
      throw new SnapshotFileError(this.path, end, 'checksum mismatch');
    }
  }

  async close(): Promise<void> {
    await this.handle.close();
  }
}

/**
 * Reads exactly `length` bytes at `position` (into `out` when given, which must be that
 * long); a short file is an error.
 */
async function readExactly(handle: FileHandle, position: number, length: number,
  out: Buffer = Buffer.allocUnsafe(length)): Promise<Uint8Array> {
  let done = 0;
  while (done < length) {
    const { bytesRead } = await handle.read(out, done, length - done, position + done);
    if (bytesRead <= 0) throw new Error(`snapshot file ends before byte ${position + done}`);
    done += bytesRead;
  }
  return out;
}

/** Writes a whole snapshot given as bytes durably (tests and tools). */
export async function writeSnapshotFile(snapDir: string, meta: SnapshotMeta, data: Uint8Array,
  observe?: FsyncObserver): Promise<void> {
  const writer = await SnapshotFileWriter.create(snapDir, meta, data.byteLength, observe);
  await writer.write(data);
  await writer.finish();
  await writer.publish();
}

/**
 * Snapshot indexes on disk, newest first. Removes temp files a crash left behind, unless
 * `removeTemps` is false (read-only tools: a running node may be writing one).
 */
export async function listSnapshotIndexes(snapDir: string, removeTemps = true):
  Promise<number[]> {
  const names = await openWith(() => readdir(snapDir));
  for (const name of names) {
    if (removeTemps && name.endsWith('.tmp')) await unlink(join(snapDir, name));
  }
  return names
    .map((name) => SNAPSHOT_NAME.exec(name)?.[1])
    .filter((digits): digits is string => digits !== undefined)
    .map(Number)
    .sort((a, b) => b - a);
}

/** What checking a snapshot file found: its meta and size, or where and why it is bad. */
export type SnapshotCheck =
  | { readonly kind: 'ok'; readonly meta: SnapshotMeta; readonly dataBytes: number }
  | { readonly kind: 'bad'; readonly offset: number; readonly reason: string };

/** Checks one snapshot file whole (header, meta, checksum), reading it in chunks. */
export async function checkSnapshotFile(snapDir: string, index: number): Promise<SnapshotCheck> {
  let reader: SnapshotFileReader;
  try {
    reader = await SnapshotFileReader.open(snapDir, index);
  } catch (error) {
    if (error instanceof SnapshotFileError) {
      return { kind: 'bad', offset: error.offset, reason: error.reason };
    }
    throw error;
  }
  try {
    await reader.verify();
    return { kind: 'ok', meta: reader.meta, dataBytes: reader.dataBytes };
  } catch (error) {
    if (error instanceof SnapshotFileError) {
      return { kind: 'bad', offset: error.offset, reason: error.reason };
    }
    throw error;
  } finally {
    await reader.close();
  }
}

/**
 * Removes all but the newest SNAPSHOTS_KEPT snapshots, then fsyncs the directory. The newest
 * of those removed that `recycle` allows is renamed to a spare (a temp file) instead of being
 * unlinked, and its path returned, for the next snapshot to be written over
 * (`SnapshotFileWriter.create`); null when there is none.
 *
 * Why a spare: freeing a file's blocks is not free. On ext4 mounted with `discard`, unlinking
 * a 153 MB snapshot under puts at 1M keys kept the log's fdatasyncs that overlapped it
 * waiting 15 to 30 ms; written over, the file's blocks are neither freed nor allocated.
 * Recovery removes a spare left behind, as it removes every temp file.
 */
export async function pruneSnapshots(snapDir: string, observe?: FsyncObserver,
  recycle?: (index: number) => boolean): Promise<string | null> {
  const names = await openWith(() => readdir(snapDir));
  const indexes = names
    .map((name) => SNAPSHOT_NAME.exec(name)?.[1])
    .filter((digits): digits is string => digits !== undefined)
    .map(Number)
    .sort((a, b) => b - a);
  const old = indexes.slice(SNAPSHOTS_KEPT);
  let spare: string | null = null;
  for (const index of old) {
    const path = join(snapDir, snapshotFileName(index));
    if (spare === null && recycle !== undefined && recycle(index)) {
      spare = join(snapDir, `spare.${tempSequence++}.tmp`);
      await rename(path, spare);
    } else {
      await unlink(path);
    }
  }
  if (old.length > 0) await fsyncDirectory(snapDir, observe);
  return spare;
}

/**
 * Renames a snapshot that failed verification to `<name>.corrupt`, so it is kept for
 * inspection but no longer counts as the newest.
 */
export async function setAsideSnapshot(
  snapDir: string,
  index: number,
  observe?: FsyncObserver,
): Promise<string> {
  const path = join(snapDir, snapshotFileName(index));
  await rename(path, `${path}.corrupt`);
  await fsyncDirectory(snapDir, observe);
  return `${path}.corrupt`;
}

/** A damaged snapshot file as the storage layer reports damage: file, offset and reason. */
function asCorruption(error: unknown): unknown {
  return error instanceof SnapshotFileError
    ? new StorageCorruptionError(error.path, error.offset, error.reason) : error;
}

/**
 * The data of snapshot `index` in `snapDir`, in chunks of about `chunkBytes`, its checksum
 * verified before the last chunk is yielded (storage.ts, `snapshotChunks`); damage rejects
 * with a StorageCorruptionError.
 */
export async function* verifiedSnapshotChunks(snapDir: string, index: number,
  chunkBytes: number, transient = false): AsyncGenerator<Uint8Array> {
  const reader = await SnapshotFileReader.open(snapDir, index).catch((error: unknown) => {
    throw asCorruption(error);
  });
  try {
    for await (const chunk of reader.chunks(chunkBytes, transient)) yield chunk;
  } catch (error) {
    throw asCorruption(error);
  } finally {
    await reader.close();
  }
}
