/**
 * `makeDirectories` (host/storage/make-directories.ts): `mkdir -p` that fails with the path
 * that failed. Where Node's recursive mkdir loops forever (under /proc), a real `serve` is
 * tried instead (test/integration/data-lock.test.ts), so a regression fails, not hangs.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync, writeFileSync }
  from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeDirectories } from '../../host/storage/make-directories.js';

let root = '';

afterEach(() => {
  if (root !== '') rmSync(root, { recursive: true, force: true });
  root = '';
});

function tempRoot(): string {
  root = mkdtempSync(join(tmpdir(), 'hivekv-mkdirs-'));
  return root;
}

describe('makeDirectories', () => {
  it('creates every missing level, and leaves an existing directory as it is', () => {
    const dir = join(tempRoot(), 'a', 'b', 'c');
    makeDirectories(dir);
    expect(statSync(dir).isDirectory()).toBe(true);
    makeDirectories(dir);
    makeDirectories(root);
    expect(statSync(dir).isDirectory()).toBe(true);
  });

  it('names a file in the way, and a symlink to something missing', () => {
    const base = tempRoot();
    writeFileSync(join(base, 'file'), '');
    expect(() => makeDirectories(join(base, 'file', 'data'))).toThrow(
      `at ${join(base, 'file')}: it exists and is not a directory`);
    symlinkSync(join(base, 'unmounted'), join(base, 'disk'));
    expect(() => makeDirectories(join(base, 'disk', 'hivekv'))).toThrow(
      `at ${join(base, 'disk')}: it exists and is not a directory`);
    expect(existsSync(join(base, 'unmounted'))).toBe(false);
  });

  it('creates the levels below a directory that exists', () => {
    const base = tempRoot();
    mkdirSync(join(base, 'x'));
    makeDirectories(join(base, 'x', 'y'));
    expect(statSync(join(base, 'x', 'y')).isDirectory()).toBe(true);
  });
});
