/**
 * Snapshots between the machine and storage, never whole in memory, beside the Ready loop:
 *
 * - `Snapshotter` takes this node's snapshots: the machine hands out a slice of at most
 *   `sliceBytes` per event-loop turn (entries keep applying between slices: the machine keeps
 *   the preimages), each written to the snapshot file before the next is cut.
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
import type { SnapshotSink, Storage } from '../storage/storage.js';
import { LegacySnapshotSkipper } from './envelope.js';

/** Bytes of machine snapshot cut per event-loop turn: a slice costs about 1 ms per MiB. */
export const SNAPSHOT_SLICE_BYTES = 1024 * 1024;
/** Bytes of a stored snapshot read and fed to the machine at a time when restoring. */
export const RESTORE_CHUNK_BYTES = 4 * 1024 * 1024;

/** Takes this node's snapshots, one at a time. */
export class Snapshotter {
  private current: { aborted: boolean; done: Promise<Snapshot | null> } | null = null;
  /** Size of the snapshot taken last (or being taken), in bytes. */
  dataBytes = 0;

  constructor(
    private readonly machine: StateMachine,
    private readonly storage: Storage,
    private readonly sliceBytes = SNAPSHOT_SLICE_BYTES,
  ) {}

  get running(): boolean {
    return this.current !== null;
  }

  /**
   * Snapshots the machine as it is now (its applied index must be `meta.index`), slice by
   * slice, into storage. Resolves with the snapshot once it is durable and
   * installed in storage, or null when it was aborted or a newer one got there first.
   */
  take(meta: SnapshotMeta): Promise<Snapshot | null> {
    if (this.current !== null) throw new Error('assertion failed: a snapshot is being taken');
    if (this.machine.appliedIndex !== meta.index) {
      throw new Error(`assertion failed: snapshot meta ${meta.index} is not the applied index ` +
        `${this.machine.appliedIndex}`);
    }
    const run = { aborted: false, done: Promise.resolve<Snapshot | null>(null) };
    const dataBytes = this.machine.snapshotBegin();
    this.dataBytes = dataBytes;
    run.done = this.write(run, meta, dataBytes).finally(() => {
      if (this.current === run) this.current = null;
    });
    this.current = run;
    return run.done;
  }

  private async write(run: { aborted: boolean }, meta: SnapshotMeta,
    dataBytes: number): Promise<Snapshot | null> {
    let sink: SnapshotSink | null = null;
    try {
      sink = await this.storage.createSnapshot(meta, dataBytes);
      let written = 0;
      while (!run.aborted) {
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

  /** Stops the snapshot being taken, if any, and waits until its file is gone. */
  async abort(): Promise<void> {
    const run = this.current;
    if (run === null) return;
    run.aborted = true;
    this.machine.snapshotAbort();
    await run.done.catch(() => null);
  }
}

/** Writes a snapshot a leader sends, chunk by chunk, then installs it. */
export class SnapshotReceiver {
  private sink: SnapshotSink | null = null;
  private written = 0;

  constructor(private readonly storage: Storage) {}

  /** Writes the Ready's steps in order (ready.ts, ReceivedSnapshotStep). */
  async write(steps: readonly ReceivedSnapshotStep[]): Promise<void> {
    for (const step of steps) {
      if (step.type === 'abandon' || step.offset === 0) await this.abandon();
      if (step.type === 'abandon') continue;
      if (step.offset === 0) {
        this.sink = await this.storage.createSnapshot(step.meta, step.totalBytes);
        this.written = 0;
      }
      const sink = this.sink;
      if (sink === null || sink.meta.index !== step.meta.index || this.written !== step.offset) {
        throw new Error(`assertion failed: snapshot chunk at ${step.offset} of ` +
          `${step.meta.index} does not follow what was written`);
      }
      this.written += step.data.length;
      await sink.write(step.data);
    }
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
