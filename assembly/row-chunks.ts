/**
 * A growable sequence of rows kept in chunks of ROW_CHUNK_ROWS, for the expiry heap.
 *
 * The runtime's incremental collector marks an object's references in one step, however
 * many: one array holding every TTL row (a million and more) made a step of tens of
 * milliseconds once per collection, and the pause grew with the state. In chunks, each step
 * marks at most ROW_CHUNK_ROWS rows.
 *
 * Every store of a row goes through the forward write barrier (`__link(chunk, row, false)`:
 * the row is marked when the chunk already is). The backward one that `StaticArray` stores
 * take would mark the whole chunk again, and a row moving from a chunk not yet scanned into
 * one already scanned would otherwise be lost to the collector while the heap still names it.
 */
import { Row } from './row';

const ROW_CHUNK_BITS: i32 = 12;
const ROW_CHUNK_ROWS: i32 = 1 << ROW_CHUNK_BITS;
const ROW_CHUNK_MASK: i32 = ROW_CHUNK_ROWS - 1;

export class RowChunks {
  private chunks: Array<StaticArray<Row>> = new Array<StaticArray<Row>>();
  length: i32 = 0;

  // @ts-ignore: decorator
  @inline private chunkOf(i: i32): StaticArray<Row> {
    return unchecked(this.chunks[i >> ROW_CHUNK_BITS]);
  }

  // @ts-ignore: decorator
  @inline private slot(i: i32): usize {
    return changetype<usize>(this.chunkOf(i)) + (<usize>(i & ROW_CHUNK_MASK) << alignof<usize>());
  }

  // @ts-ignore: decorator
  @inline get(i: i32): Row {
    return changetype<Row>(load<usize>(this.slot(i)));
  }

  set(i: i32, r: Row): void {
    assert(i >= 0 && i < this.length, 'RowChunks.set out of range');
    store<usize>(this.slot(i), changetype<usize>(r));
    __link(changetype<usize>(this.chunkOf(i)), changetype<usize>(r), false);
  }

  push(r: Row): void {
    let i = this.length;
    if ((i >> ROW_CHUNK_BITS) == this.chunks.length) {
      this.chunks.push(new StaticArray<Row>(ROW_CHUNK_ROWS));
    }
    this.length = i + 1;
    this.set(i, r);
  }

  pop(): Row {
    assert(this.length > 0, 'RowChunks.pop of nothing');
    let i = this.length - 1;
    let r = this.get(i);
    this.truncate(i);
    return r;
  }

  /**
   * Keeps the first n rows. The slots past them are cleared, so that the collector does not
   * keep their rows alive, and whole chunks past them are given back but one (a heap that
   * pushes and pops across a chunk's edge does not allocate a chunk each time).
   */
  truncate(n: i32): void {
    assert(n >= 0 && n <= this.length, 'RowChunks.truncate past the end');
    let keep = ((n + ROW_CHUNK_MASK) >> ROW_CHUNK_BITS) + 1;
    // Slots are cleared up to the chunks kept; the chunks given back go whole.
    let clearTo = min(this.length, keep << ROW_CHUNK_BITS);
    for (let i = n; i < clearTo;) {
      let end = min(clearTo, ((i >> ROW_CHUNK_BITS) + 1) << ROW_CHUNK_BITS);
      memory.fill(this.slot(i), 0, <usize>(end - i) << alignof<usize>());
      i = end;
    }
    this.length = n;
    if (this.chunks.length > keep) this.chunks.length = keep;
  }
}
