/**
 * Request bodies held in memory at once, bounded.
 *
 * A body is read whole before its call runs, into a buffer of its declared length. Thirty
 * connections that each declared 60 MB and sent all but the last bytes held 1.8 GB of a node
 * for as long as they trickled a byte now and then, and a few hundred would have had it
 * killed. So a call's body is counted from the moment the call arrives until it is answered
 * or its client goes away, and a call whose body would take the count past `maxBytes` is
 * refused at once with 503 `overloaded` (its bytes are then drained, not kept). A chunked body,
 * whose length is not known ahead, counts as the largest body allowed. The first body is
 * always taken, whatever its size, so one large call still works on a quiet node.
 *
 * Before a call is refused, uploads that have stalled make room: a body of a declared length
 * still arriving whose last bytes came STALLED_MS or more ago is an upload that holds its
 * share while it sends nothing, and its connection is closed, stalest first, until the new
 * body fits (as answer-budget.ts does with clients that stopped reading); none is closed
 * when closing them all would not make room. Chunked bodies, which hyper-express reads, are
 * not watched and are never closed here.
 */
import { performance } from 'node:perf_hooks';
import { STALLED_MS } from './answer-budget.js';

/** The default bound on request body bytes held at once, over every connection. */
export const BODY_BYTES_HELD_MAX = 1024 * 1024 * 1024;

/** A body still arriving, which the budget may close to make room. */
export interface Upload {
  /** When its last bytes arrived (or the call did), on `nowMs`'s clock. */
  progressAtMs: number;
  /** The bytes it holds of the budget. */
  readonly bodyBytesHeld: number;
  /** Closes its connection and gives its bytes back (`release`). */
  evict(): void;
}

export class BodyBudget {
  /** Bytes of bodies held now. */
  heldBytes = 0;
  /** Calls refused because their body would have taken the bytes past the bound. */
  refusedCalls = 0;
  /** Connections closed because their upload had stalled and a new body needed its room. */
  closedUploads = 0;
  private readonly uploads = new Set<Upload>();

  constructor(readonly maxBytes = BODY_BYTES_HELD_MAX,
    readonly nowMs: () => number = () => performance.now()) {}

  /**
   * True when a body of `bytes` may be held (until `release`); false: refuse the call. An
   * `upload` given is watched until `arrived` or `release`: it may be closed to make room.
   */
  hold(bytes: number, upload?: Upload): boolean {
    if (!this.fits(bytes)) this.makeRoom(bytes);
    if (!this.fits(bytes)) {
      this.refusedCalls += 1;
      return false;
    }
    this.heldBytes += bytes;
    if (upload !== undefined) {
      upload.progressAtMs = this.nowMs();
      this.uploads.add(upload);
    }
    return true;
  }

  /** The upload's body has all come: it holds its bytes until released, and is not closed. */
  arrived(upload: Upload): void {
    this.uploads.delete(upload);
  }

  release(bytes: number, upload?: Upload): void {
    if (upload !== undefined) this.uploads.delete(upload);
    this.heldBytes -= bytes;
    if (this.heldBytes < 0) throw new Error('assertion failed: body bytes held went below zero');
  }

  private fits(bytes: number): boolean {
    return this.heldBytes === 0 || this.heldBytes + bytes <= this.maxBytes;
  }

  /**
   * Closes stalled uploads, stalest first, until `bytes` more fit; none when closing every
   * one of them would still leave too little room (the new call is refused, and they go on).
   */
  private makeRoom(bytes: number): void {
    const now = this.nowMs();
    const stalled = [...this.uploads].filter((u) => now - u.progressAtMs >= STALLED_MS)
      .sort((a, b) => a.progressAtMs - b.progressAtMs);
    let stalledBytes = 0;
    for (const upload of stalled) stalledBytes += upload.bodyBytesHeld;
    if (this.heldBytes - stalledBytes + bytes > this.maxBytes) return;
    for (const upload of stalled) {
      if (this.fits(bytes)) return;
      this.uploads.delete(upload);
      this.closedUploads += 1;
      const before = this.heldBytes;
      upload.evict();
      if (this.heldBytes >= before) {
        throw new Error('assertion failed: a closed upload gave back none of its bytes');
      }
    }
  }
}
