/**
 * The data-directory lock (host/node/data-lock.ts) in one process: a second taker is refused
 * and told who holds it, a release frees it, and a stale socket file is taken over. The
 * cross-process cases (a zombie, a live second node) are in test/integration/data-lock.test.ts.
 */
import { spawnSync } from 'node:child_process';
import { statSync, writeFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { DataDirLockedError, lockDataDir, lockSocketPath } from '../../host/node/data-lock.js';
import { removeDir, tempDir } from '../helpers/node-process.js';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) removeDir(dir);
});

describe.each([
  ['the abstract namespace', true],
  ['a socket file', false],
])('the data-directory lock in %s', (_name, abstract) => {
  it('refuses a second taker, naming the holder, until the first releases it', async () => {
    const dir = tempDir('lock');
    dirs.push(dir);
    const release = await lockDataDir(dir, { abstract });
    const second = lockDataDir(dir, { abstract });
    await expect(second).rejects.toBeInstanceOf(DataDirLockedError);
    await expect(lockDataDir(dir, { abstract })).rejects
      .toThrow(`data directory ${dir} is in use by process ${process.pid}`);
    release();
    const again = await lockDataDir(dir, { abstract });
    again();
  });

  it('creates a missing directory', async () => {
    const dir = `${tempDir('lock')}/deeper/still`;
    dirs.push(dir);
    (await lockDataDir(dir, { abstract }))();
  });
});

describe('the socket-file lock', () => {
  it('takes over a socket file its dead holder left behind', async () => {
    const dir = tempDir('lock');
    dirs.push(dir);
    const path = lockSocketPath(dir, false);
    // A process that binds the socket file and dies without a chance to remove it.
    spawnSync(process.execPath, ['-e', `require('node:net').createServer()
      .listen(${JSON.stringify(path)}, () => process.kill(process.pid, 'SIGKILL'))`]);
    expect(statSync(path).isSocket()).toBe(true);
    (await lockDataDir(dir, { abstract: false }))();
  });

  it('takes over a plain file in its place', async () => {
    const dir = tempDir('lock');
    dirs.push(dir);
    writeFileSync(lockSocketPath(dir, false), 'left over');
    (await lockDataDir(dir, { abstract: false }))();
  });
});
