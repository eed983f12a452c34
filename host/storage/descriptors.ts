/**
 * File descriptors are one pool for the whole process: every connection the HTTP server
 * accepts takes one, and so does every file the node opens (a WAL segment, a snapshot, the
 * hard state, a directory it fsyncs). Clients that open connections up to the process's limit
 * would leave none for the node's own files, and a node that cannot open its next snapshot or
 * segment stops. So the node holds a few descriptors in reserve (on /dev/null), and every file
 * it opens goes through `openWith`: when an open fails for want of a descriptor, the node
 * first stops accepting connections (the listeners registered here), then gives its reserve
 * back to the process and tries again. The HTTP side (host/http/accept-gate.ts) fills the
 * reserve again, and accepts again, once descriptors are free.
 *
 * One reserve per process, as the descriptors are.
 */
import { closeSync, openSync } from 'node:fs';

/** Descriptors held back for the node's own files. */
export const RESERVE_DESCRIPTORS = 16;
/** Tries of an open that found no descriptor, after the first. */
const RETRIES = 4;
/** Between those tries: another thread may have taken what the reserve gave back. */
const RETRY_PAUSE_MS = 25;

/** EMFILE (this process is at its limit) or ENFILE (the whole system is). */
export function isOutOfDescriptors(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === 'EMFILE' || code === 'ENFILE';
}

export class DescriptorReserve {
  private held: number[] = [];
  private readonly exhaustedListeners: Array<() => void> = [];
  /** Opens that found no descriptor, and were tried again. */
  shortages = 0;

  constructor(readonly size: number, private readonly openSpare: () => number =
  () => openSync('/dev/null', 'r'), private readonly closeSpare: (fd: number) => void =
  closeSync) {}

  get heldCount(): number {
    return this.held.length;
  }

  /** Takes descriptors until the reserve is full, or none is left. Returns whether it is full. */
  fill(): boolean {
    while (this.held.length < this.size) {
      let fd: number;
      try {
        fd = this.openSpare();
      } catch (error) {
        if (isOutOfDescriptors(error)) return false;
        throw error;
      }
      this.held.push(fd);
    }
    return true;
  }

  /** Gives every held descriptor back to the process. */
  release(): void {
    const held = this.held;
    this.held = [];
    for (const fd of held) this.closeSpare(fd);
  }

  /** `listener` runs, synchronously, when an open found no descriptor (before the retry). */
  onExhausted(listener: () => void): void {
    this.exhaustedListeners.push(listener);
  }

  /**
   * Runs `open` (anything that takes a descriptor), and when it fails for want of one: tells
   * the listeners (so no more connections are accepted), gives the reserve back, and tries
   * again, a few times. Any other failure, or the last one, is thrown as it came.
   */
  async openWith<T>(open: () => Promise<T>): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await open();
      } catch (error) {
        if (!isOutOfDescriptors(error) || attempt >= RETRIES) throw error;
        this.shortages++;
        for (const listener of this.exhaustedListeners) listener();
        this.release();
        if (attempt > 0) await new Promise((resolve) => setTimeout(resolve, RETRY_PAUSE_MS));
      }
    }
  }
}

/** The process's reserve. Filled when a node starts serving (host/node/main.ts). */
export const descriptors = new DescriptorReserve(RESERVE_DESCRIPTORS);

/** `descriptors.openWith`, for the storage modules' opens. */
export function openWith<T>(open: () => Promise<T>): Promise<T> {
  return descriptors.openWith(open);
}
