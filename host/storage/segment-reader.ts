/**
 * Reads the segments of a log at recovery, in order, each with its scan (segment-scan.ts).
 * Where the compiled reading worker is present (a build, not a test run of the sources), it
 * reads and checks every segment on another thread, so the checksums of a large log are
 * verified on the second core while this thread restores the snapshot; this thread then
 * only builds the entries of records already verified. Otherwise the segments are read here,
 * each one while the one before it is checked. Both ways give the same scans: the worker
 * runs the same pure scan, and chains the previous segment's last term the same way.
 *
 * Must never: act on a segment (cut it, refuse it) — the caller does, in order, as before.
 */
import { existsSync, openSync, closeSync, fstatSync, readSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';

import {
  entriesAt, scanSegmentBytes, type SegmentScan, type SegmentVerdict,
} from './segment-scan.js';
import { openWith } from './descriptors.js';

/** A segment's bytes and what its scan found. */
export interface ReadSegment {
  readonly bytes: Buffer;
  readonly scan: SegmentScan;
}

export interface SegmentSource {
  /** Segment `i` of those given, read and scanned. Ask for 0, 1, 2, ... in turn. */
  next(i: number): Promise<ReadSegment>;
  /** Stops reading (a refusal, or done); segments not asked for are dropped. */
  close(): Promise<void>;
}

/** What the reading worker is given: the segments in index order. */
export interface SegmentWork {
  readonly paths: readonly string[];
  readonly firstIndexes: readonly number[];
}

/** What the worker posts for segment `i`: its verdict and its bytes, or why it failed. */
export type SegmentMessage =
  | { readonly i: number; readonly verdict: SegmentVerdict; readonly bytes: ArrayBuffer }
  | { readonly i: number; readonly error: string; readonly code: string | undefined };

const WORKER_URL = new URL('./segment-reader-worker.js', import.meta.url);

/**
 * The segments at `paths` (first indexes `firstIndexes`), scanned with the rules of
 * segment-scan.ts; entries at or below `keepAfter` are checked but not built. `workerUrl`
 * is for tests (a worker that fails).
 */
export function readSegments(work: SegmentWork, keepAfter: number, workerUrl = WORKER_URL):
  SegmentSource {
  if (work.paths.length > 0 && existsSync(fileURLToPath(workerUrl))) {
    return new WorkerSegments(work, keepAfter, workerUrl);
  }
  return new LocalSegments(work, keepAfter, 0, 0);
}

/**
 * The scan of segment `i` given the last term of the segments before it, and the last term
 * after it: the chaining both readers share.
 */
export function scanInTurn(work: SegmentWork, i: number, bytes: Uint8Array, previousTerm: number,
  keepAfter: number): SegmentScan {
  return scanSegmentBytes(bytes, work.firstIndexes[i] as number, i === work.paths.length - 1,
    previousTerm, keepAfter);
}

/** Reads in this thread, one segment ahead, from segment `first` (after `lastTerm`). */
class LocalSegments implements SegmentSource {
  private reading: Promise<Buffer> | null = null;
  private readingIndex = -1;

  constructor(private readonly work: SegmentWork, private readonly keepAfter: number,
    first: number, private lastTerm: number) {
    this.readAhead(first);
  }

  private readAhead(i: number): void {
    const path = this.work.paths[i];
    this.readingIndex = i;
    this.reading = path === undefined ? null : readWholeFile(path);
    // A read left behind by a refusal must not surface as an unhandled rejection.
    this.reading?.catch(() => undefined);
  }

  async next(i: number): Promise<ReadSegment> {
    const path = this.work.paths[i];
    if (path === undefined) throw new Error(`assertion failed: no segment ${i}`);
    const bytes = await (this.readingIndex === i && this.reading !== null ? this.reading
      : readWholeFile(path));
    this.readAhead(i + 1);
    const scan = scanInTurn(this.work, i, bytes, this.lastTerm, this.keepAfter);
    if (scan.kind === 'ok') this.lastTerm = scan.lastTerm;
    return { bytes, scan };
  }

  async close(): Promise<void> {
    await this.reading?.catch(() => undefined);
    this.reading = null;
  }
}

interface Waiter {
  resolve(message: SegmentMessage): void;
  reject(error: unknown): void;
}

/**
 * Reads in the worker; posts arrive in order and wait here until asked for. Should the
 * worker fail (it cannot start, or it dies), the segments it did not post are read in this
 * thread instead: a start is slower then, never refused for it.
 */
class WorkerSegments implements SegmentSource {
  private readonly worker: Worker;
  private readonly arrived = new Map<number, SegmentMessage>();
  private readonly waiting = new Map<number, Waiter>();
  private failure: unknown = null;
  /** The last term of the sound segments handed out so far. */
  private lastTerm = 0;
  private local: LocalSegments | null = null;

  constructor(private readonly work: SegmentWork, private readonly keepAfter: number,
    workerUrl: URL) {
    this.worker = new Worker(workerUrl, { workerData: work });
    this.worker.on('message', (message: SegmentMessage) => {
      const waiter = this.waiting.get(message.i);
      this.waiting.delete(message.i);
      if (waiter !== undefined) waiter.resolve(message);
      else this.arrived.set(message.i, message);
    });
    this.worker.on('error', (error) => this.fail(error));
    // Messages posted before the exit may still be on their way: a segment still waited
    // for after them is one the worker never posted.
    this.worker.on('exit', (code) => setImmediate(() => {
      this.fail(new Error(`the log reading worker exited (code ${code}) before it was done`));
    }));
  }

  private fail(error: unknown): void {
    this.failure ??= error;
    for (const waiter of this.waiting.values()) waiter.reject(this.failure);
    this.waiting.clear();
  }

  private message(i: number): Promise<SegmentMessage> {
    const message = this.arrived.get(i);
    if (message !== undefined) {
      this.arrived.delete(i);
      return Promise.resolve(message);
    }
    if (this.failure !== null) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => this.waiting.set(i, { resolve, reject }));
  }

  async next(i: number): Promise<ReadSegment> {
    if (this.local !== null) return this.local.next(i);
    let message: SegmentMessage;
    try {
      message = await this.message(i);
    } catch {
      this.local = new LocalSegments(this.work, this.keepAfter, i, this.lastTerm);
      return this.local.next(i);
    }
    if ('error' in message) {
      throw Object.assign(new Error(message.error), { code: message.code });
    }
    const bytes = Buffer.from(message.bytes);
    const { verdict } = message;
    if (verdict.kind !== 'ok') return { bytes, scan: verdict };
    this.lastTerm = verdict.lastTerm;
    const firstIndex = this.work.firstIndexes[i] as number;
    return { bytes, scan: { ...verdict,
      entries: entriesAt(bytes, verdict.offsets, firstIndex, this.keepAfter) } };
  }

  async close(): Promise<void> {
    this.worker.removeAllListeners('exit');
    await this.worker.terminate();
    await this.local?.close();
  }
}

/**
 * The whole file, read by positional reads of everything still missing: one read for a
 * segment, where readFile would read it in small chunks with a turn of this thread for each.
 */
export async function readWholeFile(path: string): Promise<Buffer> {
  const handle = await openWith(() => open(path, 'r'));
  try {
    const { size } = await handle.stat();
    const bytes = Buffer.allocUnsafe(size);
    let at = 0;
    while (at < size) {
      const { bytesRead } = await handle.read(bytes, at, size - at, at);
      if (bytesRead === 0) throw new Error(`${path}: file ended at byte ${at} of ${size}`);
      at += bytesRead;
    }
    return bytes;
  } finally {
    await handle.close();
  }
}

/** `readWholeFile` for the worker: into a buffer of its own, so it can be transferred. */
export function readWholeFileSync(path: string): Buffer {
  const fd = openSync(path, 'r');
  try {
    const { size } = fstatSync(fd);
    const bytes = Buffer.allocUnsafeSlow(size);
    let at = 0;
    while (at < size) {
      const bytesRead = readSync(fd, bytes, at, size - at, at);
      if (bytesRead === 0) throw new Error(`${path}: file ended at byte ${at} of ${size}`);
      at += bytesRead;
    }
    return bytes;
  } finally {
    closeSync(fd);
  }
}
