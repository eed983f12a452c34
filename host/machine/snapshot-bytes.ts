/**
 * A machine snapshot as one byte array, built on the streaming exports: for tests, the
 * machine benchmark and small tools. A node never holds a whole snapshot in memory; it
 * streams slices to a file and chunks back in (host/node/snapshotter.ts).
 */
import type { StateMachine } from './state-machine.js';

/** Slice size used when nothing else is asked for. */
export const WHOLE_SNAPSHOT_SLICE_BYTES = 4 * 1024 * 1024;

/** Takes a snapshot of the state now, in slices of `sliceBytes`, and joins them. */
export function snapshotToBytes(machine: StateMachine,
  sliceBytes = WHOLE_SNAPSHOT_SLICE_BYTES): Uint8Array {
  const total = machine.snapshotBegin();
  const out = new Uint8Array(total);
  let at = 0;
  for (let slice = machine.snapshotNext(sliceBytes); slice.length > 0;
    slice = machine.snapshotNext(sliceBytes)) {
    if (at + slice.length > total) throw new Error('snapshot: slices pass the announced size');
    out.set(slice, at);
    at += slice.length;
  }
  if (at !== total) throw new Error(`snapshot: ${at} bytes written of ${total} announced`);
  return out;
}

/**
 * Replaces the state with a snapshot fed in chunks of `chunkBytes`. Throws (state unchanged)
 * when the bytes are not a valid snapshot.
 */
export function restoreFromBytes(machine: StateMachine, bytes: Uint8Array,
  chunkBytes = WHOLE_SNAPSHOT_SLICE_BYTES): void {
  machine.restoreBegin();
  try {
    for (let at = 0; at < bytes.length; at += chunkBytes) {
      machine.restoreChunk(bytes.subarray(at, Math.min(bytes.length, at + chunkBytes)));
    }
    machine.restoreEnd();
  } catch (error) {
    machine.restoreAbort();
    throw error;
  }
}
