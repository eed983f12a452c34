/**
 * A hash index from store key to row and leaf beside the live tree: a write or a read of a
 * key already in the store finds its row and the leaf holding it with two or three cache
 * misses, where a descent from the root of a large tree takes about ten.
 *
 * An accelerator, never the truth: a key may be missing from it (its probe run was too long,
 * or the table is at its cap), so a miss sends the caller down the tree, and the leaf of an
 * entry may be stale (a split moved the row), so the caller checks that the leaf holds the
 * row and descends when it does not. A key in the index always names the row the tree
 * holds: the tree updates the entry on every replace and removes it on every remove. Nothing
 * it holds is part of the state: the digest, snapshots and answers never depend on it.
 *
 * Open addressing with linear probing and backward-shift deletion (no tombstones). An entry
 * is three u32: the key's hash (its low bits pick the home slot, so the table doubles without
 * reading a key), the row and the leaf, as raw addresses; the tree holds both, and nodes are
 * never freed while their tree lives. No entry is more than PROBE_MAX slots past its home, so
 * a lookup reads at most PROBE_MAX entries, whatever keys a client chooses. The table lives
 * outside the collector (heap.alloc), bounded by CAPACITY_MAX.
 */
import { Row, rowKeyPtr, rowKeyLen } from './row';

const ENTRY_BYTES: usize = 12;
/** Longest run a lookup follows; an insert that would land farther is skipped. */
const PROBE_MAX: u32 = 64;
const CAPACITY_MIN: u32 = 1024;
/** Entries `entryOf` reads of a run: a hint needs no more than the home slot's cache line. */
const WARM_PROBES: u32 = 4;
/**
 * 4M slots (48 MiB; 72 MiB while doubling into it): room for 3M keys at the load limit. A
 * state with more keys finds the rest through the tree. Bounded so the index stays inside
 * the memory the state's budget leaves outside its count (host/machine/memory-budget.ts).
 */
const CAPACITY_MAX: u32 = 1 << 22;
/** Entries per slot (in 1/1024ths) past which the table doubles: 3/4. */
const LOAD_MAX_1024: u64 = 768;

/**
 * A fixed seed: the table's layout is the same on every replica, and keys chosen to collide
 * cost at most PROBE_MAX entries per lookup before the tree takes over (see above).
 */
const SEED: u64 = 0x68697665_6b76_6b69;
const M1: u64 = 0x9e3779b97f4a7c15;
const M2: u64 = 0xbf58476d1ce4e5b9;
const M3: u64 = 0x94d049bb133111eb;

/** Hashes key bytes, 8 at a time, then the splitmix64 finalizer. */
function keyHash(p: usize, len: i32): u64 {
  let h = SEED ^ (<u64>len * M1);
  let end = p + <usize>len;
  let q = p;
  for (; q + 8 <= end; q += 8) h = rotl<u64>((h ^ load<u64>(q)) * M1, 29);
  let tail: u64 = 0;
  let shift: u64 = 0;
  for (; q < end; q++) {
    tail |= <u64>load<u8>(q) << shift;
    shift += 8;
  }
  h = (h ^ tail) * M1;
  h = (h ^ (h >> 30)) * M2;
  h = (h ^ (h >> 27)) * M3;
  return h ^ (h >> 31);
}

export class KeyIndex {
  private table: usize = 0;
  private mask: u32 = 0;
  /** Entries in the table. */
  count: u32 = 0;
  /** The slot of the last successful lookup, valid until the table changes. */
  lastSlot: usize = 0;

  /** An index sized for `keys` entries without doubling (up to its cap). */
  constructor(keys: i32) {
    let capacity = CAPACITY_MIN;
    while (capacity < CAPACITY_MAX && <u64>keys * 1024 > <u64>capacity * LOAD_MAX_1024) {
      capacity <<= 1;
    }
    this.allocate(capacity);
  }

  /** Gives the table back; the index must not be used afterwards. */
  release(): void {
    if (this.table != 0) heap.free(this.table);
    this.table = 0;
    this.count = 0;
  }

  /** Bytes the table takes. */
  bytes(): usize {
    return (<usize>this.mask + 1) * ENTRY_BYTES;
  }

  private allocate(capacity: u32): void {
    let bytes = <usize>capacity * ENTRY_BYTES;
    this.table = heap.alloc(bytes);
    memory.fill(this.table, 0, bytes);
    this.mask = capacity - 1;
    this.count = 0;
  }

  // @ts-ignore: decorator
  @inline private slot(i: u32): usize {
    return this.table + <usize>(i & this.mask) * ENTRY_BYTES;
  }

  /** The row stored under key k, or null (then the tree is the authority). */
  find(k: usize, kLen: i32): Row | null {
    let h = <u32>keyHash(k, kLen);
    let i = h;
    for (let n: u32 = 0; n < PROBE_MAX; n++, i++) {
      let s = this.slot(i);
      let row = load<u32>(s, 4);
      if (row == 0) return null;
      if (load<u32>(s) == h) {
        let r = changetype<Row>(<usize>row);
        let rLen = rowKeyLen(r);
        if (rLen == kLen && memory.compare(rowKeyPtr(r), k, <usize>kLen) == 0) {
          this.lastSlot = s;
          return r;
        }
      }
    }
    return null;
  }

  /**
   * The home slot of key k: where a lookup of k starts. Its hash is left in `lastHash` for
   * `entryOf`. Reads nothing of the table; see `warmKeys` (warm.ts).
   */
  homeSlot(k: usize, kLen: i32): usize {
    let h = <u32>keyHash(k, kLen);
    this.lastHash = h;
    return this.slot(h);
  }
  lastHash: u32 = 0;

  /**
   * The first entry of the run from `home` whose hash is h, or 0: the entry a lookup of a key
   * with that hash most likely ends at (without comparing keys, so maybe another key's).
   */
  entryOf(home: usize, h: u32): usize {
    let i = <u32>((home - this.table) / ENTRY_BYTES);
    for (let n: u32 = 0; n < WARM_PROBES; n++, i++) {
      let s = this.slot(i);
      if (load<u32>(s, 4) == 0) return 0;
      if (load<u32>(s) == h) return s;
    }
    return 0;
  }

  /** The leaf recorded with the last found row (maybe stale: check it holds the row). */
  lastLeaf(): usize {
    return <usize>load<u32>(this.lastSlot, 8);
  }

  /**
   * Points an entry found by `find` at a new row with the same key, and its leaf. The slot
   * must come from a find with no insert or remove since.
   */
  setAt(slot: usize, row: Row, leaf: usize): void {
    store<u32>(slot, <u32>changetype<usize>(row), 4);
    store<u32>(slot, <u32>leaf, 8);
  }

  /** Records the leaf of an entry found by `find` (a descent found its row elsewhere). */
  setLeafAt(slot: usize, leaf: usize): void {
    store<u32>(slot, <u32>leaf, 8);
  }

  /** Records that a row now sits in another leaf (a split moved it); no-op when absent. */
  moved(row: Row, leaf: usize): void {
    let found = this.find(rowKeyPtr(row), rowKeyLen(row));
    if (found != null) store<u32>(this.lastSlot, <u32>leaf, 8);
  }

  /** Adds a row whose key is not in the index (the caller knows). May skip it. */
  insert(row: Row, leaf: usize): void {
    if (<u64>(this.count + 1) * 1024 > (<u64>this.mask + 1) * LOAD_MAX_1024) {
      if (this.mask + 1 >= CAPACITY_MAX) return;
      this.grow();
    }
    this.place(<u32>keyHash(rowKeyPtr(row), rowKeyLen(row)), <u32>changetype<usize>(row),
      <u32>leaf);
  }

  /** Puts an entry in the first free slot of its run; leaves it out when that is too far. */
  private place(h: u32, row: u32, leaf: u32): void {
    let i = h;
    for (let n: u32 = 0; n < PROBE_MAX; n++, i++) {
      let s = this.slot(i);
      if (load<u32>(s, 4) != 0) continue;
      store<u32>(s, h);
      store<u32>(s, row, 4);
      store<u32>(s, leaf, 8);
      this.count++;
      return;
    }
  }

  private grow(): void {
    let old = this.table;
    let oldCapacity = this.mask + 1;
    this.allocate(oldCapacity << 1);
    for (let i: u32 = 0; i < oldCapacity; i++) {
      let s = old + <usize>i * ENTRY_BYTES;
      let row = load<u32>(s, 4);
      if (row == 0) continue;
      this.place(load<u32>(s), row, load<u32>(s, 8));
    }
    heap.free(old);
  }

  /** Removes the entry in a slot found by `find` (no insert or remove since). */
  removeAt(slot: usize): void {
    let hole = <u32>((slot - this.table) / ENTRY_BYTES);
    // Backward shift: later entries of the run move into the hole when that brings them no
    // farther from home, so every run stays unbroken and no entry moves away from home.
    let j = hole;
    while (true) {
      j = (j + 1) & this.mask;
      let s = this.slot(j);
      if (load<u32>(s, 4) == 0) break;
      let home = load<u32>(s) & this.mask;
      // Move when home is not in the cyclic range (hole, j].
      let movable = hole <= j ? (home <= hole || home > j) : (home <= hole && home > j);
      if (!movable) continue;
      memory.copy(this.slot(hole), s, ENTRY_BYTES);
      hole = j;
    }
    store<u32>(this.slot(hole), 0, 4);
    this.count--;
    this.lastSlot = 0;
  }
}
