/**
 * Binary encoding of Raft messages for the peer link.
 *
 * Layout (little-endian): u8 formatVersion, u8 type code (position in MESSAGE_TYPES),
 * str from, str to, int term, then the type's fields in declaration order. `str` is a u16
 * byte length and UTF-8; `int` is a float64 holding a safe integer; `bool` a u8 0/1;
 * `bytes` a u32 length and the bytes; entries are a u32 count of (int term, int index,
 * int timeMs, u8 type, bytes data); a SnapshotMeta is int index, int term, int timeMs, then
 * its configuration: int count and str of each voter, of each learner, int count and
 * (str id, str address) of each peer, int count and str of each removed id. A membership
 * change is u8 kind (0 add a learner, 1 promote, 2 remove), str id, and str peer for an add;
 * a (pre)vote ends with a u8 1 when `selfRemoved` is true, and with nothing otherwise;
 * a refusal is u8 (0: none, else 1 + its position in MEMBERSHIP_REFUSALS).
 *
 * Pure: no I/O. `decodeMessage` never throws: garbage, truncation, trailing bytes, an
 * unknown version or out-of-range numbers all give null.
 */
import {
  MEMBERSHIP_REFUSALS, REMOVED_IDS_MAX, type MembershipChange, type MembershipRefusal,
} from './configuration.js';
import type { AppendMessage, Message, MessageType } from './messages.js';
import { MESSAGE_TYPES } from './messages.js';
import type { EntryType, SnapshotMeta } from './types.js';
import type { Entry } from './types.js';

/** 2: snapshot metas carry learners, peer addresses and removed ids; config entries. */
export const MESSAGE_FORMAT_VERSION = 2;
/** Entries one append may carry on the wire. */
export const WIRE_ENTRIES_MAX = 1 << 20;
/** Voters, learners or peers one snapshot meta may list on the wire. */
export const WIRE_VOTERS_MAX = 64;
/** Removed ids one snapshot meta may list on the wire. */
export const WIRE_REMOVED_MAX = REMOVED_IDS_MAX;
const ENTRY_TYPES: readonly EntryType[] = ['normal', 'empty', 'config'];
const CHANGE_KINDS: readonly MembershipChange['kind'][] = ['addLearner', 'promote', 'remove'];
const STRING_BYTES_MAX = 0xffff;
const INITIAL_BUFFER_BYTES = 256;
/** The encode scratch buffer is kept between messages up to this size. */
const SCRATCH_BYTES_KEPT_MAX = 4 * 1024 * 1024;

const utf8 = new TextEncoder();
const utf8Strict = new TextDecoder('utf-8', { fatal: true });
/** Node ids repeat in every message; their encodings are kept, up to this many. */
const ENCODED_STRINGS_MAX = 1024;
const encodedStrings = new Map<string, Uint8Array>();
/** Ids up to this length in plain ASCII are decoded without TextDecoder. */
const ASCII_FAST_PATH_BYTES_MAX = 64;

function encodeString(text: string): Uint8Array {
  let data = encodedStrings.get(text);
  if (data === undefined) {
    data = utf8.encode(text);
    if (encodedStrings.size >= ENCODED_STRINGS_MAX) encodedStrings.clear();
    encodedStrings.set(text, data);
  }
  return data;
}

/**
 * One scratch buffer serves every encode (encoding is synchronous and not re-entrant);
 * `done()` copies out exactly the bytes of the message.
 */
let scratch = new Uint8Array(INITIAL_BUFFER_BYTES * 16);
let scratchView = new DataView(scratch.buffer);

class Writer {
  private buffer = scratch;
  private view = scratchView;
  private at = 0;

  private room(bytes: number): void {
    if (this.at + bytes <= this.buffer.length) return;
    const grown = new Uint8Array(Math.max(this.buffer.length * 2, this.at + bytes));
    grown.set(this.buffer.subarray(0, this.at));
    this.buffer = grown;
    this.view = new DataView(grown.buffer);
    // Keep the larger buffer for later messages, up to a bound, so big appends stay cheap.
    if (grown.length <= SCRATCH_BYTES_KEPT_MAX) {
      scratch = grown;
      scratchView = this.view;
    }
  }

  u8(value: number): void {
    this.room(1);
    this.view.setUint8(this.at, value);
    this.at += 1;
  }

  int(value: number): void {
    if (!Number.isSafeInteger(value)) throw new Error(`codec: ${value} is not a safe integer`);
    this.room(8);
    this.view.setFloat64(this.at, value, true);
    this.at += 8;
  }

  bytes(data: Uint8Array): void {
    this.room(4 + data.length);
    this.view.setUint32(this.at, data.length, true);
    this.buffer.set(data, this.at + 4);
    this.at += 4 + data.length;
  }

  str(text: string): void {
    const data = encodeString(text);
    if (data.length > STRING_BYTES_MAX) throw new Error('codec: string too long');
    this.room(2 + data.length);
    this.view.setUint16(this.at, data.length, true);
    this.buffer.set(data, this.at + 2);
    this.at += 2 + data.length;
  }

  done(): Uint8Array {
    return this.buffer.slice(0, this.at);
  }
}

/** Thrown inside the reader only; `decodeMessage` turns it into null. */
class Malformed extends Error {}

class Reader {
  private readonly view: DataView;
  at = 0;

  constructor(private readonly data: Uint8Array) {
    this.view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  }

  need(bytes: number): void {
    if (this.at + bytes > this.data.length) throw new Malformed('truncated');
  }

  u8(): number {
    this.need(1);
    return this.view.getUint8(this.at++);
  }

  int(): number {
    this.need(8);
    const value = this.view.getFloat64(this.at, true);
    this.at += 8;
    if (!Number.isSafeInteger(value) || value < -1) throw new Malformed('bad integer');
    return value;
  }

  index(): number {
    const value = this.int();
    if (value < 0) throw new Malformed('negative index');
    return value;
  }

  bool(): boolean {
    const value = this.u8();
    if (value > 1) throw new Malformed('bad boolean');
    return value === 1;
  }

  /**
   * The next length-prefixed bytes, copied by the constructor: `slice` of a Buffer (a frame
   * from `ws` is one) would be a view, keeping the whole frame alive.
   */
  bytes(): Uint8Array {
    const start = this.span();
    return new Uint8Array(this.data.subarray(start, this.at));
  }

  /**
   * Like `bytes`, but a view into the frame: for a log entry, whose bytes the follower's log
   * copies into its own slabs as it appends (entry-columns.ts), so a copy here would be made
   * only to be dropped.
   */
  bytesView(): Uint8Array {
    const start = this.span();
    return this.data.subarray(start, this.at);
  }

  /** Reads a u32 length and steps over that many bytes; returns where they start. */
  private span(): number {
    this.need(4);
    const length = this.view.getUint32(this.at, true);
    this.at += 4;
    this.need(length);
    const start = this.at;
    this.at += length;
    return start;
  }

  str(): string {
    this.need(2);
    const length = this.view.getUint16(this.at, true);
    this.at += 2;
    this.need(length);
    const text = length <= ASCII_FAST_PATH_BYTES_MAX ? this.ascii(length) : null;
    const decoded = text ?? utf8Strict.decode(this.data.subarray(this.at, this.at + length));
    this.at += length;
    return decoded;
  }

  /** The string at `at` if it is plain ASCII, else null (the caller decodes UTF-8). */
  private ascii(length: number): string | null {
    let text = '';
    for (let i = this.at; i < this.at + length; i++) {
      const byte = this.data[i] ?? 0x80;
      if (byte >= 0x80) return null;
      text += String.fromCharCode(byte);
    }
    return text;
  }

  end(): boolean {
    return this.at === this.data.length;
  }
}

function writeEntries(w: Writer, entries: AppendMessage['entries']): void {
  w.int(entries.length);
  for (const e of entries) {
    w.int(e.term);
    w.int(e.index);
    w.int(e.timeMs);
    w.u8(ENTRY_TYPES.indexOf(e.type));
    w.bytes(e.data);
  }
}

function readEntries(r: Reader): Entry[] {
  const count = r.index();
  if (count > WIRE_ENTRIES_MAX) throw new Malformed('too many entries');
  const entries: Entry[] = [];
  for (let i = 0; i < count; i++) {
    const term = r.index();
    const index = r.index();
    const timeMs = r.index();
    const type = ENTRY_TYPES[r.u8()];
    if (type === undefined) throw new Malformed('bad entry type');
    entries.push({ term, index, timeMs, type, data: r.bytesView() });
  }
  return entries;
}

function writeStrings(w: Writer, list: readonly string[]): void {
  w.int(list.length);
  for (const item of list) w.str(item);
}

function readStrings(r: Reader, max: number): string[] {
  const count = r.index();
  if (count > max) throw new Malformed('list too long');
  const list: string[] = [];
  for (let i = 0; i < count; i++) list.push(r.str());
  return list;
}

function writeMeta(w: Writer, meta: SnapshotMeta): void {
  w.int(meta.index);
  w.int(meta.term);
  w.int(meta.timeMs);
  writeStrings(w, meta.voters);
  writeStrings(w, meta.learners);
  w.int(meta.peers.length);
  for (const peer of meta.peers) {
    w.str(peer.id);
    w.str(peer.address);
  }
  writeStrings(w, meta.removed);
}

function readMeta(r: Reader): SnapshotMeta {
  const index = r.index();
  const term = r.index();
  const timeMs = r.index();
  const voters = readStrings(r, WIRE_VOTERS_MAX);
  const learners = readStrings(r, WIRE_VOTERS_MAX);
  const peerCount = r.index();
  if (peerCount > WIRE_VOTERS_MAX) throw new Malformed('too many peers');
  const peers: Array<{ id: string; address: string }> = [];
  for (let i = 0; i < peerCount; i++) peers.push({ id: r.str(), address: r.str() });
  const removed = readStrings(r, WIRE_REMOVED_MAX);
  return { index, term, timeMs, voters, learners, peers, removed };
}

function writeChange(w: Writer, change: MembershipChange): void {
  w.u8(CHANGE_KINDS.indexOf(change.kind));
  w.str(change.id);
  if (change.kind === 'addLearner') w.str(change.peer);
}

function readChange(r: Reader): MembershipChange {
  const kind = CHANGE_KINDS[r.u8()];
  const id = r.str();
  switch (kind) {
    case 'addLearner': return { kind, id, peer: r.str() };
    case 'promote':
    case 'remove': return { kind, id };
    default: throw new Malformed('bad change kind');
  }
}

function readRefusal(r: Reader): MembershipRefusal | null {
  const code = r.u8();
  if (code === 0) return null;
  const refusal = MEMBERSHIP_REFUSALS[code - 1];
  if (refusal === undefined) throw new Malformed('bad refusal');
  return refusal;
}

/**
 * A (pre)vote's `selfRemoved` is a trailing u8 1, written only when true: a node of the
 * release before it reads every other vote as before and drops this one (a trailing byte),
 * so during a rolling upgrade such a candidate goes without that node's answer.
 */
function writeSelfRemoved(w: Writer, m: { selfRemoved?: boolean }): void {
  if (m.selfRemoved === true) w.u8(1);
}

function readSelfRemoved(r: Reader): { selfRemoved?: true } {
  if (r.end()) return {};
  if (r.u8() !== 1) throw new Malformed('bad selfRemoved');
  return { selfRemoved: true };
}

function writeBody(w: Writer, m: Message): void {
  switch (m.type) {
    case 'preVote':
      w.int(m.lastLogIndex); w.int(m.lastLogTerm); writeSelfRemoved(w, m); return;
    case 'vote':
      w.int(m.lastLogIndex); w.int(m.lastLogTerm); w.u8(m.transfer ? 1 : 0);
      writeSelfRemoved(w, m); return;
    case 'preVoteResponse':
    case 'voteResponse':
      w.u8(m.granted ? 1 : 0); return;
    case 'append':
      w.int(m.prevLogIndex); w.int(m.prevLogTerm); writeEntries(w, m.entries);
      w.int(m.commitIndex); return;
    case 'appendResponse':
      w.u8(m.success ? 1 : 0); w.int(m.matchIndex); w.int(m.rejectedIndex);
      w.int(m.hintIndex); w.int(m.hintTerm); return;
    case 'heartbeat':
      w.int(m.commitIndex); w.int(m.readContext); return;
    case 'heartbeatResponse':
      w.int(m.readContext); return;
    case 'propose':
      w.bytes(m.data); w.int(m.nowMs); return;
    case 'readIndex':
      w.int(m.requestId); return;
    case 'readIndexResponse':
      w.int(m.requestId); w.int(m.readIndex); return;
    case 'snapshotChunk':
      if (m.data.length !== m.chunkBytes) {
        throw new Error(`snapshot chunk of ${m.chunkBytes} bytes sent with ${m.data.length}`);
      }
      writeMeta(w, m.meta); w.int(m.offset); w.int(m.totalBytes); w.bytes(m.data); return;
    case 'snapshotChunkResponse':
      w.int(m.snapshotIndex); w.int(m.nextOffset); return;
    case 'timeoutNow':
      return;
    case 'membershipRequest':
      w.int(m.requestId); writeChange(w, m.change); return;
    case 'membershipResponse':
      w.int(m.requestId); w.int(m.index); w.int(m.entryTerm);
      w.u8(m.refusal === null ? 0 : MEMBERSHIP_REFUSALS.indexOf(m.refusal) + 1); w.str(m.detail);
      return;
  }
}

type Head = { from: string; to: string; term: number };

function readBody(r: Reader, type: MessageType, h: Head): Message {
  switch (type) {
    case 'preVote':
      return { type, ...h, lastLogIndex: r.index(), lastLogTerm: r.index(),
        ...readSelfRemoved(r) };
    case 'vote':
      return { type, ...h, lastLogIndex: r.index(), lastLogTerm: r.index(), transfer: r.bool(),
        ...readSelfRemoved(r) };
    case 'preVoteResponse':
    case 'voteResponse':
      return { type, ...h, granted: r.bool() };
    case 'append':
      return { type, ...h, prevLogIndex: r.index(), prevLogTerm: r.index(),
        entries: readEntries(r), commitIndex: r.index() };
    case 'appendResponse':
      return { type, ...h, success: r.bool(), matchIndex: r.index(), rejectedIndex: r.index(),
        hintIndex: r.index(), hintTerm: r.index() };
    case 'heartbeat':
      return { type, ...h, commitIndex: r.index(), readContext: r.index() };
    case 'heartbeatResponse':
      return { type, ...h, readContext: r.index() };
    case 'propose':
      return { type, ...h, data: r.bytes(), nowMs: r.index() };
    case 'readIndex':
      return { type, ...h, requestId: r.int() };
    case 'readIndexResponse':
      return { type, ...h, requestId: r.int(), readIndex: r.int() };
    case 'snapshotChunk': {
      const meta = readMeta(r);
      const offset = r.index();
      const totalBytes = r.index();
      const data = r.bytes();
      return { type, ...h, meta, offset, totalBytes, chunkBytes: data.length, data };
    }
    case 'snapshotChunkResponse':
      return { type, ...h, snapshotIndex: r.index(), nextOffset: r.index() };
    case 'timeoutNow':
      return { type, ...h };
    case 'membershipRequest':
      return { type, ...h, requestId: r.int(), change: readChange(r) };
    case 'membershipResponse':
      return { type, ...h, requestId: r.int(), index: r.index(), entryTerm: r.index(),
        refusal: readRefusal(r), detail: r.str() };
  }
}

/**
 * Encodes a message. Throws only on a message no core produces (non-integer numbers) or one
 * its driver failed to complete (a snapshot chunk whose data was not filled in).
 */
export function encodeMessage(m: Message): Uint8Array {
  const w = new Writer();
  w.u8(MESSAGE_FORMAT_VERSION);
  w.u8(MESSAGE_TYPES.indexOf(m.type));
  w.str(m.from);
  w.str(m.to);
  w.int(m.term);
  writeBody(w, m);
  return w.done();
}

/** Decodes a frame; null for anything that is not exactly one well-formed message. */
export function decodeMessage(bytes: Uint8Array): Message | null {
  try {
    const r = new Reader(bytes);
    if (r.u8() !== MESSAGE_FORMAT_VERSION) return null;
    const type = MESSAGE_TYPES[r.u8()];
    if (type === undefined) return null;
    const head: Head = { from: r.str(), to: r.str(), term: r.index() };
    const message = readBody(r, type, head);
    return r.end() ? message : null;
  } catch {
    // Malformed input, invalid UTF-8 (TypeError) or a range error: all mean "not a message".
    return null;
  }
}
