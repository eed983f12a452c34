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
 * The rows live in chunks of a fixed number of rows, never in one array grown by copying: a
 * log that doubled its columns copied every row it held in one turn of the loop, 12 to 30 ms
 * at 0.5 to 1M entries, a stall of every call (docs/performance.md, "The Raft log's rows in
 * chunks"). Appending takes a new chunk when the last is full, and a compaction drops the
 * chunks it passed: neither touches the rows that stay.
 *
 * Pure: no I/O.
 */
import type { Entry, EntryType } from './types.js';

const TYPES: readonly EntryType[] = ['normal', 'empty', 'config'];
const TYPE_CODES: Readonly<Record<EntryType, number>> = { normal: 0, empty: 1, config: 2 };
/** Rows per chunk as a power of two (a row's chunk is its number shifted, its slot masked). */
const CHUNK_SHIFT = 12;
/** The store's own slabs, into which small entries that came in buffers of their own go. */
const SLAB_BYTES = 256 * 1024;
/** A buffer this large is shared by many entries already: entries in it are not copied. */
const SHARED_BUFFER_BYTES_MIN = 32 * 1024;
/** An entry this large keeps its own buffer: a copy would cost what it saves. */
const OWN_BYTES_MIN = 8 * 1024;
const EMPTY = new Uint8Array(0);

/** A chunk's rows; a slot not in use holds no buffer, so it keeps no bytes alive. */
class Chunk {
  readonly terms: Float64Array;
  readonly times: Float64Array;
  readonly types: Uint8Array;
  readonly offsets: Float64Array;
  readonly lengths: Float64Array;
  readonly buffers: Array<ArrayBufferLike | null>;

  constructor(rows: number) {
    this.terms = new Float64Array(rows);
    this.times = new Float64Array(rows);
    this.types = new Uint8Array(rows);
    this.offsets = new Float64Array(rows);
    this.lengths = new Float64Array(rows);
    this.buffers = new Array<ArrayBufferLike | null>(rows).fill(null);
  }
}

export class EntryColumns {
  private readonly shift: number;
  private readonly rowsPerChunk: number;
  private readonly slotMask: number;
  /** Never empty: chunk 0 holds entry 0 (or is where it will go). */
  private readonly chunks: Chunk[];
  /** A chunk a compaction let go, cleared, for the next one needed (no allocation then). */
  private spare: Chunk | null = null;
  /** Slot of entry 0 in chunk 0. */
  private start = 0;
  private count = 0;
  private slab: ArrayBuffer | null = null;
  private slabAt = 0;

  /** `chunkShift`: rows per chunk as a power of two (tests use small chunks). */
  constructor(chunkShift = CHUNK_SHIFT) {
    if (!(Number.isInteger(chunkShift) && chunkShift >= 1 && chunkShift <= 16)) {
      throw new Error(`assertion failed: chunk shift ${chunkShift}`);
    }
    this.shift = chunkShift;
    this.rowsPerChunk = 1 << chunkShift;
    this.slotMask = this.rowsPerChunk - 1;
    this.chunks = [new Chunk(this.rowsPerChunk)];
  }

  get length(): number {
    return this.count;
  }

  /**
   * Appends `entry`'s fields; its bytes are kept where they are or copied (see above), and
   * always copied when `copy` says their buffer must not be kept (a view into a peer's frame,
   * which holds other bytes besides).
   */
  push(entry: Entry, copy = false): void {
    const row = this.start + this.count;
    const chunks = this.chunks;
    if (row >>> this.shift === chunks.length) chunks.push(this.takeChunk());
    const chunk = chunks[row >>> this.shift]!;
    const slot = row & this.slotMask;
    chunk.terms[slot] = entry.term;
    chunk.times[slot] = entry.timeMs;
    chunk.types[slot] = TYPE_CODES[entry.type];
    const data = entry.data;
    // `length`, not `byteLength`: this Node compiles a typed array's `byteLength`, `buffer`
    // and `byteOffset` as generic loads (docs/performance.md), and a Uint8Array's are equal.
    const bytes = data.length;
    const buffer = copy ? null : data.buffer;
    if (bytes === 0) {
      chunk.buffers[slot] = null;
      chunk.offsets[slot] = 0;
    } else if (buffer !== null && (bytes >= OWN_BYTES_MIN ||
      buffer.byteLength >= SHARED_BUFFER_BYTES_MIN)) {
      chunk.buffers[slot] = buffer;
      chunk.offsets[slot] = data.byteOffset;
    } else if (bytes >= OWN_BYTES_MIN) {
      // A copy by the constructor: `slice` of a Buffer (a peer's frame is one) is a view.
      chunk.buffers[slot] = new Uint8Array(data).buffer;
      chunk.offsets[slot] = 0;
    } else {
      const at = this.room(bytes);
      new Uint8Array(this.slab!, at, bytes).set(data);
      chunk.buffers[slot] = this.slab;
      chunk.offsets[slot] = at;
    }
    chunk.lengths[slot] = bytes;
    this.count++;
  }

  /** Keeps the first `keep` entries and forgets the rest. */
  truncate(keep: number): void {
    if (!(Number.isSafeInteger(keep) && keep >= 0 && keep <= this.count)) {
      throw new Error(`assertion failed: truncate to ${keep} of ${this.count}`);
    }
    const end = this.start + keep;
    // The chunks past the last kept row go (chunk 0 always stays); `release` clears the one
    // it keeps, so only the kept chunks' rows past the cut are cleared here.
    const chunksKept = Math.max(1, (end + this.slotMask) >>> this.shift);
    while (this.chunks.length > chunksKept) this.release(this.chunks.pop()!);
    this.forgetRows(end, Math.min(this.start + this.count, chunksKept << this.shift));
    this.count = keep;
    if (keep === 0) this.start = 0;
  }

  /** Forgets the first `n` entries. */
  dropFirst(n: number): void {
    if (!(Number.isSafeInteger(n) && n >= 0 && n <= this.count)) {
      throw new Error(`assertion failed: drop ${n} of ${this.count}`);
    }
    if (n === this.count) {
      this.truncate(0);
      return;
    }
    const end = this.start + n;
    const passed = end >>> this.shift;
    // Whole chunks passed go without clearing row by row; the rest of the rows dropped are
    // in the new first chunk, before its new start (the rows before the old one are clear).
    for (const chunk of this.chunks.splice(0, passed)) this.release(chunk);
    this.start = end & this.slotMask;
    this.forgetRows(0, this.start);
    this.count -= n;
  }

  term(i: number): number {
    const row = this.row(i);
    return this.chunks[row >>> this.shift]!.terms[row & this.slotMask]!;
  }

  timeMs(i: number): number {
    const row = this.row(i);
    return this.chunks[row >>> this.shift]!.times[row & this.slotMask]!;
  }

  type(i: number): EntryType {
    const row = this.row(i);
    return TYPES[this.chunks[row >>> this.shift]!.types[row & this.slotMask]!]!;
  }

  dataBytes(i: number): number {
    const row = this.row(i);
    return this.chunks[row >>> this.shift]!.lengths[row & this.slotMask]!;
  }

  /** Entry i as an `Entry` at log index `index`: a new object, its data a view. */
  get(i: number, index: number): Entry {
    const row = this.row(i);
    const chunk = this.chunks[row >>> this.shift]!;
    const slot = row & this.slotMask;
    const bytes = chunk.lengths[slot]!;
    return {
      term: chunk.terms[slot]!,
      index,
      timeMs: chunk.times[slot]!,
      type: TYPES[chunk.types[slot]!]!,
      data: bytes === 0 ? EMPTY
        : new Uint8Array(chunk.buffers[slot]!, chunk.offsets[slot]!, bytes),
    };
  }

  private row(i: number): number {
    if (!(i >= 0 && i < this.count)) {
      throw new Error(`assertion failed: entry ${i} of ${this.count}`);
    }
    return this.start + i;
  }

  /** Clears the buffers of rows `from` to `to` (exclusive, in one chunk): they keep no bytes. */
  private forgetRows(from: number, to: number): void {
    if (from >= to) return;
    const chunk = from >>> this.shift;
    if ((to - 1) >>> this.shift !== chunk) {
      throw new Error(`assertion failed: rows ${from} to ${to} span chunks`);
    }
    this.chunks[chunk]!.buffers.fill(null, from & this.slotMask, ((to - 1) & this.slotMask) + 1);
  }

  /** Keeps one chunk let go as the spare, cleared; others go to the collector. */
  private release(chunk: Chunk): void {
    if (this.spare !== null) return;
    chunk.buffers.fill(null);
    this.spare = chunk;
  }

  private takeChunk(): Chunk {
    const spare = this.spare;
    if (spare === null) return new Chunk(this.rowsPerChunk);
    this.spare = null;
    return spare;
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
