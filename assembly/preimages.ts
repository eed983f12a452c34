/**
 * What an open snapshot still needs of rows that changed after it began. Rows are immutable
 * (a write makes a new row), so the state at begin is the live tree's rows with a version up
 * to `snapshotVersion`, plus, for every key the snapshot has not written yet, the row that
 * key held at begin if a write, delete or sweep has taken it out of the tree since: its
 * preimage, kept here by reference (never copied) in a second tree ordered by store key.
 * Also counts the bytes of rows that left the state and may still await the collector.
 * Pure: no clock, no I/O.
 */
import {
  Row, rowKeyPtr, rowKeyLen, rowVersion, rowValueLen, rowFootprint, compareBytes,
} from './row';
import { Tree } from './tree';

/** Longest store key: tenant id + namespace + NUL + key (abi.ts bounds). */
export const STORE_KEY_BYTES_MAX: i32 = 4 + 255 + 1 + 4096;

/** A snapshot has begun and has not ended or been aborted. */
export let snapshotOpen: bool = false;
/** lastVersion when the open snapshot began: any row above it was written afterwards. */
export let snapshotVersion: i64 = 0;
/**
 * The last store key the open snapshot wrote (when `cursorStarted`): every key up to it is
 * written, so a row at such a key no longer matters to the snapshot.
 */
export const cursorKey: usize = heap.alloc(<usize>STORE_KEY_BYTES_MAX);
export let cursorLen: i32 = 0;
export let cursorStarted: bool = false;
/** Rows the open snapshot still has to write that have left the live tree, by store key. */
export let preimages: Tree = new Tree();
/** Sum of `rowFootprint` over `preimages`: memory the snapshot keeps alive. */
export let preimageBytes: i64 = 0;
/**
 * Footprint of every row that left the state (and of preimages released, and of states and
 * tables replaced) since the module started; and how much of it the collector is known to
 * have reclaimed (memory-use.ts). The difference is an upper bound on the row garbage not yet
 * reclaimed.
 */
export let retiredTotal: i64 = 0;
export let reclaimedTotal: i64 = 0;

/** Opens a snapshot of the state as of `version`, with no key written yet. */
export function openPreimages(version: i64): void {
  assert(!snapshotOpen, 'a snapshot is already open');
  snapshotOpen = true;
  snapshotVersion = version;
  cursorStarted = false;
  cursorLen = 0;
  preimages = new Tree();
  preimageBytes = 0;
}

/** Ends the open snapshot (done or aborted): its preimages become garbage. */
export function closePreimages(): void {
  snapshotOpen = false;
  retiredTotal += preimageBytes;
  preimages = new Tree();
  preimageBytes = 0;
}

/** Records that the snapshot has written every key up to this one. */
export function advanceCursor(keyPtr: usize, keyLen: i32): void {
  assert(keyLen <= STORE_KEY_BYTES_MAX, 'store key too long for the cursor');
  memory.copy(cursorKey, keyPtr, <usize>keyLen);
  cursorLen = keyLen;
  cursorStarted = true;
}

/**
 * A row has just left the live tree (replaced, deleted or swept). Keeps it when the open
 * snapshot still has to write it: it existed at begin (version <= snapshotVersion) and its
 * key lies after the cursor. Only the first row to leave at a key is kept, which is the row
 * the key held at begin (any later row there has a higher version).
 */
export function retireRow(r: Row): void {
  let footprint = rowFootprint(rowKeyLen(r), rowValueLen(r));
  if (snapshotOpen && rowVersion(r) <= snapshotVersion && !(cursorStarted &&
    compareBytes(rowKeyPtr(r), rowKeyLen(r), cursorKey, cursorLen) <= 0) &&
    preimages.insertIfAbsent(r)) {
    preimageBytes += footprint;
    return;
  }
  retiredTotal += footprint;
}

/** Bytes of a whole state that was replaced (restore) are garbage now. */
export function retireBytes(bytes: i64): void {
  retiredTotal += bytes;
}

/** Everything retired up to `total` (a past `retiredTotal`) has been reclaimed. */
export function reclaimRetired(total: i64): void {
  if (total > reclaimedTotal) reclaimedTotal = total;
}

/** Retired bytes not known reclaimed: at most this much row garbage is in memory. */
export function unreclaimedBytes(): i64 {
  return retiredTotal - reclaimedTotal;
}
