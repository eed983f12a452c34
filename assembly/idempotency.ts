/**
 * Idempotent retries: which keyed calls applied, with what fingerprint and what answer, so a
 * retry of a call (same Idempotency-Key, same tenant) applies nothing and answers what the
 * first attempt answered, on every replica, after any leader change and across restarts.
 *
 * A keyed call travels in ONE log entry (CMD_KEYED_CALL: the key, the record lifetime and
 * the call), so its record and its effect commit together. The table is replicated state:
 * changed only by applied entries, in log order, with the entry's time, and carried in
 * snapshots. Every replica renders a keyed call's answer (not only the proposer) because
 * the answer is part of the record.
 *
 * Records are bounded: per tenant IDEMPOTENCY_RECORDS_PER_TENANT_MAX records and
 * IDEMPOTENCY_BYTES_PER_TENANT_MAX bytes, in all IDEMPOTENCY_BYTES_MAX bytes; past a bound
 * the oldest record (of that tenant, or of any tenant for the global bound) is evicted.
 * Records expire at entry time + their lifetime and are removed by sweeps (CMD_SWEEP).
 * Pure: no clock, no I/O.
 */
import {
  CMD_CALL, OUT_CALL, SHAPE_TRANSACTION, TENANT_BYTES_MAX, TRANSACTION_ID_BYTES_MAX,
  ANSWER_HEADER_BYTES, ANSWER_REPLAYED, IDEMPOTENCY_KEY_BYTES_MAX, IDEMPOTENCY_TTL_SECONDS_MAX,
  IDEMPOTENCY_RECORDS_PER_TENANT_MAX, IDEMPOTENCY_BYTES_PER_TENANT_MAX, IDEMPOTENCY_BYTES_MAX,
  IDEMPOTENCY_ANSWER_BYTES_MAX, IDEMPOTENCY_RECORD_OVERHEAD_BYTES, SAFE_INTEGER_MAX,
} from './abi';
import {
  Reader, putU8, putU32, putI64, putBytes, outputLen, outputPtr, reserveRaw, truncateOutput,
} from './buffers';
import { runCall, emitInvalid } from './call';
import { text, putText } from './json-out';
import { retireBytes } from './preimages';

export class IdemRecord {
  /** `<key>\0<tenant>`: the key has no NUL, so the split is unambiguous. */
  mapKey: string = '';
  tenant: string = '';
  key: string = '';
  fingerprint: u64 = 0;
  expiresAt: i64 = 0;
  /** The answer as the machine wrote it (header and body); null when it was too large. */
  answer: ArrayBuffer | null = null;
  /** What the record counts against the bounds. */
  bytes: i64 = 0;
  dead: bool = false;
}

/** One tenant's records, oldest first (dead ones are skipped lazily). */
class TenantRecords {
  queue: Array<IdemRecord> = new Array<IdemRecord>();
  head: i32 = 0;
  count: i32 = 0;
  bytes: i64 = 0;
}

/** The table: records by map key, each tenant's queue, and all records oldest first. */
export class IdemTable {
  records: Map<string, IdemRecord> = new Map<string, IdemRecord>();
  tenants: Map<string, TenantRecords> = new Map<string, TenantRecords>();
  order: Array<IdemRecord> = new Array<IdemRecord>();
  head: i32 = 0;
  count: i64 = 0;
  bytes: i64 = 0;
}

let table = new IdemTable();
/** Since this process started (not replicated): records evicted at a bound, replays answered. */
let evictions: i64 = 0;
let replays: i64 = 0;

export function recordCount(): i64 { return table.count; }
export function recordBytes(): i64 { return table.bytes; }
export function evictionCount(): i64 { return evictions; }
export function replayCount(): i64 { return replays; }

/** 1..IDEMPOTENCY_KEY_BYTES_MAX bytes, each printable ASCII (0x20..0x7e). */
export function isIdempotencyKey(p: usize, len: i32): bool {
  if (len < 1 || len > IDEMPOTENCY_KEY_BYTES_MAX) return false;
  for (let i = 0; i < len; i++) {
    let c = load<u8>(p + i);
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

const P1: u64 = 0x9e3779b185ebca87;
const P2: u64 = 0xc2b2ae3d27d4eb4f;

function mix(z: u64): u64 {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9;
  z = (z ^ (z >> 27)) * 0x94d049bb133111eb;
  return z ^ (z >> 31);
}

/**
 * A 64-bit hash of the call's shape and its ops as the entry carries them: eight bytes a
 * step, then the tail, then a finalizer. Not cryptographic: it tells a retry from another
 * call of the same client under the same key, which nobody gains by forging.
 */
export function fingerprintOf(shape: i32, p: usize, len: usize): u64 {
  let h: u64 = P1 ^ (<u64>len * P2) ^ <u64>shape;
  let i: usize = 0;
  for (; i + 8 <= len; i += 8) h = rotl<u64>(h ^ (load<u64>(p + i) * P2), 31) * P1;
  for (; i < len; i++) h = rotl<u64>(h ^ (<u64>load<u8>(p + i) * P1), 23) * P2;
  return mix(h);
}

/** What the head of a CMD_CALL says: its shape, tenant and where its ops start. */
let callShape: i32 = 0;
let callTenantPtr: usize = 0;
let callTenantLen: i32 = 0;

/** Reads the head of the CMD_CALL after its kind byte; false when it does not parse. */
function readCallHead(rd: Reader): bool {
  callShape = rd.u8();
  rd.bytes(<u32>TRANSACTION_ID_BYTES_MAX, 'transaction id');
  rd.u8();
  rd.i64();
  callTenantPtr = rd.bytes(<u32>TENANT_BYTES_MAX, 'tenant');
  callTenantLen = <i32>rd.lastLen;
  return !rd.failed && callTenantLen > 0;
}

const REUSED_BODY = text('{"error":"kv_bad_request","reason":"kv_idempotency_key_reused",' +
  '"detail":"this Idempotency-Key was used for another request (route, method or body ' +
  'differ); use a fresh key for a new request"}');
const NOT_KEPT_BODY = text('{"error":"conflict","reason":"kv_idempotency_answer_not_kept",' +
  '"detail":"the request with this Idempotency-Key was applied once; its answer was too ' +
  'large to keep, so it cannot be replayed"}');

/** A fixed refusal: its header (no ETag, no Retry-After) and body. */
function answerFixed(status: i32, body: ArrayBuffer): void {
  let at = reserveRaw(<usize>ANSWER_HEADER_BYTES);
  store<u16>(at, <u16>status);
  store<u8>(at, 0, 2);
  store<i64>(at, 0, 3);
  store<u32>(at, 0, 11);
  store<u32>(at, <u32>body.byteLength, 15);
  putText(body);
}

/** The recorded answer, flagged as replayed. */
function answerReplay(rec: IdemRecord): void {
  let answer = rec.answer;
  if (answer == null) {
    answerFixed(409, NOT_KEPT_BODY);
    return;
  }
  let len = <usize>answer.byteLength;
  let at = reserveRaw(len);
  memory.copy(at, changetype<usize>(answer), len);
  store<u8>(at, load<u8>(at, 2) | <u8>ANSWER_REPLAYED, 2);
}

/**
 * Applies a CMD_KEYED_CALL (the reader is after its kind byte) at entry time `time`: a key
 * recorded and alive answers its record (or 422 when the request differs) and applies
 * nothing; otherwise the call runs, and its answer is recorded when it is a 200 (a call the
 * entry refused whole, paused, ungranted or over quota, changed nothing and may be retried).
 */
export function runKeyedCall(rd: Reader, time: i64, answered: bool): void {
  let keyPtr = rd.bytes(<u32>IDEMPOTENCY_KEY_BYTES_MAX, 'idempotency key');
  let keyLen = <i32>rd.lastLen;
  let ttl = rd.i64();
  if (!rd.failed && !isIdempotencyKey(keyPtr, keyLen)) rd.fail('bad idempotency key');
  if (!rd.failed && (ttl < 1 || ttl > IDEMPOTENCY_TTL_SECONDS_MAX)) rd.fail('bad record ttl');
  if (!rd.failed && rd.u8() != CMD_CALL) rd.fail('a keyed command that is not a call');
  if (rd.failed) { emitInvalid(rd.why); return; }
  let callStart = rd.pos;
  let head = new Reader(callStart, rd.end - callStart);
  if (!readCallHead(head)) { emitInvalid(head.why.length > 0 ? head.why : 'empty tenant'); return; }
  let fingerprint = fingerprintOf(callShape, head.pos, head.end - head.pos);
  let tenant = String.UTF8.decodeUnsafe(callTenantPtr, <usize>callTenantLen);
  let key = String.UTF8.decodeUnsafe(keyPtr, <usize>keyLen);
  let mapKey = key + '\0' + tenant;
  if (table.records.has(mapKey)) {
    let rec = table.records.get(mapKey);
    if (rec.expiresAt > time) {
      putU8(OUT_CALL);
      if (rec.fingerprint != fingerprint) {
        if (answered) answerFixed(422, REUSED_BODY);
      } else {
        replays++;
        if (answered) answerReplay(rec);
      }
      return;
    }
    kill(rec);
  }
  let outStart = outputLen;
  runCall(new Reader(callStart, rd.end - callStart), CMD_CALL, time, true, true);
  recordOutcome(outStart, mapKey, tenant, key, fingerprint, expiryOf(time, ttl));
  // Only the proposer sends the answer; the others rendered it for the record alone.
  if (!answered && load<u8>(outputPtr + outStart) == <u8>OUT_CALL) truncateOutput(outStart + 1);
}

function expiryOf(time: i64, ttl: i64): i64 {
  let at = time + ttl * 1000;
  return at > SAFE_INTEGER_MAX ? SAFE_INTEGER_MAX : at;
}

/** Records the call's answer written at `outStart` when it is an OUT_CALL with a 200. */
function recordOutcome(outStart: usize, mapKey: string, tenant: string, key: string,
  fingerprint: u64, expiresAt: i64): void {
  let at = outputPtr + outStart;
  if (load<u8>(at) != <u8>OUT_CALL) return;
  if (load<u16>(at + 1) != 200) return;
  let answerLen = <i32>(outputLen - outStart - 1);
  let rec = new IdemRecord();
  rec.mapKey = mapKey;
  rec.tenant = tenant;
  rec.key = key;
  rec.fingerprint = fingerprint;
  rec.expiresAt = expiresAt;
  if (answerLen <= IDEMPOTENCY_ANSWER_BYTES_MAX) {
    let answer = new ArrayBuffer(answerLen);
    memory.copy(changetype<usize>(answer), at + 1, <usize>answerLen);
    rec.answer = answer;
  }
  insert(rec);
}

/** What a record counts: its map key (as a string), tenant and key, answer, overhead. */
function bytesOf(rec: IdemRecord): i64 {
  let answer = rec.answer;
  let answerLen: i64 = answer == null ? 0 : <i64>answer.byteLength;
  return 4 * <i64>rec.mapKey.length + answerLen + <i64>IDEMPOTENCY_RECORD_OVERHEAD_BYTES;
}

function tenantOf(t: IdemTable, tenant: string): TenantRecords {
  if (t.tenants.has(tenant)) return t.tenants.get(tenant);
  let tr = new TenantRecords();
  t.tenants.set(tenant, tr);
  return tr;
}

/** Adds a record as the newest, then evicts the oldest records past any bound. */
function insert(rec: IdemRecord): void {
  add(table, rec);
  let tr = tenantOf(table, rec.tenant);
  while (tr.count > IDEMPOTENCY_RECORDS_PER_TENANT_MAX ||
    tr.bytes > IDEMPOTENCY_BYTES_PER_TENANT_MAX) {
    let oldest = oldestOf(tr.queue, tr.head);
    tr.head = oldestIndex;
    if (oldest == null || oldest == rec) break;
    evict(oldest);
  }
  while (table.bytes > IDEMPOTENCY_BYTES_MAX) {
    let oldest = oldestOf(table.order, table.head);
    table.head = oldestIndex;
    if (oldest == null || oldest == rec) break;
    evict(oldest);
  }
}

function add(t: IdemTable, rec: IdemRecord): void {
  rec.bytes = bytesOf(rec);
  t.records.set(rec.mapKey, rec);
  let tr = tenantOf(t, rec.tenant);
  tr.queue.push(rec);
  tr.count++;
  tr.bytes += rec.bytes;
  t.order.push(rec);
  t.count++;
  t.bytes += rec.bytes;
}

/** Set by `oldestOf`: the index of the record it found (or the queue's length). */
let oldestIndex: i32 = 0;

/** The first live record of a queue from `head`, or null. */
function oldestOf(queue: Array<IdemRecord>, head: i32): IdemRecord | null {
  let i = head;
  while (i < queue.length && unchecked(queue[i]).dead) i++;
  oldestIndex = i;
  return i < queue.length ? unchecked(queue[i]) : null;
}

function evict(rec: IdemRecord): void {
  evictions++;
  kill(rec);
}

/** Removes a record from the table; its queue slots are skipped and compacted later. */
function kill(rec: IdemRecord): void {
  rec.dead = true;
  table.records.delete(rec.mapKey);
  let tr = table.tenants.get(rec.tenant);
  tr.count--;
  tr.bytes -= rec.bytes;
  table.count--;
  table.bytes -= rec.bytes;
  retireBytes(rec.bytes);
  if (tr.count == 0) table.tenants.delete(rec.tenant);
  else compactTenant(tr);
  compactOrder();
}

/** The live records of `queue` from `head` on, in order. */
function liveOf(queue: Array<IdemRecord>, head: i32): Array<IdemRecord> {
  let out = new Array<IdemRecord>();
  for (let i = head; i < queue.length; i++) {
    let rec = unchecked(queue[i]);
    if (!rec.dead) out.push(rec);
  }
  return out;
}

/** First index from `head` of a live record (or the length). */
function skipDead(queue: Array<IdemRecord>, head: i32): i32 {
  let i = head;
  while (i < queue.length && unchecked(queue[i]).dead) i++;
  return i;
}

/**
 * A queue keeps its head on a live record, and is rebuilt from its live records once dead
 * slots (before or after the head: a record dies in the middle when another tenant's bound
 * or a lookup of an expired key removes it) outnumber the live ones: amortised O(1) per
 * record, and a queue never holds more than twice its records plus a constant.
 */
function needsRebuild(length: i32, live: i64): bool {
  return <i64>length > 2 * live + QUEUE_SLACK;
}

const QUEUE_SLACK: i64 = 1024;

function compactTenant(tr: TenantRecords): void {
  tr.head = skipDead(tr.queue, tr.head);
  if (needsRebuild(tr.queue.length, <i64>tr.count)) {
    tr.queue = liveOf(tr.queue, tr.head);
    tr.head = 0;
  }
}

function compactOrder(): void {
  table.head = skipDead(table.order, table.head);
  if (needsRebuild(table.order.length, table.count)) {
    table.order = liveOf(table.order, table.head);
    table.head = 0;
  }
}

/**
 * Removes up to `maxRecords` records expired at `time`, oldest first (in the order they
 * were recorded, which is expiry order while the lifetime setting stays the same; a record
 * behind a longer-lived one waits for it, and is treated as absent meanwhile).
 */
export function sweepRecords(time: i64, maxRecords: i64): i64 {
  let removed: i64 = 0;
  while (removed < maxRecords) {
    let oldest = oldestOf(table.order, table.head);
    table.head = oldestIndex;
    if (oldest == null || oldest.expiresAt > time) break;
    kill(oldest);
    removed++;
  }
  return removed;
}

/**
 * The expiry of the oldest record, or -1 with none: the leader proposes a sweep once it has
 * passed. Read-only: it looks past at most 64 dead records, and answers 0 (sweep now, which
 * drops them) beyond that.
 */
export function nextRecordExpiry(): i64 {
  let order = table.order;
  let i = table.head;
  for (let visits = 0; i < order.length && visits < 64; visits++, i++) {
    let rec = unchecked(order[i]);
    if (!rec.dead) return rec.expiresAt;
  }
  return i < order.length ? 0 : -1;
}

// ---- the snapshot's idempotency section ----

/** Largest idempotency section a snapshot may carry, in bytes. */
export const IDEMPOTENCY_SECTION_BYTES_MAX: u32 = <u32>(2 * IDEMPOTENCY_BYTES_MAX);

/**
 * The live records oldest first: `u32 count`, then per record `string tenant, string key,
 * u64 fingerprint, i64 expiresAt, u8 hasAnswer, [string answer]`. Restoring them in this
 * order rebuilds the same queues, so later evictions decide alike.
 */
export function writeIdempotencySection(): void {
  putU32(<u32>table.count);
  let order = table.order;
  for (let i = table.head; i < order.length; i++) {
    let rec = unchecked(order[i]);
    if (rec.dead) continue;
    let t = String.UTF8.encode(rec.tenant);
    putBytes(changetype<usize>(t), <usize>t.byteLength);
    let k = String.UTF8.encode(rec.key);
    putBytes(changetype<usize>(k), <usize>k.byteLength);
    putI64(<i64>rec.fingerprint);
    putI64(rec.expiresAt);
    let answer = rec.answer;
    putU8(answer == null ? 0 : 1);
    if (answer != null) putBytes(changetype<usize>(answer), <usize>answer.byteLength);
  }
}

/** A table read by a restore that has not swapped in yet. */
let staged: IdemTable | null = null;

/** Reads one record of a section; null when a byte does not check out. */
function readRecord(rd: Reader): IdemRecord | null {
  let tPtr = rd.bytes(<u32>TENANT_BYTES_MAX, 'tenant');
  let tLen = rd.lastLen;
  if (rd.failed || tLen == 0) return null;
  let kPtr = rd.bytes(<u32>IDEMPOTENCY_KEY_BYTES_MAX, 'idempotency key');
  let kLen = <i32>rd.lastLen;
  if (rd.failed || !isIdempotencyKey(kPtr, kLen)) return null;
  let rec = new IdemRecord();
  rec.tenant = String.UTF8.decodeUnsafe(tPtr, tLen);
  rec.key = String.UTF8.decodeUnsafe(kPtr, <usize>kLen);
  rec.mapKey = rec.key + '\0' + rec.tenant;
  rec.fingerprint = <u64>rd.i64();
  rec.expiresAt = rd.i64();
  let hasAnswer = rd.u8();
  if (rd.failed || hasAnswer > 1 || rec.expiresAt < 0 || rec.expiresAt > SAFE_INTEGER_MAX) {
    return null;
  }
  if (hasAnswer == 1) {
    let p = rd.bytes(<u32>IDEMPOTENCY_ANSWER_BYTES_MAX, 'answer');
    let len = rd.lastLen;
    if (rd.failed || len < <u32>ANSWER_HEADER_BYTES ||
      load<u32>(p + 15) != len - <u32>ANSWER_HEADER_BYTES) return null;
    let answer = new ArrayBuffer(<i32>len);
    memory.copy(changetype<usize>(answer), p, <usize>len);
    rec.answer = answer;
  }
  return rec;
}

/**
 * Reads a section's content (the reader covers exactly its bytes) into a staged table;
 * returns an empty string or why the bytes are not an idempotency section.
 */
export function readIdempotencySection(rd: Reader): string {
  let count = rd.u32();
  if (rd.failed || count > <u32>(IDEMPOTENCY_BYTES_MAX / IDEMPOTENCY_RECORD_OVERHEAD_BYTES)) {
    return 'bad idempotency section';
  }
  let t = new IdemTable();
  for (let i: u32 = 0; i < count; i++) {
    let rec = readRecord(rd);
    if (rec == null || t.records.has(rec.mapKey)) return 'bad idempotency record';
    add(t, rec);
  }
  if (rd.pos != rd.end) return 'bad idempotency section';
  staged = t;
  return '';
}

/** Makes the staged table live (a restore's swap) or, with nothing staged, empties it. */
export function installIdempotencySection(): void {
  retireBytes(table.bytes);
  table = staged != null ? staged! : new IdemTable();
  staged = null;
}

/** Drops a staged table (a failed or abandoned restore). */
export function discardIdempotencySection(): void {
  staged = null;
}

// The transaction shape keeps its transaction id in the recorded answer: a retry, which
// draws a new id, is answered with the first attempt's.
assert(SHAPE_TRANSACTION == 3);
