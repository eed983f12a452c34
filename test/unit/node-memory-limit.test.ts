/**
 * The memory a process may use (host/node/memory-limit.ts), read from /proc and /sys trees
 * written to a temporary directory, and the default memory budget sized to it
 * (host/machine/memory-budget.ts `stateBudgetFor`, host/node/config.ts).
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { serveCommand, serveFlags } from '../../host/cli/serve.js';
import {
  catchUpHeldFor, MAX_STATE_BYTES_DEFAULT, MAX_STATE_BYTES_MIN, restoreRoomFor, stateBudgetFor,
} from '../../host/machine/memory-budget.js';
import { loadConfig } from '../../host/node/config.js';
import { cgroupsOf, readMemoryLimit } from '../../host/node/memory-limit.js';

const MiB = 2 ** 20;
const GiB = 2 ** 30;
let root = '';

afterEach(() => {
  if (root !== '') rmSync(root, { recursive: true, force: true });
  root = '';
});

/** A /proc and /sys under a temporary root, with `files` (path -> text) written. */
function tree(files: Record<string, string>): { proc: string; sys: string } {
  root = mkdtempSync(join(tmpdir(), 'hivekv-memory-'));
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  return { proc: join(root, 'proc'), sys: join(root, 'sys') };
}

const MEMINFO = `MemTotal:       24683792 kB\nMemFree:         1000000 kB\n`;

describe('readMemoryLimit', () => {
  it('takes the least of the machine and every cgroup v2 memory.max up to the root', () => {
    const { proc, sys } = tree({
      'proc/meminfo': MEMINFO,
      'proc/self/cgroup': '0::/system.slice/hivekv.service\n',
      'sys/fs/cgroup/system.slice/hivekv.service/memory.max': 'max\n',
      'sys/fs/cgroup/system.slice/memory.max': `${2 * GiB}\n`,
      'sys/fs/cgroup/memory.max': 'max\n',
    });
    expect(readMemoryLimit(proc, sys)).toEqual({ bytes: 2 * GiB,
      source: 'the cgroup limit of /system.slice (memory.max)' });
  });

  it('reads cgroup v1, where a limit near 2^63 means none', () => {
    const { proc, sys } = tree({
      'proc/meminfo': MEMINFO,
      'proc/self/cgroup': '4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n',
      'sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes': '9223372036854771712\n',
      'sys/fs/cgroup/memory/docker/memory.limit_in_bytes': `${512 * MiB}\n`,
    });
    expect(readMemoryLimit(proc, sys)?.bytes).toBe(512 * MiB);
  });

  it('falls back to the machine, and to nothing', () => {
    const machine = tree({ 'proc/meminfo': MEMINFO, 'proc/self/cgroup': '0::/\n' });
    expect(readMemoryLimit(machine.proc, machine.sys)).toEqual({ bytes: 24683792 * 1024,
      source: 'the machine\'s memory' });
    const bare = tree({});
    expect(readMemoryLimit(bare.proc, bare.sys)).toBeNull();
  });

  it('finds the v2 group and the v1 memory group of /proc/self/cgroup', () => {
    expect(cgroupsOf('12:memory:/a\n0::/b\n5:cpu:/c\n')).toEqual([
      { version: 1, path: '/a' }, { version: 2, path: '/b' }]);
    expect(cgroupsOf(null)).toEqual([]);
  });
});

describe('the default memory budget', () => {
  it('is 2.5 GiB, or 40% of the memory when that is less, in whole MiB', () => {
    expect(stateBudgetFor(null)).toBe(MAX_STATE_BYTES_DEFAULT);
    expect(stateBudgetFor(24 * GiB)).toBe(MAX_STATE_BYTES_DEFAULT);
    expect(stateBudgetFor(2 * GiB)).toBe(819 * MiB);
    expect(stateBudgetFor(MiB)).toBe(MAX_STATE_BYTES_MIN);
  });

  it('leaves a follower room to restore half the memory, or its budget if that is more', () => {
    expect(restoreRoomFor(null, MAX_STATE_BYTES_DEFAULT)).toBe(Number.POSITIVE_INFINITY);
    expect(restoreRoomFor(256 * MiB, stateBudgetFor(256 * MiB))).toBe(128 * MiB);
    // A machine like the leader's takes its snapshot at the budget, and a quarter past it.
    expect(restoreRoomFor(2 * GiB, stateBudgetFor(2 * GiB))).toBeGreaterThan(1.25 * 819 * MiB);
    expect(restoreRoomFor(2 * GiB, 3 * GiB)).toBe(3 * GiB);
  });

  it('holds a follower back from a state past its room, unless it holds as much', () => {
    const room = 128 * MiB;
    let asked = 0;
    const own = (bytes: number) => () => { asked++; return bytes; };
    expect(catchUpHeldFor(null, room, own(0))).toBeNull();
    expect(catchUpHeldFor(room, room, own(0))).toBeNull();
    expect(asked).toBe(0);
    expect(catchUpHeldFor(room + 1, room, own(0))).toBe(room + 1);
    expect(catchUpHeldFor(200 * MiB, room, own(room))).toBe(200 * MiB);
    // Past its room already (a leader's state a little ahead of its own): it catches up.
    expect(catchUpHeldFor(200 * MiB, room, own(room + 1))).toBeNull();
  });

  it('is what a node takes unless HIVEKV_MAX_STATE_BYTES sets it, and says why', () => {
    const flags = serveFlags(serveCommand().parse([], { from: 'user' }));
    const small = { bytes: 2 * GiB, source: 'the cgroup limit of / (memory.max)' };
    expect(loadConfig(flags, {}, small)).toMatchObject({ maxStateBytes: 819 * MiB,
      maxStateBytesFrom: { kind: 'memory', memory: small } });
    expect(loadConfig(flags, {}, { bytes: 64 * GiB, source: 'x' })).toMatchObject({
      maxStateBytes: MAX_STATE_BYTES_DEFAULT, maxStateBytesFrom: { kind: 'ceiling' } });
    expect(loadConfig(flags, {}, null)).toMatchObject({
      maxStateBytes: MAX_STATE_BYTES_DEFAULT, maxStateBytesFrom: { kind: 'ceiling' } });
    expect(loadConfig(flags, { HIVEKV_MAX_STATE_BYTES: String(3 * GiB) }, small))
      .toMatchObject({ maxStateBytes: 3 * GiB, maxStateBytesFrom: { kind: 'setting' } });
  });
});
