/**
 * One process per data directory, with a lock the kernel holds for us. Two nodes writing one
 * log would corrupt it silently, so start-up binds a Unix socket named after the directory's
 * real path, and a second bind of that name fails while the first process lives.
 *
 * Why a socket and not a PID file: a PID in a file outlives its process. A SIGKILLed node
 * lingers for a while as a zombie, which `kill(pid, 0)` still finds alive, and after a reboot
 * its PID may belong to anything; either way a restart refused to start. A bound socket is
 * closed by the kernel the moment the process exits (zombie or not, before any reaping), and
 * an abstract-namespace socket (Linux) leaves nothing on disk to go stale.
 *
 * - Linux: the abstract name `\0hivekv-data-lock/<sha256 of the real path>`. Abstract names
 *   belong to a network namespace: two containers sharing a data volume must share one too.
 * - Elsewhere: a socket file `<dir>/LOCK.sock`. A file left by a dead process answers no
 *   connection, which tells it from a live holder; it is then replaced.
 *
 * The holder answers every connection to the lock with its pid, so a refusal can name it.
 */
import { createHash } from 'node:crypto';
import { realpathSync, rmSync } from 'node:fs';
import { connect, createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { makeDirectories } from '../storage/make-directories.js';

/** How long a refused start waits for the holder to say its pid. */
const HOLDER_QUERY_TIMEOUT_MS = 1000;
const SOCKET_FILE = 'LOCK.sock';

export class DataDirLockedError extends Error {
  constructor(dir: string, holder: string) {
    super(`data directory ${dir} is in use by ${holder}; stop it, or choose another --data`);
    this.name = 'DataDirLockedError';
  }
}

export interface LockOptions {
  /** Use the abstract namespace; defaults to true on Linux. Tests force the file variant. */
  readonly abstract?: boolean;
}

/** The socket path for `dir`: an abstract name (leading NUL) or a file inside it. */
export function lockSocketPath(dir: string, abstract: boolean): string {
  const real = realpathSync(dir);
  if (!abstract) return join(real, SOCKET_FILE);
  return `\u0000hivekv-data-lock/${createHash('sha256').update(real).digest('hex')}`;
}

function listen(server: Server, path: string): Promise<NodeJS.ErrnoException | null> {
  return new Promise((resolve) => {
    const onError = (error: NodeJS.ErrnoException) => resolve(error);
    server.once('error', onError);
    server.listen({ path, exclusive: true }, () => {
      server.off('error', onError);
      resolve(null);
    });
  });
}

/**
 * Asks whoever holds `path` for its pid. Resolves with a description of the holder, or null
 * when nobody answers (the connection is refused: a stale socket file).
 */
function askHolder(path: string): Promise<string | null> {
  return new Promise((resolve) => {
    const socket = connect({ path });
    let text = '';
    const done = (holder: string | null) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(holder);
    };
    const timer = setTimeout(() => done('another process (it did not say which)'),
      HOLDER_QUERY_TIMEOUT_MS);
    socket.on('error', (error: NodeJS.ErrnoException) => {
      const stale = error.code === 'ECONNREFUSED' || error.code === 'ENOENT';
      done(stale ? null : `another process (${error.code ?? error.message})`);
    });
    socket.on('data', (chunk: Buffer) => {
      text = (text + chunk.toString('utf8')).slice(0, 64);
    });
    socket.on('end', () => {
      const pid = /^hivekv (\d+)\n/.exec(text)?.[1];
      done(pid === undefined ? 'another process' : `process ${pid}`);
    });
  });
}

function lockServer(): Server {
  const server = createServer((socket) => {
    socket.on('error', () => socket.destroy());
    socket.end(`hivekv ${process.pid}\n`);
  });
  // The lock never keeps the process alive on its own.
  server.unref();
  return server;
}

/**
 * Takes the lock on `dir` (created if missing) or throws `DataDirLockedError`. Resolves with
 * the release function; the lock is also released, by the kernel, when the process ends.
 */
export async function lockDataDir(dir: string, options: LockOptions = {}): Promise<() => void> {
  makeDirectories(dir);
  const abstract = options.abstract ?? process.platform === 'linux';
  const path = lockSocketPath(dir, abstract);
  for (let attempt = 0; attempt < 2; attempt++) {
    const server = lockServer();
    const error = await listen(server, path);
    if (error === null) {
      server.on('error', () => undefined);
      return () => {
        server.close();
        if (!abstract) rmSync(path, { force: true });
      };
    }
    if (error.code !== 'EADDRINUSE') {
      throw new Error(`cannot lock data directory ${dir} (${path.replace('\u0000', '@')}): ` +
        error.message);
    }
    const holder = await askHolder(path);
    if (holder !== null) throw new DataDirLockedError(dir, holder);
    // A socket file whose process is gone: nobody listens on it any more. Replace it.
    rmSync(path, { force: true });
  }
  throw new Error(`could not lock data directory ${dir}: its lock socket ${path} keeps ` +
    'coming back');
}
