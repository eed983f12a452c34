/**
 * The writes of the call being parsed: one record per put, delete or incr (where its
 * namespace, key, value or delta sit in the command being written), for the one-write-per-key
 * rule (WIRE.md, "Calls with writes") and for the growth estimate. Duplicates are found with
 * an open-addressing table of record indexes, stamped with a generation so that a new call
 * clears nothing. Fixed memory, sized for OPS_PER_CALL_MAX: no allocation per call.
 */
import { OPS_PER_CALL_MAX } from '../abi';
import { addressOf } from './command';

const CAP: i32 = OPS_PER_CALL_MAX;
/** Slots of the duplicate table: a power of two, at least twice the records. */
const SLOTS: i32 = 2 * OPS_PER_CALL_MAX;

export const writeCode = new StaticArray<i32>(CAP);
export const writeNsOff = new StaticArray<i32>(CAP);
export const writeNsLen = new StaticArray<i32>(CAP);
export const writeKeyOff = new StaticArray<i32>(CAP);
export const writeKeyLen = new StaticArray<i32>(CAP);
/** put: value length; incr: offset of the delta text (its length in writeAuxLen). */
export const writeAux = new StaticArray<i32>(CAP);
export const writeAuxLen = new StaticArray<i32>(CAP);
export let writeCount: i32 = 0;

const slotGeneration = new StaticArray<u32>(SLOTS);
const slotRecord = new StaticArray<i32>(SLOTS);
const slotHash = new StaticArray<u32>(SLOTS);
let generation: u32 = 0;

export function resetWrites(): void {
  writeCount = 0;
  generation++;
  if (generation == 0) { // wrapped: stamps of 2^32 calls ago would look current
    memory.fill(changetype<usize>(slotGeneration), 0, <usize>SLOTS << 2);
    generation = 1;
  }
}

/** FNV-1a over namespace, a 0 byte, key. */
function hashOf(nsPtr: usize, nsLen: i32, keyPtr: usize, keyLen: i32): u32 {
  let h: u32 = 2166136261;
  for (let i = 0; i < nsLen; i++) h = (h ^ <u32>load<u8>(nsPtr + <usize>i)) * 16777619;
  h = h * 16777619;
  for (let i = 0; i < keyLen; i++) h = (h ^ <u32>load<u8>(keyPtr + <usize>i)) * 16777619;
  return h;
}

function sameTarget(r: i32, nsOff: i32, nsLen: i32, keyOff: i32, keyLen: i32): bool {
  if (unchecked(writeNsLen[r]) != nsLen || unchecked(writeKeyLen[r]) != keyLen) return false;
  let ns = addressOf(unchecked(writeNsOff[r]));
  let key = addressOf(unchecked(writeKeyOff[r]));
  return memory.compare(ns, addressOf(nsOff), <usize>nsLen) == 0 &&
    memory.compare(key, addressOf(keyOff), <usize>keyLen) == 0;
}

/**
 * Records a write to (namespace, key), both given as offsets in the output region. Returns
 * false, recording nothing, when the call already writes that key.
 */
export function addWrite(code: i32, nsOff: i32, nsLen: i32, keyOff: i32, keyLen: i32,
  aux: i32, auxLen: i32): bool {
  let h = hashOf(addressOf(nsOff), nsLen, addressOf(keyOff), keyLen);
  let s = <i32>(h & <u32>(SLOTS - 1));
  while (unchecked(slotGeneration[s]) == generation) {
    let r = unchecked(slotRecord[s]);
    if (unchecked(slotHash[s]) == h && sameTarget(r, nsOff, nsLen, keyOff, keyLen)) return false;
    s = (s + 1) & (SLOTS - 1);
  }
  assert(writeCount < CAP, 'more writes than OPS_PER_CALL_MAX');
  let r = writeCount++;
  unchecked(writeCode[r] = code);
  unchecked(writeNsOff[r] = nsOff);
  unchecked(writeNsLen[r] = nsLen);
  unchecked(writeKeyOff[r] = keyOff);
  unchecked(writeKeyLen[r] = keyLen);
  unchecked(writeAux[r] = aux);
  unchecked(writeAuxLen[r] = auxLen);
  unchecked(slotGeneration[s] = generation);
  unchecked(slotRecord[s] = r);
  unchecked(slotHash[s] = h);
  return true;
}
