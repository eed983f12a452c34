/**
 * Bump allocation of small byte buffers, each kind from slabs of its own.
 *
 * Node's Buffer pool cuts every small Buffer of the process from shared 8 KiB slabs: one
 * long-lived buffer then pins a slab of short-lived ones, and a 2 KiB buffer takes a fresh
 * slab every fourth call. A `Slabs` serves one kind of buffer (log entries, which live until
 * a snapshot compacts them; a call's command or log record, which live for one call), cut in
 * order from slabs of `slabBytes`: a slab is freed once every buffer cut from it is, so
 * buffers that die in the order they were made (log entries do) pin at most one slab that
 * is not full of live ones. Buffers of `ownBytesMin` or more get an allocation of their own.
 *
 * Pure: no I/O. Buffers are not zeroed: the caller writes every byte it takes.
 */
export const SLAB_BYTES_DEFAULT = 64 * 1024;

export class Slabs {
  private slab: ArrayBuffer | null = null;
  private at = 0;

  constructor(
    private readonly slabBytes = SLAB_BYTES_DEFAULT,
    private readonly ownBytesMin = slabBytes / 8,
  ) {
    if (!(Number.isSafeInteger(slabBytes) && slabBytes >= 64 && ownBytesMin <= slabBytes)) {
      throw new Error(`assertion failed: slabs of ${slabBytes} bytes, own from ${ownBytesMin}`);
    }
  }

  /**
   * `bytes` bytes of their own (no other `take` overlaps them), contents undefined. A plain
   * `Uint8Array` made by its constructor, not a Buffer: Buffer's `subarray` is JavaScript
   * that reads the parent's `buffer` and `byteOffset`, which this Node's compiler turns into
   * generic property loads on any typed array (docs/performance.md, "Typed-array properties
   * this Node reads the slow way").
   */
  take(bytes: number): Uint8Array {
    if (bytes >= this.ownBytesMin) return new Uint8Array(uninitialized(bytes));
    let slab = this.slab;
    if (slab === null || this.at + bytes > this.slabBytes) {
      slab = uninitialized(this.slabBytes);
      this.slab = slab;
      this.at = 0;
    }
    const out = new Uint8Array(slab, this.at, bytes);
    // 8-byte aligned, so a DataView or typed view over a buffer never straddles words oddly.
    this.at += (bytes + 7) & ~7;
    return out;
  }
}

/** An ArrayBuffer of exactly `bytes` bytes, not zeroed (an unpooled Buffer's own). */
function uninitialized(bytes: number): ArrayBuffer {
  return Buffer.allocUnsafeSlow(bytes).buffer as ArrayBuffer;
}
