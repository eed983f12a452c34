/**
 * The driver's envelope around a machine command in a log entry, and the table that makes a
 * duplicated proposal apply once.
 *
 * A proposal carries its origin (node id and a random incarnation drawn at process start) and
 * a sequence number, so the node that holds the client's request can recognise its entry when
 * it applies, whichever node appended it. A network that duplicates a forwarded proposal can
 * get the same command appended twice; every replica skips the second copy the same way,
 * because the table is replicated state (it travels in the snapshot) updated only by applied
 * entries. Pure: no I/O, no clock.
 */

const ENVELOPE_FORMAT_VERSION = 1;
const ORIGIN_ID_BYTES_MAX = 64;
/** Sequence numbers of one origin remembered below its highest one. */
export const DEDUP_WINDOW = 4096;
/** Origins (node incarnations) remembered; the least recently applied is forgotten first. */
export const DEDUP_ORIGINS_MAX = 64;
const SNAPSHOT_MAGIC = 0x48_4b_53_31; // "HKS1"

export interface Origin {
  readonly nodeId: string;
  /** Random per process start, so sequence numbers never repeat across restarts. */
  readonly incarnation: number;
}

export interface Envelope {
  readonly origin: Origin;
  readonly seq: number;
  readonly command: Uint8Array;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: true });

export function encodeEnvelope(origin: Origin, seq: number, command: Uint8Array): Uint8Array {
  const id = encoder.encode(origin.nodeId);
  if (id.length > ORIGIN_ID_BYTES_MAX) throw new Error(`node id over ${ORIGIN_ID_BYTES_MAX} bytes`);
  if (!Number.isSafeInteger(seq) || seq <= 0) throw new Error(`bad sequence number ${seq}`);
  const out = new Uint8Array(2 + id.length + 4 + 8 + command.length);
  const view = new DataView(out.buffer);
  out[0] = ENVELOPE_FORMAT_VERSION;
  out[1] = id.length;
  out.set(id, 2);
  let at = 2 + id.length;
  view.setUint32(at, origin.incarnation >>> 0, true);
  view.setBigUint64(at + 4, BigInt(seq), true);
  at += 12;
  out.set(command, at);
  return out;
}

/** Returns null for bytes that are not an envelope of this format (never throws). */
export function decodeEnvelope(data: Uint8Array): Envelope | null {
  if (data.length < 2 || data[0] !== ENVELOPE_FORMAT_VERSION) return null;
  const idBytes = data[1] ?? 0;
  const at = 2 + idBytes;
  if (data.length < at + 12) return null;
  let nodeId: string;
  try {
    nodeId = decoder.decode(data.subarray(2, at));
  } catch {
    return null;
  }
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const incarnation = view.getUint32(at, true);
  const seq = Number(view.getBigUint64(at + 4, true));
  if (!Number.isSafeInteger(seq) || seq <= 0) return null;
  return { origin: { nodeId, incarnation }, seq, command: data.subarray(at + 12) };
}

interface OriginWindow {
  highestSeq: number;
  /** Sequence numbers in (highestSeq - DEDUP_WINDOW, highestSeq] already applied. */
  readonly seen: Set<number>;
  /** Log index of the last entry of this origin, for least-recently-applied eviction. */
  lastIndex: number;
}

function originKey(origin: Origin): string {
  return `${origin.incarnation}:${origin.nodeId}`;
}

/**
 * Which proposals were applied. `admit` must be called for every applied enveloped entry, in
 * log order, on every replica: that is what keeps the table identical everywhere.
 */
export class DedupTable {
  private readonly origins = new Map<string, OriginWindow>();

  /** True the first time a proposal applies; false for a duplicate or one too old to tell. */
  admit(envelope: Envelope, entryIndex: number): boolean {
    const key = originKey(envelope.origin);
    let window = this.origins.get(key);
    if (window === undefined) {
      window = { highestSeq: 0, seen: new Set(), lastIndex: entryIndex };
      this.origins.set(key, window);
      this.evictOldest();
    }
    window.lastIndex = entryIndex;
    const seq = envelope.seq;
    if (seq <= window.highestSeq - DEDUP_WINDOW || window.seen.has(seq)) return false;
    window.seen.add(seq);
    if (seq > window.highestSeq) window.highestSeq = seq;
    // Pruning is amortised: only when the set has grown to twice the window.
    if (window.seen.size > 2 * DEDUP_WINDOW) {
      const floor = window.highestSeq - DEDUP_WINDOW;
      for (const old of window.seen) if (old <= floor) window.seen.delete(old);
    }
    return true;
  }

  private evictOldest(): void {
    while (this.origins.size > DEDUP_ORIGINS_MAX) {
      let oldestKey: string | null = null;
      let oldestIndex = Infinity;
      for (const [key, window] of this.origins) {
        if (window.lastIndex < oldestIndex) {
          oldestIndex = window.lastIndex;
          oldestKey = key;
        }
      }
      if (oldestKey === null) return;
      this.origins.delete(oldestKey);
    }
  }

  /**
   * Canonical JSON (origins and seqs sorted, only seqs inside the window), so equal tables
   * give equal bytes whenever their pruning happened.
   */
  serialize(): Uint8Array {
    const rows = [...this.origins.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([key, w]) => [key, w.highestSeq, w.lastIndex, [...w.seen]
        .filter((seq) => seq > w.highestSeq - DEDUP_WINDOW).sort((x, y) => x - y)]);
    return encoder.encode(JSON.stringify(rows));
  }

  static deserialize(bytes: Uint8Array): DedupTable {
    const table = new DedupTable();
    const rows = JSON.parse(decoder.decode(bytes)) as Array<[string, number, number, number[]]>;
    for (const [key, highestSeq, lastIndex, seen] of rows) {
      table.origins.set(key, { highestSeq, lastIndex, seen: new Set(seen) });
    }
    return table;
  }
}

/** Largest dedup table a snapshot may carry (64 origins x 4096 sequence numbers, as JSON). */
const SNAPSHOT_TABLE_BYTES_MAX = 64 * 1024 * 1024;

/**
 * The snapshot the driver stores is its dedup table, then the machine's snapshot bytes:
 * u32 magic, u32 tableBytes, the table (canonical JSON), then the machine's bytes. This is
 * everything before the machine's bytes.
 */
export function encodeSnapshotPrefix(dedup: DedupTable): Uint8Array {
  const table = dedup.serialize();
  const out = new Uint8Array(8 + table.length);
  const view = new DataView(out.buffer);
  view.setUint32(0, SNAPSHOT_MAGIC, true);
  view.setUint32(4, table.length, true);
  out.set(table, 8);
  return out;
}

/**
 * Splits a driver snapshot fed in chunks of any size: gathers the prefix (magic and dedup
 * table) and hands back the machine's bytes of each chunk as they come.
 */
export class SnapshotPrefixReader {
  private head = new Uint8Array(8);
  private headBytes = 0;
  private table: Uint8Array | null = null;
  private tableBytes = 0;
  /** The dedup table, once the whole prefix has arrived. */
  dedup: DedupTable | null = null;

  /** The part of `chunk` that belongs to the machine. Throws on a bad prefix. */
  take(chunk: Uint8Array): Uint8Array {
    let at = 0;
    if (this.headBytes < 8) {
      const n = Math.min(8 - this.headBytes, chunk.length);
      this.head.set(chunk.subarray(0, n), this.headBytes);
      this.headBytes += n;
      at = n;
      if (this.headBytes < 8) return chunk.subarray(chunk.length);
      const view = new DataView(this.head.buffer);
      if (view.getUint32(0, true) !== SNAPSHOT_MAGIC) {
        throw new Error('snapshot data does not start with the driver snapshot magic');
      }
      const length = view.getUint32(4, true);
      if (length > SNAPSHOT_TABLE_BYTES_MAX) throw new Error('snapshot dedup table too large');
      this.table = new Uint8Array(length);
    }
    if (this.dedup === null && this.table !== null) {
      const n = Math.min(this.table.length - this.tableBytes, chunk.length - at);
      this.table.set(chunk.subarray(at, at + n), this.tableBytes);
      this.tableBytes += n;
      at += n;
      if (this.tableBytes < this.table.length) return chunk.subarray(chunk.length);
      this.dedup = DedupTable.deserialize(this.table);
      this.table = null;
    }
    return chunk.subarray(at);
  }
}
