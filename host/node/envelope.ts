/**
 * The driver's envelope around a machine command in a log entry: the proposal's origin (node
 * id and a random incarnation drawn at process start) and a sequence number, so the node that
 * holds the client's request can recognise its entry when it applies, whichever node
 * appended it, and so a proposal the network duplicated applies once. The machine reads the
 * envelope and keeps the table of applied proposals itself (assembly/dedup.ts), as replicated
 * state, so every replica and every replay skips the same duplicates.
 *
 *   envelope := u8 ENVELOPE_FORMAT_VERSION, u8 idLength, id (UTF-8), u32 incarnation,
 *               u64 seq, command
 *
 * Pure: no I/O, no clock.
 */
import { putU32, putU64 } from '../core/little-endian.js';
import { Slabs } from '../core/slabs.js';
import { ENVELOPE_FORMAT_VERSION, ORIGIN_ID_BYTES_MAX } from '../machine/abi.js';

/** The driver snapshot of releases before the dedup table moved into the machine. */
const LEGACY_SNAPSHOT_MAGIC = 0x48_4b_53_31; // "HKS1"

export interface Origin {
  readonly nodeId: string;
  /** Random per process start, so sequence numbers never repeat across restarts. */
  readonly incarnation: number;
}

const encoder = new TextEncoder();

/**
 * The fixed head of every envelope one origin proposes (format, id, incarnation), encoded once:
 * a node proposes with one origin for its whole life, and this runs for every write.
 */
const headsByOrigin = new WeakMap<Origin, Uint8Array>();
/**
 * The origin asked for last and its head: a node asks for its own on every write, and a
 * comparison costs a few instructions where the map's lookup cost about 250.
 */
let lastOrigin: Origin | null = null;
let lastHead: Uint8Array = new Uint8Array(0);

function headOf(origin: Origin): Uint8Array {
  if (origin === lastOrigin) return lastHead;
  const head = headsByOrigin.get(origin) ?? newHead(origin);
  lastOrigin = origin;
  lastHead = head;
  return head;
}

function newHead(origin: Origin): Uint8Array {
  const id = encoder.encode(origin.nodeId);
  if (id.length > ORIGIN_ID_BYTES_MAX) throw new Error(`node id over ${ORIGIN_ID_BYTES_MAX} bytes`);
  const head = new Uint8Array(2 + id.length + 4);
  head[0] = ENVELOPE_FORMAT_VERSION;
  head[1] = id.length;
  head.set(id, 2);
  putU32(head, 2 + id.length, origin.incarnation >>> 0);
  headsByOrigin.set(origin, head);
  return head;
}

/**
 * Log entries' bytes: they live until a snapshot compacts them, in the order they were made,
 * so they are cut from slabs of their own (slabs.ts) rather than one fresh ArrayBuffer each
 * (an allocation outside the heap and work at every scavenge, per write).
 */
const entrySlabs = new Slabs();

/** The bytes of a log entry proposing `command` as `origin`'s proposal number `seq`. */
export function encodeEnvelope(origin: Origin, seq: number, command: Uint8Array): Uint8Array {
  if (!Number.isSafeInteger(seq) || seq <= 0) throw new Error(`bad sequence number ${seq}`);
  const head = headOf(origin);
  const out = entrySlabs.take(head.length + 8 + command.length);
  out.set(head, 0);
  let at = head.length;
  putU64(out, at, seq);
  at += 8;
  out.set(command, at);
  return out;
}

/** What `decodeEnvelope` read: the proposal's origin and number, and the command bytes. */
export interface DecodedEnvelope {
  readonly origin: Origin;
  readonly seq: number;
  readonly command: Uint8Array;
}

const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * The envelope of a normal entry's bytes, for tools that print a log; null when the bytes
 * are no valid envelope (the machine applies such an entry as a no-op).
 */
export function decodeEnvelope(data: Uint8Array): DecodedEnvelope | null {
  if (data.length < 2 || data[0] !== ENVELOPE_FORMAT_VERSION) return null;
  const idLength = data[1]!;
  if (idLength > ORIGIN_ID_BYTES_MAX || data.length < 2 + idLength + 12) return null;
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  let nodeId: string;
  try {
    nodeId = strictUtf8.decode(data.subarray(2, 2 + idLength));
  } catch {
    return null;
  }
  const at = 2 + idLength;
  const seq = view.getBigUint64(at + 4, true);
  if (seq < 1n || seq > BigInt(Number.MAX_SAFE_INTEGER)) return null;
  return { origin: { nodeId, incarnation: view.getUint32(at, true) }, seq: Number(seq),
    command: data.subarray(at + 12) };
}

/**
 * The machine's snapshot inside a stored snapshot. Snapshots of earlier releases wrap it
 * after their own dedup table (magic "HKS1"); that table is dropped, since the machine keeps
 * its own now (a duplicate straddling such a snapshot is the only proposal it could miss).
 */
export function machineSnapshotOf(data: Uint8Array): Uint8Array {
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  if (data.length < 8 || view.getUint32(0, true) !== LEGACY_SNAPSHOT_MAGIC) return data;
  const tableBytes = view.getUint32(4, true);
  if (8 + tableBytes > data.length) throw new Error('snapshot dedup table overruns the data');
  return data.subarray(8 + tableBytes);
}

/**
 * `machineSnapshotOf` for a snapshot read in chunks: passes the machine's bytes through,
 * skipping the dedup table an earlier release put in front of them.
 */
export class LegacySnapshotSkipper {
  /** Bytes still to skip; -1 while the first 8 bytes (magic, table length) are not all in. */
  private skip = -1;
  private head = new Uint8Array(0);

  /** The machine's bytes in `chunk` (possibly none). */
  take(chunk: Uint8Array): Uint8Array {
    if (this.skip < 0) {
      const joined = new Uint8Array(this.head.length + chunk.length);
      joined.set(this.head);
      joined.set(chunk, this.head.length);
      if (joined.length < 8) {
        this.head = joined;
        return new Uint8Array(0);
      }
      const view = new DataView(joined.buffer);
      const legacy = view.getUint32(0, true) === LEGACY_SNAPSHOT_MAGIC;
      this.skip = legacy ? 8 + view.getUint32(4, true) : 0;
      this.head = new Uint8Array(0);
      chunk = joined;
    }
    const dropped = Math.min(this.skip, chunk.length);
    this.skip -= dropped;
    return chunk.subarray(dropped);
  }

  /** True once the dedup table, if any, is behind: the rest was the machine's. */
  get done(): boolean {
    return this.skip === 0;
  }
}
