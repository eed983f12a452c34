/**
 * The suite keeps each server's output beside its report: one file per server, named after
 * it, appended as the output comes, and cut with a line saying so once it reaches its bound.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';

import { ServerLog, serverLogName } from '../../bench/suite/server-log.js';

const dirs: string[] = [];
const tempDir = () => {
  const dir = mkdtempSync(join(tmpdir(), 'hivekv-server-log-'));
  dirs.push(dir);
  return dir;
};
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

const bytes = (text: string) => new TextEncoder().encode(text);

describe('a server\'s log beside the report', () => {
  it('names the file after the server, in letters, digits, dots and dashes', () => {
    expect(serverLogName('hivekv-3-n2')).toBe('hivekv-3-n2.log');
    expect(serverLogName('hivekv-1 again')).toBe('hivekv-1-again.log');
    expect(serverLogName('../etc/passwd')).toBe('..-etc-passwd.log');
    expect(serverLogName('  ')).toBe('server.log');
  });

  it('appends every chunk in order, in a directory it makes', () => {
    const dir = join(tempDir(), 'logs');
    const log = new ServerLog(dir, 'hivekv-3-n1');
    log.write(bytes('{"msg":"serving"}\n'));
    log.write(bytes('{"msg":"snapshot taken"}\n'));
    log.close();
    log.write(bytes('after the close\n'));
    expect(readFileSync(join(dir, 'hivekv-3-n1.log'), 'utf8'))
      .toBe('{"msg":"serving"}\n{"msg":"snapshot taken"}\n');
  });

  it('stops at its bound with one line that says so, and writes nothing after it', () => {
    const dir = tempDir();
    const log = new ServerLog(dir, 'redis', 10);
    log.write(bytes('123456'));
    log.write(bytes('7890'));
    log.write(bytes('abcdef'));
    log.write(bytes('never'));
    expect(readFileSync(join(dir, 'redis.log'), 'utf8'))
      .toBe('1234567890\n[log cut at 10 bytes]\n');
  });
});
