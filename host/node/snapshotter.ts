/**
 * Snapshots between the machine and storage, never whole in memory, beside the Ready loop:
 *
 * - `Snapshotter` takes this node's snapshots: the machine hands out a slice of at most
 *   `sliceBytes` per event-loop turn (entries keep applying between slices: the machine keeps
 *   the preimages), each written to the snapshot file before the next is cut, and the next
 *   cut waits until the bytes written are within the node's pace (HIVEKV_SNAPSHOT_BYTES_PER_SEC).
 * - `SnapshotReceiver` writes the chunks of a snapshot a leader sends, as they arrive, to a
 *   file of their own, and installs it once complete.
 * - `ChunkSender` fills the chunks the core asks to send with bytes read from the snapshot
 *   file, in order per follower.
 * - `restoreMachine` streams a stored snapshot into the machine.
 *
 * The data of a snapshot is the machine's snapshot (its dedup table included); an earlier
 * release's file starts with the driver's table, which a restore skips (envelope.ts).
 * Errors: an I/O failure rejects (the driver crashes the node); a chunk that cannot be read
 * for a follower is not sent (the core resends or renews the transfer).
 */
import type { SnapshotChunkMessage } from '../core/raft/messages.js';
import type { ReceivedSnapshotStep } from '../core/raft/ready.js';
import type { Snapshot, SnapshotMeta } from '../core/raft/types.js';
import type { StateMachine } from '../machine/state-machine.js';
import { SnapshotNoRoomError, type SnapshotSink, type Storage } from '../storage/storage.js';
import { LegacySnapshotSkipper } from './envelope.js';
import type { Scheduler, TimerHandle } from './scheduler.js';

/**
 * Bytes of machine snapshot cut per event-loop turn: a slice costs the loop about 1 ms per MiB
 * on an idle node, 1 to 5 ms a MiB under 64 connections of puts at 1M keys, and every call
 * waiting meanwhile waits that long. At 1 MiB a slice was the longest stall left in a put's
 * tail: with a snapshot always being written, p99 4.17 to 5.74 ms at 1 MiB against 3.52 to
 * 4.07 at 256 KiB, four turns each (128 KiB: 3.47 and 3.93), at the same rate of puts and
 * of snapshots (bench/RESULTS.md, "Puts while a snapshot is written").
 */
export const SNAPSHOT_SLICE_BYTES = 256 * 1024;
/** Bytes of a stored snapshot read and fed to the machine at a time when restoring. */
export const RESTORE_CHUNK_BYTES = 4 * 1024 * 1024;

/**
 * Default of HIVEKV_SNAPSHOT_BYTES_PER_SEC. Written as fast as the loop cuts slices, a
 * snapshot of 1M keys (153 MB) went to the page cache at 200 to 350 MB/s; the flushes of that
 * much data shared the disk and the two cores with the WAL's fdatasyncs and the calls, and
 * puts at 64 connections with one always being written ran at 0.50 to 0.53x of their rate
 * with none (p99 50 to 53 ms); at 64 MiB/s, at 0.74 to 0.91x (p99 37 to 41 ms; bench/RESULTS.md,
 * "Puts while a snapshot is written"). A 2 GiB state takes 32 s, unless the pace gives way
 * (PACE_PREIMAGE_BYTES_MIN, SnapshotPace.logOutgrew).
 */
export const SNAPSHOT_BYTES_PER_SEC_DEFAULT = 64 * 1024 * 1024;
/**
 * A paced snapshot stops waiting once the preimages it keeps alive (rows changed since it
 * began) reach an eighth of its size, or this many bytes if more: under heavy overwrites a
 * slower snapshot would hold more memory, which counts against the state's budget
 * (memory-budget.ts), and refusing writes is worse than a burst on the disk.
 */
export const PACE_PREIMAGE_BYTES_MIN = 16 * 1024 * 1024;

/**
 * Default of HIVEKV_SNAPSHOT_LOG_PERCENT. Every snapshot writes the whole state, so at a large
 * state a fixed interval makes snapshots most of the disk's writes and of the loop's work
 * (a 2 GiB state takes 32 s at the default pace, while 100,000 puts come in 4 s): the next
 * snapshot also waits until the log since the last one holds this share of its size. A
 * restart then replays about that much log (and what came while the next one was written)
 * besides restoring the snapshot, so its time stays in proportion to the state's.
 */
export const SNAPSHOT_LOG_PERCENT_DEFAULT = 25;

/** When a node takes its own snapshots (its HIVEKV_SNAPSHOT_* settings). */
export interface SnapshotCadence {
  readonly everyEntries: number;
  readonly everyBytes: number;
  /** Percent of the last snapshot's bytes the log must hold since it (0: no such floor). */
  readonly logPercent: number;
}

/**
 * True when a snapshot is due: `entriesSince` entries applied or `logBytesSince` bytes of
 * log written since the last one began, and the log holds at least `logPercent` of
 * `lastSnapshotBytes` (the size of the last snapshot taken, restored or installed). Pure.
 */
export function snapshotDue(cadence: SnapshotCadence, entriesSince: number,
  logBytesSince: number, lastSnapshotBytes: number): boolean {
  const interval = entriesSince >= cadence.everyEntries || logBytesSince >= cadence.everyBytes;
  return interval && logBytesSince * 100 >= lastSnapshotBytes * cadence.logPercent;
}

/** How fast this node writes its own snapshots, and the clock it waits on. */
export interface SnapshotPace {
  /** Bytes of snapshot written per second at most; 0 writes as fast as slices are cut. */
  readonly bytesPerSecond: number;
  readonly scheduler: Scheduler;
  /**
   * True once the log has grown by a whole snapshot interval since this snapshot began
   * (the replica's HIVEKV_SNAPSHOT_EVERY_BYTES): the pace gives way, since a log that the
   * snapshot lets pile up is disk the node cannot free and entries a restart replays.
   */
  readonly logOutgrew?: () => boolean;
}

/**
 * Milliseconds to wait before the next slice so that `writtenBytes` since `startMs` stay
 * within `bytesPerSecond`; 0 when the snapshot is behind its pace, unpaced (rate 0), or
 * holds `preimageBytes` of at least an eighth of `dataBytes` (PACE_PREIMAGE_BYTES_MIN at
 * least). Pure.
 */
export function paceDelayMs(startMs: number, nowMs: number, writtenBytes: number,
  bytesPerSecond: number, preimageBytes: number, dataBytes: number): number {
  if (bytesPerSecond <= 0) return 0;
  if (preimageBytes >= Math.max(PACE_PREIMAGE_BYTES_MIN, dataBytes / 8)) return 0;
  const dueMs = startMs + (writtenBytes * 1000) / bytesPerSecond;
  return Math.max(0, Math.ceil(dueMs - nowMs));
}

interface SnapshotRun {
  aborted: boolean;
  /** False: written as fast as slices are cut, whatever the pace (someone waits for it). */
  readonly paced: boolean;
  done: Promise<Snapshot | null>;
  /** The pause between two slices, while one runs: `abort` ends it at once. */
  pause: { readonly timer: TimerHandle; readonly resume: () => void } | null;
}

/** Takes this node's snapshots, one at a time. */
export class Snapshotter {
  private current: SnapshotRun | null = null;
  /** Size of the snapshot taken last (or being taken), in bytes. */
  dataBytes = 0;

  constructor(
    private readonly machine: StateMachine,
    private readonly storage: Storage,
    private readonly sliceBytes = SNAPSHOT_SLICE_BYTES,
    /** null: slices are written as fast as they are cut (tools, tests). */
    private readonly pace: SnapshotPace | null = null,
  ) {}

  get running(): boolean {
    return this.current !== null;
  }

  /**
   * Snapshots the machine as it is now (its applied index must be `meta.index`), slice by
   * slice, into storage. Resolves with the snapshot once it is durable and
   * installed in storage, or null when it was aborted or a newer one got there first.
   * `paced` false writes it without the pace's waits: an export waits for this one.
   */
  take(meta: SnapshotMeta, paced = true): Promise<Snapshot | null> {
    if (this.current !== null) throw new Error('assertion failed: a snapshot is being taken');
    if (this.machine.appliedIndex !== meta.index) {
      throw new Error(`assertion failed: snapshot meta ${meta.index} is not the applied index ` +
        `${this.machine.appliedIndex}`);
    }
    const run: SnapshotRun = { aborted: false, paced, done: Promise.resolve(null),
      pause: null };
    const dataBytes = this.machine.snapshotBegin();
    this.dataBytes = dataBytes;
    run.done = this.write(run, meta, dataBytes).finally(() => {
      if (this.current === run) this.current = null;
    });
    this.current = run;
    return run.done;
  }

  private async write(run: SnapshotRun, meta: SnapshotMeta,
    dataBytes: number): Promise<Snapshot | null> {
    let sink: SnapshotSink | null = null;
    try {
      sink = await this.storage.createSnapshot(meta, dataBytes);
      const startMs = this.pace?.scheduler.nowMs() ?? 0;
      let written = 0;
      while (!run.aborted) {
        if (this.pace !== null && run.paced && written > 0 && written < dataBytes) {
          await this.waitForPace(run, startMs, written, dataBytes, this.pace);
          if (run.aborted) break;
        }
        const slice = this.machine.snapshotNext(this.sliceBytes);
        if (slice.length === 0) break;
        written += slice.length;
        await sink.write(slice);
      }
      if (run.aborted) {
        await sink.abort();
        return null;
      }
      if (written !== dataBytes) {
        throw new Error(`assertion failed: snapshot ${meta.index} wrote ${written} of ` +
          `${dataBytes} bytes`);
      }
      return (await sink.commit()) ? { meta, dataBytes } : null;
    } catch (error) {
      this.machine.snapshotAbort();
      throw error;
    }
  }

  /** Waits, if the snapshot is ahead of its pace, until the next slice is due. */
  private waitForPace(run: SnapshotRun, startMs: number, written: number, dataBytes: number,
    pace: SnapshotPace): Promise<void> {
    if (pace.logOutgrew?.() === true) return Promise.resolve();
    const delayMs = paceDelayMs(startMs, pace.scheduler.nowMs(), written, pace.bytesPerSecond,
      this.machine.memoryUse().preimageBytes, dataBytes);
    if (delayMs === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const resume = (): void => {
        run.pause = null;
        resolve();
      };
      run.pause = { timer: pace.scheduler.after(delayMs, resume), resume };
    });
  }

  /** Stops the snapshot being taken, if any, and waits until its file is gone. */
  async abort(): Promise<void> {
    const run = this.current;
    if (run === null) return;
    run.aborted = true;
    this.machine.snapshotAbort();
    const pause = run.pause;
    if (pause !== null) {
      pause.timer.cancel();
      pause.resume();
    }
    await run.done.catch(() => null);
  }
}

/** A snapshot from the leader whose bytes the volume refused midway. */
export interface RefusedSnapshot {
  readonly index: number;
  readonly totalBytes: number;
}

/**
 * Writes a snapshot a leader sends, chunk by chunk, then installs it. A volume that refuses
 * its bytes (storage.ts, SnapshotNoRoomError) leaves nothing of it: `write` names it, skips
 * its later chunks, and the driver tells the core to forget it (the leader starts again).
 */
export class SnapshotReceiver {
  private sink: SnapshotSink | null = null;
  private written = 0;
  /** The snapshot refused for want of room: its later chunks are skipped. */
  private refusedIndex = -1;

  constructor(private readonly storage: Storage) {}

  /**
   * Writes the Ready's steps in order (ready.ts, ReceivedSnapshotStep). Returns a snapshot
   * storage refused for want of room on the way, or null.
   */
  async write(steps: readonly ReceivedSnapshotStep[]): Promise<RefusedSnapshot | null> {
    let refused: RefusedSnapshot | null = null;
    for (const step of steps) {
      if (step.type === 'abandon' || step.offset === 0) {
        await this.abandon();
        this.refusedIndex = -1;
      }
      if (step.type === 'abandon' || step.meta.index === this.refusedIndex) continue;
      try {
        await this.writeChunk(step);
      } catch (error) {
        if (!(error instanceof SnapshotNoRoomError)) throw error;
        // Storage removed the file: there is nothing left to abort.
        this.sink = null;
        this.refusedIndex = step.meta.index;
        refused = { index: step.meta.index, totalBytes: step.totalBytes };
      }
    }
    return refused;
  }

  private async writeChunk(step: ReceivedSnapshotStep & { type: 'chunk' }): Promise<void> {
    if (step.offset === 0) {
      this.sink = await this.storage.createSnapshot(step.meta, step.totalBytes);
      this.written = 0;
    }
    const sink = this.sink;
    if (sink === null || sink.meta.index !== step.meta.index || this.written !== step.offset) {
      throw new Error(`assertion failed: snapshot chunk at ${step.offset} of ` +
        `${step.meta.index} does not follow what was written`);
    }
    await sink.write(step.data);
    this.written += step.data.length;
    // Whole: durable now, so that a volume that runs out does so before the core installs it.
    if (this.written === step.totalBytes) await sink.finish();
  }

  /** The index of the snapshot being written once every byte of it is, else -1. */
  wholeIndex(): number {
    const sink = this.sink;
    return sink !== null && this.written === sink.dataBytes ? sink.meta.index : -1;
  }

  /** The snapshot is whole: makes it durable and installs it in storage. */
  async complete(snapshot: Snapshot): Promise<void> {
    const sink = this.sink;
    if (sink === null || sink.meta.index !== snapshot.meta.index ||
      this.written !== snapshot.dataBytes) {
      throw new Error(`assertion failed: snapshot ${snapshot.meta.index} is not all written`);
    }
    this.sink = null;
    if (!(await sink.commit())) {
      throw new Error(`assertion failed: received snapshot ${snapshot.meta.index} is stale`);
    }
  }

  /** Removes what was written of a snapshot that will not complete. */
  async abandon(): Promise<void> {
    const sink = this.sink;
    this.sink = null;
    if (sink !== null) await sink.abort();
  }
}

/**
 * Fills the snapshot chunks the core sends (messages.ts: their data is left to the driver)
 * from storage and sends them, in order for each follower.
 */
export class ChunkSender {
  private readonly queues = new Map<string, Promise<void>>();

  constructor(
    private readonly storage: Storage,
    private readonly send: (message: SnapshotChunkMessage) => void,
    private readonly onUnreadable: (message: SnapshotChunkMessage, error: unknown) => void,
  ) {}

  post(message: SnapshotChunkMessage): void {
    const previous = this.queues.get(message.to) ?? Promise.resolve();
    const next = previous.then(() => this.fill(message)).then((filled) => {
      if (filled !== null) this.send(filled);
    });
    this.queues.set(message.to, next);
    void next.finally(() => {
      if (this.queues.get(message.to) === next) this.queues.delete(message.to);
    });
  }

  private async fill(message: SnapshotChunkMessage): Promise<SnapshotChunkMessage | null> {
    try {
      const data = await this.storage.readSnapshot(message.meta.index, message.offset,
        message.chunkBytes);
      return { ...message, data };
    } catch (error) {
      this.onUnreadable(message, error);
      return null;
    }
  }

  /** Settles once every chunk posted so far was sent or dropped. */
  async drain(): Promise<void> {
    await Promise.all([...this.queues.values()]);
  }
}

/**
 * Replaces the machine's state with the stored snapshot, streamed in chunks. The machine
 * swaps the state in only after the last chunk, which storage hands out only once the
 * file's checksum verified; on any failure it keeps its state and this rejects. To free
 * memory first, the caller empties the machine (`clearState`).
 */
export async function restoreMachine(storage: Pick<Storage, 'snapshotChunks'>,
  machine: StateMachine, snapshot: Snapshot, chunkBytes = RESTORE_CHUNK_BYTES): Promise<void> {
  const legacy = new LegacySnapshotSkipper();
  machine.restoreBegin();
  try {
    // Transient chunks: the skipper and the machine copy what they keep.
    for await (const chunk of storage.snapshotChunks(snapshot.meta.index, chunkBytes, true)) {
      const part = legacy.take(chunk);
      if (part.length > 0) machine.restoreChunk(part);
    }
    if (!legacy.done) throw new Error('snapshot data ends inside its header');
    machine.restoreEnd();
  } catch (error) {
    machine.restoreAbort();
    throw error;
  }
}
