/**
 * What each server the suite starts writes to its stdout and stderr, kept beside the report
 * (`logs/<server>.log` in the run's directory), so a stall or an election seen in the figures
 * can be read against the servers' own lines afterwards. Bounded: a server's file stops at
 * `SERVER_LOG_BYTES_MAX`, with one line that says so.
 */
import { closeSync, mkdirSync, openSync, writeSync } from 'node:fs';
import { join } from 'node:path';

export const SERVER_LOG_BYTES_MAX = 16 * 1024 * 1024;

/** A file name from a server's name: letters, digits, dots and dashes only. */
export function serverLogName(server: string): string {
  const name = server.toLowerCase().replace(/[^a-z0-9.-]+/g, '-').replace(/^-+|-+$/g, '');
  return `${name === '' ? 'server' : name}.log`;
}

/** One server's log file, written as its output arrives (a few lines a second at info). */
export class ServerLog {
  private fd: number | null;
  private written = 0;

  constructor(dir: string, server: string, private readonly bytesMax = SERVER_LOG_BYTES_MAX) {
    mkdirSync(dir, { recursive: true });
    this.fd = openSync(join(dir, serverLogName(server)), 'a');
  }

  /** Appends a chunk of output, up to the bound; past it, one line and nothing more. */
  write(chunk: Uint8Array): void {
    if (this.fd === null) return;
    const room = this.bytesMax - this.written;
    if (chunk.length <= room) {
      writeSync(this.fd, chunk);
      this.written += chunk.length;
      return;
    }
    if (room > 0) writeSync(this.fd, chunk.subarray(0, room));
    writeSync(this.fd, `\n[log cut at ${this.bytesMax} bytes]\n`);
    this.close();
  }

  close(): void {
    if (this.fd === null) return;
    closeSync(this.fd);
    this.fd = null;
  }
}
