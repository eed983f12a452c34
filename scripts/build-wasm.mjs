#!/usr/bin/env node
// Compiles the machine with asc (arguments as for `asc`, run from the current directory),
// after one correction to the runtime's incremental collector, made to the compiler's copy of
// its standard library in memory (node_modules is not touched).
//
// The collector idles until its heap has doubled: `threshold = total * 2`, in 32-bit
// arithmetic. Past 2 GiB of objects that wraps to a threshold below the heap, and the
// collector then never idles: it marks the whole heap again and again, with every
// allocation paying for it (a restore of 12M keys took three times as long). Made to
// saturate alone, it would instead never start a cycle past 2 GiB, leaving the garbage of
// calls, which the machine's own full collections (assembly/memory-use.ts) do not count, to
// pile up towards wasm32's 4 GiB. So the threshold is the heap plus the lesser of the heap and
// IDLE_HEADROOM_BYTES: unchanged up to that size, a cycle per IDLE_HEADROOM_BYTES allocated
// past it, and never more than the 32-bit ceiling.
import asc from 'assemblyscript/asc';
import { COLLECTOR, correctCollector } from './collector-threshold.mjs';

const source = asc.libraryFiles[COLLECTOR];
if (typeof source !== 'string') {
  console.error(`assemblyscript ${asc.version}: no ${COLLECTOR} in its library`);
  process.exit(1);
}
try {
  asc.libraryFiles[COLLECTOR] = correctCollector(source, asc.version);
} catch (error) {
  console.error(error.message);
  process.exit(1);
}
const { error } = await asc.main(process.argv.slice(2), {
  stdout: process.stdout,
  stderr: process.stderr,
});
if (error) {
  console.error(error.message);
  process.exit(1);
}
