/**
 * What the state holds in memory, and full collections before the garbage it leaves behind
 * could exhaust wasm32's 4 GiB. Once the bytes the machine holds or may still hold as garbage
 * (rows that left the state, preimages released, a replaced state, not yet known reclaimed)
 * pass COLLECT_LINE_BYTES, it collects in full.
 *
 * What the incremental collector reclaims is counted too: a cycle frees every object that
 * was garbage when it began, so once a cycle that began after an entry has ended, the rows
 * retired by that entry are reclaimed. Counted only at full collections, a million keys
 * overwritten in entries of 256 reached the line every 3 GiB of rows retired, about 57,000
 * entries, and each full collection paused the machine 140 to 160 ms, though the
 * incremental cycles had long freed those rows. Pure: no clock, no I/O.
 */
import { putI64 } from './buffers';
import {
  stateBytes, recountRowBytes, tenantTableBytes, heapDeadBytes, heapDropDeadNow,
} from './state';
import { preimageBytes, retiredTotal, reclaimRetired, unreclaimedBytes } from './preimages';
import { recordBytes } from './idempotency';

/**
 * Held plus retired bytes past which the machine collects in full: the 4 GiB ceiling less
 * room for the input and output regions, tree nodes, scratch objects of calls, allocator
 * rounding and fragmentation.
 */
const COLLECT_LINE_BYTES: i64 = 3328 * 1024 * 1024;
/** Retired bytes below which a full collection is not worth its pause. */
const RETIRED_COLLECT_BYTES_MIN: i64 = 64 * 1024 * 1024;

/** Full collections this machine ran (see collectWhenDue). */
let fullCollections: i64 = 0;

/** The collector's cycles begun as of the last check (`noteCycles`). */
let cyclesBegunSeen: u32 = 0;
/** `retiredTotal` at the last check. */
let retiredAtCheck: i64 = 0;
/** A cycle that began after the check at which `retiredTotal` was `pendingMark` (0: none). */
let pendingCycle: u32 = 0;
let pendingMark: i64 = 0;

/**
 * Counts as reclaimed what the collector's finished cycles freed. Called between entries: a
 * cycle begun since the last check began after every row retired by then had left the
 * state, so when it ends those rows are freed. (Like a full collection, it cannot free a dead
 * row the expiry heap still names until a compaction drops the entry, state.ts.)
 */
function noteCycles(): void {
  // @ts-ignore: the runtime's, scripts/runtime-corrections.mjs
  let cycles: u64 = __gc_cycles();
  let begun = <u32>(cycles >> 32), ended = <u32>cycles;
  if (pendingCycle != 0 && ended >= pendingCycle) {
    reclaimRetired(pendingMark);
    pendingCycle = 0;
  }
  // Cycles run one after another, so any cycle pending above has ended by the time another
  // begins: only the newest one can be pending.
  if (begun != cyclesBegunSeen) {
    cyclesBegunSeen = begun;
    if (ended >= begun) reclaimRetired(retiredAtCheck);
    else {
      pendingCycle = begun;
      pendingMark = retiredAtCheck;
    }
  }
  retiredAtCheck = retiredTotal;
}

/** Collects in full when the garbage the machine may hold would pass the line. */
export function collectWhenDue(): void {
  noteCycles();
  // Dead rows the expiry heap still names are in neither count: no cycle frees them (it
  // counts them reclaimed all the same), so they are added, and dropped before collecting.
  let garbage = unreclaimedBytes() + heapDeadBytes;
  if (garbage < RETIRED_COLLECT_BYTES_MIN) return;
  if (stateBytes() + recordBytes() + preimageBytes + garbage < COLLECT_LINE_BYTES) return;
  heapDropDeadNow();
  collectNow();
}

/** Collects in full now (after a whole state was dropped, before another is built). */
export function collectNow(): void {
  __collect();
  reclaimRetired(retiredTotal);
  fullCollections++;
}

/**
 * As i64: stateBytes; the bytes an open snapshot keeps alive beyond it (preimages); the bytes
 * of rows retired and not yet known reclaimed (an upper bound on their garbage); the
 * full collections run so far; dead rows the expiry heap keeps alive (state.ts).
 */
export function writeMemoryUse(): void {
  putI64(stateBytes());
  putI64(preimageBytes);
  putI64(unreclaimedBytes());
  putI64(fullCollections);
  putI64(heapDeadBytes);
}

/** The byte total recounted from the rows, and from the tenant table, as i64. */
export function writeRecount(): void {
  putI64(recountRowBytes());
  putI64(tenantTableBytes());
}
