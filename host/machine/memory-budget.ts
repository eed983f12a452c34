/**
 * The state's memory budget: how many bytes of state (assembly/row.ts `rowFootprint` of every
 * row plus the tenant table, counted by the machine) a node admits writes up to. Past it a
 * write that would grow the state is refused before the log (503 `kv_unavailable`, reason
 * `memory_full`), so no committed entry can ever fail to apply on any replica.
 *
 * How the default is derived from the ceiling (figures in bytes of wasm memory):
 *
 *   4.00 GiB  the ceiling: wasm32 linear memory can never grow past it.
 *  -0.75 GiB  what the machine holds outside its count: the input region (up to twice the
 *             largest entry, 64 MiB) and the output region (reads up to QUEEN_KV_MAX_READ_BYTES,
 *             snapshot slices), tree nodes and separator rows, the key index beside the tree
 *             (at most 48 MiB, 72 MiB while it doubles: assembly/key-index.ts), scratch
 *             objects of calls, and the allocator's rounding and fragmentation.
 *  = 3.25 GiB the collection line (assembly/memory-use.ts): once the state, the preimages of
 *             an open snapshot, the rows retired and not yet known reclaimed (by a full
 *             collection, or by a cycle of the incremental collector that has ended) and the
 *             dead rows the expiry heap keeps alive (at most about 256 MiB: past it the heap
 *             compacts, assembly/state.ts) pass it, the machine drops the heap's dead entries
 *             and collects in full.
 *  -0.75 GiB  room above the budget for writes admitted before it was reached (a leader takes
 *             up to 128 MiB of uncommitted entries, and an entry's rows can take about twice
 *             its bytes), and for garbage the collector has not reclaimed yet, so that full
 *             collections stay rare (overwriting 5.5 GiB of 60 KB rows at the budget took
 *             seven when only they counted as reclaiming, none since cycles count too).
 *  = 2.50 GiB the default budget. Preimages of an open snapshot count against it too
 *             (`memoryFull`), so a snapshot taken at the budget cannot push memory past the line.
 *
 * Measured (the machine alone, and `npm run bench:fill` through a node): a state of 2.5 GiB
 * of 60 KB values takes 5.5 GiB of overwrites and a snapshot in slices without trapping, and
 * 10M keys of 100-byte values (2.1 GiB of state) fit under it.
 */

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;

/** wasm32's memory ceiling. */
export const MACHINE_MEMORY_CEILING_BYTES = 4 * GiB;
/** HIVEKV_MAX_STATE_BYTES when unset. */
export const MAX_STATE_BYTES_DEFAULT = 2.5 * GiB;
/** The highest budget accepted: beyond it full collections would follow each other. */
export const MAX_STATE_BYTES_LIMIT = 3 * GiB;
/** The lowest budget accepted (1 MiB): an empty state with a few tenants. */
export const MAX_STATE_BYTES_MIN = 1024 * 1024;

/**
 * The share of the process's memory (host/node/memory-limit.ts) a default budget may take.
 * At the budget a node's RSS measured 1.2 to 1.9 times its state (`npm run bench:fill`: 3.1
 * to 4.7 GiB for 2.5 GiB), and a restart restores the whole state: 40% keeps that under
 * about three quarters of the limit.
 */
export const MEMORY_SHARE_FOR_STATE = 0.4;

/**
 * The default budget where the process may use `memoryBytes`: MAX_STATE_BYTES_DEFAULT, or
 * MEMORY_SHARE_FOR_STATE of the memory when that is less (in whole MiB, at least
 * MAX_STATE_BYTES_MIN). Null memory (unknown): the default.
 */
export function stateBudgetFor(memoryBytes: number | null): number {
  if (memoryBytes === null) return MAX_STATE_BYTES_DEFAULT;
  const share = Math.floor(memoryBytes * MEMORY_SHARE_FOR_STATE / MiB) * MiB;
  return Math.max(MAX_STATE_BYTES_MIN, Math.min(MAX_STATE_BYTES_DEFAULT, share));
}

/**
 * The share of the process's memory a state restored from a leader's snapshot may take. The
 * budget admits writes only up to the smallest budget among the members heard, so a larger
 * state comes from writes admitted while this member was away, or had more memory: on a
 * small machine, installing it would have the process killed for memory, and again at every
 * restart as the installed snapshot is restored. Half the memory, not the budget's 40%: the
 * state may pass the budget by what was admitted before it was reached, and a follower on a
 * machine like its leader's must take the leader's snapshot at the budget.
 */
export const MEMORY_SHARE_FOR_RESTORE = 0.5;

/**
 * The largest snapshot a follower takes from its leader, in bytes (a snapshot's rows take
 * fewer bytes than the state they restore: assembly/snapshot-out.ts `emitRow` against
 * assembly/row.ts `rowFootprint`): MEMORY_SHARE_FOR_RESTORE of the memory the process may
 * use, or the budget when that is more (an operator who set it so expects the state to grow
 * to it anyway). Unknown memory: no bound here.
 */
export function restoreRoomFor(memoryBytes: number | null, maxStateBytes: number): number {
  if (memoryBytes === null) return Number.POSITIVE_INFINITY;
  return Math.max(maxStateBytes, Math.floor(memoryBytes * MEMORY_SHARE_FOR_RESTORE));
}

/**
 * The state a follower must not catch up to, or null: the largest state a member said it
 * holds (`largestBytes`, null when none said), where it is more than this node restores
 * (`restoreRoomBytes`) and this node holds less. A node that holds as much already catches
 * up: every member of a busy cluster lags its leader a little, and one past its room is no
 * safer behind.
 */
export function catchUpHeldFor(largestBytes: number | null, restoreRoomBytes: number,
  ownStateBytes: () => number): number | null {
  if (largestBytes === null || largestBytes <= restoreRoomBytes) return null;
  return ownStateBytes() <= restoreRoomBytes ? largestBytes : null;
}

/** What the budget check reads from the machine (StateMachine.memoryUse). */
export interface StateBytes {
  readonly stateBytes: number;
  readonly preimageBytes: number;
}

/**
 * True when a call that would change the state by `growthBytes` must be refused: it grows
 * the state while the state and what an open snapshot keeps alive are at or past the budget.
 * Shrinking and neutral calls always pass, so deletes free memory at any level.
 */
export function memoryFull(use: StateBytes, maxStateBytes: number, growthBytes: number): boolean {
  return growthBytes > 0 && use.stateBytes + use.preimageBytes >= maxStateBytes;
}
