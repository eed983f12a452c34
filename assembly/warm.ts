/**
 * Touches the memory a run of ops is about to read, in passes, before the ops run.
 *
 * At a million keys a write of a stored key misses the cache four or five times in a chain:
 * the key index's slot, then the row it names and the leaf it records, then the leaf's array
 * of rows. One op at a time, each miss waits for the one before. Here each pass makes one
 * load per op whose address the previous pass brought in, so the loads of a pass do not
 * depend on each other and the processor has many misses in flight at once; the ops then run
 * on cached lines. WebAssembly has no prefetch instruction, so the passes load and fold what
 * they read into `warmSink`, which nothing reads, to keep the loads in the compiled code.
 *
 * Reads only: nothing here changes the state, the answer or the digest, and a wrong guess
 * (a stale leaf, another key with the same hash) costs a wasted load, never a wrong result.
 */
import { OP_PUT, OP_DELETE, OP_INCR, OP_GET, OP_CHECK } from './abi';
import { Op, composeKey } from './ops';
import { keyScratch } from './ops';
import { tree } from './state';
import { Node } from './tree';

/** Where a leaf keeps the address of its array of rows. */
const ROWS_FIELD: usize = offsetof<Node>('rows');

/** Ops warmed in one round of passes: their lines (about six each) stay within L2. */
export const WARM_CHUNK: i32 = 64;
/** Calls with fewer ops gain nothing from the passes: a single op has nothing to overlap. */
export const WARM_OPS_MIN: i32 = 4;

const homes = new StaticArray<u32>(WARM_CHUNK);
const hashes = new StaticArray<u32>(WARM_CHUNK);
const entries = new StaticArray<u32>(WARM_CHUNK);

/** What the passes read, folded; kept so the loads are not optimised away. */
export let warmSink: u32 = 0;

function keyed(code: i32): bool {
  return code == OP_PUT || code == OP_DELETE || code == OP_INCR || code == OP_GET ||
    code == OP_CHECK;
}

/** Warms ops[from, min(from + WARM_CHUNK, count)) of tenant `tid` (>= 0). */
export function warmKeys(ops: Array<Op>, from: i32, count: i32, tid: i32): void {
  let index = tree.index;
  if (index == null) return;
  let n = min(WARM_CHUNK, count - from);
  let acc: u32 = 0;
  // Each key's home slot in the index: hashing only, so that the loads of the next pass sit
  // close together (a pass whose iterations are long leaves the processor room for a miss
  // or two at once).
  for (let i = 0; i < n; i++) {
    let op = unchecked(ops[from + i]);
    if (!keyed(op.code)) {
      unchecked(homes[i] = 0);
      continue;
    }
    let kLen = composeKey(tid, op.nsPtr, op.nsLen, op.keyPtr, op.keyLen);
    let home = index.homeSlot(keyScratch, kLen);
    unchecked(homes[i] = <u32>home);
    unchecked(hashes[i] = index.lastHash);
  }
  // Pass 1: the home slots.
  for (let i = 0; i < n; i++) {
    let home = <usize>unchecked(homes[i]);
    if (home != 0) acc += load<u32>(home, 4);
  }
  // The entry each key's lookup will most likely end at (in the slot lines just loaded).
  for (let i = 0; i < n; i++) {
    let home = unchecked(homes[i]);
    unchecked(entries[i] = home == 0 ? 0 : <u32>index.entryOf(<usize>home,
      unchecked(hashes[i])));
  }
  // Pass 2: the row and the leaf the entry names.
  for (let i = 0; i < n; i++) {
    let s = <usize>unchecked(entries[i]);
    if (s == 0) continue;
    acc += load<u32>(<usize>load<u32>(s, 4), 24) + load<u32>(<usize>load<u32>(s, 8), ROWS_FIELD);
  }
  // Pass 3: the leaf's array of rows (every line a scan for the row may read), and the
  // rest of the row (the digest and the answer read all of it).
  for (let i = 0; i < n; i++) {
    let s = <usize>unchecked(entries[i]);
    if (s == 0) continue;
    let rows = <usize>load<u32>(<usize>load<u32>(s, 8), ROWS_FIELD);
    acc += load<u32>(rows) + load<u32>(rows, 64) + load<u32>(rows, 128) + load<u32>(rows, 192);
    let row = <usize>load<u32>(s, 4);
    // An ArrayBuffer's byte length is the u32 just before its data.
    let last = row + <usize>load<u32>(row - 4) - 1;
    for (let p = row + 64; p <= last; p += 64) acc += load<u8>(p);
    acc += load<u8>(last);
  }
  warmSink += acc;
}
