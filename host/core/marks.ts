/**
 * Coverage marks: a rare branch calls `mark('name')`, and one named test asserts that the
 * branch was hit (`takeMark`). Counting only: marks never change what the core decides, so
 * determinism is unaffected.
 *
 * Pure: no I/O. The counters are process-wide; a test reads and resets one name.
 */

const hits = new Map<string, number>();

/** Records that the branch named `name` ran. */
export function mark(name: string): void {
  hits.set(name, (hits.get(name) ?? 0) + 1);
}

/** How often `name` was hit since the last `takeMark(name)`; resets it to zero. */
export function takeMark(name: string): number {
  const count = hits.get(name) ?? 0;
  hits.delete(name);
  return count;
}
