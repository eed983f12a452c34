/**
 * How the machine's memory grows once it is large. The allocator (TLSF) grows memory by
 * doubling it, and past 2 GiB, where doubling would pass wasm32's 4 GiB, by exactly what the
 * request needs: one 64 KiB page for a row. V8 counts the whole buffer again as new external
 * memory on every `memory.grow` and answers past 2 GiB with a full collection of the JS heap,
 * so a large state grew one page and one collection at a time (a node of 12M keys spent three
 * quarters of its time in them). Past that size the machine therefore grows the allocator by a
 * step at once: a block of the step is allocated and freed, which the allocator takes in one
 * grow and then serves the next rows from.
 */

/** Pages of wasm memory past which the allocator can no longer double it (2 GiB). */
const LARGE_MEMORY_PAGES: i32 = 32768;
/** wasm32's ceiling, in 64 KiB pages. */
const MAX_MEMORY_PAGES: i32 = 65536;
/** Bytes the allocator is grown by at once past LARGE_MEMORY_PAGES. */
const GROW_STEP_BYTES: usize = 64 << 20;
/** The step in pages, with one page for the allocator's block overhead. */
const GROW_STEP_PAGES: i32 = <i32>(GROW_STEP_BYTES >> 16) + 1;

/** Memory size when last seen here, in pages. */
let pagesSeen: i32 = 0;

/**
 * Called before the machine allocates a row: once memory is large and has grown since the
 * last call, makes the allocator take a whole step, so that at most one small grow (the one
 * just seen) happens per step. Near the ceiling it leaves the allocator to grow as it needs.
 */
export function growInStepsWhenLarge(): void {
  let pages = memory.size();
  if (pages == pagesSeen) return;
  pagesSeen = pages;
  if (pages < LARGE_MEMORY_PAGES || pages > MAX_MEMORY_PAGES - GROW_STEP_PAGES) return;
  heap.free(heap.alloc(GROW_STEP_BYTES));
  pagesSeen = memory.size();
}
