/**
 * Where a group's fsync runs: on the thread pool, beside the event loop, or on the loop
 * itself (FileStorage.sync's `onLoop`). At one connection a pool fdatasync paid two wake-ups
 * of an idle vCPU, 0.24 ms of a put's 0.5 at p50 on this machine; on the loop it paid none.
 * But a blocked loop reads no socket, so it hides the calls queued behind it: each would then
 * come alone and be synced alone, one fsync a call. So the loop is taken only after a run of
 * lone calls seen while it was free, and given up as soon as a group holds more than one
 * entry, or a second entry's sync is due in the turn of the loop that ran one (more calls
 * were waiting).
 *
 * Pure: the driver says when a turn of the event loop ends (`endTurn`, from `soon`).
 */

/** Consecutive pool fsyncs of one entry each before the next may run on the loop. */
export const LONE_SYNCS_BEFORE_LOOP = 16;

export class SyncPlacement {
  private loneSyncs = 0;
  private onLoop = false;
  private syncedOnLoopThisTurn = false;

  /**
   * Whether the sync about to start, covering `entries` new log entries, runs on the loop;
   * `turnEnds` is asked to call `endTurn` once this turn's I/O is handled, when it does.
   * A sync of no entry (a commit index, a vote) tells nothing of the calls waiting.
   */
  place(entries: number, turnEnds: () => void): boolean {
    if (entries > 1 || (entries === 1 && this.syncedOnLoopThisTurn)) {
      this.onLoop = false;
      this.loneSyncs = 0;
    }
    const onLoop = this.onLoop;
    if (onLoop && entries > 0) {
      if (!this.syncedOnLoopThisTurn) turnEnds();
      this.syncedOnLoopThisTurn = true;
    } else if (!onLoop && entries === 1 && ++this.loneSyncs >= LONE_SYNCS_BEFORE_LOOP) {
      this.onLoop = true;
    }
    return onLoop;
  }

  endTurn(): void {
    this.syncedOnLoopThisTurn = false;
  }
}
