/**
 * The ordered store: a B+tree of rows keyed by their store key bytes, with chained leaves so a
 * prefix page is a range walk, never a scan. Nodes are not merged when deletes empty them: a
 * leaf may be empty and a separator may name a key that is gone, which keeps deletes O(log n)
 * and simple; `restore` rebuilds a compact tree. Pure data structure: no time, no policy.
 */
import {
  Row, rowKeyPtr, rowKeyLen, compareBytes,
} from './row';

/** Rows per leaf and children per inner node. */
const NODE_CAP: i32 = 64;
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

  constructor(leaf: bool) {
    this.leaf = leaf;
    if (!leaf) this.kids = new StaticArray<Node>(NODE_CAP);
  }
}

function cmpRow(r: Row, k: usize, kLen: i32): i32 {
  return compareBytes(rowKeyPtr(r), rowKeyLen(r), k, kLen);
}

/** First index in rows[0..n) whose key is >= k. */
function lowerBound(rows: StaticArray<Row>, n: i32, k: usize, kLen: i32): i32 {
  let lo = 0, hi = n;
  while (lo < hi) {
    let mid = (lo + hi) >>> 1;
    if (cmpRow(unchecked(rows[mid]), k, kLen) < 0) lo = mid + 1; else hi = mid;
  }
  return lo;
}

/** Child index for k in an inner node: the number of separators <= k. */
function childIndex(node: Node, k: usize, kLen: i32): i32 {
  let lo = 0, hi = node.n - 1;
  let rows = node.rows;
  while (lo < hi) {
    let mid = (lo + hi) >>> 1;
    if (cmpRow(unchecked(rows[mid]), k, kLen) <= 0) lo = mid + 1; else hi = mid;
  }
  return lo;
}

/** Moves refs inside one array; they stay reachable from it, so no write barrier is due. */
function shiftRefs(arr: usize, from: i32, to: i32, count: i32): void {
  if (count <= 0) return;
  memory.copy(arr + (<usize>to << 2), arr + (<usize>from << 2), <usize>count << 2);
}

export class Tree {
  root: Node = new Node(true);
  count: i32 = 0;
  private path: StaticArray<Node> = new StaticArray<Node>(DEPTH_MAX);
  private pathIdx: StaticArray<i32> = new StaticArray<i32>(DEPTH_MAX);
  private depth: i32 = 0;
  /** Cursor of the last seek: leaf and index (index may equal n; call `settle`). */
  curLeaf: Node | null = null;
  curIdx: i32 = 0;

  private descend(k: usize, kLen: i32): Node {
    let node = this.root;
    let d = 0;
    while (!node.leaf) {
      assert(d < DEPTH_MAX, 'tree too deep');
      let ci = childIndex(node, k, kLen);
      unchecked(this.path[d] = node);
      unchecked(this.pathIdx[d] = ci);
      d++;
      node = unchecked(node.kids![ci]);
    }
    this.depth = d;
    return node;
  }

  find(k: usize, kLen: i32): Row | null {
    let leaf = this.descend(k, kLen);
    let i = lowerBound(leaf.rows, leaf.n, k, kLen);
    if (i < leaf.n && cmpRow(unchecked(leaf.rows[i]), k, kLen) == 0) {
      return unchecked(leaf.rows[i]);
    }
    return null;
  }

  /** Inserts or replaces the row with the same key; returns the replaced row or null. */
  upsert(row: Row): Row | null {
    let k = rowKeyPtr(row), kLen = rowKeyLen(row);
    let leaf = this.descend(k, kLen);
    let i = lowerBound(leaf.rows, leaf.n, k, kLen);
    if (i < leaf.n && cmpRow(unchecked(leaf.rows[i]), k, kLen) == 0) {
      let old = unchecked(leaf.rows[i]);
      unchecked(leaf.rows[i] = row);
      return old;
    }
    this.count++;
    if (leaf.n < NODE_CAP) {
      shiftRefs(changetype<usize>(leaf.rows), i, i + 1, leaf.n - i);
      unchecked(leaf.rows[i] = row);
      leaf.n++;
      return null;
    }
    let right = new Node(true);
    let half = NODE_CAP >> 1;
    for (let j = half; j < NODE_CAP; j++) unchecked(right.rows[j - half] = leaf.rows[j]);
    right.n = NODE_CAP - half;
    leaf.n = half;
    right.next = leaf.next;
    leaf.next = right;
    let target = i <= half ? leaf : right;
    let at = i <= half ? i : i - half;
    shiftRefs(changetype<usize>(target.rows), at, at + 1, target.n - at);
    unchecked(target.rows[at] = row);
    target.n++;
    this.insertIntoParent(this.depth - 1, leaf, unchecked(right.rows[0]), right);
    return null;
  }

  private insertIntoParent(level: i32, left: Node, sep: Row, right: Node): void {
    while (true) {
      if (level < 0) {
        let root = new Node(false);
        unchecked(root.kids![0] = left);
        unchecked(root.kids![1] = right);
        unchecked(root.rows[0] = sep);
        root.n = 2;
        this.root = root;
        return;
      }
      let parent = unchecked(this.path[level]);
      let ci = unchecked(this.pathIdx[level]);
      if (parent.n < NODE_CAP) {
        insertInner(parent, ci, sep, right);
        return;
      }
      let mid = NODE_CAP >> 1;
      let sib = new Node(false);
      for (let j = mid; j < parent.n; j++) unchecked(sib.kids![j - mid] = parent.kids![j]);
      for (let j = mid; j < parent.n - 1; j++) unchecked(sib.rows[j - mid] = parent.rows[j]);
      let promoted = unchecked(parent.rows[mid - 1]);
      sib.n = parent.n - mid;
      parent.n = mid;
      if (ci < mid) insertInner(parent, ci, sep, right);
      else insertInner(sib, ci - mid, sep, right);
      left = parent;
      sep = promoted;
      right = sib;
      level--;
    }
  }

  /** Removes the row with key k; returns it or null when absent. */
  remove(k: usize, kLen: i32): Row | null {
    let leaf = this.descend(k, kLen);
    let i = lowerBound(leaf.rows, leaf.n, k, kLen);
    if (i >= leaf.n || cmpRow(unchecked(leaf.rows[i]), k, kLen) != 0) return null;
    let old = unchecked(leaf.rows[i]);
    shiftRefs(changetype<usize>(leaf.rows), i + 1, i, leaf.n - i - 1);
    leaf.n--;
    this.count--;
    return old;
  }

  /** Positions the cursor on the first row whose key is >= k. */
  seek(k: usize, kLen: i32): void {
    let leaf = this.descend(k, kLen);
    this.curLeaf = leaf;
    this.curIdx = lowerBound(leaf.rows, leaf.n, k, kLen);
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

  /** Replaces the whole tree by one built from rows already in strictly increasing order. */
  build(sorted: Array<Row>): void {
    let level = new Array<Node>();
    let leaf: Node | null = null;
    for (let i = 0; i < sorted.length; i++) {
      if (leaf == null || leaf.n == NODE_CAP) {
        let fresh = new Node(true);
        if (leaf != null) leaf.next = fresh;
        leaf = fresh;
        level.push(fresh);
      }
      unchecked(leaf.rows[leaf.n] = sorted[i]);
      leaf.n++;
    }
    if (level.length == 0) level.push(new Node(true));
    while (level.length > 1) level = buildInnerLevel(level);
    this.root = level[0];
    this.count = sorted.length;
  }
}

function insertInner(node: Node, ci: i32, sep: Row, right: Node): void {
  shiftRefs(changetype<usize>(node.rows), ci, ci + 1, node.n - 1 - ci);
  unchecked(node.rows[ci] = sep);
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
