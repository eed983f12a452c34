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
 */

/** The default bound on request body bytes held at once, over every connection. */
export const BODY_BYTES_HELD_MAX = 1024 * 1024 * 1024;

export class BodyBudget {
  /** Bytes of bodies held now. */
  heldBytes = 0;
  /** Calls refused because their body would have taken the bytes past the bound. */
  refusedCalls = 0;

  constructor(readonly maxBytes = BODY_BYTES_HELD_MAX) {}

  /** True when a body of `bytes` may be held (until `release`); false: refuse the call. */
  hold(bytes: number): boolean {
    if (this.heldBytes > 0 && this.heldBytes + bytes > this.maxBytes) {
      this.refusedCalls += 1;
      return false;
    }
    this.heldBytes += bytes;
    return true;
  }

  release(bytes: number): void {
    this.heldBytes -= bytes;
    if (this.heldBytes < 0) throw new Error('assertion failed: body bytes held went below zero');
  }
}
