#!/usr/bin/env node
// Compiles the machine with asc (arguments as for `asc`, run from the current directory),
// after the corrections of scripts/runtime-corrections.mjs to the runtime's allocator and
// collector, made to the compiler's copy of its standard library in memory (node_modules is
// never written). A compiler whose runtime no longer matches stops the build. Three transforms
// of the compiled module: shadow-stack frames zeroed with stores, not `memory.fill`
// (scripts/stack-frame-stores.mjs); no frame at all for a function the collector can never
// see running (scripts/unread-frames.mjs); and copies of up to 32 bytes made in WebAssembly,
// not by `memory.copy` (scripts/short-copies.mjs).
import asc from 'assemblyscript/asc';
import { correctRuntime } from './runtime-corrections.mjs';
import { ShortCopies } from './short-copies.mjs';
import { StackFrameStores } from './stack-frame-stores.mjs';
import { UnreadFrames } from './unread-frames.mjs';

try {
  Object.assign(asc.libraryFiles, correctRuntime(asc.libraryFiles, asc.version));
} catch (error) {
  console.error(error.message);
  process.exit(1);
}
const { error } = await asc.main(process.argv.slice(2), {
  stdout: process.stdout,
  stderr: process.stderr,
  transforms: [StackFrameStores, UnreadFrames, ShortCopies],
});
if (error) {
  console.error(error.message);
  process.exit(1);
}
