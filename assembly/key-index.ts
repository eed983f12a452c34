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
 *
 * The table doubles in slices, never at once: doubling 2M slots in one go (zeroing 48 MiB,
 * then re-placing 1.5M entries, each a cache miss) stalled the entry that crossed the load
 * limit for 65 to 72 ms. Growing goes through two phases, each advanced a little by every
 * insert and a slice more after every entry applied (`step`):
 *  - preparing: the next table is zeroed in slices while the current one takes the inserts
 *    (its load passes the limit by well under 1% before the next table is ready);
 *  - draining: inserts go to the next table, and the old one is emptied into it a cluster
 *    (a maximal run of occupied slots) at a time, walking from a slot that was empty when
 *    the drain began. A cluster moves whole, so every entry left in the old table is still
 *    reached from its home, and a key whose old home lies in the walked part is in the new
 *    table only: a lookup reads one table for most keys, two for a key not yet moved.
 * The old table only loses entries while it drains, so its empty slots stay empty.
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
 * Growth slices. Per insert: zeroing then takes 2 * 12 / 4096 of an insert per old slot, so
 * the old table's load passes 3/4 by under 0.6% before the next table takes inserts; the
 * drain walks 8 slots. Per entry: 256 KiB zeroed, or 4,096 slots walked (about 3,000
 * entries placed, a fraction of a millisecond). A drain ends within capacity/8 inserts
 * alone, before the new table (twice the size, under 3/8 full when the drain began) could
 * reach its limit again: that takes 3/4 * capacity inserts.
 */
const ZERO_PER_INSERT: usize = 4096;
const DRAIN_PER_INSERT: u32 = 8;
const ZERO_PER_STEP: usize = 256 << 10;
const DRAIN_PER_STEP: u32 = 4096;

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

/** The address of slot i (taken modulo the table's size) of a table. */
// @ts-ignore: decorator
@inline function slotAt(table: usize, mask: u32, i: u32): usize {
  return table + <usize>(i & mask) * ENTRY_BYTES;
}

export class KeyIndex {
  /** The table that takes inserts (the new one while draining). */
  private table: usize = 0;
  private mask: u32 = 0;
  /** Entries in both tables. */
  count: u32 = 0;
  /** The slot of the last successful lookup, valid until the index changes. */
  lastSlot: usize = 0;

  /** Preparing: the next table, zeroed up to `zeroed` bytes; else 0. */
  private next: usize = 0;
  private nextMask: u32 = 0;
  private zeroed: usize = 0;
  /** Draining: the old table; else 0. */
  private old: usize = 0;
  private oldMask: u32 = 0;
  /** Draining: the old slot the walk began after (empty), and the slots walked since. */
  private drainFrom: u32 = 0;
  private drained: u32 = 0;

  /** An index sized for `keys` entries without doubling (up to its cap). */
  constructor(keys: i32) {
    let capacity = CAPACITY_MIN;
    while (capacity < CAPACITY_MAX && <u64>keys * 1024 > <u64>capacity * LOAD_MAX_1024) {
      capacity <<= 1;
    }
    let bytes = <usize>capacity * ENTRY_BYTES;
    this.table = heap.alloc(bytes);
    memory.fill(this.table, 0, bytes);
    this.mask = capacity - 1;
  }

  /** Gives the tables back; the index must not be used afterwards. */
  release(): void {
    if (this.table != 0) heap.free(this.table);
    if (this.next != 0) heap.free(this.next);
    if (this.old != 0) heap.free(this.old);
    this.table = 0;
    this.next = 0;
    this.old = 0;
    this.count = 0;
  }

  /** Bytes the tables take. */
  bytes(): usize {
    let slots = <usize>this.mask + 1;
    if (this.next != 0) slots += <usize>this.nextMask + 1;
    if (this.old != 0) slots += <usize>this.oldMask + 1;
    return slots * ENTRY_BYTES;
  }

  /** 0 when not growing, 1 while the next table is zeroed, 2 while the old one drains. */
  growPhase(): i32 {
    return this.next != 0 ? 1 : this.old != 0 ? 2 : 0;
  }

  /** The row stored under key k, or null (then the tree is the authority). */
  find(k: usize, kLen: i32): Row | null {
    let h = <u32>keyHash(k, kLen);
    if (this.old != 0 && this.inOld(h)) {
      let r = this.findIn(this.old, this.oldMask, h, k, kLen);
      if (r != null) return r;
    }
    return this.findIn(this.table, this.mask, h, k, kLen);
  }

  /** Whether a key with hash h may still be in the old table: its old home is not walked. */
  // @ts-ignore: decorator
  @inline private inOld(h: u32): bool {
    let offset = ((h & this.oldMask) - this.drainFrom) & this.oldMask;
    return offset == 0 || offset > this.drained;
  }

  /** Whether a slot address lies in the old table (draining). */
  private inOldTable(slot: usize): bool {
    return this.old != 0 && slot >= this.old
      && slot < this.old + (<usize>this.oldMask + 1) * ENTRY_BYTES;
  }

  private findIn(table: usize, mask: u32, h: u32, k: usize, kLen: i32): Row | null {
    let i = h;
    for (let n: u32 = 0; n < PROBE_MAX; n++, i++) {
      let s = slotAt(table, mask, i);
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
   * The home slot of key k: where a lookup of k starts (in the old table while its home
   * there is not walked). Its hash is left in `lastHash` for `entryOf`. Reads nothing of the
   * table; see `warmKeys` (warm.ts).
   */
  homeSlot(k: usize, kLen: i32): usize {
    let h = <u32>keyHash(k, kLen);
    this.lastHash = h;
    if (this.old != 0 && this.inOld(h)) {
      return slotAt(this.old, this.oldMask, h);
    }
    return slotAt(this.table, this.mask, h);
  }
  lastHash: u32 = 0;

  /**
   * The first entry of the run from `home` whose hash is h, or 0: the entry a lookup of a key
   * with that hash most likely ends at (without comparing keys, so maybe another key's).
   */
  entryOf(home: usize, h: u32): usize {
    let inOld = this.inOldTable(home);
    let table = inOld ? this.old : this.table;
    let mask = inOld ? this.oldMask : this.mask;
    let i = <u32>((home - table) / ENTRY_BYTES);
    for (let n: u32 = 0; n < WARM_PROBES; n++, i++) {
      let s = slotAt(table, mask, i);
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
   * must come from a find with no insert, remove or step since.
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
    if (this.next != 0 || this.old != 0) this.advance(ZERO_PER_INSERT, DRAIN_PER_INSERT);
    if (<u64>(this.count + 1) * 1024 > (<u64>this.mask + 1) * LOAD_MAX_1024
      && this.next == 0 && this.mask + 1 < CAPACITY_MAX) {
      // A drain still running would end before the new table filled this far (see the
      // slice sizes), unless inserts come far faster than entries; then it ends here.
      if (this.old != 0) this.advance(0, U32.MAX_VALUE);
      this.next = heap.alloc((<usize>this.mask + 1) * 2 * ENTRY_BYTES);
      this.nextMask = (this.mask << 1) | 1;
      this.zeroed = 0;
    }
    this.place(this.table, this.mask, <u32>keyHash(rowKeyPtr(row), rowKeyLen(row)),
      <u32>changetype<usize>(row), <u32>leaf);
    this.lastSlot = 0;
  }

  /**
   * A slice of a growth in progress, after an entry applied (nothing when none runs).
   * Returns whether the tables changed (any slot held from an earlier find is stale).
   */
  step(): bool {
    if (this.next == 0 && this.old == 0) return false;
    this.advance(ZERO_PER_STEP, DRAIN_PER_STEP);
    this.lastSlot = 0;
    return true;
  }

  /** Zeroes up to `zeroBytes` of the next table, or walks up to about `slots` old slots. */
  private advance(zeroBytes: usize, slots: u32): void {
    if (this.next != 0) {
      let size = (<usize>this.nextMask + 1) * ENTRY_BYTES;
      let n = min(zeroBytes, size - this.zeroed);
      memory.fill(this.next + this.zeroed, 0, n);
      this.zeroed += n;
      if (this.zeroed < size) return;
      assert(this.old == 0, 'key index prepared a table while one drains');
      this.old = this.table;
      this.oldMask = this.mask;
      this.table = this.next;
      this.mask = this.nextMask;
      this.next = 0;
      this.drained = 0;
      // An empty slot to walk from: the old table's load is under 1, so one exists.
      let from: u32 = 0;
      while (load<u32>(slotAt(this.old, this.oldMask, from), 4) != 0) from++;
      this.drainFrom = from;
      return;
    }
    if (this.old == 0) return;
    let capacity = this.oldMask + 1;
    let budget = slots;
    // Walks slots drainFrom+1, drainFrom+2, ..., and stops only just after an empty one, so
    // a cluster always moves whole. The walk ends at drainFrom itself, which is empty.
    while (this.drained < capacity) {
      this.drained++;
      let s = slotAt(this.old, this.oldMask, this.drainFrom + this.drained);
      let row = load<u32>(s, 4);
      if (row != 0) {
        this.count--;
        this.place(this.table, this.mask, load<u32>(s), row, load<u32>(s, 8));
        store<u32>(s, 0, 4);
      } else if (budget <= 1) {
        return;
      }
      if (budget > 0) budget--;
    }
    heap.free(this.old);
    this.old = 0;
  }

  /** Puts an entry in the first free slot of its run; leaves it out when that is too far. */
  private place(table: usize, mask: u32, h: u32, row: u32, leaf: u32): void {
    let i = h;
    for (let n: u32 = 0; n < PROBE_MAX; n++, i++) {
      let s = slotAt(table, mask, i);
      if (load<u32>(s, 4) != 0) continue;
      store<u32>(s, h);
      store<u32>(s, row, 4);
      store<u32>(s, leaf, 8);
      this.count++;
      return;
    }
  }

  /** Removes the entry in a slot found by `find` (no insert, remove or step since). */
  removeAt(slot: usize): void {
    let inOld = this.inOldTable(slot);
    let table = inOld ? this.old : this.table;
    let mask = inOld ? this.oldMask : this.mask;
    let hole = <u32>((slot - table) / ENTRY_BYTES);
    // Backward shift: later entries of the run move into the hole when that brings them no
    // farther from home, so every run stays unbroken and no entry moves away from home.
    let j = hole;
    while (true) {
      j = (j + 1) & mask;
      let s = slotAt(table, mask, j);
      if (load<u32>(s, 4) == 0) break;
      let home = load<u32>(s) & mask;
      // Move when home is not in the cyclic range (hole, j].
      let movable = hole <= j ? (home <= hole || home > j) : (home <= hole && home > j);
      if (!movable) continue;
      memory.copy(slotAt(table, mask, hole), s, ENTRY_BYTES);
      hole = j;
    }
    store<u32>(slotAt(table, mask, hole), 0, 4);
    this.count--;
    this.lastSlot = 0;
  }
}
