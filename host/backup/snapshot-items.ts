/**
 * Reads a machine snapshot (docs/codec.md, "Snapshot") on the host, as it streams in chunks:
 * its header, its tenant table with the quota rows, and then its rows one at a time, each
 * decoded into tenant, namespace, key, value, version, expiry and update time, and the
 * idempotency records. The dedup table is skipped (a dump does not carry it; docs/backup.md).
 *
 * Bounded: one row (a few MiB), one chunk and the idempotency section (which the machine
 * bounds, IDEMPOTENCY_BYTES_MAX) are held at a time. Pure apart from
 * pulling chunks. Throws SnapshotItemsError when the bytes are not a snapshot the machine
 * wrote (the machine checked them when it wrote them; this is a guard, not a validator).
 */
import {
  FORMAT_VERSION, FORMAT_VERSION_NO_DEDUP, FORMAT_VERSION_NO_IDEMPOTENCY, LIMIT_NONE_WIRE,
  SNAPSHOT_MAGIC,
} from '../machine/abi.js';
import type { QuotaSettings } from '../machine/commands.js';

/** A row buffer's fixed part: version, expiresAt, updatedAt (i64), key length, dead (u32). */
export const ROW_HEADER_BYTES = 32;
/** Largest row buffer a snapshot may hold (assembly/snapshot.ts SNAPSHOT_ROW_BYTES_MAX). */
export const SNAPSHOT_ROW_BYTES_MAX = 4 * 1024 * 1024;
/** `expiresAt` of a row that never expires: i64 max. */
export const EXPIRES_NEVER_RAW = 0x7fff_ffff_ffff_ffffn;
/** Largest dedup or idempotency section skipped (the machine bounds both far below this). */
const SECTION_BYTES_MAX = 1024 * 1024 * 1024;

export class SnapshotItemsError extends Error {
  override readonly name = 'SnapshotItemsError';
}

export interface SnapshotHead {
  readonly formatVersion: number;
  readonly index: number;
  readonly lastTimeMs: number;
  readonly lastVersion: number;
  readonly paused: boolean;
  /** In table order: a row's tenant id is its position here. */
  readonly tenants: readonly SnapshotTenant[];
  /** The idempotency records, oldest first (insertion order). */
  readonly idempotency: readonly IdempotencyRecord[];
  readonly rowCount: number;
}

/** A recorded answer to a keyed write call (docs/codec.md, "Idempotency records"). */
export interface IdempotencyRecord {
  readonly tenant: Uint8Array;
  /** 1 to 255 bytes of 0x20..0x7E. */
  readonly key: Uint8Array;
  /** The call's fingerprint, u64 as 16 hex digits (little-endian bytes read as a number). */
  readonly fingerprint: string;
  readonly expiresAt: number;
  /** The answer as recorded (header and body), or null when it was not kept. */
  readonly answer: Uint8Array | null;
}

export interface SnapshotTenant {
  /** The name's UTF-8 bytes, as stored. */
  readonly name: Uint8Array;
  readonly quota: QuotaSettings | null;
}

export interface SnapshotRow {
  readonly tenantId: number;
  readonly ns: Uint8Array;
  readonly key: Uint8Array;
  readonly value: Uint8Array;
  readonly version: number;
  /** null: never expires. */
  readonly expiresAt: number | null;
  readonly updatedAt: number;
}

/** Pulls exact byte counts out of a stream of chunks of any size. */
class ChunkFeed {
  private buffer: Uint8Array = new Uint8Array(0);
  private at = 0;

  constructor(private readonly source: AsyncIterator<Uint8Array>) {}

  private get available(): number {
    return this.buffer.length - this.at;
  }

  /** Appends the next chunk; false at the end of the stream. */
  private async more(): Promise<boolean> {
    const next = await this.source.next();
    if (next.done === true) return false;
    const rest = this.buffer.subarray(this.at);
    if (rest.length === 0) {
      this.buffer = next.value;
    } else {
      const joined = new Uint8Array(rest.length + next.value.length);
      joined.set(rest);
      joined.set(next.value, rest.length);
      this.buffer = joined;
    }
    this.at = 0;
    return true;
  }

  /** The next `n` bytes (a view, valid until the next call); throws when the stream ends. */
  async take(n: number, what: string): Promise<Uint8Array> {
    while (this.available < n) {
      if (!(await this.more())) {
        throw new SnapshotItemsError(`the snapshot ends inside ${what}`);
      }
    }
    const out = this.buffer.subarray(this.at, this.at + n);
    this.at += n;
    return out;
  }

  async skip(n: number, what: string): Promise<void> {
    let left = n;
    while (left > 0) {
      if (this.available === 0 && !(await this.more())) {
        throw new SnapshotItemsError(`the snapshot ends inside ${what}`);
      }
      const step = Math.min(left, this.available);
      this.at += step;
      left -= step;
    }
  }

  /** True when no byte is left. */
  async atEnd(): Promise<boolean> {
    while (this.available === 0) {
      if (!(await this.more())) return true;
    }
    return false;
  }
}

function view(bytes: Uint8Array): DataView {
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

function safe(value: bigint, what: string): number {
  if (value < 0n || value > BigInt(Number.MAX_SAFE_INTEGER)) {
    throw new SnapshotItemsError(`${what} ${value} is out of range`);
  }
  return Number(value);
}

function limit(value: bigint): number | null {
  return value === BigInt(LIMIT_NONE_WIRE) ? null : safe(value, 'a quota limit');
}

async function readTenant(feed: ChunkFeed): Promise<SnapshotTenant> {
  const length = view(await feed.take(4, 'a tenant')).getUint32(0, true);
  // A copy by the constructor: the feed's bytes may be a Buffer, whose `slice` is a view.
  const name = new Uint8Array(await feed.take(length, 'a tenant'));
  const hasQuota = (await feed.take(1, 'a tenant'))[0];
  if (hasQuota === 0) return { name, quota: null };
  const q = view(await feed.take(33, 'a quota row'));
  return { name, quota: {
    enabled: q.getUint8(0) === 1,
    maxRows: limit(q.getBigInt64(1, true)),
    maxBytes: limit(q.getBigInt64(9, true)),
    maxReadsPerSec: limit(q.getBigInt64(17, true)),
    maxWritesPerSec: limit(q.getBigInt64(25, true)),
  } };
}

/** A u32-length-prefixed section, skipped. */
async function skipSection(feed: ChunkFeed, what: string): Promise<void> {
  const length = view(await feed.take(4, what)).getUint32(0, true);
  if (length > SECTION_BYTES_MAX) throw new SnapshotItemsError(`${what} too long`);
  await feed.skip(length, what);
}

/** Reads a u32-length-prefixed byte string at `at` of `v`; returns it and the next offset. */
function lengthPrefixed(v: DataView, at: number, what: string): [Uint8Array, number] {
  if (at + 4 > v.byteLength) throw new SnapshotItemsError(`${what} overruns its section`);
  const length = v.getUint32(at, true);
  if (at + 4 + length > v.byteLength) throw new SnapshotItemsError(`${what} overruns its section`);
  return [new Uint8Array(v.buffer, v.byteOffset + at + 4, length).slice(), at + 4 + length];
}

/** The idempotency section: u32 count, then per record tenant, key, fingerprint, expiry, answer. */
async function readIdempotency(feed: ChunkFeed): Promise<IdempotencyRecord[]> {
  const what = 'the idempotency records';
  const length = view(await feed.take(4, what)).getUint32(0, true);
  if (length > SECTION_BYTES_MAX || length < 4) throw new SnapshotItemsError(`${what}: bad size`);
  const v = view(await feed.take(length, what));
  const count = v.getUint32(0, true);
  const out: IdempotencyRecord[] = [];
  let at = 4;
  for (let i = 0; i < count; i++) {
    const [tenant, afterTenant] = lengthPrefixed(v, at, 'a record\'s tenant');
    const [key, afterKey] = lengthPrefixed(v, afterTenant, 'a record\'s key');
    if (afterKey + 17 > v.byteLength) throw new SnapshotItemsError(`${what}: a record overruns`);
    const fingerprint = v.getBigUint64(afterKey, true).toString(16).padStart(16, '0');
    const expiresAt = safe(v.getBigInt64(afterKey + 8, true), 'a record expiry');
    const hasAnswer = v.getUint8(afterKey + 16);
    at = afterKey + 17;
    let answer: Uint8Array | null = null;
    if (hasAnswer === 1) [answer, at] = lengthPrefixed(v, at, 'a record\'s answer');
    out.push({ tenant, key, fingerprint, expiresAt, answer });
  }
  if (at !== length) throw new SnapshotItemsError(`${what}: bytes follow the last record`);
  return out;
}

async function readHead(feed: ChunkFeed): Promise<SnapshotHead> {
  const h = view(await feed.take(33, 'its header'));
  if (h.getUint32(0, true) !== SNAPSHOT_MAGIC) {
    throw new SnapshotItemsError('not a machine snapshot (bad magic)');
  }
  const formatVersion = h.getUint32(4, true);
  if (formatVersion !== FORMAT_VERSION && formatVersion !== FORMAT_VERSION_NO_DEDUP &&
    formatVersion !== FORMAT_VERSION_NO_IDEMPOTENCY) {
    throw new SnapshotItemsError(`unknown snapshot format ${formatVersion}`);
  }
  const index = safe(h.getBigInt64(8, true), 'the applied index');
  const lastTimeMs = safe(h.getBigInt64(16, true), 'the last time');
  const lastVersion = safe(h.getBigInt64(24, true), 'the last version');
  const paused = h.getUint8(32) === 1;
  const tenantCount = view(await feed.take(4, 'the tenant table')).getUint32(0, true);
  const tenants: SnapshotTenant[] = [];
  for (let i = 0; i < tenantCount; i++) tenants.push(await readTenant(feed));
  if (formatVersion !== FORMAT_VERSION_NO_DEDUP) await skipSection(feed, 'the dedup table');
  const idempotency = formatVersion === FORMAT_VERSION ? await readIdempotency(feed) : [];
  const rowCount = safe(view(await feed.take(8, 'the row count')).getBigInt64(0, true),
    'the row count');
  return { formatVersion, index, lastTimeMs, lastVersion, paused, tenants, idempotency,
    rowCount };
}

function decodeRow(buffer: Uint8Array): SnapshotRow {
  if (buffer.length < ROW_HEADER_BYTES) throw new SnapshotItemsError('a row is too short');
  const v = view(buffer);
  const keyLength = v.getUint32(24, true);
  if (keyLength < 6 || ROW_HEADER_BYTES + keyLength > buffer.length) {
    throw new SnapshotItemsError('a row\'s key overruns it');
  }
  const storeKey = buffer.subarray(ROW_HEADER_BYTES, ROW_HEADER_BYTES + keyLength);
  const zero = storeKey.indexOf(0, 4);
  if (zero <= 4 || zero >= storeKey.length - 1) {
    throw new SnapshotItemsError('a row\'s key has no namespace or no key');
  }
  const rawExpiry = v.getBigInt64(8, true);
  return {
    tenantId: view(storeKey).getUint32(0, false),
    ns: storeKey.subarray(4, zero),
    key: storeKey.subarray(zero + 1),
    value: buffer.subarray(ROW_HEADER_BYTES + keyLength),
    version: safe(v.getBigInt64(0, true), 'a row version'),
    expiresAt: rawExpiry === EXPIRES_NEVER_RAW ? null : safe(rawExpiry, 'a row expiry'),
    updatedAt: safe(v.getBigInt64(16, true), 'a row update time'),
  };
}

/**
 * A snapshot read item by item: `head` first (await it), then `rows()` once. Each row's
 * byte fields are views that stay valid only until the next row is read.
 */
export class SnapshotItems {
  private readonly feed: ChunkFeed;

  private constructor(feed: ChunkFeed, readonly head: SnapshotHead) {
    this.feed = feed;
  }

  static async open(chunks: AsyncIterable<Uint8Array>): Promise<SnapshotItems> {
    const feed = new ChunkFeed(chunks[Symbol.asyncIterator]());
    return new SnapshotItems(feed, await readHead(feed));
  }

  async *rows(): AsyncGenerator<SnapshotRow> {
    const tenantCount = this.head.tenants.length;
    for (let i = 0; i < this.head.rowCount; i++) {
      const length = view(await this.feed.take(4, 'a row')).getUint32(0, true);
      if (length > SNAPSHOT_ROW_BYTES_MAX) throw new SnapshotItemsError('a row is too long');
      const row = decodeRow(await this.feed.take(length, 'a row'));
      if (row.tenantId >= tenantCount) {
        throw new SnapshotItemsError(`a row names tenant ${row.tenantId} of ${tenantCount}`);
      }
      yield row;
    }
    if (!(await this.feed.atEnd())) {
      throw new SnapshotItemsError('bytes follow the last row');
    }
  }
}
