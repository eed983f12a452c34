/**
 * How much memory this process may use: the least of the machine's (MemTotal) and every
 * cgroup limit above the process (cgroup v2 `memory.max`, v1 `memory.limit_in_bytes`, from
 * its own group up to the root). A node sizes its default memory budget from it (config.ts,
 * `stateBudgetFor`): the budget derived from the wasm32 ceiling alone (2.5 GiB of state,
 * 3 to 4.7 GiB of RSS at the budget) would have a container of 2 GiB killed for memory as
 * its state grew, and again at every restart as the snapshot was restored.
 *
 * The reads take the roots of /proc and /sys, so tests give them trees of their own.
 */
import { readOrNull } from './system-files.js';

export interface MemoryLimit {
  readonly bytes: number;
  /** Where the figure comes from, for the log: "cgroup memory.max /system.slice/x". */
  readonly source: string;
}

/** A cgroup v1 limit at or above this is "no limit" (the kernel writes 2^63 less a page). */
const V1_UNLIMITED_BYTES = 2 ** 62;

export function readMemoryLimit(procRoot = '/proc', sysRoot = '/sys'): MemoryLimit | null {
  const limits: MemoryLimit[] = [];
  const total = memTotalOf(readOrNull(`${procRoot}/meminfo`));
  if (total !== null) limits.push({ bytes: total, source: 'the machine\'s memory' });
  for (const group of cgroupsOf(readOrNull(`${procRoot}/self/cgroup`))) {
    for (const path of selfAndAncestors(group.path)) {
      const file = group.version === 2
        ? `${sysRoot}/fs/cgroup${path === '/' ? '' : path}/memory.max`
        : `${sysRoot}/fs/cgroup/memory${path === '/' ? '' : path}/memory.limit_in_bytes`;
      const bytes = cgroupLimitOf(readOrNull(file));
      if (bytes !== null && (group.version === 2 || bytes < V1_UNLIMITED_BYTES)) {
        limits.push({ bytes, source: `the cgroup limit of ${path} ` +
          `(${group.version === 2 ? 'memory.max' : 'memory.limit_in_bytes'})` });
      }
    }
  }
  if (limits.length === 0) return null;
  return limits.reduce((least, limit) => limit.bytes < least.bytes ? limit : least);
}

/** MemTotal of a /proc/meminfo text, in bytes; null if absent. */
export function memTotalOf(meminfo: string | null): number | null {
  const kib = meminfo === null ? undefined : /^MemTotal:\s+(\d+) kB$/m.exec(meminfo)?.[1];
  return kib === undefined ? null : Number(kib) * 1024;
}

/** The memory cgroups of a /proc/self/cgroup text: the v2 group, and v1's memory group. */
export function cgroupsOf(text: string | null): Array<{ version: 1 | 2; path: string }> {
  const groups: Array<{ version: 1 | 2; path: string }> = [];
  for (const line of (text ?? '').split('\n')) {
    const match = /^(\d+):([^:]*):(\/.*)$/.exec(line.trim());
    if (match === null) continue;
    if (match[1] === '0' && match[2] === '') groups.push({ version: 2, path: match[3]! });
    else if (match[2]!.split(',').includes('memory')) groups.push({ version: 1, path: match[3]! });
  }
  return groups;
}

/** A limit file's bytes; null for "max", an empty or unreadable file. */
export function cgroupLimitOf(text: string | null): number | null {
  const trimmed = text?.trim() ?? '';
  if (!/^\d+$/.test(trimmed)) return null;
  const bytes = Number(trimmed);
  return Number.isFinite(bytes) && bytes > 0 ? bytes : null;
}

/** "/a/b" -> "/a/b", "/a", "/". */
function selfAndAncestors(path: string): string[] {
  const paths: string[] = [];
  let at = path.length > 1 ? path.replace(/\/+$/, '') : '/';
  for (;;) {
    paths.push(at);
    if (at === '/') return paths;
    const cut = at.lastIndexOf('/');
    at = cut <= 0 ? '/' : at.slice(0, cut);
  }
}
