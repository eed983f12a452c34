/**
 * The simulated durable log: a `SimDisk` per node that outlives crashes, and a `SimStorage`
 * per node incarnation that implements the production `Storage` seam over it.
 *
 * Semantics follow host/storage/storage.ts: `append` may overwrite a suffix; nothing is
 * durable until `sync()` resolves (through the scheduler, at a simulated fsync latency);
 * hard state and snapshots; snapshots drop the log records they cover. Faults, all drawn
 * from the run's PRNG: a crash loses what was not synced, or (`wal.torn-write`) keeps a
 * prefix of it with its last record torn, which recovery cuts; a bit flip on read
 * (`disk.bit-flip`) must be caught by the per-record checksum, and `recover()` then rejects
 * with `StorageCorruptionError`; a failed fsync (`disk.fsync-fail`) rejects `sync()`; a spell
 * with no room for snapshots (`disk.no-room`): `snapshotRoomBytes()` says 0, and starting or
 * writing a snapshot meanwhile fails with `SnapshotNoRoomError`, as a full volume does; a
 * spell below the free-space floor (space-spells.ts): `isLowOnSpace()` says true.
 */
import { decodeConfigEntry } from '../../host/core/raft/configuration.js';
import type {
  Configuration, Entry, HardState, Snapshot, SnapshotMeta,
} from '../../host/core/raft/types.js';
import { EMPTY_HARD_STATE } from '../../host/core/raft/types.js';
import {
  SnapshotNoRoomError, StorageCorruptionError, type RecoveredState, type SnapshotSink,
  type Storage,
} from '../../host/storage/storage.js';
import type { Faults } from './faults.js';
import type { SimRandom } from './random.js';
import type { SimScheduler } from './scheduler.js';
import type { Trace } from './trace.js';

/** Records one disk holds; the driver snapshots long before, so this only catches a leak. */
export const DISK_RECORDS_MAX = 1_000_000;
const FSYNC_US_MIN = 100;
const FSYNC_US_MAX = 5_000;
const SLOW_FSYNC_US_MAX = 200_000;
const READ_US = 500;
const SNAPSHOT_WRITE_US = 2_000;
/** Simulated time to write or read one chunk of a snapshot. */
const SNAPSHOT_CHUNK_US = 200;
/** The longest spell of no room (`disk.no-room`). */
const NO_ROOM_US_MAX = 10_000_000;

/** FNV-1a over bytes, continuing from `hash`; the simulated checksum and the data hash. */
export function fnv1a(bytes: Uint8Array, hash = 0x811c9dc5): number {
  let h = hash >>> 0;
  for (let i = 0; i < bytes.length; i++) {
    h ^= bytes[i] as number;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

function mix(hash: number, value: number): number {
  let h = hash;
  for (let k = 0; k < 7; k++) {
    h = Math.imul(h ^ (Math.floor(value / 2 ** (8 * k)) & 0xff), 0x01000193) >>> 0;
  }
  return h;
}

/** Checksum of a whole record: header fields and data. */
export function entryChecksum(entry: Entry): number {
  let h = mix(mix(mix(0x811c9dc5, entry.term), entry.index), entry.timeMs);
  h = mix(h, entry.type === 'normal' ? 1 : entry.type === 'empty' ? 2 : 3);
  return fnv1a(entry.data, h);
}

function hardStateChecksum(hs: HardState): number {
  const vote = new TextEncoder().encode(hs.votedFor ?? '\u0000');
  return fnv1a(vote, mix(mix(0x811c9dc5, hs.term), hs.commitIndex));
}

/** One WAL record as it sits on the simulated disk. */
interface DiskRecord {
  entry: Entry;
  readonly checksum: number;
  /** Written partly at a crash: recovery must cut it (it can only be the last record). */
  readonly torn: boolean;
}

type PendingOp =
  | { readonly kind: 'append'; readonly entries: readonly Entry[] }
  | { readonly kind: 'hardState'; readonly hardState: HardState };

/** A snapshot as it sits on the simulated disk: bytes and all. */
export interface SimSnapshot {
  readonly meta: SnapshotMeta;
  readonly data: Uint8Array;
}

/** A node's disk: survives crashes; only `SimStorage` changes it. */
/** What of a log stays after a snapshot at `meta` lands: nothing if it conflicts there. */
function afterSnapshot<T>(log: readonly T[], entryOf: (item: T) => Entry,
  meta: SnapshotMeta): T[] {
  const atIndex = log.find((item) => entryOf(item).index === meta.index);
  if (atIndex !== undefined && entryOf(atIndex).term !== meta.term) return [];
  return log.filter((item) => entryOf(item).index > meta.index);
}

export class SimDisk {
  hardState: HardState = EMPTY_HARD_STATE;
  hardStateSum = hardStateChecksum(EMPTY_HARD_STATE);
  snapshot: SimSnapshot | null = null;
  snapshotSum = 0;
  /** Durable records after the snapshot, contiguous by index. */
  records: DiskRecord[] = [];
  /** A bit flipped in what recovery reads: the node's data is lost for good. */
  corrupted = false;
  readonly fsyncBaseUs: number;

  constructor(readonly nodeId: string, rng: SimRandom) {
    this.fsyncBaseUs = rng.between(FSYNC_US_MIN, FSYNC_US_MAX);
  }

  /** Index of the last durable, untorn record, or the snapshot's index. */
  lastDurableIndex(): number {
    for (let i = this.records.length - 1; i >= 0; i--) {
      const record = this.records[i] as DiskRecord;
      if (!record.torn) return record.entry.index;
    }
    return this.snapshot?.meta.index ?? 0;
  }

  /** The durable entry at `index`, or null (compacted, absent or torn). */
  durableEntry(index: number): Entry | null {
    const first = this.records[0];
    if (first === undefined) return null;
    const record = this.records[index - first.entry.index];
    return record === undefined || record.torn ? null : record.entry;
  }

  applyOp(op: PendingOp, tearLast: boolean): void {
    if (op.kind === 'hardState') {
      this.hardState = op.hardState;
      this.hardStateSum = hardStateChecksum(op.hardState);
      return;
    }
    const firstIndex = op.entries[0]?.index;
    if (firstIndex === undefined) return;
    const head = this.records[0]?.entry.index ?? firstIndex;
    // Overwrite rule: records from firstIndex on are replaced (Raft §5.3).
    this.records.length = Math.max(0, Math.min(this.records.length, firstIndex - head));
    for (const [i, entry] of op.entries.entries()) {
      const torn = tearLast && i === op.entries.length - 1;
      this.records.push({ entry, checksum: entryChecksum(entry), torn });
    }
    if (this.records.length > DISK_RECORDS_MAX) throw new Error('sim disk: too many records');
  }

  /** The newest configuration on this disk (log, then snapshot), or null when none is. */
  latestConfiguration(): Configuration | null {
    for (let i = this.records.length - 1; i >= 0; i--) {
      const entry = (this.records[i] as DiskRecord).entry;
      if (entry.type !== 'config') continue;
      const decoded = decodeConfigEntry(entry.data);
      if (decoded !== null) return decoded.config;
    }
    return this.snapshot?.meta ?? null;
  }

  /**
   * As FileStorage does (Raft §7): a record at the snapshot's index with another term was
   * never committed, and it and everything after it go with the log the snapshot replaces;
   * otherwise the records after the snapshot stay.
   */
  saveSnapshot(meta: SnapshotMeta, data: Uint8Array): void {
    this.snapshot = { meta, data: data.slice() };
    this.snapshotSum = fnv1a(data, mix(0x811c9dc5, meta.index));
    this.records = afterSnapshot(this.records, (r) => r.entry, meta);
  }
}

export interface SimStorageHooks {
  /** May this recovery suffer a bit flip? The operator's budget of damaged nodes decides. */
  readonly mayCorrupt: () => boolean;
  /** Called after every `append` (fault injection: a crash right after it). */
  readonly onAppend?: () => void;
  /** Whether the volume is below its free-space floor now (space-spells.ts). */
  readonly lowOnSpace?: () => boolean;
}

/** One incarnation's storage. After `crash()`, nothing it does reaches the disk. */
export class SimStorage implements Storage {
  /** What the driver has written, synced or not: entries after the snapshot. */
  private volatileLog: Entry[] = [];
  private pending: PendingOp[] = [];
  /** Ops handed to a sync that has not completed, oldest first. */
  private syncing: PendingOp[][] = [];
  private lastSyncDoneUs = 0;
  private dead = false;
  /** A spell of no room for snapshots (`disk.no-room`) lasts until then. */
  private noRoomUntilUs = 0;

  constructor(readonly disk: SimDisk, private readonly scheduler: SimScheduler,
    private readonly rng: SimRandom, private readonly faults: Faults,
    private readonly trace: Trace, private readonly hooks: SimStorageHooks) {}

  async recover(whileLogReads?: (snapshot: Snapshot | null) => Promise<void>):
    Promise<RecoveredState> {
    const state = await this.later(READ_US, () => this.readBack());
    await whileLogReads?.(state.snapshot);
    return state;
  }

  append(entries: readonly Entry[]): void {
    const first = entries[0];
    if (first === undefined || this.dead) return;
    const head = this.volatileLog[0]?.index ?? first.index;
    const last = this.volatileLog.at(-1)?.index ?? (this.disk.snapshot?.meta.index ?? 0);
    if (first.index > last + 1) {
      throw new Error(`sim storage: append at ${first.index} leaves a hole after ${last}`);
    }
    this.volatileLog.length = Math.max(0, Math.min(this.volatileLog.length, first.index - head));
    this.volatileLog.push(...entries);
    this.pending.push({ kind: 'append', entries: [...entries] });
    this.hooks.onAppend?.();
  }

  setHardState(hardState: HardState): void {
    if (this.dead) return;
    this.pending.push({ kind: 'hardState', hardState });
  }

  /** Writes reach the simulated disk only through `sync` or a crash (a prefix of them). */
  startWrite(): void {}

  sync(): Promise<void> {
    const ops = this.pending;
    this.pending = [];
    this.syncing.push(ops);
    let latencyUs = this.disk.fsyncBaseUs + this.rng.below(this.disk.fsyncBaseUs + 1);
    if (this.faults.maybe('disk.slow-fsync')) latencyUs += this.rng.below(SLOW_FSYNC_US_MAX);
    // Syncs complete in the order they were issued, like one fsync queue.
    const doneUs = Math.max(this.scheduler.elapsedUs() + latencyUs, this.lastSyncDoneUs);
    this.lastSyncDoneUs = doneUs;
    const fail = this.faults.maybe('disk.fsync-fail');
    return this.later(doneUs - this.scheduler.elapsedUs(), () => {
      if (fail) {
        // Its writes stay unsynced, in order before every later one: the node crashes next,
        // and the crash keeps none or a prefix of them all (never later ones past a hole).
        this.trace.log(this.disk.nodeId, 'fsync FAILED');
        throw new Error('simulated fsync failure');
      }
      this.syncing.shift();
      for (const op of ops) this.disk.applyOp(op, false);
    });
  }

  async createSnapshot(meta: SnapshotMeta, dataBytes: number): Promise<SnapshotSink> {
    const installed = this.disk.snapshot?.meta.index ?? 0;
    if (meta.index < 1 || meta.index < installed) {
      throw new Error(`assertion failed: snapshot ${meta.index} is older than ${installed}`);
    }
    if (this.noRoom()) throw new SnapshotNoRoomError(meta.index, dataBytes, 'a spell of no room');
    const data = new Uint8Array(dataBytes);
    let written = 0;
    return {
      meta,
      dataBytes,
      write: (chunk) => {
        if (written + chunk.length > dataBytes) {
          return Promise.reject(new Error('assertion failed: snapshot data passes its size'));
        }
        if (this.noRoom()) return this.refusedMidway(meta, dataBytes);
        data.set(chunk, written);
        written += chunk.length;
        return this.later(SNAPSHOT_CHUNK_US, () => undefined);
      },
      finish: () => {
        if (this.noRoom()) return this.refusedMidway(meta, dataBytes);
        return this.later(SNAPSHOT_CHUNK_US, () => undefined);
      },
      commit: () => {
        if (written !== dataBytes) {
          return Promise.reject(new Error('assertion failed: snapshot committed short'));
        }
        return this.later(SNAPSHOT_WRITE_US, () => this.installSnapshot(meta, data));
      },
      abort: () => Promise.resolve(),
    };
  }

  private installSnapshot(meta: SnapshotMeta, data: Uint8Array): boolean {
    if (meta.index <= (this.disk.snapshot?.meta.index ?? 0)) return false;
    this.disk.saveSnapshot(meta, data);
    this.volatileLog = afterSnapshot(this.volatileLog, (e) => e, meta);
    this.trace.log(this.disk.nodeId, `snapshot saved at ${meta.index} t${meta.term}`);
    return true;
  }

  /** The sim keeps one snapshot: an older one is gone, as a pruned file would be. */
  readSnapshot(index: number, offset: number, length: number): Promise<Uint8Array> {
    return this.later(SNAPSHOT_CHUNK_US, () => {
      const snapshot = this.disk.snapshot;
      if (snapshot === null || snapshot.meta.index !== index) {
        throw new Error(`snapshot ${index} is gone`);
      }
      if (offset < 0 || offset + length > snapshot.data.length) {
        throw new Error(`assertion failed: read outside snapshot ${index}`);
      }
      return snapshot.data.slice(offset, offset + length);
    });
  }

  async *snapshotChunks(index: number, chunkBytes: number): AsyncGenerator<Uint8Array> {
    const snapshot = this.disk.snapshot;
    if (snapshot === null || snapshot.meta.index !== index) {
      throw new Error(`snapshot ${index} is gone`);
    }
    const data = snapshot.data;
    let offset = 0;
    do {
      const end = Math.min(data.length, offset + chunkBytes);
      const chunk = await this.later(SNAPSHOT_CHUNK_US, () => data.slice(offset, end));
      offset = end;
      if (offset === data.length &&
        fnv1a(data, mix(0x811c9dc5, snapshot.meta.index)) !== this.disk.snapshotSum) {
        throw new StorageCorruptionError(`${this.disk.nodeId}/snap`, 0, 'checksum mismatch');
      }
      yield chunk;
    } while (offset < data.length);
  }

  isLowOnSpace(): boolean {
    return this.hooks.lowOnSpace?.() ?? false;
  }

  /** Checked once a tick by a follower's driver: a spell of no room may start here. */
  snapshotRoomBytes(): number {
    if (this.noRoom()) return 0;
    if (!this.faults.maybe('disk.no-room')) return Number.POSITIVE_INFINITY;
    const spellUs = 1 + this.rng.below(NO_ROOM_US_MAX);
    this.noRoomUntilUs = this.scheduler.elapsedUs() + spellUs;
    this.trace.log(this.disk.nodeId, `no room for snapshots for ${Math.ceil(spellUs / 1000)} ms`);
    return 0;
  }

  /** A snapshot's bytes the volume refuses in a spell of no room, as ENOSPC would. */
  private refusedMidway(meta: SnapshotMeta, dataBytes: number): Promise<never> {
    this.trace.log(this.disk.nodeId, `snapshot ${meta.index}: no room midway`);
    return Promise.reject(new SnapshotNoRoomError(meta.index, dataBytes,
      'the volume refused its bytes'));
  }

  /** In a spell of no room; a healed run (faults off) has room. */
  private noRoom(): boolean {
    return this.faults.active && this.scheduler.elapsedUs() < this.noRoomUntilUs;
  }

  close(): Promise<void> {
    return Promise.resolve();
  }

  /** The log as the driver wrote it (synced or not), after the durable snapshot. */
  logView(): { snapshotIndex: number; snapshotTerm: number; entries: readonly Entry[] } {
    const meta = this.disk.snapshot?.meta;
    return { snapshotIndex: meta?.index ?? 0, snapshotTerm: meta?.term ?? 0,
      entries: this.volatileLog };
  }

  /** The entry the driver wrote at `index` (synced or not), or null. */
  volatileEntry(index: number): Entry | null {
    const head = this.volatileLog[0]?.index;
    if (head === undefined) return null;
    return this.volatileLog[index - head] ?? null;
  }

  /**
   * The process died. Unsynced writes are lost, or with `wal.torn-write` a prefix of them
   * reaches the disk with its last record torn. Pending promises never settle.
   */
  crash(): void {
    if (this.dead) return;
    const unsynced = this.die();
    if (unsynced.length === 0 || !this.faults.maybe('wal.torn-write')) return;
    const keep = this.rng.between(1, unsynced.length);
    for (let i = 0; i < keep; i++) {
      this.disk.applyOp(unsynced[i] as PendingOp, i === keep - 1);
    }
    this.trace.log(this.disk.nodeId, `crash keeps ${keep}/${unsynced.length} unsynced writes`);
  }

  /**
   * The process exits cleanly (a graceful stop): what it wrote reaches the disk in order, as
   * the page cache writes it back, and nothing of this incarnation runs afterwards.
   */
  exitCleanly(): void {
    if (this.dead) return;
    for (const op of this.die()) this.disk.applyOp(op, false);
  }

  /** This incarnation ends: nothing of it runs after; returns its unsynced writes in order. */
  private die(): PendingOp[] {
    this.dead = true;
    const unsynced = [...this.syncing.flat(), ...this.pending];
    this.syncing = [];
    this.pending = [];
    return unsynced;
  }

  /** Runs `work` after `delayUs` of simulated time, unless the process died meanwhile. */
  private later<T>(delayUs: number, work: () => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.scheduler.atDelayUs(delayUs, '', () => {
        if (this.dead) return;
        try {
          resolve(work());
        } catch (error) {
          reject(error);
        }
      });
    });
  }

  private readBack(): RecoveredState {
    const disk = this.disk;
    if (!disk.corrupted && this.hooks.mayCorrupt() && this.faults.maybe('disk.bit-flip')) {
      this.flipOneBit();
    }
    // Cut a torn tail: only the last record may be torn.
    const last = disk.records.at(-1);
    if (last !== undefined && last.torn) disk.records.pop();
    if (hardStateChecksum(disk.hardState) !== disk.hardStateSum) {
      throw new StorageCorruptionError(`${disk.nodeId}/hardstate`, 0, 'checksum mismatch');
    }
    if (disk.snapshot !== null &&
      fnv1a(disk.snapshot.data, mix(0x811c9dc5, disk.snapshot.meta.index)) !== disk.snapshotSum) {
      throw new StorageCorruptionError(`${disk.nodeId}/snap`, 0, 'checksum mismatch');
    }
    this.verifyRecords();
    this.volatileLog = disk.records.map((r) => r.entry);
    // As FileStorage does: commitIndex is volatile in Raft (Figure 2), and only an entry the
    // log holds may be claimed committed; a hard state can reach the disk before the entries.
    const snapshotIndex = disk.snapshot?.meta.index ?? 0;
    const lastIndex = this.volatileLog.at(-1)?.index ?? snapshotIndex;
    const commitIndex = Math.max(snapshotIndex, Math.min(disk.hardState.commitIndex, lastIndex));
    const snapshot = disk.snapshot === null ? null
      : { meta: disk.snapshot.meta, dataBytes: disk.snapshot.data.length };
    return { hardState: { ...disk.hardState, commitIndex }, snapshot,
      entries: [...this.volatileLog] };
  }

  private verifyRecords(): void {
    const disk = this.disk;
    let expected = (disk.records[0]?.entry.index ?? 0);
    const snapshotIndex = disk.snapshot?.meta.index ?? 0;
    if (disk.records.length > 0 && expected > snapshotIndex + 1) {
      throw new StorageCorruptionError(`${disk.nodeId}/wal`, 0, `log starts at ${expected}`);
    }
    for (const [at, record] of disk.records.entries()) {
      if (record.torn || entryChecksum(record.entry) !== record.checksum) {
        throw new StorageCorruptionError(`${disk.nodeId}/wal`, at, 'record checksum mismatch');
      }
      if (record.entry.index !== expected) {
        throw new StorageCorruptionError(`${disk.nodeId}/wal`, at, 'indexes not contiguous');
      }
      expected++;
    }
  }

  /** Damages one stored item in place, as a flipped bit on the medium would. */
  private flipOneBit(): void {
    const disk = this.disk;
    disk.corrupted = true;
    const target = this.rng.below(disk.records.length + 2);
    if (target < disk.records.length) {
      const record = disk.records[target] as DiskRecord;
      const data = record.entry.data.slice();
      if (data.length === 0) {
        record.entry = { ...record.entry, timeMs: record.entry.timeMs ^ 1 };
      } else {
        const bit = this.rng.below(data.length * 8);
        data[bit >> 3] = (data[bit >> 3] as number) ^ (1 << (bit & 7));
        record.entry = { ...record.entry, data };
      }
    } else if (target === disk.records.length && disk.snapshot !== null &&
      disk.snapshot.data.length > 0) {
      const data = disk.snapshot.data;
      const bit = this.rng.below(data.length * 8);
      data[bit >> 3] = (data[bit >> 3] as number) ^ (1 << (bit & 7));
    } else {
      disk.hardState = { ...disk.hardState, term: disk.hardState.term + 1 };
    }
    this.trace.log(disk.nodeId, `bit flip on read (item ${target})`);
  }
}
