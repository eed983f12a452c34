/**
 * The entries of the in-memory Raft log (log.ts), kept as columns instead of an object each.
 *
 * Why: the log holds every entry since the last snapshot (100,000 by default), and each
 * entry was an `Entry` and a `Uint8Array` (a follower's also an `ArrayBuffer` of its own),
 * about 200 bytes of JavaScript heap that outlived two young-generation collections and was
 * copied by both, then promoted, then marked by every full collection until a snapshot
 * compacted it away. Under puts at 64 connections that was about 0.97 MB per scavenge,
 * three quarters of what each promoted (docs/performance.md, "Log entries the collector no
 * longer copies"). Here an entry is a row of typed arrays (term, time, type, where its bytes are);
 * its bytes stay in a buffer shared by many entries: the slab its proposal was cut from, or
 * one of this store's own slabs, into which a small entry is copied when it came in a buffer
 * of its own or as a view into a peer's frame (a follower's, message-codec.ts), which the log
 * must not keep alive. An `Entry` is made when a caller asks for one and is dropped young.
 *
 * Pure: no I/O.
 */
import type { Entry, EntryType } from './types.js';

const TYPES: readonly EntryType[] = ['normal', 'empty', 'config'];
const TYPE_CODES: Readonly<Record<EntryType, number>> = { normal: 0, empty: 1, config: 2 };
const CAPACITY_MIN = 1024;
/** The store's own slabs, into which small entries that came in buffers of their own go. */
const SLAB_BYTES = 256 * 1024;
/** A buffer this large is shared by many entries already: entries in it are not copied. */
const SHARED_BUFFER_BYTES_MIN = 32 * 1024;
/** An entry this large keeps its own buffer: a copy would cost what it saves. */
const OWN_BYTES_MIN = 8 * 1024;
const EMPTY = new Uint8Array(0);

export class EntryColumns {
  private terms = new Float64Array(CAPACITY_MIN);
  private times = new Float64Array(CAPACITY_MIN);
  private types = new Uint8Array(CAPACITY_MIN);
  private offsets = new Float64Array(CAPACITY_MIN);
  private lengths = new Float64Array(CAPACITY_MIN);
  private buffers: Array<ArrayBufferLike | null> = new Array<ArrayBufferLike | null>(
    CAPACITY_MIN).fill(null);
  /** Row of entry 0. */
  private start = 0;
  private count = 0;
  private slab: ArrayBuffer | null = null;
  private slabAt = 0;

  get length(): number {
    return this.count;
  }

  /**
   * Appends `entry`'s fields; its bytes are kept where they are or copied (see above), and
   * always copied when `copy` says their buffer must not be kept (a view into a peer's frame,
   * which holds other bytes besides).
   */
  push(entry: Entry, copy = false): void {
    if (this.start + this.count === this.terms.length) this.makeRoom();
    const row = this.start + this.count;
    this.terms[row] = entry.term;
    this.times[row] = entry.timeMs;
    this.types[row] = TYPE_CODES[entry.type];
    const data = entry.data;
    // `length`, not `byteLength`: this Node compiles a typed array's `byteLength`, `buffer`
    // and `byteOffset` as generic loads (docs/performance.md), and a Uint8Array's are equal.
    const bytes = data.length;
    const buffer = copy ? null : data.buffer;
    if (bytes === 0) {
      this.buffers[row] = null;
      this.offsets[row] = 0;
    } else if (buffer !== null && (bytes >= OWN_BYTES_MIN ||
      buffer.byteLength >= SHARED_BUFFER_BYTES_MIN)) {
      this.buffers[row] = buffer;
      this.offsets[row] = data.byteOffset;
    } else if (bytes >= OWN_BYTES_MIN) {
      // A copy by the constructor: `slice` of a Buffer (a peer's frame is one) is a view.
      this.buffers[row] = new Uint8Array(data).buffer;
      this.offsets[row] = 0;
    } else {
      const at = this.room(bytes);
      new Uint8Array(this.slab!, at, bytes).set(data);
      this.buffers[row] = this.slab;
      this.offsets[row] = at;
    }
    this.lengths[row] = bytes;
    this.count++;
  }

  /** Keeps the first `keep` entries and forgets the rest. */
  truncate(keep: number): void {
    if (!(Number.isSafeInteger(keep) && keep >= 0 && keep <= this.count)) {
      throw new Error(`assertion failed: truncate to ${keep} of ${this.count}`);
    }
    this.buffers.fill(null, this.start + keep, this.start + this.count);
    this.count = keep;
    if (keep === 0) this.start = 0;
  }

  /** Forgets the first `n` entries. */
  dropFirst(n: number): void {
    if (!(Number.isSafeInteger(n) && n >= 0 && n <= this.count)) {
      throw new Error(`assertion failed: drop ${n} of ${this.count}`);
    }
    this.buffers.fill(null, this.start, this.start + n);
    this.start += n;
    this.count -= n;
    if (this.count === 0) this.start = 0;
  }

  term(i: number): number {
    return this.terms[this.row(i)]!;
  }

  timeMs(i: number): number {
    return this.times[this.row(i)]!;
  }

  type(i: number): EntryType {
    return TYPES[this.types[this.row(i)]!]!;
  }

  dataBytes(i: number): number {
    return this.lengths[this.row(i)]!;
  }

  /** Entry i as an `Entry` at log index `index`: a new object, its data a view. */
  get(i: number, index: number): Entry {
    const row = this.row(i);
    const bytes = this.lengths[row]!;
    return {
      term: this.terms[row]!,
      index,
      timeMs: this.times[row]!,
      type: TYPES[this.types[row]!]!,
      data: bytes === 0 ? EMPTY : new Uint8Array(this.buffers[row]!, this.offsets[row]!, bytes),
    };
  }

  private row(i: number): number {
    if (!(i >= 0 && i < this.count)) {
      throw new Error(`assertion failed: entry ${i} of ${this.count}`);
    }
    return this.start + i;
  }

  /**
   * Room for one more row: the live rows moved to the front when at least half the columns
   * lie before them (what compactions leave), else columns twice as long.
   */
  private makeRoom(): void {
    const capacity = this.terms.length;
    const grow = this.start < capacity / 2;
    const next = grow ? capacity * 2 : capacity;
    const from = this.start;
    const to = from + this.count;
    const move = <T extends Float64Array | Uint8Array>(column: T, make: (n: number) => T): T => {
      if (!grow) {
        column.copyWithin(0, from, to);
        return column;
      }
      const out = make(next);
      out.set(column.subarray(from, to));
      return out;
    };
    this.terms = move(this.terms, (n) => new Float64Array(n));
    this.times = move(this.times, (n) => new Float64Array(n));
    this.types = move(this.types, (n) => new Uint8Array(n));
    this.offsets = move(this.offsets, (n) => new Float64Array(n));
    this.lengths = move(this.lengths, (n) => new Float64Array(n));
    const buffers = new Array<ArrayBufferLike | null>(next).fill(null);
    for (let i = 0; i < this.count; i++) buffers[i] = this.buffers[from + i]!;
    this.buffers = buffers;
    this.start = 0;
  }

  /** Where `bytes` more bytes go in the current slab (a fresh one when they do not fit). */
  private room(bytes: number): number {
    if (this.slab === null || this.slabAt + bytes > SLAB_BYTES) {
      this.slab = new ArrayBuffer(SLAB_BYTES);
      this.slabAt = 0;
    }
    const at = this.slabAt;
    this.slabAt += (bytes + 7) & ~7;
    return at;
  }
}
