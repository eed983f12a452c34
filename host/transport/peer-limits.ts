/**
 * The bounds of the peer port, in one place, and the guard that holds a connection to them
 * until it has authenticated. Before the handshake ends a connection is a stranger: it may
 * send a few hundred bytes and must finish within a deadline, and only a few strangers are
 * heard at once. After it, frames are bounded by the largest frame Raft can legitimately
 * send. A connection that breaks a bound is destroyed; nothing here throws at a peer's
 * bidding.
 */
import type { Socket } from 'node:net';
import { ENTRY_OVERHEAD_BYTES } from '../core/raft/log.js';
import { PROPOSAL_BYTES_MAX } from '../core/raft/raft.js';
import { HANDSHAKE_MESSAGE_BYTES_MAX } from './handshake.js';

/**
 * Bytes of a Raft message beyond its payload: version and type, two member ids (at most 64
 * bytes each on this link), the numeric fields, and a snapshot meta's voter list (at most
 * WIRE_VOTERS_MAX ids of 64 bytes). 16 KiB covers every type with room to spare.
 */
export const FRAME_FIXED_BYTES_MAX = 16 * 1024;
/**
 * The largest frame an authenticated peer may send: one proposal of PROPOSAL_BYTES_MAX (an
 * append carries one entry larger than its byte budget alone, and a follower forwards a
 * proposal whole) with its entry framing and the fixed part. A larger frame closes the link.
 */
export const FRAME_BYTES_MAX = PROPOSAL_BYTES_MAX + ENTRY_OVERHEAD_BYTES + FRAME_FIXED_BYTES_MAX;
/** Bytes of the HTTP upgrade request a stranger may send (Node refuses longer heads: 431). */
export const UPGRADE_HEADER_BYTES_MAX = 4096;
/**
 * Bytes a connection may send after the upgrade and before it has authenticated: its two
 * handshake messages with their WebSocket framing (at most 14 bytes each), and slack for a
 * close frame. Counted on the plaintext side, so TLS records do not count.
 */
export const PREAUTH_BYTES_MAX = 2 * (HANDSHAKE_MESSAGE_BYTES_MAX + 14) + 256;
/** From TCP accept (or dial) to an authenticated link: TLS, upgrade and handshake. */
export const HANDSHAKE_DEADLINE_MS = 5000;
/** Connections that have not authenticated yet, at once; more are closed on arrival. */
export const PENDING_CONNECTIONS_MAX = 64;
/** Bytes queued on one peer's socket before new frames for it are dropped. */
export const PEER_BUFFERED_BYTES_MAX = 64 * 1024 * 1024;

// ws keeps its payload bound in an int32.
if (FRAME_BYTES_MAX >= 2 ** 31) throw new Error('assertion failed: FRAME_BYTES_MAX >= 2^31');

/** The Raft settings a frame's size follows from. */
export interface RaftFrameSettings {
  readonly maxEntriesBytesPerAppend: number;
  readonly maxSnapshotChunkBytes: number;
}

/**
 * Asserts at start that every frame the configured Raft core can send fits FRAME_BYTES_MAX:
 * an append of several entries (its byte budget counts their framing), a snapshot chunk, or
 * one proposal-sized entry. Throws when a setting outgrew the bound: peers would cut every
 * link that carried such a frame, and the cluster would stall instead of failing loudly.
 */
export function assertFrameBound(settings: RaftFrameSettings): void {
  const largestPayload = Math.max(settings.maxEntriesBytesPerAppend,
    settings.maxSnapshotChunkBytes, PROPOSAL_BYTES_MAX + ENTRY_OVERHEAD_BYTES);
  if (largestPayload + FRAME_FIXED_BYTES_MAX > FRAME_BYTES_MAX) {
    throw new Error(`assertion failed: a Raft frame of ${largestPayload} payload bytes ` +
      `exceeds the peer link's frame bound of ${FRAME_BYTES_MAX}`);
  }
}

/** What a guard reports when a stranger breaks a bound. */
export type PreauthViolation = 'bytes' | 'deadline';

/**
 * Holds one connection to the stranger's bounds: at most PREAUTH_BYTES_MAX bytes after
 * `countFrom` starts counting, and authenticated by the deadline. `authenticated()` lifts
 * both; `release()` (on close) clears the timer. On a violation the socket is destroyed and
 * `onViolation` called once.
 */
export class PreauthGuard {
  private timer: NodeJS.Timeout | null;
  private counted: Socket | null = null;
  private bytes = 0;
  private over = false;
  private readonly onData = (chunk: Buffer) => {
    this.bytes += chunk.length;
    if (this.bytes > PREAUTH_BYTES_MAX) this.violate('bytes');
  };

  constructor(private readonly socket: Socket,
    private readonly onViolation: (violation: PreauthViolation) => void,
    deadlineMs = HANDSHAKE_DEADLINE_MS) {
    this.timer = setTimeout(() => this.violate('deadline'), deadlineMs);
  }

  /**
   * Counts the plaintext bytes `socket` delivers from now on, after `alreadyBytes`. Attach it
   * only once the WebSocket reads the socket (after `ws` took it over): a `data` listener
   * added earlier would set the socket flowing, and the bytes `ws` puts back into it (those
   * read past the upgrade request) would then be emitted at once, before `ws` listens.
   */
  countFrom(socket: Socket, alreadyBytes = 0): void {
    this.counted = socket;
    this.bytes += alreadyBytes;
    socket.on('data', this.onData);
    if (this.bytes > PREAUTH_BYTES_MAX) this.violate('bytes');
  }

  authenticated(): void {
    this.stop();
  }

  release(): void {
    this.stop();
  }

  private stop(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    this.counted?.off('data', this.onData);
    this.counted = null;
  }

  private violate(violation: PreauthViolation): void {
    if (this.over) return;
    this.over = true;
    this.stop();
    this.socket.destroy();
    this.onViolation(violation);
  }
}

/** Log lines of one kind a window lets through; the rest are counted and reported. */
const LOG_LINES_PER_WINDOW = 1;
const LOG_WINDOW_MS = 10_000;

/**
 * Keeps a flood of refused strangers from becoming a flood of log lines: per kind, one line
 * per window, and the next line says how many were held back.
 */
export class LogThrottle {
  private readonly windows = new Map<string, { startMs: number; lines: number;
    held: number }>();

  /** Whether to log this event now, and how many of its kind were held back before it. */
  admit(kind: string, nowMs: number): { readonly log: boolean; readonly held: number } {
    let window = this.windows.get(kind);
    if (window === undefined || nowMs - window.startMs >= LOG_WINDOW_MS) {
      const held = window?.held ?? 0;
      if (this.windows.size >= 256) this.windows.clear();
      window = { startMs: nowMs, lines: 0, held: 0 };
      this.windows.set(kind, window);
      window.lines++;
      return { log: true, held };
    }
    if (window.lines < LOG_LINES_PER_WINDOW) {
      window.lines++;
      return { log: true, held: 0 };
    }
    window.held++;
    return { log: false, held: 0 };
  }
}
