/**
 * The last item of an array, or undefined when it has none. `items[items.length - 1]` on an
 * empty array reads the key -1, which is not an index: this Node's V8 looks it up as a named
 * property, through a megamorphic load that calls into the runtime (up to about 650
 * instructions, against a few for an index). Raft's Ready lists are empty in most turns. Pure.
 */
export function lastOf<T>(items: readonly T[]): T | undefined {
  return items.length === 0 ? undefined : items[items.length - 1];
}
