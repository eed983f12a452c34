/**
 * Which proposals were applied, so a proposal that the network duplicated applies once.
 *
 * Every log entry of a call carries its origin (the proposing node's id and a random
 * incarnation drawn at its start) and a sequence number (docs/codec.md, "Entries"). A
 * follower forwards a proposal to the leader; a network that duplicates that message gets the
 * same command appended twice, and every replica skips the second copy the same way, because
 * this table is replicated state: changed only by applied entries, in log order, and carried
 * in snapshots. Each origin remembers the DEDUP_WINDOW sequence numbers below its highest;
 * at most DEDUP_ORIGINS_MAX origins are kept, the least recently applied forgotten first.
 */
import { DEDUP_WINDOW, DEDUP_ORIGINS_MAX, ORIGIN_ID_BYTES_MAX } from './abi';
import { Reader, putU32, putI64, putBytes } from './buffers';

/** Bits of the window in one word of `OriginWindow.seen`. */
const WORD_BITS: i64 = 64;

class OriginWindow {
  highestSeq: i64 = 0;
  /**
   * Which sequence numbers in (highestSeq - DEDUP_WINDOW, highestSeq] were applied: bit
   * `seq mod DEDUP_WINDOW`. A slot is cleared as the window moves past the number it held,
   * so a bit always speaks for the one number of the window that maps to it. Checking and
   * recording a number is a bit test, with no allocation (a set of numbers cost hashing and
   * a rebuild every DEDUP_WINDOW entries).
   */
  seen: StaticArray<u64> = new StaticArray<u64>(DEDUP_WINDOW / <i32>WORD_BITS);
  /** Log index of the last entry of this origin, for least-recently-applied eviction. */
  lastIndex: i64 = 0;

  has(seq: i64): bool {
    let slot = seq & (<i64>DEDUP_WINDOW - 1);
    let word = unchecked(this.seen[<i32>(slot / WORD_BITS)]);
    return (word & (<u64>1 << <u64>(slot % WORD_BITS))) != 0;
  }

  /** Records `seq` (above highestSeq - DEDUP_WINDOW); moves the window up to it. */
  add(seq: i64): void {
    if (seq > this.highestSeq) {
      // The slots of the numbers the window leaves behind are those of the numbers it takes in.
      let from = max(this.highestSeq + 1, seq - <i64>DEDUP_WINDOW + 1);
      for (let s = from; s <= seq; s++) this.set(s, false);
      this.highestSeq = seq;
    }
    this.set(seq, true);
  }

  private set(seq: i64, on: bool): void {
    let slot = seq & (<i64>DEDUP_WINDOW - 1);
    let word = <i32>(slot / WORD_BITS);
    let bit = <u64>1 << <u64>(slot % WORD_BITS);
    let w = unchecked(this.seen[word]);
    unchecked(this.seen[word] = on ? w | bit : w & ~bit);
  }
}

/** Keyed by `<incarnation>:<node id>`: strings hash by content (STYLE.md: no buffer keys). */
let origins = new Map<string, OriginWindow>();
/**
 * The last origin looked up (its id bytes and incarnation), so a run of entries from one
 * node costs a byte comparison, not a string and a map lookup.
 */
let lastKey: string = '';
let lastIdBytes: ArrayBuffer = new ArrayBuffer(0);
let lastIncarnation: u32 = 0;
let lastWindow: OriginWindow | null = null;

/** This node's own origin: its entries are the ones whose callers wait here for answers. */
let selfIdBytes: ArrayBuffer = new ArrayBuffer(0);
let selfIncarnation: u32 = 0;

export function setSelfOrigin(idPtr: usize, idLen: i32, incarnation: u32): void {
  selfIdBytes = copyBytes(idPtr, idLen);
  selfIncarnation = incarnation;
}

function copyBytes(ptr: usize, len: i32): ArrayBuffer {
  let out = new ArrayBuffer(len);
  memory.copy(changetype<usize>(out), ptr, <usize>len);
  return out;
}

function sameBytes(buf: ArrayBuffer, ptr: usize, len: i32): bool {
  return buf.byteLength == len && memory.compare(changetype<usize>(buf), ptr, <usize>len) == 0;
}

/** True when (id, incarnation) is this node's own origin. */
export function isSelf(idPtr: usize, idLen: i32, incarnation: u32): bool {
  return incarnation == selfIncarnation && sameBytes(selfIdBytes, idPtr, idLen);
}

function windowOf(idPtr: usize, idLen: i32, incarnation: u32, entryIndex: i64): OriginWindow {
  if (lastWindow != null && incarnation == lastIncarnation &&
    sameBytes(lastIdBytes, idPtr, idLen)) {
    return lastWindow!;
  }
  let key = incarnation.toString() + ':' + String.UTF8.decodeUnsafe(idPtr, <usize>idLen);
  let window: OriginWindow;
  if (origins.has(key)) {
    window = origins.get(key);
  } else {
    window = new OriginWindow();
    // Stamped before eviction, so the newcomer is never the one evicted.
    window.lastIndex = entryIndex;
    origins.set(key, window);
    evictOldest();
  }
  lastKey = key;
  lastIdBytes = copyBytes(idPtr, idLen);
  lastIncarnation = incarnation;
  lastWindow = window;
  return window;
}

/**
 * True the first time (origin, seq) applies at `entryIndex`; false for a duplicate or for a
 * sequence number too old to tell. Must be called for every applied enveloped entry, in log
 * order, on every replica.
 */
export function admit(idPtr: usize, idLen: i32, incarnation: u32, seq: i64,
  entryIndex: i64): bool {
  let window = windowOf(idPtr, idLen, incarnation, entryIndex);
  window.lastIndex = entryIndex;
  if (seq <= window.highestSeq - DEDUP_WINDOW) return false;
  if (seq <= window.highestSeq && window.has(seq)) return false;
  window.add(seq);
  return true;
}

function evictOldest(): void {
  while (origins.size > DEDUP_ORIGINS_MAX) {
    let keys = origins.keys();
    let oldest = '';
    let oldestIndex = i64.MAX_VALUE;
    for (let i = 0; i < keys.length; i++) {
      let w = origins.get(unchecked(keys[i]));
      if (w.lastIndex < oldestIndex) {
        oldestIndex = w.lastIndex;
        oldest = unchecked(keys[i]);
      }
    }
    origins.delete(oldest);
    if (oldest == lastKey) lastWindow = null;
  }
}

function sortedKeys(): Array<string> {
  let keys = origins.keys();
  keys.sort((a: string, b: string): i32 => (a < b ? -1 : a > b ? 1 : 0));
  return keys;
}

/**
 * The table in canonical form (origins sorted by key, each origin's sequence numbers inside
 * the window, ascending), so equal tables give equal bytes whenever they were pruned:
 *   u32 originCount, then per origin: string key, i64 highestSeq, i64 lastIndex,
 *   u32 seqCount, seqCount x i64 seq
 */
export function writeDedup(): void {
  let keys = sortedKeys();
  putU32(<u32>keys.length);
  for (let i = 0; i < keys.length; i++) {
    let key = unchecked(keys[i]);
    let w = origins.get(key);
    let name = String.UTF8.encode(key);
    putBytes(changetype<usize>(name), <usize>name.byteLength);
    putI64(w.highestSeq);
    putI64(w.lastIndex);
    let seqs = new Array<i64>();
    for (let seq = max<i64>(1, w.highestSeq - DEDUP_WINDOW + 1); seq <= w.highestSeq; seq++) {
      if (w.has(seq)) seqs.push(seq);
    }
    putU32(<u32>seqs.length);
    for (let j = 0; j < seqs.length; j++) putI64(unchecked(seqs[j]));
  }
}

/** A table read from a snapshot, not yet in force (see `installDedup`). */
export class DedupTable {
  origins: Map<string, OriginWindow> = new Map<string, OriginWindow>();
}

/** Puts a table read by `readDedup` in force (an empty one for a snapshot without). */
export function installDedup(table: DedupTable): void {
  origins = table.origins;
  lastKey = '';
  lastWindow = null;
}

/**
 * Reads a table written by `writeDedup`; null when any byte does not check out. The table in
 * force is untouched until `installDedup`.
 */
export function readDedup(rd: Reader): DedupTable | null {
  let count = rd.u32();
  if (rd.failed || count > <u32>DEDUP_ORIGINS_MAX) return null;
  let table = new DedupTable();
  for (let i: u32 = 0; i < count; i++) {
    let p = rd.bytes(<u32>(ORIGIN_ID_BYTES_MAX + 12), 'dedup origin');
    if (rd.failed) return null;
    let key = String.UTF8.decodeUnsafe(p, rd.lastLen);
    let w = new OriginWindow();
    w.highestSeq = rd.i64();
    w.lastIndex = rd.i64();
    let seqs = rd.u32();
    if (rd.failed || seqs > <u32>DEDUP_WINDOW || w.highestSeq < 0) return null;
    for (let j: u32 = 0; j < seqs; j++) {
      let seq = rd.i64();
      if (rd.failed || seq < 1 || seq <= w.highestSeq - DEDUP_WINDOW || seq > w.highestSeq) {
        return null;
      }
      // highestSeq is already in place, so this only sets the bit.
      w.add(seq);
    }
    table.origins.set(key, w);
  }
  return table;
}

// ---- the snapshot's dedup section (snapshot.ts) ----

/** Largest dedup section a snapshot may carry, in bytes. */
export const DEDUP_SECTION_BYTES_MAX: u32 = 64 * 1024 * 1024;

/** A table read by a restore that has not swapped in yet. */
let staged: DedupTable | null = null;

/**
 * Writes the section's content (not its length, which the caller writes) to the output
 * region, as the table is now. Called when a snapshot begins.
 */
export function writeDedupSection(): void {
  writeDedup();
}

/**
 * Reads a section's content (the reader covers exactly its bytes) into a staged table;
 * returns an empty string or why the bytes are not a dedup section. Changes no live state.
 */
export function readDedupSection(rd: Reader): string {
  let table = readDedup(rd);
  if (table == null || rd.pos != rd.end) return 'bad dedup section';
  staged = table;
  return '';
}

/** Makes the staged table live (a restore's swap) or, with nothing staged, empties it. */
export function installDedupSection(): void {
  installDedup(staged != null ? staged! : new DedupTable());
  staged = null;
}

/** Drops a staged table (a failed or abandoned restore). */
export function discardDedupSection(): void {
  staged = null;
}
