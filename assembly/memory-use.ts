/**
 * What the state holds in memory, and full collections before the garbage it leaves behind
 * could exhaust wasm32's 4 GiB. The incremental collector starts a cycle only once its heap
 * has doubled since the last one, which a state of more than a third of the ceiling can never
 * afford: so once the bytes the machine holds or knows to be garbage (rows that left the
 * state, preimages released, a replaced state) pass COLLECT_LINE_BYTES, it collects in full.
 * Pure: no clock, no I/O.
 */
import { putI64 } from './buffers';
import { stateBytes, recountRowBytes, tenantTableBytes } from './state';
import { preimageBytes, retiredBytes, clearRetired } from './preimages';
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

/** Collects in full when the garbage the machine knows of would pass the line. */
export function collectWhenDue(): void {
  if (retiredBytes < RETIRED_COLLECT_BYTES_MIN) return;
  if (stateBytes() + recordBytes() + preimageBytes + retiredBytes < COLLECT_LINE_BYTES) return;
  collectNow();
}

/** Collects in full now (after a whole state was dropped, before another is built). */
export function collectNow(): void {
  __collect();
  clearRetired();
  fullCollections++;
}

/**
 * As i64: stateBytes; the bytes an open snapshot keeps alive beyond it (preimages); the bytes
 * of rows retired since the last full collection (an upper bound on their garbage); the
 * full collections run so far.
 */
export function writeMemoryUse(): void {
  putI64(stateBytes());
  putI64(preimageBytes);
  putI64(retiredBytes);
  putI64(fullCollections);
}

/** The byte total recounted from the rows, and from the tenant table, as i64. */
export function writeRecount(): void {
  putI64(recountRowBytes());
  putI64(tenantTableBytes());
}
