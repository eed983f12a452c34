/**
 * State machine snapshots in `<dir>/snap/`, one file per snapshot named by its index:
 * written to `<name>.tmp`, fsynced, renamed into place, directory fsynced; the newest
 * SNAPSHOTS_KEPT are kept so a damaged newest one can fall back to the one before it.
 *
 * Layout (little-endian): 0 magic u32 | 4 formatVersion u32 | 8 metaBytes u32
 *   | 12 reserved u32 (0) | 16 dataBytes u64 | 24 meta as JSON (UTF-8) | data
 *   | crc u32 over every byte before it.
 * Must never: return a snapshot whose checksum or meta does not verify.
 */
import { open, readdir, readFile, rename, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { crc32 } from 'node:zlib';

import { bootstrapConfiguration, checkConfiguration } from '../core/raft/configuration.js';
import type { Configuration, PeerEntry, Snapshot, SnapshotMeta } from '../core/raft/types.js';
import { assertSafeU64, readU64, writeU64 } from './record.js';
import { datasyncTimed, fsyncDirectory, writeFully, type FsyncObserver } from './wal.js';

/** 'HKVS' read as a little-endian u32. */
export const SNAPSHOT_MAGIC = 0x5356_4b48;
export const SNAPSHOT_FORMAT_VERSION = 1;
export const SNAPSHOT_HEADER_BYTES = 24;
/** The largest state machine snapshot (1 GiB); it is read whole at recovery. */
export const SNAPSHOT_DATA_BYTES_MAX = 1024 * 1024 * 1024;
/**
 * The largest encoded meta (256 KiB): room for a whole configuration, 32 members with their
 * addresses and 1,024 removed ids of 64 bytes each.
 */
export const SNAPSHOT_META_BYTES_MAX = 256 * 1024;
/** Snapshots kept on disk: the newest, and one to fall back to. */
export const SNAPSHOTS_KEPT = 2;
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
  if (dataBytes > SNAPSHOT_DATA_BYTES_MAX) {
    throw new Error(`assertion failed: snapshot data ${dataBytes} > ${SNAPSHOT_DATA_BYTES_MAX}`);
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

/** A decoded snapshot, or where and why it does not verify. */
export type SnapshotDecode =
  | { readonly kind: 'ok'; readonly snapshot: Snapshot }
  | { readonly kind: 'bad'; readonly offset: number; readonly reason: string };

/** Verifies a snapshot file's bytes; `nameIndex` is the index its file name claims. */
export function decodeSnapshot(bytes: Uint8Array, nameIndex: number): SnapshotDecode {
  const bad = (offset: number, reason: string): SnapshotDecode => ({ kind: 'bad', offset, reason });
  if (bytes.byteLength < SNAPSHOT_HEADER_BYTES + CRC_BYTES) return bad(0, 'file is short');
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const end = bytes.byteLength - CRC_BYTES;
  if (view.getUint32(end, true) !== crc32(bytes.subarray(0, end))) {
    return bad(end, 'checksum mismatch');
  }
  if (view.getUint32(0, true) !== SNAPSHOT_MAGIC) return bad(0, 'bad magic');
  const formatVersion = view.getUint32(4, true);
  if (formatVersion !== SNAPSHOT_FORMAT_VERSION) return bad(4, `formatVersion ${formatVersion}`);
  const metaBytes = view.getUint32(8, true);
  const dataBytes = readU64(view, 16);
  if (dataBytes === null || SNAPSHOT_HEADER_BYTES + metaBytes + dataBytes !== end) {
    return bad(8, 'meta and data lengths do not match the file length');
  }
  const metaStart = SNAPSHOT_HEADER_BYTES;
  const meta = parseMeta(bytes.subarray(metaStart, metaStart + metaBytes));
  if (meta === null) return bad(metaStart, 'meta is not valid');
  if (meta.index !== nameIndex) return bad(metaStart, `meta index ${meta.index} != file name`);
  const data = new Uint8Array(bytes.subarray(metaStart + metaBytes, end));
  return { kind: 'ok', snapshot: { meta, data } };
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

/**
 * Writes a snapshot durably: temp file, fsync, rename, directory fsync. When it resolves the
 * snapshot survives a crash; before that, recovery sees the previous snapshots only.
 */
export async function writeSnapshotFile(
  snapDir: string,
  meta: SnapshotMeta,
  data: Uint8Array,
  observe?: FsyncObserver,
): Promise<void> {
  await writeSnapshotTemp(snapDir, meta, data, observe);
  await publishSnapshotTemp(snapDir, meta, observe);
}

/**
 * Writes and fsyncs a snapshot under its temp name; nothing reads it until
 * `publishSnapshotTemp`. A crash leaves a temp file that recovery removes.
 */
export async function writeSnapshotTemp(
  snapDir: string,
  meta: SnapshotMeta,
  data: Uint8Array,
  observe?: FsyncObserver,
): Promise<void> {
  const prefix = encodePrefix(meta, data.byteLength);
  const checksum = Buffer.alloc(CRC_BYTES);
  checksum.writeUInt32LE(crc32(data, crc32(prefix)), 0);
  const temp = join(snapDir, `${snapshotFileName(meta.index)}.tmp`);
  const handle = await open(temp, 'w');
  try {
    await writeFully(handle, prefix, 0);
    await writeFully(handle, data, prefix.byteLength);
    await writeFully(handle, checksum, prefix.byteLength + data.byteLength);
    await datasyncTimed(handle, observe);
  } finally {
    await handle.close();
  }
}

/** Renames a written temp snapshot into place and makes the rename durable. */
export async function publishSnapshotTemp(
  snapDir: string,
  meta: SnapshotMeta,
  observe?: FsyncObserver,
): Promise<void> {
  const name = snapshotFileName(meta.index);
  await rename(join(snapDir, `${name}.tmp`), join(snapDir, name));
  await fsyncDirectory(snapDir, observe);
}

/** Snapshot indexes on disk, newest first. Removes temp files a crash left behind. */
export async function listSnapshotIndexes(snapDir: string): Promise<number[]> {
  const names = await readdir(snapDir);
  for (const name of names) {
    if (name.endsWith('.snap.tmp')) await unlink(join(snapDir, name));
  }
  return names
    .map((name) => SNAPSHOT_NAME.exec(name)?.[1])
    .filter((digits): digits is string => digits !== undefined)
    .map(Number)
    .sort((a, b) => b - a);
}

/** Reads and verifies one snapshot file. */
export async function loadSnapshotFile(snapDir: string, index: number): Promise<SnapshotDecode> {
  return decodeSnapshot(await readFile(join(snapDir, snapshotFileName(index))), index);
}

/** Deletes all but the newest SNAPSHOTS_KEPT snapshots, then fsyncs the directory. */
export async function pruneSnapshots(snapDir: string, observe?: FsyncObserver): Promise<void> {
  const indexes = await listSnapshotIndexes(snapDir);
  const old = indexes.slice(SNAPSHOTS_KEPT);
  for (const index of old) await unlink(join(snapDir, snapshotFileName(index)));
  if (old.length > 0) await fsyncDirectory(snapDir, observe);
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
