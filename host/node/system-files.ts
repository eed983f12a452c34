/**
 * Reading what the kernel says of this machine (/proc, /sys): a file that is absent or
 * unreadable is an answer too (not Linux, no cgroup, no cpuidle), so it reads as null.
 */
import { readFileSync } from 'node:fs';

export function readOrNull(path: string): string | null {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return null;
  }
}
