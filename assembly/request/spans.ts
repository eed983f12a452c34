/**
 * Where the containers one level inside the body's root end, as the syntax pass found them.
 *
 * The walk of the root object (`{"operations":[...]}`, a transaction's `kv`) must step over
 * each member's value to reach the next member, and the value that matters is the whole list
 * of operations: stepping over it byte by byte scanned the body a second time, only for the
 * walk of each operation to scan it a third. The syntax pass already passes every container's
 * end, so it notes those at depth 2 here, and `valueEnd` looks a container up before it scans.
 *
 * Entries are (open position, position after the close), in the order the containers open,
 * which is also the order they close: containers at one depth never nest in each other. The
 * table is good for the text the last syntax pass checked; a position outside that text, or
 * one the pass noted nothing for, is a miss, and the caller scans as before.
 */

/** Entries held before the first growth (a body with more root-level containers is rare). */
const SPANS_INITIAL: i32 = 64;

let spans: usize = heap.alloc(<usize>SPANS_INITIAL << 3);
let spanCap: i32 = SPANS_INITIAL;
let spanCount: i32 = 0;
let checkedStart: usize = 0;
let checkedEnd: usize = 0;

/** Forgets every span: the text [start, end) is about to be checked. */
export function resetSpans(start: usize, end: usize): void {
  spanCount = 0;
  checkedStart = start;
  checkedEnd = end;
}

/** Notes that the container opened at `open` ends just before `after`. */
export function noteSpan(open: usize, after: usize): void {
  if (spanCount == spanCap) {
    spanCap <<= 1;
    spans = heap.realloc(spans, <usize>spanCap << 3);
  }
  let at = spans + (<usize>spanCount << 3);
  store<u32>(at, <u32>open);
  store<u32>(at, <u32>after, 4);
  spanCount++;
}

/** The position after the container opened at `open`, or 0 when no span was noted for it. */
export function spanEnd(open: usize): usize {
  if (spanCount == 0 || open < checkedStart || open >= checkedEnd) return 0;
  let lo = 0, hi = spanCount - 1;
  while (lo <= hi) {
    let mid = (lo + hi) >>> 1;
    let at = spans + (<usize>mid << 3);
    let key = <usize>load<u32>(at);
    if (key == open) return <usize>load<u32>(at, 4);
    if (key < open) lo = mid + 1;
    else hi = mid - 1;
  }
  return 0;
}
