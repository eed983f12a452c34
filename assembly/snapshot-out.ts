/**
 * A snapshot written in slices while entries keep being applied between them, without a
 * second copy of the state. `beginSnapshot` records the head (header, tenants, dedup section,
 * row count) as the state is at begin, and the version counter V0; each `nextSlice` resumes
 * after the last key it wrote (by key, so tree changes between slices are safe) and merges,
 * in key order, the live tree's rows with a version <= V0 and the preimages that writes,
 * deletes and sweeps left behind since begin (preimages.ts). The bytes are exactly those a
 * snapshot taken at once at begin would have been. Pure: no clock, no I/O.
 */
import { Row, rowKeyPtr, rowKeyLen, rowVersion, compareBytes } from './row';
import { resetOutput, reserveRaw, outputLen, outputPtr } from './buffers';
import { tree, lastVersion, rowBufferBytes } from './state';
import {
  snapshotOpen, snapshotVersion, preimages, cursorStarted, cursorKey, cursorLen,
  openPreimages, closePreimages, advanceCursor,
} from './preimages';
import { writeSnapshotHead } from './snapshot';
import { Tree } from './tree';

/** Largest slice one call writes (beyond one row that alone is larger), in bytes. */
const SLICE_BYTES_MAX: i32 = 64 * 1024 * 1024;

/** The head of the open snapshot, not yet handed out while `headPending`. */
let head: ArrayBuffer = new ArrayBuffer(0);
let headPending = false;
/** Rows the open snapshot holds (the tree's count at begin) and how many are written. */
let rowsTotal: i64 = 0;
let rowsWritten: i64 = 0;
/** Bytes of the whole snapshot, known at begin, and bytes handed out so far. */
let bytesTotal: i64 = 0;
let bytesWritten: i64 = 0;

/** Opens a snapshot of the state as it is now; returns its size in bytes. */
export function beginSnapshot(): i64 {
  assert(!snapshotOpen, 'snapshotBegin while a snapshot is open');
  resetOutput();
  writeSnapshotHead();
  let headLen = <i32>outputLen;
  head = new ArrayBuffer(headLen);
  memory.copy(changetype<usize>(head), outputPtr, <usize>headLen);
  headPending = true;
  rowsTotal = <i64>tree.count;
  rowsWritten = 0;
  bytesTotal = <i64>headLen + 4 * rowsTotal + rowBufferBytes();
  bytesWritten = 0;
  openPreimages(lastVersion);
  return bytesTotal;
}

/** Drops the open snapshot, if any, and its preimages. */
export function abortSnapshot(): void {
  if (!snapshotOpen) return;
  closePreimages();
  head = new ArrayBuffer(0);
  headPending = false;
}

/** Positions a tree's cursor on its first key after the snapshot's cursor. */
function seekAfterCursor(t: Tree): void {
  if (!cursorStarted) {
    t.seekFirst();
    return;
  }
  t.seek(cursorKey, cursorLen);
  if (t.curLeaf != null && compareBytes(rowKeyPtr(t.current()), rowKeyLen(t.current()),
    cursorKey, cursorLen) == 0) {
    t.advance();
  }
}

function compareRows(a: Row, b: Row): i32 {
  return compareBytes(rowKeyPtr(a), rowKeyLen(a), rowKeyPtr(b), rowKeyLen(b));
}

/** Skips the live tree's rows written after begin (they are not in the snapshot). */
function settleLive(): void {
  while (tree.curLeaf != null && rowVersion(tree.current()) > snapshotVersion) tree.advance();
}

/** Offset of the flags word in a row buffer (row.ts layout). */
const ROW_FLAGS_OFFSET: usize = 28;

/**
 * Appends one row as the snapshot holds it: u32 length, then the buffer with its flags 0 (a
 * preimage has left the tree, but the snapshot holds it as the live row it was at begin; the
 * others are the expiry heap's bookkeeping, which a restore builds afresh).
 */
function emitRow(r: Row): void {
  let len = r.byteLength;
  let at = reserveRaw(4 + <usize>len);
  store<u32>(at, <u32>len);
  memory.copy(at + 4, changetype<usize>(r), <usize>len);
  store<u32>(at + 4 + ROW_FLAGS_OFFSET, 0);
}

/**
 * Writes the next slice of the open snapshot to the output region: at least one item, then
 * more while the slice stays within maxBytes. Returns its length; 0 once everything is
 * written (the snapshot is then closed) or when none is open.
 */
export function nextSlice(maxBytes: i32): i32 {
  if (!snapshotOpen) return 0;
  let limit = <usize>min(max(maxBytes, 1), SLICE_BYTES_MAX);
  resetOutput();
  if (headPending) {
    let len = <usize>head.byteLength;
    memory.copy(reserveRaw(len), changetype<usize>(head), len);
    headPending = false;
    head = new ArrayBuffer(0);
  }
  seekAfterCursor(tree);
  seekAfterCursor(preimages);
  settleLive();
  let last: Row = changetype<Row>(0);
  let wrote = false;
  while (outputLen < limit || outputLen == 0) {
    let hasLive = tree.curLeaf != null;
    let hasKept = preimages.curLeaf != null;
    if (!hasLive && !hasKept) break;
    // At one key a preimage wins: it is the row the key held at begin.
    let c: i32 = !hasLive ? 1 : !hasKept ? -1 : compareRows(tree.current(), preimages.current());
    let r: Row = c < 0 ? tree.current() : preimages.current();
    emitRow(r);
    last = r;
    wrote = true;
    rowsWritten++;
    if (c <= 0) {
      tree.advance();
      settleLive();
    }
    if (c >= 0) preimages.advance();
  }
  if (wrote) advanceCursor(rowKeyPtr(last), rowKeyLen(last));
  bytesWritten += <i64>outputLen;
  if (tree.curLeaf == null && preimages.curLeaf == null) finish();
  return <i32>outputLen;
}

/** Every row is written: the counts must match what begin announced. */
function finish(): void {
  assert(rowsWritten == rowsTotal, 'snapshot wrote another number of rows than it holds');
  assert(bytesWritten == bytesTotal, 'snapshot wrote another number of bytes than announced');
  closePreimages();
}
