/**
 * Checkpoints: divergence caught as it happens. A leader proposes, every so many entries, a
 * checkpoint entry holding its digest at an index it has applied; by the time that entry
 * commits, more entries may have been appended after that index, so each replica needs its
 * own digest at an index a little in its past. The machine keeps, per applied index, the
 * inputs of the digest (seven words: cheaper to store on every entry than the hash is to
 * compute) in a ring of CHECKPOINT_RING_ENTRIES slots, and computes the digest only when a
 * checkpoint asks for it. The ring is not state: a restore starts it over, and a checkpoint
 * older than the ring, or from before a restore, is unverifiable rather than a divergence.
 */
import {
  CHECKPOINT_RING_ENTRIES, CHECKPOINT_PASSED, CHECKPOINT_DIVERGED, CHECKPOINT_UNVERIFIABLE,
  OUT_CHECKPOINT,
} from './abi';
import { Reader, putU8, putI64 } from './buffers';
import { emitInvalid } from './call';
import { digestOf } from './digest';
import {
  tree, lastVersion, appliedIndex, lastTimeMs, paused, rowDigestSum, quotaDigestSum,
} from './state';

const WORDS: i32 = 7;
const MASK: i64 = <i64>CHECKPOINT_RING_ENTRIES - 1;
// index, lastVersion, lastTimeMs, paused, rowCount, rowSum, quotaSum per slot; index 0 = empty.
const ring = new StaticArray<u64>(CHECKPOINT_RING_ENTRIES * WORDS);

/** Keeps the digest inputs of the state as it is now, at `appliedIndex`. */
export function recordApplied(): void {
  let at = <i32>(appliedIndex & MASK) * WORDS;
  unchecked(ring[at] = <u64>appliedIndex);
  unchecked(ring[at + 1] = <u64>lastVersion);
  unchecked(ring[at + 2] = <u64>lastTimeMs);
  unchecked(ring[at + 3] = paused ? 1 : 0);
  unchecked(ring[at + 4] = <u64>tree.count);
  unchecked(ring[at + 5] = rowDigestSum);
  unchecked(ring[at + 6] = quotaDigestSum);
}

/** Forgets every index (the state was replaced), then keeps the current one. */
export function restart(): void {
  for (let i = 0; i < CHECKPOINT_RING_ENTRIES; i++) unchecked(ring[i * WORDS] = 0);
  recordApplied();
}

/**
 * Applies a CMD_CHECKPOINT (the reader is after its kind byte): `i64 index, u64 digest`, the
 * leader's digest after `index`, which must be an index this replica has applied. Writes
 * OUT_CHECKPOINT with the verdict, the index, the leader's digest and this replica's (0 when
 * unverifiable). Changes no state: what to do about a divergence is the host's to decide.
 */
export function applyCheckpoint(rd: Reader): void {
  let index = rd.i64();
  let expected = <u64>rd.i64();
  if (!rd.failed && (index < 1 || index > appliedIndex)) rd.fail('checkpoint index not applied');
  if (!rd.failed && rd.pos != rd.end) rd.fail('trailing bytes');
  if (rd.failed) { emitInvalid(rd.why); return; }
  let at = <i32>(index & MASK) * WORDS;
  let own: u64 = 0;
  let verdict = CHECKPOINT_UNVERIFIABLE;
  if (unchecked(ring[at]) == <u64>index) {
    own = digestOf(<i64>unchecked(ring[at + 1]), index, <i64>unchecked(ring[at + 2]),
      unchecked(ring[at + 3]) != 0, <i64>unchecked(ring[at + 4]), unchecked(ring[at + 5]),
      unchecked(ring[at + 6]));
    verdict = own == expected ? CHECKPOINT_PASSED : CHECKPOINT_DIVERGED;
  }
  putU8(OUT_CHECKPOINT);
  putU8(verdict);
  putI64(index);
  putI64(<i64>expected);
  putI64(<i64>own);
}
