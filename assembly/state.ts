/**
 * The whole state of the machine and its bookkeeping: the ordered store, the expiry heap, the
 * version counter, tenants with their usage and quota, the pause switch. Every change to a row
 * goes through `placeRow` / `dropRow`, which keep usage, the state's byte total, the TTL row
 * count and the heap right, and hand every row that leaves to an open snapshot (preimages.ts).
 * Pure: the only time is the entry time the caller passes in.
 */
import {
  Row, rowExpiresAt, rowVersion, rowDead, setRowDead, rowTenant, rowKeyLen, rowValueLen,
  rowSucceeded, rowHeir, setRowHeir,
  rowKeyPtr, rowFootprint, EXPIRES_NEVER,
} from './row';
import { Tree, Node } from './tree';
import { RowChunks } from './row-chunks';
import { retireRow, retireBytes } from './preimages';
import { rowHash, rowHashSeed, quotaHash } from './digest';

/** Heap entries beyond twice the TTL rows (plus this slack) trigger a compaction. */
const HEAP_SLACK_ENTRIES: i32 = 4096;
/**
 * Bytes of dead rows the heap may keep alive before a compaction starts, however few they
 * are against the TTL rows (see `heapDeadBytes`).
 */
const HEAP_DEAD_BYTES_MAX: i64 = 256 * 1024 * 1024;

/**
 * Footprint of rows that left the tree while an expiry-heap entry of their own still names
 * them: the heap keeps them alive until a compaction drops the entry, so no collection can
 * reclaim them. Counted as they leave; a compaction takes off what was counted when it began
 * (every entry it reads that names a dead row is dropped). Entries a sweep pops stay counted
 * until then, and a call undone may revive a row counted: an overcount, never an undercount,
 * so a decision taken on it errs towards compacting early. Entries outnumbering the TTL rows
 * twice bounded their count, not their bytes: 10M TTL keys overwritten kept up to 10M dead
 * rows, 2.2 GB beside a 2.2 GB state, and the machine ran out of memory.
 */
export let heapDeadBytes: i64 = 0;
/** `heapDeadBytes` when the running compaction began. */
let compactDropping: i64 = 0;

/** A row left the tree: counted when an entry of its own in the heap still names it. */
// @ts-ignore: decorator
@inline function noteLeft(r: Row): void {
  if (rowExpiresAt(r) != EXPIRES_NEVER && !rowHeir(r)) {
    heapDeadBytes += rowFootprint(rowKeyLen(r), rowValueLen(r));
  }
}
/**
 * What a tenant costs in memory beyond its name: the Tenant and Quota objects with their
 * headers, its slot in `tenants` and its entry in `tenantIds`.
 */
const TENANT_OVERHEAD_BYTES: i64 = 192;

export class Quota {
  enabled: bool = false;
  /** -1 = unlimited, else a limit >= 0. */
  maxRows: i64 = -1;
  maxBytes: i64 = -1;
  maxReadsPerSec: i64 = -1;
  maxWritesPerSec: i64 = -1;
}

/**
 * What a tenant of this name (UTF-8 bytes) takes in memory, as the state's byte total counts
 * it: the overhead, the name as a string (at most two bytes per UTF-8 byte) and as UTF-8.
 */
export function tenantFootprint(nameBytes: i32): i64 {
  return TENANT_OVERHEAD_BYTES + 3 * <i64>nameBytes;
}

export class Tenant {
  name: string;
  nameBytes: ArrayBuffer;
  /** Rows this tenant holds in the store (expired rows count until swept). */
  rows: i64 = 0;
  /** Sum over those rows of user-key UTF-8 bytes + value JSON bytes. */
  bytes: i64 = 0;
  quota: Quota | null = null;
  /** The start of each of its rows' digest hashes (digest.ts `rowHashSeed`). */
  digestSeed: u64;
  constructor(name: string) {
    this.name = name;
    this.nameBytes = String.UTF8.encode(name);
    this.digestSeed = rowHashSeed(this.nameBytes);
  }
}

export let tree = indexedTree(new Tree());

/** The live tree keeps a key index beside it (key-index.ts); other trees do not. */
function indexedTree(t: Tree): Tree {
  t.attachIndex();
  return t;
}
/** Min-heap of rows by (expiresAt, version); entries of dead rows are skipped when popped. */
export let heap = new RowChunks();
let heapExp = new Array<i64>();
let heapVer = new Array<i64>();
/** Rows in the tree with a finite expiry. */
export let ttlRows: i32 = 0;
/** Highest version ever handed out; the next write gets lastVersion + 1. */
export let lastVersion: i64 = 0;
export let appliedIndex: i64 = 0;
export let lastTimeMs: i64 = 0;
export let paused: bool = false;
export let tenants = new Array<Tenant>();
export let tenantIds = new Map<string, i32>();
/**
 * The state's byte total: `rowFootprint` of every row in the tree (expired rows count until
 * swept) plus `tenantFootprint` of every tenant. Kept by `account` and `tenantId`, so reading
 * it is O(1); `recountRowBytes` and `tenantTableBytes` recount it for tests.
 */
let stateBytesTotal: i64 = 0;
/** Sum of the row buffers' byteLength over the tree: what the rows take in a snapshot. */
let rowBufferBytesTotal: i64 = 0;
/**
 * Wrapping sums of `rowHash` over the tree and `quotaHash` over the quota rows, kept as rows
 * and quotas change (`account`, `setTenantQuota`, `resetState`), so the digest is O(1).
 */
export let rowDigestSum: u64 = 0;
export let quotaDigestSum: u64 = 0;

export function setLastVersion(v: i64): void { lastVersion = v; }
export function setApplied(index: i64, timeMs: i64): void {
  appliedIndex = index;
  lastTimeMs = timeMs;
}
export function setPaused(p: bool): void { paused = p; }

export function nextVersion(): i64 {
  lastVersion++;
  return lastVersion;
}

/** The tenant's id, or -1 when unknown and `create` is false. */
export function tenantId(name: string, create: bool): i32 {
  if (tenantIds.has(name)) return tenantIds.get(name);
  if (!create) return -1;
  let id = tenants.length;
  let t = new Tenant(name);
  tenants.push(t);
  tenantIds.set(name, id);
  stateBytesTotal += tenantFootprint(t.nameBytes.byteLength);
  return id;
}

/** The tenant `tenantIdOfBytes` found last: a call usually names the one the last named. */
let lastTenantId: i32 = -1;

/**
 * `tenantId` of the tenant named by these UTF-8 bytes. The tenant the last lookup found is
 * checked first, by its name's bytes, which spares a call the name's string and the map.
 * The check needs no invalidation: it compares with whatever tenant holds that id now.
 */
/**
 * True when [a, a+len) and [b, b+len) hold the same bytes: eight at a time (`memory.compare`
 * goes byte by byte, and this runs on every call with its 36-byte tenant).
 */
function sameBytes(a: usize, b: usize, len: usize): bool {
  let i: usize = 0;
  for (; i + 8 <= len; i += 8) if (load<u64>(a + i) != load<u64>(b + i)) return false;
  for (; i < len; i++) if (load<u8>(a + i) != load<u8>(b + i)) return false;
  return true;
}

export function tenantIdOfBytes(p: usize, len: i32, create: bool): i32 {
  let last = lastTenantId;
  if (last >= 0 && last < tenants.length) {
    let name = unchecked(tenants[last]).nameBytes;
    if (name.byteLength == len && sameBytes(changetype<usize>(name), p, <usize>len)) return last;
  }
  let id = tenantId(String.UTF8.decodeUnsafe(p, <usize>len), create);
  if (id >= 0) lastTenantId = id;
  return id;
}

/** The state's byte total (see `stateBytesTotal`). */
export function stateBytes(): i64 {
  return stateBytesTotal;
}

/** Sum of the byteLength of every row buffer in the tree. */
export function rowBufferBytes(): i64 {
  return rowBufferBytesTotal;
}

/** Bytes a row counts against its tenant: user key + value (not tenant, namespace, header). */
export function rowUsageBytes(r: Row): i64 {
  let k = rowKeyPtr(r);
  let kLen = rowKeyLen(r);
  let i = 4;
  while (i < kLen && load<u8>(k + i) != 0) i++;
  return <i64>(kLen - i - 1) + <i64>rowValueLen(r);
}

/** A row enters (sign 1) or leaves (sign -1) the tree: usage, byte total, TTL rows. */
function account(r: Row, sign: i64): void {
  let t = unchecked(tenants[rowTenant(r)]);
  t.rows += sign;
  t.bytes += sign * rowUsageBytes(r);
  stateBytesTotal += sign * rowFootprint(rowKeyLen(r), rowValueLen(r));
  rowBufferBytesTotal += sign * <i64>r.byteLength;
  rowDigestSum += <u64>sign * rowHash(t.digestSeed, r);
  if (rowExpiresAt(r) != EXPIRES_NEVER) ttlRows += <i32>sign;
}

/** A tenant's quota row's share of the digest. */
export function tenantQuotaHash(t: Tenant, q: Quota): u64 {
  return quotaHash(t.nameBytes, q.enabled, q.maxRows, q.maxBytes, q.maxReadsPerSec,
    q.maxWritesPerSec);
}

/** Sets (or replaces) a tenant's quota row. */
export function setTenantQuota(tid: i32, q: Quota): void {
  let t = unchecked(tenants[tid]);
  if (t.quota != null) quotaDigestSum -= tenantQuotaHash(t, t.quota!);
  t.quota = q;
  quotaDigestSum += tenantQuotaHash(t, q);
}

/** Puts a row into the tree (replacing any row with its key); returns the replaced row. */
export function placeRow(r: Row, pushExpiry: bool): Row | null {
  let old = tree.upsert(r);
  if (old != null) {
    setRowDead(old, true);
    account(old, -1);
    retireRow(old);
    noteLeft(old);
  }
  setRowDead(r, false);
  account(r, 1);
  if (pushExpiry && rowExpiresAt(r) != EXPIRES_NEVER) heapPush(r);
  return old;
}

/** Removes a row that is in the tree (`popped`: a sweep took its heap entry first). */
export function dropRow(r: Row, popped: bool = false): void {
  let gone = tree.remove(rowKeyPtr(r), rowKeyLen(r));
  assert(gone === r, 'dropRow: row not in tree');
  setRowDead(r, true);
  account(r, -1);
  retireRow(r);
  if (!popped) noteLeft(r);
}

// ---- expiry heap ----

// Three parallel sequences: heap.get(i) is a row (in chunks, row-chunks.ts), heapExp[i] and
// heapVer[i] its expiresAt and version, so ordering never dereferences a row (at a million
// keys each would be a cache miss).

function before(i: i32, j: i32): bool {
  let ei = unchecked(heapExp[i]), ej = unchecked(heapExp[j]);
  return ei < ej || (ei == ej && unchecked(heapVer[i]) < unchecked(heapVer[j]));
}

function swap(i: i32, j: i32): void {
  let r = heap.get(i);
  heap.set(i, heap.get(j));
  heap.set(j, r);
  let e = unchecked(heapExp[i]);
  unchecked(heapExp[i] = heapExp[j]);
  unchecked(heapExp[j] = e);
  let v = unchecked(heapVer[i]);
  unchecked(heapVer[i] = heapVer[j]);
  unchecked(heapVer[j] = v);
}

export function heapPush(r: Row): void {
  if (compactPhase != COMPACT_IDLE) {
    pendingRows.push(r);
    let e = rowExpiresAt(r);
    if (e < pendingFloor) pendingFloor = e;
    return;
  }
  heap.push(r);
  heapExp.push(rowExpiresAt(r));
  heapVer.push(rowVersion(r));
  let i = heap.length - 1;
  while (i > 0) {
    let p = (i - 1) >> 1;
    if (!before(i, p)) break;
    swap(i, p);
    i = p;
  }
}

function siftDown(i: i32): void {
  let n = heap.length;
  while (true) {
    let l = 2 * i + 1, r = l + 1, m = i;
    if (l < n && before(l, m)) m = l;
    if (r < n && before(r, m)) m = r;
    if (m == i) return;
    swap(i, m);
    i = m;
  }
}

function heapPop(): Row {
  let last = heap.length - 1;
  swap(0, last);
  let top = heap.pop();
  heapExp.pop();
  let version = heapVer.pop();
  // A row the heap names is never freed while it does (the collector's barriers in
  // row-chunks.ts), and rows are immutable: a live one carries the version it was pushed with.
  assert(rowDead(top) || rowVersion(top) == version, 'expiry heap names a freed row');
  if (heap.length > 0) siftDown(0);
  return top;
}

/** Makes the heap out of these rows in O(n). */
export function heapRebuild(entries: RowChunks): void {
  compactPhase = COMPACT_IDLE;
  compactDropping = 0;
  heapDeadBytes = 0;
  pendingRows.truncate(0);
  pendingFloor = EXPIRES_NEVER;
  heap = entries;
  heapExp = new Array<i64>(entries.length);
  heapVer = new Array<i64>(entries.length);
  for (let i = 0; i < entries.length; i++) {
    let r = entries.get(i);
    unchecked(heapExp[i] = rowExpiresAt(r));
    unchecked(heapVer[i] = rowVersion(r));
  }
  for (let i = (heap.length >> 1) - 1; i >= 0; i--) siftDown(i);
}

/**
 * Drops dead entries once they outnumber live ones, in slices of COMPACT_SLICE_ENTRIES:
 * called after every entry, it does one slice while a compaction runs, and starts one when
 * due. A whole compaction at once read every entry's row and re-made the heap in one go, 66
 * to 87 ms at a million TTL rows, growing with the state.
 *
 * While it runs the heap is frozen: rows that need an entry wait in `pendingRows` (merged
 * when it ends), and a sweep first finishes it (`heapCompactNow`). So the compaction works
 * in place and allocates nothing (the collector's steps, set off by allocation, do not run
 * inside it), and its result is the heap a whole compaction made: the live entries in their
 * order (an entry standing for an heir becomes the heir's own), made a heap again, then the
 * pending rows pushed in their order. Every replica compacts after the same entries, and a
 * sweep's result never depends on the heap's layout (a restored replica's differs anyway).
 */
export function heapMaybeCompact(): void {
  if (compactPhase == COMPACT_IDLE) {
    if (heap.length <= 2 * ttlRows + HEAP_SLACK_ENTRIES &&
      (heapDeadBytes <= HEAP_DEAD_BYTES_MAX || heap.length == 0)) return;
    compactBegin();
  }
  compactSlice(COMPACT_SLICE_ENTRIES);
}

function compactBegin(): void {
  compactPhase = COMPACT_COPY;
  compactRead = 0;
  compactKept = 0;
  compactFloor = unchecked(heapExp[0]);
  compactDropping = heapDeadBytes;
}

/** Finishes a running compaction at once (before a sweep pops the heap). */
function heapCompactNow(): void {
  while (compactPhase != COMPACT_IDLE) compactSlice(i32.MAX_VALUE);
}

/**
 * Drops every dead row's entry at once, when the heap keeps any alive: before a full
 * collection that memory needs (memory-use.ts), which could not free them otherwise.
 */
export function heapDropDeadNow(): void {
  if (compactPhase == COMPACT_IDLE && heapDeadBytes > 0 && heap.length > 0) compactBegin();
  heapCompactNow();
}

/** Entries a compaction reads, or sifts, after one entry applied. */
const COMPACT_SLICE_ENTRIES: i32 = 16_384;
const COMPACT_IDLE: i32 = 0;
const COMPACT_COPY: i32 = 1;
const COMPACT_HEAPIFY: i32 = 2;
let compactPhase: i32 = COMPACT_IDLE;
/** Copy: the next entry to read, and how many are kept before it. Heapify: the next sift. */
let compactRead: i32 = 0;
let compactKept: i32 = 0;
/** The heap's earliest expiry when the compaction began: no entry it holds expires before. */
let compactFloor: i64 = 0;
/** Rows pushed while a compaction runs, and their earliest expiry. */
let pendingRows = new RowChunks();
let pendingFloor: i64 = EXPIRES_NEVER;

function compactSlice(budget: i32): void {
  if (compactPhase == COMPACT_COPY) {
    let n = heap.length;
    let end = compactRead + min(budget, n - compactRead);
    let kept = compactKept;
    for (let i = compactRead; i < end; i++) {
      let r = heap.get(i);
      if (rowDead(r)) {
        // An entry standing for an heir becomes the heir's own (the heap is re-made below).
        let heir = rowSucceeded(r) ? takeHeir(r) : null;
        if (heir == null) continue;
        heap.set(kept, heir);
        unchecked(heapExp[kept] = rowExpiresAt(heir));
        unchecked(heapVer[kept] = rowVersion(heir));
        kept++;
        continue;
      }
      assert(rowVersion(r) == unchecked(heapVer[i]), 'expiry heap names a freed row');
      if (kept != i) {
        heap.set(kept, r);
        unchecked(heapExp[kept] = heapExp[i]);
        unchecked(heapVer[kept] = heapVer[i]);
      }
      kept++;
    }
    compactRead = end;
    compactKept = kept;
    if (end < n) return;
    heap.truncate(kept);
    heapExp.length = kept;
    heapVer.length = kept;
    compactPhase = COMPACT_HEAPIFY;
    compactRead = (kept >> 1) - 1;
    return;
  }
  if (compactPhase == COMPACT_HEAPIFY) {
    let stop = max(-1, compactRead - budget);
    for (let i = compactRead; i > stop; i--) siftDown(i);
    compactRead = stop;
    if (stop >= 0) return;
    compactPhase = COMPACT_IDLE;
    heapDeadBytes = max<i64>(0, heapDeadBytes - compactDropping);
    compactDropping = 0;
    for (let i = 0; i < pendingRows.length; i++) heapPush(pendingRows.get(i));
    pendingRows.truncate(0);
    pendingFloor = EXPIRES_NEVER;
  }
}

/**
 * The heir a dead row's entry stands for (row.ts ROW_HEIR), no longer one from here on; or
 * null when the key's row is not an heir of that expiry (a put or a delete came since).
 */
function takeHeir(dead: Row): Row | null {
  let r = tree.find(rowKeyPtr(dead), rowKeyLen(dead));
  if (r == null || !rowHeir(r) || rowExpiresAt(r) != rowExpiresAt(dead)) return null;
  setRowHeir(r, false);
  return r;
}

/** Removes up to maxKeys rows expired at timeMs, oldest (expiresAt, version) first. */
export function sweep(timeMs: i64, maxKeys: i64): i64 {
  heapCompactNow();
  let removed: i64 = 0;
  while (removed < maxKeys && heap.length > 0) {
    if (unchecked(heapExp[0]) > timeMs) break;
    let top = heapPop();
    if (rowDead(top)) {
      // A dead row's entry may stand for its heir, due now: it gets its own entry here.
      let heir = rowSucceeded(top) ? takeHeir(top) : null;
      if (heir != null) heapPush(heir);
      continue;
    }
    dropRow(top, true);
    removed++;
  }
  return removed;
}

/** Heap entries `nextExpiry` looks at before it settles for a lower bound. */
const NEXT_EXPIRY_VISITS_MAX: i32 = 64;
/**
 * Its work stack, allocated once: each visit pops one entry and pushes at most two, so it
 * never holds more than NEXT_EXPIRY_VISITS_MAX + 1 entries. A query allocates nothing, so
 * the leader (the only node that asks) keeps the same heap as every follower.
 */
const nextExpiryStack = new StaticArray<i32>(NEXT_EXPIRY_VISITS_MAX + 2);

/**
 * The earliest expiresAt of a row in the store, or EXPIRES_NEVER when no row expires: before
 * it, a sweep would remove nothing. Read-only. Entries of rows rewritten or deleted since
 * stay in the heap until a sweep pops them, so it looks past dead entries from the top, at
 * most NEXT_EXPIRY_VISITS_MAX of them; past that it answers the lowest expiry of the entries
 * it did not open, a lower bound: never later than the truth, so a sweep is never late, at
 * worst early once (and that sweep pops the dead entries that made it early).
 */
export function nextExpiry(): i64 {
  // While a compaction runs the heap is no heap: its floor then, and the pending rows'.
  if (compactPhase != COMPACT_IDLE) return min(compactFloor, pendingFloor);
  let best = EXPIRES_NEVER;
  let stack = nextExpiryStack;
  let top = 0;
  if (heap.length > 0) stack[top++] = 0;
  let visits = 0;
  while (top > 0) {
    let i = stack[--top];
    let e = unchecked(heapExp[i]);
    // Everything below entry i expires at e or later.
    if (e >= best) continue;
    let r = heap.get(i);
    if (visits >= NEXT_EXPIRY_VISITS_MAX || !rowDead(r) || rowSucceeded(r)) {
      best = e;
      continue;
    }
    visits++;
    let l = 2 * i + 1;
    if (l < heap.length) stack[top++] = l;
    if (l + 1 < heap.length) stack[top++] = l + 1;
  }
  return best;
}

/**
 * Replaces the whole state (restore, and `clearState`). Usage, the byte total and the expiry
 * heap come from the rows; the old state is garbage from here on.
 */
export function resetState(
  t: Tree, ts: Array<Tenant>, version: i64, index: i64, timeMs: i64, p: bool,
): void {
  retireBytes(stateBytesTotal);
  tree.detachIndex();
  tree = indexedTree(t);
  tenants = ts;
  tenantIds = new Map<string, i32>();
  stateBytesTotal = 0;
  rowBufferBytesTotal = 0;
  rowDigestSum = 0;
  quotaDigestSum = 0;
  for (let i = 0; i < ts.length; i++) {
    let tn = unchecked(ts[i]);
    tenantIds.set(tn.name, i);
    stateBytesTotal += tenantFootprint(tn.nameBytes.byteLength);
    if (tn.quota != null) quotaDigestSum += tenantQuotaHash(tn, tn.quota!);
  }
  lastVersion = version;
  appliedIndex = index;
  lastTimeMs = timeMs;
  paused = p;
  ttlRows = 0;
  let entries = new RowChunks();
  t.seekFirst();
  while (t.curLeaf != null) {
    let r = t.current();
    let tn = unchecked(ts[rowTenant(r)]);
    tn.rows++;
    tn.bytes += rowUsageBytes(r);
    stateBytesTotal += rowFootprint(rowKeyLen(r), rowValueLen(r));
    rowBufferBytesTotal += <i64>r.byteLength;
    rowDigestSum += rowHash(tn.digestSeed, r);
    if (rowExpiresAt(r) != EXPIRES_NEVER) {
      ttlRows++;
      entries.push(r);
    }
    t.advance();
  }
  heapRebuild(entries);
}

/** Recounts `rowFootprint` over the tree (tests check it against the running total). */
export function recountRowBytes(): i64 {
  let total: i64 = 0;
  tree.seekFirst();
  while (tree.curLeaf != null) {
    let r = tree.current();
    total += rowFootprint(rowKeyLen(r), rowValueLen(r));
    tree.advance();
  }
  return total;
}

/** Recounts `tenantFootprint` over the tenant table. */
export function tenantTableBytes(): i64 {
  let total: i64 = 0;
  for (let i = 0; i < tenants.length; i++) {
    total += tenantFootprint(unchecked(tenants[i]).nameBytes.byteLength);
  }
  return total;
}

/** Heap bytes of one managed object with `payload` bytes: block + object header, aligned. */
function objectBytes(payload: i64): i64 {
  return ((16 + payload + 15) & ~15) + 4;
}

/** See index.ts `structureBytes`. */
export function structureBytesWalk(): i64 {
  let total: i64 = objectBytes(<i64>heap.length * 20) + 3 * objectBytes(16);
  let nodes: i64 = 0;
  let stack = new Array<Node>();
  stack.push(tree.root);
  while (stack.length > 0) {
    let n = stack.pop();
    nodes++;
    total += objectBytes(offsetof<Node>()) + objectBytes(<i64>n.rows.length * 4);
    if (!n.leaf) {
      total += objectBytes(<i64>n.kids!.length * 4);
      for (let i = 0; i < n.n; i++) stack.push(unchecked(n.kids![i]));
    } else {
      for (let i = 0; i < n.n; i++) total += objectBytes(<i64>unchecked(n.rows[i]).byteLength);
    }
  }
  for (let i = 0; i < tenants.length; i++) total += objectBytes(64);
  if (tree.index != null) total += objectBytes(<i64>tree.index!.bytes());
  return total;
}
