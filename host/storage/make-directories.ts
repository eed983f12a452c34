/**
 * `mkdir -p`, one level at a time. Node's own recursive mkdir loops forever, at full CPU and
 * without a word, where a directory exists but refuses a child with ENOENT (a path under
 * /proc or /sys): a node given such a `--data` hung at start. Here every path fails with its
 * name: one that exists but is no directory (a file, a dangling symlink to an unmounted disk),
 * or one the system will not create.
 */
import { mkdirSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';

export function makeDirectories(dir: string): void {
  const missing: string[] = [];
  for (let at = resolve(dir); !isDirectory(at); at = dirname(at)) {
    missing.push(at);
    if (dirname(at) === at) break;
  }
  for (const path of missing.reverse()) {
    try {
      mkdirSync(path);
    } catch (error) {
      const code = (error as { code?: unknown }).code;
      if (code === 'EEXIST' && isDirectory(path)) continue;
      const why = code === 'EEXIST' ? 'it exists and is not a directory (a file, or a symlink ' +
        'to something missing?)' : (error as Error).message;
      throw new Error(`cannot create directory ${dir}: at ${path}: ${why}`, { cause: error });
    }
  }
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}
