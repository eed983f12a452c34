/**
 * A dump written to a file durably: into `<path>.partial` first, then fsynced, renamed over
 * `path` and the directory fsynced, so `path` is always a whole dump (the one before, or
 * this one) and a crash or a failed export never leaves a short file under the name a
 * restore would pick up.
 */
import { constants } from 'node:fs';
import { open, rename, unlink, type FileHandle } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { fsyncDirectory } from '../storage/wal.js';

export class DumpFile {
  private bytes = 0;

  private constructor(readonly path: string, private readonly partial: string,
    private handle: FileHandle | null) {}

  static async create(path: string): Promise<DumpFile> {
    const partial = `${path}.partial`;
    const handle = await open(partial,
      constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC, 0o600);
    return new DumpFile(path, partial, handle);
  }

  get written(): number {
    return this.bytes;
  }

  async write(chunk: string | Uint8Array): Promise<void> {
    if (this.handle === null) throw new Error('assertion failed: the dump file is closed');
    const data = typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk;
    let at = 0;
    while (at < data.length) {
      const { bytesWritten } = await this.handle.write(data, at, data.length - at);
      at += bytesWritten;
    }
    this.bytes += data.length;
  }

  /** The dump is whole: makes it durable under its name. */
  async commit(): Promise<void> {
    const handle = this.handle;
    if (handle === null) throw new Error('assertion failed: the dump file is closed');
    this.handle = null;
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(this.partial, this.path);
    await fsyncDirectory(dirname(resolve(this.path)));
  }

  /** The dump will not be whole: nothing of it remains. */
  async abort(): Promise<void> {
    const handle = this.handle;
    this.handle = null;
    await handle?.close().catch(() => undefined);
    await unlink(this.partial).catch(() => undefined);
  }
}
