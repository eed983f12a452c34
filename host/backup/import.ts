/**
 * `hivekv import`'s logic: a dump (dump-format.ts) read line by line becomes a data
 * directory a single node starts from.
 *
 * 1. The target must be an empty directory (or not exist): an import never mixes with a log.
 * 2. Every line is checked as it arrives and its bytes fed to a restore of the same module
 *    the node runs, which checks them again, row by row, so a refusal names the line.
 * 3. The restored state must have the header's index and digest: a dump edited or damaged
 *    anywhere the line checks cannot see is refused here.
 * 4. Only then is anything written: a snapshot at the dump's index, taken by that machine,
 *    through the node's own storage code (written, fsynced, renamed, directory fsynced), and
 *    a hard state at the dump's term with everything through the index committed. The
 *    snapshot's configuration names one voter, the node that will serve the directory.
 *
 * The directory is built beside the target and renamed into place when whole. It then holds
 * no CLUSTER_ID: the first `hivekv serve` writes it.
 */
import { readdir, rename, rm, stat } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { bootstrapConfiguration } from '../core/raft/configuration.js';
import type { SnapshotMeta } from '../core/raft/types.js';
import { FORMAT_VERSION, IDEMPOTENCY_BYTES_MAX, SNAPSHOT_MAGIC } from '../machine/abi.js';
import type { QuotaSettings } from '../machine/commands.js';
import { StateMachine } from '../machine/state-machine.js';
import { MEMBER_ID_FILE, writeIdFile } from '../node/cluster-id-file.js';
import { lockDataDir } from '../node/data-lock.js';
import { FileStorage } from '../storage/file-storage.js';
import { makeDirectories } from '../storage/make-directories.js';
import { fsyncDirectory } from '../storage/wal.js';
import {
  DumpError, type DumpHeader, parseLine, readEnd, readHeader, readIdempotency, readRow,
  readTenant, type RowLine,
} from './dump-format.js';
import {
  EXPIRES_NEVER_RAW, type IdempotencyRecord, ROW_HEADER_BYTES, SNAPSHOT_ROW_BYTES_MAX,
} from './snapshot-items.js';
import { openMachineSnapshot } from './export.js';

/** The target directory cannot take an import. */
export class ImportTargetError extends Error {
  override readonly name = 'ImportTargetError';
}

export interface ImportOptions {
  /** The id of the node that will serve the directory (its only voter); `n1` by default. */
  readonly nodeId?: string;
}

export interface ImportResult {
  readonly index: number;
  readonly term: number;
  readonly digest: string;
  readonly tenants: number;
  readonly rows: number;
  readonly snapshotBytes: number;
}

/** Refuses a target that exists and is not an empty directory. */
export async function checkImportTarget(dir: string): Promise<void> {
  const info = await stat(dir).catch(() => null);
  if (info === null) return;
  if (!info.isDirectory()) throw new ImportTargetError(`${dir} exists and is not a directory`);
  const names = await readdir(dir);
  if (names.length > 0) {
    throw new ImportTargetError(`${dir} is not empty (it holds ${names.slice(0, 3).join(', ')}` +
      `${names.length > 3 ? ', ...' : ''}): import only into an empty or new directory`);
  }
}

const NO_LIMIT = -1n;

class Bytes {
  private readonly parts: Uint8Array[] = [];
  private length = 0;

  u8(v: number): this { return this.push(Uint8Array.of(v)); }
  u32(v: number): this {
    const b = new Uint8Array(4);
    new DataView(b.buffer).setUint32(0, v, true);
    return this.push(b);
  }
  i64(v: bigint): this {
    const b = new Uint8Array(8);
    new DataView(b.buffer).setBigInt64(0, v, true);
    return this.push(b);
  }
  str(v: Uint8Array): this { return this.u32(v.length).push(v); }
  push(b: Uint8Array): this {
    this.parts.push(b);
    this.length += b.length;
    return this;
  }
  done(): Uint8Array {
    const out = new Uint8Array(this.length);
    let at = 0;
    for (const part of this.parts) {
      out.set(part, at);
      at += part.length;
    }
    return out;
  }
}

function limitOf(v: number | null): bigint {
  return v === null ? NO_LIMIT : BigInt(v);
}

/** The snapshot's bytes before its tenants: magic, format, index, time, version, pause. */
function snapshotHead(h: DumpHeader): Uint8Array {
  return new Bytes().u32(SNAPSHOT_MAGIC).u32(FORMAT_VERSION).i64(BigInt(h.index))
    .i64(BigInt(h.lastTimeMs)).i64(BigInt(h.lastVersion)).u8(h.paused ? 1 : 0)
    .u32(h.tenantCount).done();
}

function tenantBytes(name: Uint8Array, quota: QuotaSettings | null): Uint8Array {
  const b = new Bytes().str(name);
  if (quota === null) return b.u8(0).done();
  return b.u8(1).u8(quota.enabled ? 1 : 0).i64(limitOf(quota.maxRows))
    .i64(limitOf(quota.maxBytes)).i64(limitOf(quota.maxReadsPerSec))
    .i64(limitOf(quota.maxWritesPerSec)).done();
}

/** One idempotency record as the section holds it (docs/codec.md). */
function recordBytes(record: IdempotencyRecord): Uint8Array {
  const b = new Bytes().str(record.tenant).str(record.key)
    .i64(BigInt.asIntN(64, BigInt(`0x${record.fingerprint}`))).i64(BigInt(record.expiresAt));
  return (record.answer === null ? b.u8(0) : b.u8(1).str(record.answer)).done();
}

/** After the tenants: an empty dedup table, the idempotency records, the row count. */
function sectionsAndCount(records: readonly Uint8Array[], rowCount: number): Uint8Array {
  const recordsLength = records.reduce((sum, r) => sum + r.length, 0);
  const b = new Bytes().u32(4).u32(0).u32(4 + recordsLength).u32(records.length);
  for (const record of records) b.push(record);
  return b.i64(BigInt(rowCount)).done();
}

/** Idempotency record bytes an import gathers at most (the machine keeps at most half). */
const RECORD_BYTES_MAX = 2 * IDEMPOTENCY_BYTES_MAX;

/** The store key: tenant id (u32 big-endian), namespace, a zero byte, key. */
function storeKeyOf(tenantId: number, row: RowLine): Uint8Array {
  const k = new Uint8Array(4 + row.ns.length + 1 + row.key.length);
  new DataView(k.buffer).setUint32(0, tenantId, false);
  k.set(row.ns, 4);
  k.set(row.key, 5 + row.ns.length);
  return k;
}

/** A row as its u32 length and row buffer (docs/codec.md, "Snapshot"). */
function rowBytes(storeKey: Uint8Array, row: RowLine): Uint8Array {
  const length = ROW_HEADER_BYTES + storeKey.length + row.value.length;
  const out = new Uint8Array(4 + length);
  const v = new DataView(out.buffer);
  v.setUint32(0, length, true);
  v.setBigInt64(4, BigInt(row.version), true);
  v.setBigInt64(12, row.expiresAt === null ? EXPIRES_NEVER_RAW : BigInt(row.expiresAt), true);
  v.setBigInt64(20, BigInt(row.updatedAt), true);
  v.setUint32(28, storeKey.length, true);
  v.setUint32(32, 0, true);
  out.set(storeKey, 4 + ROW_HEADER_BYTES);
  out.set(row.value, 4 + ROW_HEADER_BYTES + storeKey.length);
  return out;
}

function compareBytes(a: Uint8Array, b: Uint8Array): number {
  return Buffer.compare(Buffer.from(a.buffer, a.byteOffset, a.byteLength),
    Buffer.from(b.buffer, b.byteOffset, b.byteLength));
}

/**
 * A dump's lines fed one at a time into a restore of `machine`, each checked as it comes;
 * `finish` swaps the state in and checks it against the header.
 */
export class DumpRestorer {
  private header: DumpHeader | null = null;
  /** Tenant names (as latin1 of their bytes) to their ids: their place in the table. */
  private readonly tenantIds = new Map<string, number>();
  private records: Uint8Array[] = [];
  private recordsRead = 0;
  private recordBytes = 0;
  private readonly recordKeys = new Set<string>();
  private sectionsFed = false;
  private rows = 0;
  private ended = false;
  private previousKey: Uint8Array | null = null;
  /** Lines read so far. */
  line = 0;

  constructor(private readonly machine: StateMachine) {
    machine.restoreBegin();
  }

  private feed(bytes: Uint8Array, what: string): void {
    try {
      this.machine.restoreChunk(bytes);
    } catch (error) {
      throw new DumpError(this.line, `${what} refused by the machine: ` +
        (error as Error).message.replace(/^restore: /, ''));
    }
  }

  /** Takes the next line (without its newline). Throws DumpError naming the line. */
  take(text: string): void {
    const line = ++this.line;
    if (this.ended) {
      if (text.trim() === '') return;
      throw new DumpError(line, 'a line follows the end line');
    }
    if (text.trim() === '') throw new DumpError(line, 'an empty line inside the dump');
    const o = parseLine(text, line);
    const header = this.header;
    if (header === null) {
      this.header = readHeader(o, line);
      this.feed(snapshotHead(this.header), 'the header');
      this.feedSectionsOnceDue(this.header);
    } else if (this.tenantIds.size < header.tenantCount) {
      this.takeTenant(o, line, header);
    } else if (this.recordsRead < header.idempotencyRecords) {
      this.takeRecord(o, line, header);
    } else if (this.rows < header.rowCount) {
      this.takeRow(o, line, header);
    } else {
      readEnd(o, line, header);
      this.ended = true;
    }
  }

  private takeTenant(o: Record<string, unknown>, line: number, header: DumpHeader): void {
    const tenant = readTenant(o, line);
    const name = Buffer.from(tenant.name).toString('latin1');
    if (this.tenantIds.has(name)) throw new DumpError(line, 'a tenant listed twice');
    this.tenantIds.set(name, this.tenantIds.size);
    this.feed(tenantBytes(tenant.name, tenant.quota), 'the tenant');
    this.feedSectionsOnceDue(header);
  }

  private takeRecord(o: Record<string, unknown>, line: number, header: DumpHeader): void {
    const record = readIdempotency(o, line);
    const id = `${Buffer.from(record.tenant).toString('latin1')}\0` +
      Buffer.from(record.key).toString('latin1');
    if (this.recordKeys.has(id)) {
      throw new DumpError(line, 'an idempotency record for a tenant and key listed twice');
    }
    this.recordKeys.add(id);
    const bytes = recordBytes(record);
    this.recordBytes += bytes.length;
    if (this.recordBytes > RECORD_BYTES_MAX) {
      throw new DumpError(line, `the idempotency records pass ${RECORD_BYTES_MAX} bytes`);
    }
    this.records.push(bytes);
    this.recordsRead++;
    this.feedSectionsOnceDue(header);
  }

  /** Feeds the sections between the tenant table and the rows once all they hold is read. */
  private feedSectionsOnceDue(header: DumpHeader): void {
    if (this.sectionsFed || this.tenantIds.size < header.tenantCount ||
      this.recordsRead < header.idempotencyRecords) return;
    this.sectionsFed = true;
    this.feed(sectionsAndCount(this.records, header.rowCount), 'the idempotency records');
    this.records = [];
  }

  private takeRow(o: Record<string, unknown>, line: number, header: DumpHeader): void {
    const row = readRow(o, line, header);
    const tenantId = this.tenantIds.get(Buffer.from(row.tenant).toString('latin1'));
    if (tenantId === undefined) {
      throw new DumpError(line, 'the row\'s tenant has no tenant line');
    }
    const storeKey = storeKeyOf(tenantId, row);
    if (this.previousKey !== null && compareBytes(this.previousKey, storeKey) >= 0) {
      throw new DumpError(line, 'rows out of order (or a key twice): rows must stay in the ' +
        'order export wrote them (by tenant line, then namespace, then key, bytewise)');
    }
    const bytes = rowBytes(storeKey, row);
    if (bytes.length - 4 > SNAPSHOT_ROW_BYTES_MAX) {
      throw new DumpError(line, `the row takes ${bytes.length - 4} bytes, over the ` +
        `${SNAPSHOT_ROW_BYTES_MAX} a snapshot row may`);
    }
    this.feed(bytes, 'the row');
    this.previousKey = storeKey;
    this.rows++;
  }

  /**
   * The dump is read: swaps the restored state in and checks that it has the header's index
   * and digest. Throws DumpError otherwise (the machine then keeps an empty state).
   */
  finish(): DumpHeader {
    const header = this.header;
    if (header === null) {
      this.machine.restoreAbort();
      throw new DumpError(0, 'the dump is empty: expected a header line first');
    }
    if (!this.ended) {
      this.machine.restoreAbort();
      const tenants = this.tenantIds.size;
      throw new DumpError(0, `the dump ends after line ${this.line} without its end line ` +
        `(${tenants} of ${header.tenantCount} tenants, ${this.rows} of ${header.rowCount} ` +
        'rows): it is truncated');
    }
    try {
      this.machine.restoreEnd();
    } catch (error) {
      throw new DumpError(0, `the machine refuses the dump: ${(error as Error).message}`);
    }
    const digest = this.machine.digest();
    if (this.machine.appliedIndex !== header.index || digest !== header.digest) {
      throw new DumpError(0, `the rows give state digest ${digest} at index ` +
        `${this.machine.appliedIndex}, but the header says ${header.digest} at ` +
        `${header.index}: the dump was changed or damaged`);
    }
    return header;
  }
}

/**
 * Builds the directory in a sibling (`<dir>.importing-<pid>`, same file system) and renames
 * it into place once it is whole and durable: an import stopped half-way (a kill, a full
 * disk) leaves no directory a node would start from as an empty store. The rename fails if
 * a node started on the target meanwhile (it is no longer empty), and nothing is lost.
 */
async function writeDataDir(dir: string, machine: StateMachine, header: DumpHeader,
  nodeId: string): Promise<number> {
  const target = resolve(dir);
  const staging = `${target}.importing-${process.pid}`;
  await rm(staging, { recursive: true, force: true });
  makeDirectories(staging);
  try {
    const total = await buildDataDir(staging, machine, header, nodeId);
    await fsyncDirectory(staging);
    await rename(staging, target).catch((error: NodeJS.ErrnoException) => {
      throw error.code === 'ENOTEMPTY' || error.code === 'EEXIST'
        ? new ImportTargetError(`${dir} was written to while the dump was imported: ` +
          'import only into an empty or new directory, with no node started on it')
        : error;
    });
    await fsyncDirectory(dirname(target));
    return total;
  } catch (error) {
    await rm(staging, { recursive: true, force: true });
    throw error;
  }
}

/**
 * Writes the directory a node starts from: the machine's snapshot at the dump's index and a
 * hard state at its term, all durable (storage.ts), with one voter, `nodeId`. Holds the
 * directory's lock meanwhile.
 */
async function buildDataDir(dir: string, machine: StateMachine, header: DumpHeader,
  nodeId: string): Promise<number> {
  const release = await lockDataDir(dir);
  try {
    const storage = new FileStorage(dir);
    await storage.recover();
    storage.setHardState({ term: header.term, votedFor: null, commitIndex: header.index });
    await storage.sync();
    const meta: SnapshotMeta = { index: header.index, term: header.term,
      timeMs: header.lastTimeMs, ...bootstrapConfiguration([nodeId]) };
    const snapshot = openMachineSnapshot(machine);
    const total = snapshot.bytes;
    const sink = await storage.createSnapshot(meta, total);
    let written = 0;
    for (const slice of snapshot.slices) {
      written += slice.length;
      await sink.write(slice);
    }
    if (written !== total) throw new Error(`snapshot: ${written} of ${total} bytes`);
    if (!(await sink.commit())) throw new Error('the snapshot was not installed');
    await storage.close();
    // The directory is the voter's: a `serve` with another --id is refused (cluster-id-file.ts).
    await writeIdFile(dir, MEMBER_ID_FILE, nodeId);
    return total;
  } finally {
    release();
  }
}

/**
 * Imports the dump read from `lines` into `dir` (empty or new). Throws ImportTargetError
 * for a directory that is not empty, DumpError naming the line for a dump that is not whole
 * and valid; in both cases nothing is written.
 */
export async function importDump(lines: AsyncIterable<string>, dir: string,
  options: ImportOptions = {}): Promise<ImportResult> {
  await checkImportTarget(dir);
  const machine = StateMachine.create();
  const restorer = new DumpRestorer(machine);
  for await (const text of lines) restorer.take(text);
  const header = restorer.finish();
  const snapshotBytes = await writeDataDir(dir, machine, header, options.nodeId ?? 'n1');
  return { index: header.index, term: header.term, digest: header.digest,
    tenants: header.tenantCount, rows: header.rowCount, snapshotBytes };
}
