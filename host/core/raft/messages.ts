/**
 * The messages Raft peers exchange, as one discriminated union on `type`.
 *
 * Pure types: no I/O. Every message names its sender (`from`), its target (`to`) and the
 * sender's `term`. Messages that are not part of the term protocol (a forwarded proposal, a
 * follower's read-index question and its answer, a forwarded membership change and its
 * answer) carry `term: 0` and are never used to learn a newer term. Indexes and terms are
 * non-negative safe integers; `readIndex` may be -1.
 */
import type { MembershipChange, MembershipRefusal } from './configuration.js';
import type { Entry, SnapshotMeta } from './types.js';

interface Envelope {
  readonly from: string;
  readonly to: string;
  readonly term: number;
}

/** §9.6 of the thesis: "would you vote for me at `term`?", sent without raising our term. */
export interface PreVoteMessage extends Envelope {
  readonly type: 'preVote';
  readonly lastLogIndex: number;
  readonly lastLogTerm: number;
  /** See VoteMessage. */
  readonly selfRemoved?: boolean;
}

export interface PreVoteResponseMessage extends Envelope {
  readonly type: 'preVoteResponse';
  readonly granted: boolean;
}

/** RequestVote (§5.2). `transfer` marks a campaign started by TimeoutNow (§3.10 thesis). */
export interface VoteMessage extends Envelope {
  readonly type: 'vote';
  readonly lastLogIndex: number;
  readonly lastLogTerm: number;
  readonly transfer: boolean;
  /**
   * The newest configuration in the candidate's log removes it: it campaigns only because
   * that change is not known committed (`mayCampaign` in raft.ts). Absent means false.
   */
  readonly selfRemoved?: boolean;
}

export interface VoteResponseMessage extends Envelope {
  readonly type: 'voteResponse';
  readonly granted: boolean;
}

/** AppendEntries (§5.3). `entries[i].index === prevLogIndex + 1 + i`. */
export interface AppendMessage extends Envelope {
  readonly type: 'append';
  readonly prevLogIndex: number;
  readonly prevLogTerm: number;
  readonly entries: readonly Entry[];
  readonly commitIndex: number;
}

/**
 * The answer to an append. On success `matchIndex` is the follower's last index known to
 * match the leader. On reject, `rejectedIndex` echoes the append's `prevLogIndex`, and
 * `hintIndex`/`hintTerm` point at the follower's best guess of the last possibly matching
 * entry, so the leader skips a whole term per round trip (§5.3, fast backtracking).
 */
export interface AppendResponseMessage extends Envelope {
  readonly type: 'appendResponse';
  readonly success: boolean;
  readonly matchIndex: number;
  readonly rejectedIndex: number;
  readonly hintIndex: number;
  readonly hintTerm: number;
}

/**
 * A leader's keep-alive. `commitIndex` is capped at what the follower is known to hold.
 * `readContext` is the newest read-index round (0: none); the response echoes it (§6.4).
 */
export interface HeartbeatMessage extends Envelope {
  readonly type: 'heartbeat';
  readonly commitIndex: number;
  readonly readContext: number;
}

export interface HeartbeatResponseMessage extends Envelope {
  readonly type: 'heartbeatResponse';
  readonly readContext: number;
}

/** A proposal a follower forwards to its leader, with the follower's clock reading. */
export interface ProposeMessage extends Envelope {
  readonly type: 'propose';
  readonly data: Uint8Array;
  readonly nowMs: number;
}

/** A follower asks the leader for a read index on behalf of its local request. */
export interface ReadIndexMessage extends Envelope {
  readonly type: 'readIndex';
  readonly requestId: number;
}

/** The leader's answer: the read index, or -1 when the read cannot be served. */
export interface ReadIndexResponseMessage extends Envelope {
  readonly type: 'readIndexResponse';
  readonly requestId: number;
  readonly readIndex: number;
}

/**
 * One chunk of a snapshot (§7): bytes [offset, offset + chunkBytes) of `totalBytes`. The
 * leader's core never holds a snapshot's bytes: it leaves `data` empty and its driver reads
 * the chunk from storage into `data` before sending. On the wire, `data.length` is always
 * `chunkBytes`.
 */
export interface SnapshotChunkMessage extends Envelope {
  readonly type: 'snapshotChunk';
  readonly meta: SnapshotMeta;
  readonly offset: number;
  readonly totalBytes: number;
  readonly chunkBytes: number;
  readonly data: Uint8Array;
}

/**
 * The follower's cumulative acknowledgement: it holds `[0, nextOffset)` of the snapshot at
 * `snapshotIndex`. `nextOffset === totalBytes` means installed (sent after persisting).
 */
export interface SnapshotChunkResponseMessage extends Envelope {
  readonly type: 'snapshotChunkResponse';
  readonly snapshotIndex: number;
  readonly nextOffset: number;
}

/** Leadership transfer (§3.10 thesis): start an election now, skipping pre-vote. */
export interface TimeoutNowMessage extends Envelope {
  readonly type: 'timeoutNow';
}

/** A member asks the leader to change the configuration for its client (thesis §4.1). */
export interface MembershipRequestMessage extends Envelope {
  readonly type: 'membershipRequest';
  readonly requestId: number;
  readonly change: MembershipChange;
}

/**
 * The leader's answer: the index and term of the `config` entry it appended (the change is
 * done once that entry commits), or why it refused (`index` 0).
 */
export interface MembershipResponseMessage extends Envelope {
  readonly type: 'membershipResponse';
  readonly requestId: number;
  readonly index: number;
  readonly entryTerm: number;
  /** Null when accepted. */
  readonly refusal: MembershipRefusal | null;
  readonly detail: string;
}

export type Message =
  | PreVoteMessage
  | PreVoteResponseMessage
  | VoteMessage
  | VoteResponseMessage
  | AppendMessage
  | AppendResponseMessage
  | HeartbeatMessage
  | HeartbeatResponseMessage
  | ProposeMessage
  | ReadIndexMessage
  | ReadIndexResponseMessage
  | SnapshotChunkMessage
  | SnapshotChunkResponseMessage
  | TimeoutNowMessage
  | MembershipRequestMessage
  | MembershipResponseMessage;

export type MessageType = Message['type'];

/** Every message type, in wire-code order (the codec's type byte is the position here). */
export const MESSAGE_TYPES: readonly MessageType[] = [
  'preVote',
  'preVoteResponse',
  'vote',
  'voteResponse',
  'append',
  'appendResponse',
  'heartbeat',
  'heartbeatResponse',
  'propose',
  'readIndex',
  'readIndexResponse',
  'snapshotChunk',
  'snapshotChunkResponse',
  'timeoutNow',
  'membershipRequest',
  'membershipResponse',
];
