/**
 * A memory cgroup of the test's own, so that a node started in it (node-process.ts,
 * `cgroupProcs`) sees a memory limit smaller than the machine's, as in a container: it reads
 * the limit as a real node does (host/node/memory-limit.ts), and the kernel kills it for
 * memory past the limit. The group is made under the test process's own memory group (cgroup
 * v1's `memory` hierarchy, or v2's), and needs root; `makeMemoryCgroup` returns null where it
 * cannot be made, and tests that need one skip.
 */
import { mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cgroupsOf } from '../../host/node/memory-limit.js';

export interface MemoryCgroup {
  /** The file a process writes its pid to in order to join the group. */
  readonly procsFile: string;
  /** Removes the group; every process in it must have exited. */
  remove(): void;
}

/** A new memory cgroup named `name` with a limit of `bytes`, or null where none can be made. */
export function makeMemoryCgroup(name: string, bytes: number): MemoryCgroup | null {
  if (process.platform !== 'linux' || process.getuid?.() !== 0) return null;
  let groups: ReturnType<typeof cgroupsOf>;
  try {
    groups = cgroupsOf(readFileSync('/proc/self/cgroup', 'utf8'));
  } catch {
    return null;
  }
  // v1's memory controller when mounted; else v2, when its controller is on in our group.
  const ordered = [...groups.filter((g) => g.version === 1),
    ...groups.filter((g) => g.version === 2)];
  for (const group of ordered) {
    const root = group.version === 1 ? '/sys/fs/cgroup/memory' : '/sys/fs/cgroup';
    const dir = join(root, group.path, `${name}-${process.pid}`);
    const limitFile = group.version === 1 ? 'memory.limit_in_bytes' : 'memory.max';
    try {
      mkdirSync(dir);
    } catch {
      continue;
    }
    try {
      writeFileSync(join(dir, limitFile), String(bytes));
      return { procsFile: join(dir, 'cgroup.procs'), remove: () => rmdirSync(dir) };
    } catch {
      rmdirSync(dir);
    }
  }
  return null;
}
