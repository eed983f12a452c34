/**
 * The data types the Raft core shares with storage, transport and the node driver.
 *
 * Pure types: no I/O, no clock. Words follow the Raft paper (term, votedFor, commitIndex).
 */

/**
 * What a log entry carries. `empty` is the no-op a new leader commits first (§5.4.2, §8);
 * `config` holds a whole cluster configuration, in effect from the moment it is appended
 * (thesis §4.1; configuration.ts encodes it).
 */
export type EntryType = 'normal' | 'empty' | 'config';

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
  /**
   * `normal`: the driver's envelope around a machine command; `config`: an encoded
   * configuration (configuration.ts); `empty`: no bytes.
   */
  readonly data: Uint8Array;
}

/** The state that must be durable before any message that depends on it is sent (§5.1, §5.2). */
export interface HardState {
  readonly term: number;
  readonly votedFor: string | null;
  readonly commitIndex: number;
}

/** How to reach one member over the peer link: `host:port`, or '' when not known. */
export interface PeerEntry {
  readonly id: string;
  readonly address: string;
}

/**
 * A cluster configuration (thesis §4): who votes, who only learns, how to reach each of
 * them, and which ids were removed for good. Invariants (configuration.ts checks them):
 * `voters` and `learners` are sorted, distinct and disjoint; `peers` has exactly one entry
 * per voter and learner, sorted by id; `removed` holds none of them, oldest first.
 */
export interface Configuration {
  /** Members whose votes and acknowledgements count (§5.2, §5.3). */
  readonly voters: readonly string[];
  /** Members that receive the log and snapshots but never vote nor count (thesis §4.2.1). */
  readonly learners: readonly string[];
  readonly peers: readonly PeerEntry[];
  /**
   * Ids removed from the cluster: never added again, because messages of the removed
   * process may still be in flight under that id. At most REMOVED_IDS_MAX, oldest first.
   */
  readonly removed: readonly string[];
}

/**
 * Describes a snapshot: it covers every entry up to and including `index`, and carries the
 * configuration in effect at `index`, so a node restored from it knows every member and how
 * to reach it.
 */
export interface SnapshotMeta extends Configuration {
  readonly index: number;
  readonly term: number;
  /** The stamp of the entry at `index`, so stamps stay monotone after a restore. */
  readonly timeMs: number;
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
