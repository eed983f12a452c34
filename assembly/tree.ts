/**
 * The ordered store: a B+tree of rows keyed by their store key bytes, with chained leaves so a
 * prefix page is a range walk, never a scan. Nodes are not merged when deletes empty them: a
 * leaf may be empty and a separator may name a key that is gone, which keeps deletes O(log n)
 * and simple; `restore` rebuilds a compact tree. Pure data structure: no time, no policy.
 */
import {
  Row, rowKeyPtr, rowKeyLen, compareBytes,
} from './row';
import { KeyIndex } from './key-index';

/** Rows per leaf and children per inner node. */
const NODE_CAP: i32 = 64;
/** Longest store key the find cache holds (longer keys just skip the cache). */
const CACHE_KEY_BYTES_MAX: usize = 4608;
/** Shared by every tree: only the live tree is ever searched. */
const cacheKeyBuffer: usize = heap.alloc(CACHE_KEY_BYTES_MAX);
/** Deepest possible tree: 64^10 far exceeds any memory a wasm32 module can address. */
const DEPTH_MAX: i32 = 10;

export class Node {
  leaf: bool;
  /** Leaf: rows in use. Inner: children in use (separators in use = n - 1). */
  n: i32 = 0;
  /** Leaf: rows in key order. Inner: separator rows; kids[i + 1] holds keys >= rows[i]. */
  rows: StaticArray<Row> = new StaticArray<Row>(NODE_CAP);
  kids: StaticArray<Node> | null = null;
  next: Node | null = null;
  /**
   * Every key that can be in this node shares its first hintOff bytes (they lie between the
   * node's bounds, whose common prefix that is), so hints[i] = the 8 bytes of rows[i]'s key
   * from hintOff on, big-endian and zero-padded, orders rows without touching them whenever
   * two hints differ. Keeps a search to about one cache miss per node.
   */
  hintOff: i32 = 0;
  hints: StaticArray<u64> = new StaticArray<u64>(NODE_CAP);
  /**
   * A node with an open bound (the tree's outer spines) takes hintOff from its own keys
   * instead: an insert that breaks the shared prefix shortens it, and a search first checks
   * the key against that prefix (a key outside it sorts before or after the whole node).
   */
  openBound: bool = true;

  constructor(leaf: bool) {
    this.leaf = leaf;
    if (!leaf) this.kids = new StaticArray<Node>(NODE_CAP);
  }
}

/** Where a row is among a leaf's rows, by address; -1 when the leaf does not hold it. */
function rowIndexIn(leaf: Node, r: Row): i32 {
  let p = changetype<usize>(leaf.rows);
  let target = i32x4.splat(<i32>changetype<usize>(r));
  // Slots past n are null (clearRefs), and the array holds NODE_CAP, a multiple of 4.
  for (let j = 0; j < leaf.n; j += 4) {
    let hits = i32x4.bitmask(i32x4.eq(v128.load(p + (<usize>j << 2)), target));
    if (hits != 0) {
      let i = j + ctz(hits);
      return i < leaf.n ? i : -1;
    }
  }
  return -1;
}

function cmpRow(r: Row, k: usize, kLen: i32): i32 {
  return compareBytes(rowKeyPtr(r), rowKeyLen(r), k, kLen);
}

/** The 8 key bytes from `off`, big-endian, zero-padded past the end. */
function hintOf(k: usize, kLen: i32, off: i32): u64 {
  if (off + 8 <= kLen) return bswap(load<u64>(k + <usize>off));
  let h: u64 = 0;
  for (let i = 0; i < 8; i++) {
    let j = off + i;
    h = (h << 8) | (j < kLen ? <u64>load<u8>(k + <usize>j) : 0);
  }
  return h;
}

function rowHint(r: Row, off: i32): u64 {
  return hintOf(rowKeyPtr(r), rowKeyLen(r), off);
}

/** Compares rows[i] with k: by hints when they differ (exact, see Node.hints), else fully. */
// @ts-ignore: decorator
@inline function cmpAt(node: Node, i: i32, kh: u64, k: usize, kLen: i32): i32 {
  let h = unchecked(node.hints[i]);
  if (h != kh) return h < kh ? -1 : 1;
  // Equal hints: both keys share the node's prefix and the 8 hinted bytes (or end inside
  // them), so the comparison resumes after them.
  let r = unchecked(node.rows[i]);
  let rLen = rowKeyLen(r);
  let s = min(node.hintOff + 8, min(rLen, kLen));
  return compareBytes(rowKeyPtr(r) + <usize>s, rLen - s, k + <usize>s, kLen - s);
}

/** Rows in use: all of a leaf's, the separators of an inner node. */
// @ts-ignore: decorator
@inline function usedOf(node: Node): i32 { return node.leaf ? node.n : node.n - 1; }

/**
 * For an open-bound node: -1 / 1 when k lies wholly before / after the node's shared
 * prefix, 0 when it shares it (and hinted comparisons apply).
 */
function outside(node: Node, k: usize, kLen: i32): i32 {
  if (!node.openBound || usedOf(node) == 0) return 0;
  let r = unchecked(node.rows[0]);
  let off = node.hintOff;
  if (kLen < off) {
    let c = memory.compare(k, rowKeyPtr(r), <usize>kLen);
    return c < 0 || c == 0 ? -1 : 1;
  }
  let c = memory.compare(k, rowKeyPtr(r), <usize>off);
  return c < 0 ? -1 : c > 0 ? 1 : 0;
}

/** First index in a leaf's rows[0..n) whose key is >= k. */
function lowerBound(node: Node, k: usize, kLen: i32): i32 {
  let side = outside(node, k, kLen);
  if (side != 0) return side < 0 ? 0 : node.n;
  let kh = hintOf(k, kLen, node.hintOff);
  let lo = 0, hi = node.n;
  while (lo < hi) {
    let mid = (lo + hi) >>> 1;
    if (cmpAt(node, mid, kh, k, kLen) < 0) lo = mid + 1; else hi = mid;
  }
  return lo;
}

/** Child index for k in an inner node: the number of separators <= k. */
function childIndex(node: Node, k: usize, kLen: i32): i32 {
  let side = outside(node, k, kLen);
  if (side != 0) return side < 0 ? 0 : node.n - 1;
  let kh = hintOf(k, kLen, node.hintOff);
  let lo = 0, hi = node.n - 1;
  while (lo < hi) {
    let mid = (lo + hi) >>> 1;
    if (cmpAt(node, mid, kh, k, kLen) <= 0) lo = mid + 1; else hi = mid;
  }
  return lo;
}

/** Length of the common prefix of two bound keys; 0 when either bound is open (null). */
function boundsPrefix(lo: Row | null, hi: Row | null): i32 {
  if (lo == null || hi == null) return 0;
  let a = rowKeyPtr(lo), b = rowKeyPtr(hi);
  let n = min(rowKeyLen(lo), rowKeyLen(hi));
  let i = 0;
  while (i < n && load<u8>(a + <usize>i) == load<u8>(b + <usize>i)) i++;
  return i;
}

function keyPrefix(a: Row, b: Row): i32 {
  let pa = rowKeyPtr(a), pb = rowKeyPtr(b);
  let n = min(rowKeyLen(a), rowKeyLen(b));
  let i = 0;
  while (i < n && load<u8>(pa + <usize>i) == load<u8>(pb + <usize>i)) i++;
  return i;
}

/**
 * Sets a node's hint offset (from its bounds, or from its own keys when a bound is open)
 * and recomputes all its hints.
 */
function rehint(node: Node, lo: Row | null, hi: Row | null): void {
  let used = usedOf(node);
  node.openBound = lo == null || hi == null;
  if (!node.openBound) node.hintOff = boundsPrefix(lo, hi);
  else if (used == 0) node.hintOff = 0;
  else node.hintOff = keyPrefix(unchecked(node.rows[0]), unchecked(node.rows[used - 1]));
  recomputeHints(node);
}

function recomputeHints(node: Node): void {
  let used = usedOf(node);
  for (let i = 0; i < used; i++) {
    unchecked(node.hints[i] = rowHint(unchecked(node.rows[i]), node.hintOff));
  }
}

/** Moves hints inside one array. */
function shiftHints(arr: StaticArray<u64>, from: i32, to: i32, count: i32): void {
  if (count <= 0) return;
  let p = changetype<usize>(arr);
  memory.copy(p + (<usize>to << 3), p + (<usize>from << 3), <usize>count << 3);
}

/** Moves refs inside one array; they stay reachable from it, so no write barrier is due. */
function shiftRefs(arr: usize, from: i32, to: i32, count: i32): void {
  if (count <= 0) return;
  memory.copy(arr + (<usize>to << 2), arr + (<usize>from << 2), <usize>count << 2);
}

/**
 * Stores a row in a leaf's array through the forward write barrier (`__link(arr, row,
 * false)`): while the collector marks, a row stored in an array it has scanned is marked
 * itself. An array's own store (`rows[i] = row`) takes the backward barrier, which marks the
 * array for a second scan instead: 64 references and their rows read again, for every
 * insert into a scanned leaf, so a load's inserts during a marking cycle made most of its
 * cost and its pauses. A row holds no references, so marking it is all the scan would do.
 */
// @ts-ignore: decorator
@inline function storeRow(arr: StaticArray<Row>, i: i32, row: Row): void {
  let a = changetype<usize>(arr);
  store<usize>(a + (<usize>i << alignof<usize>()), changetype<usize>(row));
  __link(a, changetype<usize>(row), false);
}

/**
 * Nulls the slots [from, to) a node no longer uses. The collector visits every slot of a
 * StaticArray, so a stale ref there would keep a replaced or removed row alive for good.
 */
function clearRefs(arr: usize, from: i32, to: i32): void {
  if (to <= from) return;
  memory.fill(arr + (<usize>from << 2), 0, <usize>(to - from) << 2);
}

export class Tree {
  root: Node = new Node(true);
  count: i32 = 0;
  /**
   * The last descent, as raw addresses: written on every search, so they skip the GC write
   * barrier; safe because every node and bound row on the path is held by the tree itself.
   */
  private path: StaticArray<usize> = new StaticArray<usize>(DEPTH_MAX);
  private pathIdx: StaticArray<i32> = new StaticArray<i32>(DEPTH_MAX);
  /** Bounds of path[d] (null = open), and of the leaf reached (at index depth). */
  private pathLo: StaticArray<usize> = new StaticArray<usize>(DEPTH_MAX + 1);
  private pathHi: StaticArray<usize> = new StaticArray<usize>(DEPTH_MAX + 1);
  private depth: i32 = 0;
  /**
   * The leaf and index the last `find` stopped at, still valid while `cacheValid` (any change
   * to the tree clears it), so an upsert of the key just looked up skips the second descent.
   */
  private cacheLeaf: Node | null = null;
  private cacheIdx: i32 = 0;
  private cacheDepth: i32 = 0;
  /** A copy of the key of the last find (the caller's buffer may be reused meanwhile). */
  private cacheKey: usize = cacheKeyBuffer;
  private cacheKeyLen: i32 = -1;
  private cacheValid: bool = false;
  /** The key index's slot of the last find's key, 0 when it is not in the index. */
  private cacheSlot: usize = 0;
  /** Cursor of the last seek: leaf and index (index may equal n; call `settle`). */
  curLeaf: Node | null = null;
  curIdx: i32 = 0;
  /** The live tree's key index (key-index.ts); null for other trees (preimages). */
  index: KeyIndex | null = null;
  /** The leaf the last `insertAt` put its row in. */
  private insertedLeaf: Node | null = null;

  /**
   * Starts a key index over every row the tree holds (the state's tree, after a restore).
   * Walks the leaves: the cursor is left at the end.
   */
  attachIndex(): void {
    let index = new KeyIndex(this.count);
    this.seekFirst();
    while (this.curLeaf != null) {
      let leaf = this.curLeaf!;
      for (let i = this.curIdx; i < leaf.n; i++) {
        index.insert(unchecked(leaf.rows[i]), changetype<usize>(leaf));
      }
      this.curIdx = leaf.n;
      this.settle();
    }
    this.index = index;
    this.cacheValid = false;
  }

  /**
   * Checks the key index against the tree, for tests: every entry names a row of the tree
   * under its own key, and every row the index has is found by its key. Writes i64s: rows,
   * entries, rows not indexed (skipped), entries whose recorded leaf is stale, and the index's
   * growth phase (KeyIndex.growPhase); throws on
   * any disagreement. Walks the leaves: the cursor is left at the end.
   */
  checkIndex(): StaticArray<i64> {
    let out = new StaticArray<i64>(5);
    let index = this.index;
    if (index == null) return out;
    let rows: i64 = 0, found: i64 = 0, stale: i64 = 0;
    this.seekFirst();
    while (this.curLeaf != null) {
      let leaf = this.curLeaf!;
      for (let i = this.curIdx; i < leaf.n; i++) {
        let r = unchecked(leaf.rows[i]);
        rows++;
        let hit = index.find(rowKeyPtr(r), rowKeyLen(r));
        if (hit == null) continue;
        assert(changetype<usize>(hit) == changetype<usize>(r), 'index names another row');
        found++;
        if (index.lastLeaf() != changetype<usize>(leaf)) stale++;
      }
      this.curIdx = leaf.n;
      this.settle();
    }
    assert(found == <i64>index.count, 'index holds entries for keys not in the tree');
    this.cacheValid = false;
    unchecked(out[0] = rows);
    unchecked(out[1] = found);
    unchecked(out[2] = rows - found);
    unchecked(out[3] = stale);
    unchecked(out[4] = index.growPhase());
    return out;
  }

  /** A slice of the key index's growth, when one runs (after every entry applied). */
  indexStep(): void {
    if (this.index != null && this.index!.step()) this.cacheValid = false;
  }

  /** Frees the key index's table (the tree is leaving the state). */
  detachIndex(): void {
    if (this.index != null) this.index!.release();
    this.index = null;
    this.cacheValid = false;
  }

  /**
   * Where key k is or would go: returns the index in the leaf it leaves in `foundLeaf`, and
   * in `foundSlot` the key index's slot of the key, or 0 when the index lacks it. Then, and
   * only then, the leaf was reached by a descent, whose path is in path/pathIdx for an insert.
   * An entry whose leaf does not hold its row (a split moved it) is mended by a descent.
   */
  private locate(k: usize, kLen: i32): i32 {
    let index = this.index;
    let r = index != null ? index.find(k, kLen) : null;
    if (r == null) {
      this.foundSlot = 0;
      let leaf = this.descend(k, kLen);
      this.foundLeaf = leaf;
      return lowerBound(leaf, k, kLen);
    }
    this.foundSlot = index!.lastSlot;
    let leaf = changetype<Node>(index!.lastLeaf());
    let i = rowIndexIn(leaf, r);
    if (i < 0) {
      leaf = this.descend(k, kLen);
      i = lowerBound(leaf, k, kLen);
      assert(i < leaf.n && changetype<usize>(unchecked(leaf.rows[i])) == changetype<usize>(r),
        'key index names a row not in the tree');
      index!.setLeafAt(this.foundSlot, changetype<usize>(leaf));
    }
    this.foundLeaf = leaf;
    return i;
  }
  private foundSlot: usize = 0;
  private foundLeaf: Node | null = null;

  private descend(k: usize, kLen: i32): Node {
    let node = this.root;
    let d = 0;
    let lo: usize = 0, hi: usize = 0;
    while (!node.leaf) {
      assert(d < DEPTH_MAX, 'tree too deep');
      let ci = childIndex(node, k, kLen);
      unchecked(this.path[d] = changetype<usize>(node));
      unchecked(this.pathIdx[d] = ci);
      unchecked(this.pathLo[d] = lo);
      unchecked(this.pathHi[d] = hi);
      if (ci > 0) lo = changetype<usize>(unchecked(node.rows[ci - 1]));
      if (ci < node.n - 1) hi = changetype<usize>(unchecked(node.rows[ci]));
      d++;
      node = unchecked(node.kids![ci]);
    }
    unchecked(this.pathLo[d] = lo);
    unchecked(this.pathHi[d] = hi);
    this.depth = d;
    return node;
  }

  find(k: usize, kLen: i32): Row | null {
    let i = this.locate(k, kLen);
    let leaf = this.foundLeaf!;
    this.cacheSlot = this.foundSlot;
    this.cacheDepth = this.depth;
    this.cacheLeaf = leaf;
    this.cacheIdx = i;
    this.cacheValid = kLen <= <i32>CACHE_KEY_BYTES_MAX;
    if (this.cacheValid) {
      memory.copy(this.cacheKey, k, <usize>kLen);
      this.cacheKeyLen = kLen;
    }
    if (i < leaf.n && cmpRow(unchecked(leaf.rows[i]), k, kLen) == 0) {
      return unchecked(leaf.rows[i]);
    }
    return null;
  }

  /** Inserts or replaces the row with the same key; returns the replaced row or null. */
  upsert(row: Row): Row | null {
    let k = rowKeyPtr(row), kLen = rowKeyLen(row);
    let leaf: Node;
    let i: i32;
    let slot: usize = 0;
    if (this.cacheValid && compareBytes(this.cacheKey, this.cacheKeyLen, k, kLen) == 0) {
      // Nothing changed the tree since the last find. When it found the key through the
      // index, the key is there and no path is needed; else the path of its descent is still
      // in path/pathIdx.
      leaf = this.cacheLeaf!;
      i = this.cacheIdx;
      slot = this.cacheSlot;
      if (slot == 0) this.depth = this.cacheDepth;
    } else {
      i = this.locate(k, kLen);
      leaf = this.foundLeaf!;
      slot = this.foundSlot;
    }
    this.cacheValid = false;
    let index = this.index;
    if (i < leaf.n && cmpRow(unchecked(leaf.rows[i]), k, kLen) == 0) {
      let old = unchecked(leaf.rows[i]);
      storeRow(leaf.rows, i, row);
      if (index != null) {
        if (slot != 0) index.setAt(slot, row, changetype<usize>(leaf));
        else index.insert(row, changetype<usize>(leaf));
      }
      return old;
    }
    assert(slot == 0, 'key index names a key the tree lacks');
    this.insertAt(leaf, i, row);
    if (index != null) index.insert(row, changetype<usize>(this.insertedLeaf));
    return null;
  }

  /**
   * Inserts the row unless a row with its key is there already (that one stays); returns
   * whether it inserted. Never reads or writes the find cache, so a second tree (the
   * preimages of a snapshot) can use it without disturbing the live tree's cache, which
   * shares one key buffer with every tree.
   */
  insertIfAbsent(row: Row): bool {
    let k = rowKeyPtr(row), kLen = rowKeyLen(row);
    this.cacheValid = false;
    let leaf = this.descend(k, kLen);
    let i = lowerBound(leaf, k, kLen);
    if (i < leaf.n && cmpRow(unchecked(leaf.rows[i]), k, kLen) == 0) return false;
    this.insertAt(leaf, i, row);
    let index = this.index;
    if (index != null) index.insert(row, changetype<usize>(this.insertedLeaf));
    return true;
  }

  /** Inserts a new key at index i of the leaf the last descent reached, splitting if full. */
  private insertAt(leaf: Node, i: i32, row: Row): void {
    this.count++;
    if (leaf.n < NODE_CAP) {
      leafInsert(leaf, i, row);
      this.insertedLeaf = leaf;
      return;
    }
    let right = new Node(true);
    // A key past the last of a full leaf (keys arriving in order: counters, timestamps, a
    // load) starts a new leaf and leaves this one full. Halves would leave every leaf of an
    // ordered load half empty: twice the nodes, and more cache misses in every later search.
    let appending = i == NODE_CAP;
    let half = appending ? NODE_CAP : NODE_CAP >> 1;
    for (let j = half; j < NODE_CAP; j++) unchecked(right.rows[j - half] = leaf.rows[j]);
    clearRefs(changetype<usize>(leaf.rows), half, NODE_CAP);
    right.n = NODE_CAP - half;
    leaf.n = half;
    let index = this.index;
    if (index != null) {
      // The rows that moved name their new leaf, so the index never leads to a stale one.
      for (let j = 0; j < right.n; j++) {
        index.moved(unchecked(right.rows[j]), changetype<usize>(right));
      }
    }
    right.next = leaf.next;
    leaf.next = right;
    if (!appending && i <= half) {
      leafInsert(leaf, i, row);
      this.insertedLeaf = leaf;
    } else {
      leafInsert(right, i - half, row);
      this.insertedLeaf = right;
    }
    let sep = unchecked(right.rows[0]);
    let d = this.depth;
    rehint(leaf, changetype<Row | null>(unchecked(this.pathLo[d])), sep);
    rehint(right, sep, changetype<Row | null>(unchecked(this.pathHi[d])));
    this.insertIntoParent(d - 1, leaf, sep, right);
  }

  private insertIntoParent(level: i32, left: Node, sep: Row, right: Node): void {
    while (true) {
      if (level < 0) {
        let root = new Node(false);
        unchecked(root.kids![0] = left);
        unchecked(root.kids![1] = right);
        unchecked(root.rows[0] = sep);
        root.n = 2;
        rehint(root, null, null);
        this.root = root;
        return;
      }
      let parent = changetype<Node>(unchecked(this.path[level]));
      let ci = unchecked(this.pathIdx[level]);
      if (parent.n < NODE_CAP) {
        insertInner(parent, ci, sep, right);
        return;
      }
      if (ci == parent.n - 1) {
        // Its last child split (keys arriving in order, as for leaves): the parent stays
        // full, and a new node starts with the new child alone, bounded below by `sep`.
        let alone = new Node(false);
        unchecked(alone.kids![0] = right);
        alone.n = 1;
        rehint(alone, sep, changetype<Row | null>(unchecked(this.pathHi[level])));
        rehint(parent, changetype<Row | null>(unchecked(this.pathLo[level])), sep);
        left = parent;
        right = alone;
        level--;
        continue;
      }
      let mid = NODE_CAP >> 1;
      let sib = new Node(false);
      for (let j = mid; j < parent.n; j++) unchecked(sib.kids![j - mid] = parent.kids![j]);
      for (let j = mid; j < parent.n - 1; j++) unchecked(sib.rows[j - mid] = parent.rows[j]);
      let promoted = unchecked(parent.rows[mid - 1]);
      clearRefs(changetype<usize>(parent.kids!), mid, parent.n);
      clearRefs(changetype<usize>(parent.rows), mid - 1, parent.n - 1);
      sib.n = parent.n - mid;
      parent.n = mid;
      if (ci < mid) insertInner(parent, ci, sep, right);
      else insertInner(sib, ci - mid, sep, right);
      rehint(parent, changetype<Row | null>(unchecked(this.pathLo[level])), promoted);
      rehint(sib, promoted, changetype<Row | null>(unchecked(this.pathHi[level])));
      left = parent;
      sep = promoted;
      right = sib;
      level--;
    }
  }

  /** Removes the row with key k; returns it or null when absent. */
  remove(k: usize, kLen: i32): Row | null {
    this.cacheValid = false;
    let i = this.locate(k, kLen);
    let leaf = this.foundLeaf!;
    let slot = this.foundSlot;
    if (i >= leaf.n || cmpRow(unchecked(leaf.rows[i]), k, kLen) != 0) return null;
    let old = unchecked(leaf.rows[i]);
    // A key the index lacks (slot 0) has no entry to remove.
    if (slot != 0) this.index!.removeAt(slot);
    shiftRefs(changetype<usize>(leaf.rows), i + 1, i, leaf.n - i - 1);
    shiftHints(leaf.hints, i + 1, i, leaf.n - i - 1);
    leaf.n--;
    clearRefs(changetype<usize>(leaf.rows), leaf.n, leaf.n + 1);
    this.count--;
    return old;
  }

  /** Positions the cursor on the first row whose key is >= k. */
  seek(k: usize, kLen: i32): void {
    this.cacheValid = false;
    let leaf = this.descend(k, kLen);
    this.curLeaf = leaf;
    this.curIdx = lowerBound(leaf, k, kLen);
    this.settle();
  }

  /** Positions the cursor on the first row of the tree. */
  seekFirst(): void {
    let node = this.root;
    while (!node.leaf) node = unchecked(node.kids![0]);
    this.curLeaf = node;
    this.curIdx = 0;
    this.settle();
  }

  /** Skips past exhausted (or emptied) leaves; afterwards curLeaf is null at the end. */
  settle(): void {
    let leaf = this.curLeaf;
    while (leaf != null && this.curIdx >= leaf.n) {
      leaf = leaf.next;
      this.curIdx = 0;
    }
    this.curLeaf = leaf;
  }

  /** The row under the cursor; the cursor must not be at the end. */
  current(): Row {
    return unchecked(this.curLeaf!.rows[this.curIdx]);
  }

  advance(): void {
    this.curIdx++;
    this.settle();
  }
}

/**
 * Builds a compact tree from rows handed over one at a time in strictly increasing key order
 * (the caller checks the order): full leaves, chained, then the inner levels on `finish`.
 * Holds the chain of leaves and nothing else, so a restore streamed in chunks never needs an
 * array of every row. Nor one of every leaf while it adds: pushed onto an array, each new
 * leaf put the whole array back to be scanned by the collector while it marked (an array's
 * store takes the backward write barrier), 190,000 references read again per leaf at 12M
 * keys; the leaves are gathered from the chain at the end instead.
 */
export class TreeBuilder {
  private first: Node | null = null;
  private leaf: Node | null = null;
  count: i32 = 0;

  add(row: Row): void {
    let leaf = this.leaf;
    if (leaf == null || leaf.n == NODE_CAP) {
      let fresh = new Node(true);
      if (leaf != null) leaf.next = fresh;
      else this.first = fresh;
      this.leaf = fresh;
      leaf = fresh;
    }
    storeRow(leaf.rows, leaf.n, row);
    leaf.n++;
    this.count++;
  }

  /** The tree of every row added; the builder must not be used afterwards. */
  finish(): Tree {
    let level = new Array<Node>();
    let l = this.first;
    while (l != null) {
      level.push(l!);
      l = l!.next;
    }
    if (level.length == 0) level.push(new Node(true));
    rehintLevel(level);
    while (level.length > 1) {
      level = buildInnerLevel(level);
      rehintLevel(level);
    }
    let t = new Tree();
    t.root = level[0];
    t.count = this.count;
    this.first = null;
    this.leaf = null;
    return t;
  }
}

/**
 * Keeps an open-bound node's prefix shared by every key it holds, `row` included. An empty
 * node starts over at 0: the offset it kept from the keys deletes took out of it (a restored
 * leaf of one key has the whole key as its prefix) need not be shared by the key coming in.
 */
function admit(node: Node, row: Row): void {
  if (!node.openBound) return;
  if (usedOf(node) == 0) {
    node.hintOff = 0;
    return;
  }
  let shared = keyPrefix(unchecked(node.rows[0]), row);
  if (shared >= node.hintOff) return;
  node.hintOff = shared;
  recomputeHints(node);
}

function leafInsert(leaf: Node, i: i32, row: Row): void {
  admit(leaf, row);
  shiftRefs(changetype<usize>(leaf.rows), i, i + 1, leaf.n - i);
  shiftHints(leaf.hints, i, i + 1, leaf.n - i);
  storeRow(leaf.rows, i, row);
  unchecked(leaf.hints[i] = rowHint(row, leaf.hintOff));
  leaf.n++;
}

function insertInner(node: Node, ci: i32, sep: Row, right: Node): void {
  admit(node, sep);
  shiftRefs(changetype<usize>(node.rows), ci, ci + 1, node.n - 1 - ci);
  shiftHints(node.hints, ci, ci + 1, node.n - 1 - ci);
  unchecked(node.rows[ci] = sep);
  unchecked(node.hints[ci] = rowHint(sep, node.hintOff));
  shiftRefs(changetype<usize>(node.kids!), ci + 1, ci + 2, node.n - 1 - ci);
  unchecked(node.kids![ci + 1] = right);
  node.n++;
}

/** The first row under a node (its leftmost leaf's first row); used as a separator. */
function firstRow(node: Node): Row {
  while (!node.leaf) node = unchecked(node.kids![0]);
  return unchecked(node.rows[0]);
}

function buildInnerLevel(children: Array<Node>): Array<Node> {
  let out = new Array<Node>();
  let cur: Node | null = null;
  for (let i = 0; i < children.length; i++) {
    let child = children[i];
    if (cur == null || cur.n == NODE_CAP) {
      cur = new Node(false);
      out.push(cur);
    } else {
      unchecked(cur.rows[cur.n - 1] = firstRow(child));
    }
    unchecked(cur.kids![cur.n] = child);
    cur.n++;
  }
  return out;
}

/**
 * Hints for one level of a freshly built tree: node i lies between its own first row (the
 * separator before it) and the first row of node i + 1; the outermost nodes have an open bound.
 */
function rehintLevel(level: Array<Node>): void {
  let last = level.length - 1;
  for (let i = 0; i <= last; i++) {
    let node = level[i];
    let lo: Row | null = i == 0 ? null : firstRow(node);
    let hi: Row | null = i == last ? null : firstRow(level[i + 1]);
    rehint(node, lo, hi);
  }
}
