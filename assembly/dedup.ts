/**
 * The snapshot's dedup section: the replicated table of applied proposals, once it lives in
 * the machine. Until then the section is empty (the host still carries its own table around
 * the machine's snapshot) and these hooks write and read nothing. Pure: no I/O, no clock.
 */
import { Reader } from './buffers';

/** Largest dedup section a snapshot may carry, in bytes. */
export const DEDUP_SECTION_BYTES_MAX: u32 = 64 * 1024 * 1024;

/**
 * Writes the section's content (not its length, which the caller writes) to the output
 * region, as the table is now. Called when a snapshot begins.
 */
export function writeDedupSection(): void {}

/**
 * Reads a section's content (the reader covers exactly its bytes) into a staged table;
 * returns an empty string or why the bytes are not a dedup section. Changes no live state.
 */
export function readDedupSection(rd: Reader): string {
  return rd.pos == rd.end ? '' : 'bad dedup section';
}

/** Makes the staged table live (a restore's swap) or, with nothing staged, empties it. */
export function installDedupSection(): void {}

/** Drops a staged table (a failed or abandoned restore). */
export function discardDedupSection(): void {}
