/**
 * Zero-filled segment files prepared ahead of need, so the log writes into blocks that exist.
 *
 * Why: an fdatasync after a write that grows a file must also commit the file's new size (a
 * journal commit on ext4); one after a write into blocks already written commits only the
 * data. On this project's reference disk that is 0.10 ms against 0.15 to 0.21 ms at p50. So
 * the WAL keeps one spare segment, written full of zeros and fsynced in the background, and a
 * roll renames it into place instead of creating a file. The zeros are also what recovery
 * reads as "never written" (wal.ts).
 *
 * A spare is zeroed over the file of a segment a snapshot made garbage when one is at hand
 * (`recycle`), and created only when none is: freeing a 64 MiB file's blocks is not free
 * either (on ext4 mounted with `discard`, the log's fdatasyncs that overlapped such an
 * unlink under load waited 11 to 14 ms), and blocks written over need no allocation.
 *
 * Must never: be on the durability path. A spare that fails to prepare (a full disk, say) is
 * dropped and the next roll creates its segment the old way; nothing waits for a spare.
 *
 * The ready spare outlives the process: closing keeps it, and the next start takes it over
 * instead of zero-filling another. So a node restarted on a volume with no free block (a
 * neighbour filled it) still has the room for its next segment, where creating one stopped
 * the start with ENOSPC. Names say how far a file got, so a crash leaves nothing in doubt:
 * `spare-<n>.recycled` (an old segment waiting to be zeroed) and `spare-<n>.zeroing` are
 * removed at start; `spare-<n>.prealloc` is only ever the name of a spare zeroed and
 * fdatasynced to its full length.
 */
import { open, readdir, rename, unlink, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { openWith } from './descriptors.js';

/** A spare's name at each stage (see above); `<n>` numbers them within the directory. */
const SPARE_NAME = /^spare-(\d+)\.(recycled|zeroing|prealloc)$/;
const READY = 'prealloc';
/**
 * Zeros written, then fdatasynced, per step while preparing a spare. One fdatasync of a whole
 * 64 MiB spare kept the disk busy for 70 ms on an idle machine and far longer under load, and
 * every WAL fsync behind it waited (batches of 16 puts saw a p99 of 370 ms); a step of 1 MiB
 * holds a WAL fsync back by a millisecond or two.
 */
const ZERO_CHUNK_BYTES = 1024 * 1024;
const ZEROS = Buffer.alloc(ZERO_CHUNK_BYTES);
/**
 * Old segment files kept to become spares; more are removed (each holds a segment's room).
 * Four cover the log a node writes between two snapshots at the default byte interval (256
 * MiB): batches of 16 at 64 connections write a segment a second and a snapshot covers
 * three or four at once, and with two kept the others' unlinks still stalled the log by 15
 * to 18 ms (p99 11.2 and 11.3 ms against 9.1 and 10.3 with four, in turns).
 */
const RECYCLED_MAX = 4;

/** A zero-filled file of `bytes`, fsynced, open for writing, under a temporary name. */
export interface SpareSegment {
  readonly path: string;
  readonly handle: FileHandle;
  readonly bytes: number;
}

export class SegmentPreallocator {
  private spare: SpareSegment | null = null;
  private preparing: Promise<void> | null = null;
  /** Old segment files under spare names, waiting to be zeroed into spares, oldest first. */
  private recycled: string[] = [];
  private counter = 0;
  private closed = false;
  /** Spares that failed to prepare; each one means a roll fell back to creating a file. */
  failures = 0;

  /** `enabled` false: no spares at all (every segment is created, as before preallocation). */
  constructor(
    private readonly walDir: string,
    private readonly segmentBytes: number,
    private readonly enabled: boolean,
  ) {}

  /** Resolves once the spare being prepared is ready or has failed. */
  async ready(): Promise<void> {
    await this.preparing;
  }

  /**
   * Takes over one ready spare the last process left (of the segment size), and removes the
   * rest: files a crash left half prepared, more ready ones, and all of them when spares are
   * off. They never hold log records.
   */
  async adoptLeftovers(): Promise<void> {
    for (const name of (await openWith(() => readdir(this.walDir))).sort()) {
      const match = SPARE_NAME.exec(name);
      if (match === null) continue;
      this.counter = Math.max(this.counter, Number(match[1]));
      const path = join(this.walDir, name);
      if (match[2] === READY && this.spare === null && this.enabled && !this.closed) {
        const handle = await openWith(() => open(path, 'r+'));
        if ((await handle.stat()).size === this.segmentBytes) {
          this.spare = { path, handle, bytes: this.segmentBytes };
          continue;
        }
        await handle.close();
      }
      await unlink(path);
    }
  }

  /** Hands over the prepared spare, if one is ready, and starts preparing the next. */
  take(): SpareSegment | null {
    const spare = this.spare;
    this.spare = null;
    this.prepare();
    return spare;
  }

  /**
   * Takes back a spare that a segment did not use (the segment was cut away before its first
   * write): it becomes the ready spare, or is removed when one is ready already.
   */
  giveBack(spare: SpareSegment): void {
    if (this.spare === null && !this.closed && this.enabled) {
      this.spare = spare;
      return;
    }
    void spare.handle.close().then(() => unlink(spare.path)).catch(() => {
      this.failures += 1;
    });
  }

  /**
   * Takes the file of a segment the log no longer holds (its handle closed) to zero into a
   * later spare. Returns false, leaving the file as it is, when spares are off or enough old
   * files are kept already: the caller removes it then.
   */
  async recycle(path: string): Promise<boolean> {
    if (!this.enabled || this.closed || this.recycled.length >= RECYCLED_MAX) return false;
    const sparePath = join(this.walDir, `spare-${++this.counter}.recycled`);
    await rename(path, sparePath);
    // Listed only once renamed: `prepare` may take it at any moment after.
    if (this.closed) {
      await unlink(sparePath);
      return true;
    }
    this.recycled.push(sparePath);
    this.prepare();
    return true;
  }

  /** Starts preparing a spare unless one is ready or being prepared. */
  prepare(): void {
    if (!this.enabled || this.closed || this.spare !== null || this.preparing !== null) return;
    const reused = this.recycled.shift() ?? null;
    const path = reused ?? join(this.walDir, `spare-${++this.counter}.zeroing`);
    this.preparing = this.fill(path, reused !== null).then((spare) => {
      this.preparing = null;
      // Closed meanwhile: the file stays, ready for the next start (see above).
      if (this.closed) return spare.handle.close();
      this.spare = spare;
      return undefined;
    }).catch(() => {
      this.preparing = null;
      this.failures += 1;
      return unlink(path).catch(() => undefined);
    });
  }

  /** Zeros `path` to the segment size, a new file or (`reused`) an old segment's, in steps. */
  private async fill(path: string, reused: boolean): Promise<SpareSegment> {
    const handle = await openWith(() => open(path, reused ? 'r+' : 'wx+'));
    try {
      // An old segment created on demand may be shorter or longer than a spare.
      if (reused) await handle.truncate(this.segmentBytes);
      for (let at = 0; at < this.segmentBytes; at += ZERO_CHUNK_BYTES) {
        const length = Math.min(ZERO_CHUNK_BYTES, this.segmentBytes - at);
        const { bytesWritten } = await handle.write(ZEROS, 0, length, at);
        if (bytesWritten !== length) throw new Error('short write while preparing a spare');
        await handle.datasync();
      }
      // Named ready only once every zero is durable: a start takes over only such a file.
      const readyPath = path.replace(/\.(recycled|zeroing)$/, `.${READY}`);
      await rename(path, readyPath);
      return { path: readyPath, handle, bytes: this.segmentBytes };
    } catch (error) {
      await handle.close();
      throw error;
    }
  }

  /**
   * Waits for a spare being prepared, removes the old files waiting to be zeroed, and closes
   * the ready spare, whose file stays for the next start to take over.
   */
  async close(): Promise<void> {
    this.closed = true;
    await this.preparing;
    for (const path of this.recycled.splice(0)) await unlink(path).catch(() => undefined);
    const spare = this.spare;
    this.spare = null;
    if (spare !== null) await spare.handle.close();
  }
}
