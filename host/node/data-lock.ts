/**
 * One process per data directory. Two nodes writing one log would corrupt it silently, so
 * start-up takes `<dir>/LOCK` (created exclusively, holding the pid) and refuses while another
 * live process holds it. A lock left by a killed process (its pid no longer runs) is taken over.
 */
import { closeSync, mkdirSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';

export class DataDirLockedError extends Error {
  constructor(dir: string, pid: number) {
    super(`data directory ${dir} is in use by process ${pid}; stop it or choose another --data`);
    this.name = 'DataDirLockedError';
  }
}

function processIsAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Takes the lock or throws `DataDirLockedError`. Returns the release function. */
export function lockDataDir(dir: string): () => void {
  mkdirSync(dir, { recursive: true });
  const path = join(dir, 'LOCK');
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(path, 'wx');
      writeSync(fd, `${process.pid}\n`);
      closeSync(fd);
      return () => rmSync(path, { force: true });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const holder = Number(readFileSync(path, 'utf8').trim());
      if (Number.isInteger(holder) && holder > 0 && holder !== process.pid &&
        processIsAlive(holder)) {
        throw new DataDirLockedError(dir, holder);
      }
      rmSync(path, { force: true });
    }
  }
  throw new Error(`could not take the lock ${path}`);
}
