/**
 * What the commands that read a data directory (`inspect`, `replay`, `diff`) share: their
 * flags' parsing and how a damaged directory is reported. They never write to the directory
 * (host/replay/data-dir.ts), so they may run beside a node that serves from it.
 *
 * Exit status: 0 done, 1 ran and the answer is no (a key not found, logs that differ), 2 a
 * usage mistake, a damaged directory (the message names the file and byte offset) or a
 * directory that cannot answer (no snapshot and no start of the log).
 */
import { DataDirError } from '../replay/data-dir.js';
import { ReplayError } from '../replay/replay.js';
import { StorageCorruptionError } from '../storage/storage.js';
import { EXIT_ERROR, UsageError, wholeNumber } from './connection.js';

/** An index range `A..B`, `A..` (to the end) or `N` (one index). */
export function indexRange(text: string, flag: string): { from: number; to: number } {
  const match = /^\s*(\d{1,15})\s*(\.\.\s*(\d{1,15})?)?\s*$/.exec(text);
  if (match === null) {
    throw new UsageError(`${flag} ${JSON.stringify(text)}: expected A..B, A.. or N`);
  }
  const from = Number(match[1]);
  const to = match[2] === undefined ? from
    : match[3] === undefined ? Number.MAX_SAFE_INTEGER : Number(match[3]);
  if (from < 1 || to < from) throw new UsageError(`${flag} ${text}: an empty range`);
  return { from, to };
}

/** A whole-number flag that must be at least 1, or undefined when absent. */
export function positive(text: string | undefined, flag: string): number | undefined {
  const n = wholeNumber(text, flag);
  if (n !== undefined && n < 1) throw new UsageError(`${flag} ${n}: expected at least 1`);
  return n;
}

/**
 * Runs a data command's body; a damaged directory or one that cannot answer is one line on
 * stderr and exit status 2, other errors go to `runCommand`'s handling.
 */
export async function dataCommand(name: string, body: () => Promise<number>):
  Promise<number> {
  try {
    return await body();
  } catch (error) {
    if (error instanceof StorageCorruptionError || error instanceof ReplayError ||
      error instanceof DataDirError) {
      process.stderr.write(`hivekv ${name}: ${error.message}\n`);
      return EXIT_ERROR;
    }
    throw error;
  }
}

/** Writes one JSON value per line (ndjson). */
export function printLine(value: unknown): void {
  process.stdout.write(JSON.stringify(value) + '\n');
}
