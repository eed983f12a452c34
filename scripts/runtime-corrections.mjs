// The corrections scripts/build-wasm.mjs makes to the compiler's copy of the runtime before
// compiling the machine. Pure, so tests check them against the compiler's own sources. Each
// replaces statements that must each occur exactly once; anything else stops the build.
//
// Two are about memory past 2 GiB, two about the collector's pauses:
// - rt/itcms, the incremental collector, idles until its heap has doubled:
//   `threshold = total * 2`, in 32-bit arithmetic. Past 2 GiB of objects that wraps to a
//   threshold below the heap, and the collector never idles again: it marks the whole heap
//   over and over, every allocation paying for it (a restore of 12M keys took three times as
//   long). Saturated alone, it would never start a cycle past 2 GiB, and the garbage of calls,
//   which the machine's own full collections (assembly/memory-use.ts) do not count, would pile
//   up towards wasm32's 4 GiB. So the threshold is the heap plus the lesser of the heap and
//   IDLE_HEADROOM_BYTES: unchanged below that size, a cycle per IDLE_HEADROOM_BYTES allocated
//   past it, never past the 32-bit ceiling.
// - rt/tlsf, the allocator, doubles memory when it runs out and, when doubling would pass
//   4 GiB, grows by what the allocation needs: one 64 KiB page for a row. V8 answers every
//   `memory.grow` past 2 GiB with a full collection of the JS heap (it counts the whole buffer
//   again as external memory), so a node of 12M keys spent three quarters of its time in
//   them. Where doubling fails it now grows by GROW_STEP_PAGES first, and by what is needed
//   only when that fails too.
// - rt/itcms, marking, walks its list of marked objects to the next one it must scan
//   without counting the walk against its budget. Rows hold no references, so they are
//   marked as they are found and lie in the list in long runs (a leaf's 64, a heap chunk's
//   4,096, and longer where scans of both met), each a cache miss to step over: one step
//   walked up to 49,000 of them, 30 to 40 ms at a million TTL rows. A walk now yields after
//   MARKED_WALK_STEP objects, counting them. (Counting every reference a scan reads, marked
//   or not, was tried too: a container that the backward write barrier greys again after
//   every insert, such as 250,000 idempotency records, then took a whole budget per
//   rescan, and marking never finished.) And the collector takes at most
//   STEPS_PER_INTERRUPT steps at one allocation: a step that scans an object whose
//   references are all marked costs nothing, so one allocation scanned every chunk of the
//   expiry heap in a row (two million references, 20 to 50 ms) once the tree had marked
//   their rows. A step of real cost still ends the run when the budget is spent. A scan
//   costs the object scanned as well as the objects it marks, so that such steps are paced
//   by the budget too, not only by the count.
//
// And one is a count: the collector's cycles begun and ended (`__gc_cycles`), so that the
// machine can tell which retired rows a finished cycle has reclaimed (assembly/memory-use.ts)
// instead of counting them as garbage until a full collection.
//
// The marking pace itself is set in asconfig.json (`use`: ASC_GC_SWEEPFACTOR=20, the define
// itcms reads its STEPFACTOR from): a tenth of the default. At the default, a cycle's whole
// marking ran within about a megabyte of allocation, a few entries of 256 new keys, each
// paused 25 to 30 ms at a million keys; at a tenth it spreads over ten times as many
// entries (about 6 ms each). A slower pace was pathological only while every insert into a
// scanned leaf had the leaf's array scanned again (assembly/tree.ts `storeRow`). The pace
// is the sweep's too, so its cost per object freed is a tenth of the default
// (ASC_GC_SWEEPCOST=1): garbage goes back to the allocator as fast as before, and the heap,
// which keeps growing while a sweep runs, peaks no higher than it did.

/** Allocation past which the collector starts a cycle however large the heap is. */
const IDLE_HEADROOM_BYTES = 512 * 1024 * 1024;
/** Steps the collector takes at one allocation at most, whatever they cost (see above). */
const STEPS_PER_INTERRUPT = 64;
/** Marked objects a collector step walks past before it yields (see above). */
const MARKED_WALK_STEP = 256;
/** Pages (64 MiB) the allocator grows by at once where it can no longer double memory. */
const GROW_STEP_PAGES = 1024;

export const CORRECTIONS = [
  {
    file: 'rt/itcms',
    replace: [
      ['threshold = <usize>(<u64>total * IDLEFACTOR / 100) + GRANULARITY;',
        'threshold = idleThreshold();'],
      ['threshold = total * (IDLEFACTOR / 100) + GRANULARITY;', 'threshold = idleThreshold();'],
      ['threshold = <usize>((<u64>total * IDLEFACTOR) / 100) + GRANULARITY;',
        'threshold = idleThreshold();'],
      ['/** Performs a reasonable amount of incremental GC steps. */', `
// hivekv (scripts/runtime-corrections.mjs): the idle threshold, saturating and capped.
function idleThreshold(): usize {
  let headroom = <u64>total * (IDLEFACTOR - 100) / 100;
  if (headroom > ${IDLE_HEADROOM_BYTES}) headroom = ${IDLE_HEADROOM_BYTES};
  let wanted = <u64>total + headroom + GRANULARITY;
  return wanted < <u64>usize.MAX_VALUE ? <usize>wanted : usize.MAX_VALUE;
}
/** Performs a reasonable amount of incremental GC steps. */`],
      ['        obj = obj.next;\n      }\n      visitCount = 0;\n      visitRoots(VISIT_SCAN);',
        '        obj = obj.next;\n' +
        '        // hivekv (scripts/runtime-corrections.mjs): a step walks a bounded run.\n' +
        `        if (++skipped >= ${MARKED_WALK_STEP}) return skipped * MARKCOST;\n` +
        '      }\n      visitCount = 0;\n      visitRoots(VISIT_SCAN);'],
      ['      let black = i32(!white);\n      obj = iter.next;\n',
        '      let black = i32(!white);\n      obj = iter.next;\n      let skipped: usize = 0;\n'],
      ['          __visit_members(changetype<usize>(obj) + TOTAL_OVERHEAD, VISIT_SCAN);\n' +
        '          return visitCount * MARKCOST;',
        '          __visit_members(changetype<usize>(obj) + TOTAL_OVERHEAD, VISIT_SCAN);\n' +
        '          // hivekv (scripts/runtime-corrections.mjs): the object scanned counts too.\n' +
        '          return (visitCount + 1) * MARKCOST;'],
      ['  let budget: isize = GRANULARITY * STEPFACTOR / 100;\n  do {',
        '  let budget: isize = GRANULARITY * STEPFACTOR / 100;\n' +
        '  // hivekv (scripts/runtime-corrections.mjs): a bounded number of steps.\n' +
        '  let steps = 0;\n  do {'],
      ['  } while (budget > 0);', `  } while (budget > 0 && ++steps < ${STEPS_PER_INTERRUPT});`],
      ['    case STATE_IDLE: {\n      state = STATE_MARK;\n',
        '    case STATE_IDLE: {\n      state = STATE_MARK;\n' +
        '      // hivekv (scripts/runtime-corrections.mjs): a cycle begins.\n' +
        '      cyclesBegun++;\n'],
      ['      state = STATE_IDLE;\n      break;\n',
        '      state = STATE_IDLE;\n' +
        '      // hivekv (scripts/runtime-corrections.mjs): its garbage is freed.\n' +
        '      cyclesEnded++;\n      break;\n'],
      ['/** Performs a single step according to the current state. */', `
// hivekv (scripts/runtime-corrections.mjs): the collector's cycles, counted.
// @ts-ignore: decorator
@lazy let cyclesBegun: u32 = 0;
// @ts-ignore: decorator
@lazy let cyclesEnded: u32 = 0;
/** Cycles begun (high 32 bits) and ended (low 32 bits) since the module started. */
// @ts-ignore: decorator
@global @unsafe
export function __gc_cycles(): u64 {
  return (<u64>cyclesBegun << 32) | <u64>cyclesEnded;
}
/** Performs a single step according to the current state. */`],
    ],
  },
  {
    file: 'rt/tlsf',
    replace: [
      ['    if (memory.grow(pagesNeeded) < 0) unreachable();',
        '    // hivekv (scripts/runtime-corrections.mjs): a step at once, not a page per grow.\n' +
        `    if (memory.grow(max(pagesNeeded, ${GROW_STEP_PAGES})) < 0 && ` +
        'memory.grow(pagesNeeded) < 0) unreachable();'],
    ],
  },
];

/**
 * The library's sources with every correction made, as a new table of the corrected files;
 * or an error naming the statement that no longer matches.
 */
export function correctRuntime(libraryFiles, version) {
  const out = {};
  for (const { file, replace } of CORRECTIONS) {
    let text = libraryFiles[file];
    if (typeof text !== 'string') throw new Error(`assemblyscript ${version}: no ${file}`);
    for (const [from, to] of replace) {
      if (text.split(from).length !== 2) {
        throw new Error(`assemblyscript ${version}: ${file} has not one "${from}"; check ` +
          'whether its collector or allocator still needs scripts/runtime-corrections.mjs');
      }
      text = text.replace(from, to);
    }
    out[file] = text;
  }
  return out;
}
