/**
 * The data types the Raft core shares with storage, transport and the node driver.
 *
 * Pure types: no I/O, no clock. Words follow the Raft paper (term, votedFor, commitIndex).
 */

/** What a log entry carries. `empty` is the no-op a new leader commits first (§5.4.2, §8). */
export type EntryType = 'normal' | 'empty';

/**
 * One log entry. `index` starts at 1 and has no holes. `timeMs` is the leader's stamp at
 * propose time, never lower than the previous entry's (DESIGN.md, "Determinism rules"); every
 * replica decides expiry from it.
 */
export interface Entry {
  readonly term: number;
  readonly index: number;
  readonly timeMs: number;
  readonly type: EntryType;
  /** For `normal` entries: the driver's envelope around a machine command. Empty otherwise. */
  readonly data: Uint8Array;
}

/** The state that must be durable before any message that depends on it is sent (§5.1, §5.2). */
export interface HardState {
  readonly term: number;
  readonly votedFor: string | null;
  readonly commitIndex: number;
}

/** Describes a snapshot: it covers every entry up to and including `index`. */
export interface SnapshotMeta {
  readonly index: number;
  readonly term: number;
  /** The stamp of the entry at `index`, so stamps stay monotone after a restore. */
  readonly timeMs: number;
  /** The voting members at `index`. */
  readonly voters: readonly string[];
}

/**
 * A snapshot as the core and the driver pass it around: what it covers and its size. Its
 * bytes stay in storage (a state may be gigabytes), read and written in chunks.
 */
export interface Snapshot {
  readonly meta: SnapshotMeta;
  /** Length of the snapshot's data (the driver's and the machine's bytes). */
  readonly dataBytes: number;
}

export type Role = 'follower' | 'pre-candidate' | 'candidate' | 'leader';

export const EMPTY_HARD_STATE: HardState = { term: 0, votedFor: null, commitIndex: 0 };
