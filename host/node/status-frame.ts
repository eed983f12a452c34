/**
 * The status frame: a small non-Raft frame each node sends every peer about once a second on
 * the peer link, saying what it is (role, term, indexes, digest, its client URL, its clock).
 * `cluster-status.ts` sends and collects them; the Raft core never sees one.
 *
 * Layout: u8 STATUS_FRAME_TAG, u8 STATUS_FORMAT_VERSION, then the status as compact UTF-8
 * JSON. The tag can never begin a Raft frame, whose first byte is the message codec's format
 * version (MESSAGE_FORMAT_VERSION, a small number). JSON because a status is tiny and sent
 * once a second, and a node of a later release may add fields that this one skips instead of
 * refusing the whole frame.
 *
 * Pure: no I/O, no clock. `decodeStatusFrame` never throws: garbage, a wrong tag or version,
 * a frame over STATUS_FRAME_BYTES_MAX, bad UTF-8 or JSON, or a field out of its bounds all
 * give null.
 */

/** First byte of every status frame; no Raft frame starts with it. */
export const STATUS_FRAME_TAG = 0xc7;
export const STATUS_FORMAT_VERSION = 1;
/** A larger frame is refused unread: a status is a few hundred bytes. */
export const STATUS_FRAME_BYTES_MAX = 2048;
/** Longest client URL a status may carry, in characters. */
export const STATUS_URL_CHARS_MAX = 512;
/** Longest state digest a status may carry, in characters. */
export const STATUS_DIGEST_CHARS_MAX = 128;

const MEMBER_ID_PATTERN = /^[A-Za-z0-9_.-]{1,64}$/;
const ROLE_PATTERN = /^[a-z-]{1,32}$/;
const DIGEST_PATTERN = new RegExp(`^[\\x21-\\x7e]{1,${STATUS_DIGEST_CHARS_MAX}}$`);
/** What a member holds back for: a word, so a later release's reason still reads. */
const HOLD_REASON_PATTERN = /^[a-z][a-z_]{0,31}$/;
const NODE_STATES: ReadonlySet<string> = new Set(['ok', 'starting', 'stopping']);

/** What one node says of itself. */
export interface MemberStatus {
  readonly id: string;
  /** `ok`, `starting` or `stopping`, as its `/health` says. */
  readonly status: string;
  /** `leader`, `follower`, `candidate`, `pre-candidate` (a later release may add more). */
  readonly role: string;
  /** The leader it knows, or null. */
  readonly leader: string | null;
  readonly term: number;
  readonly commitIndex: number;
  readonly appliedIndex: number;
  /** The state digest at `appliedIndex`, when the node reports one. */
  readonly digest: string | null;
  /** Where its HTTP surface is reached (`HIVEKV_ADVERTISE_URL` or its --host and --port). */
  readonly url: string;
  /** The sender's clock when it sent the frame, in Unix milliseconds. */
  readonly sentAtMs: number;
  /**
   * Its data directory is below HIVEKV_MIN_FREE_BYTES free: every member refuses writes
   * while it is (cluster-status.ts, `membersStorageFull`). False in a frame without it.
   */
  readonly storageFull: boolean;
  /**
   * Its memory budget (HIVEKV_MAX_STATE_BYTES): every member holds the same state, so every
   * member admits writes that grow it only up to the smallest budget among them. Null in a
   * frame without it.
   */
  readonly stateBytesMax: number | null;
  /**
   * The state it holds now, in bytes as the budget counts them: a follower behind takes
   * neither snapshots nor entries while a member holds more than it can restore (replica.ts,
   * `refreshCatchUpHold`). Null in a frame without it.
   */
  readonly stateBytes: number | null;
  /**
   * It holds back from catching up (its memory could not hold the state a member holds):
   * its leader sends it heartbeats only (replica.ts, `refreshCatchUpHold`). False in a frame
   * without it.
   */
  readonly catchUpHeld: boolean;
  /**
   * What it holds back for, while it does: `memory` (its memory could not hold the state a
   * member holds) or `space` (a learner whose data directory is below HIVEKV_MIN_FREE_BYTES
   * free); a later release may add more. Null while it does not hold back; `memory` in a
   * frame of a release before the field whose `catchUpHeld` is true.
   */
  readonly catchUpHeldFor: string | null;
}

const utf8 = new TextEncoder();
const utf8Strict = new TextDecoder('utf-8', { fatal: true });

/** True when `url` is an http(s) URL a status may carry (also checked on receipt). */
export function isStatusUrl(url: string): boolean {
  if (url.length === 0 || url.length > STATUS_URL_CHARS_MAX) return false;
  if (!/^https?:\/\/[^\s/?#]+/.test(url)) return false;
  try {
    const parsed = new URL(url);
    return parsed.protocol === 'http:' || parsed.protocol === 'https:';
  } catch {
    return false;
  }
}

/**
 * Encodes `status`. Throws on a status this node must not send (a bug in the caller):
 * out-of-range numbers, a bad id or URL, or a frame over STATUS_FRAME_BYTES_MAX.
 */
export function encodeStatusFrame(status: MemberStatus): Uint8Array {
  if (validStatus(status) === null) {
    throw new Error(`status frame: invalid status for ${JSON.stringify(status.id)}`);
  }
  const json = utf8.encode(JSON.stringify({
    id: status.id, status: status.status, role: status.role, leader: status.leader,
    term: status.term, commitIndex: status.commitIndex, appliedIndex: status.appliedIndex,
    digest: status.digest, url: status.url, sentAtMs: status.sentAtMs,
    storageFull: status.storageFull, stateBytesMax: status.stateBytesMax,
    stateBytes: status.stateBytes, catchUpHeld: status.catchUpHeld,
    catchUpHeldFor: status.catchUpHeldFor,
  }));
  if (json.length + 2 > STATUS_FRAME_BYTES_MAX) throw new Error('status frame: too large');
  const frame = new Uint8Array(json.length + 2);
  frame[0] = STATUS_FRAME_TAG;
  frame[1] = STATUS_FORMAT_VERSION;
  frame.set(json, 2);
  return frame;
}

/** True when `frame` is a status frame (by its first byte), well formed or not. */
export function isStatusFrame(frame: Uint8Array): boolean {
  return frame.length > 0 && frame[0] === STATUS_FRAME_TAG;
}

/** The status `frame` carries, or null for anything that is not a valid status frame. */
export function decodeStatusFrame(frame: Uint8Array): MemberStatus | null {
  if (frame.length < 3 || frame.length > STATUS_FRAME_BYTES_MAX) return null;
  if (frame[0] !== STATUS_FRAME_TAG || frame[1] !== STATUS_FORMAT_VERSION) return null;
  let parsed: unknown;
  try {
    parsed = JSON.parse(utf8Strict.decode(frame.subarray(2)));
  } catch {
    return null;
  }
  return validStatus(parsed);
}

function isIndex(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
}

function isMemberId(value: unknown): value is string {
  return typeof value === 'string' && MEMBER_ID_PATTERN.test(value);
}

/** The status as a fresh object with only the known fields, or null if any is out of bounds. */
function validStatus(value: unknown): MemberStatus | null {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return null;
  const v = value as Record<string, unknown>;
  const { id, status, role, leader, term, commitIndex, appliedIndex, digest, url, sentAtMs } = v;
  // A frame of a release before the field says nothing of its space: taken as not full.
  const storageFull = v.storageFull ?? false;
  if (typeof storageFull !== 'boolean') return null;
  const stateBytesMax = v.stateBytesMax ?? null;
  if (stateBytesMax !== null && (!isIndex(stateBytesMax) || stateBytesMax === 0)) return null;
  const stateBytes = v.stateBytes ?? null;
  if (stateBytes !== null && !isIndex(stateBytes)) return null;
  const catchUpHeld = v.catchUpHeld ?? false;
  if (typeof catchUpHeld !== 'boolean') return null;
  const catchUpHeldFor = v.catchUpHeldFor ?? (catchUpHeld ? 'memory' : null);
  if (catchUpHeldFor !== null && (typeof catchUpHeldFor !== 'string' ||
    !HOLD_REASON_PATTERN.test(catchUpHeldFor))) return null;
  if ((catchUpHeldFor !== null) !== catchUpHeld) return null;
  if (!isMemberId(id) || typeof status !== 'string' || !NODE_STATES.has(status)) return null;
  if (typeof role !== 'string' || !ROLE_PATTERN.test(role)) return null;
  if (leader !== null && !isMemberId(leader)) return null;
  if (!isIndex(term) || !isIndex(commitIndex) || !isIndex(appliedIndex)) return null;
  if (!isIndex(sentAtMs)) return null;
  if (digest !== null && (typeof digest !== 'string' || !DIGEST_PATTERN.test(digest))) {
    return null;
  }
  if (typeof url !== 'string' || !isStatusUrl(url)) return null;
  return { id, status, role, leader, term, commitIndex, appliedIndex, digest, url, sentAtMs,
    storageFull, stateBytesMax, stateBytes, catchUpHeld, catchUpHeldFor };
}
