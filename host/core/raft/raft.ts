/**
 * The Raft consensus core: a pure, synchronous step function in the style of etcd's raft
 * library. The driver feeds it ticks, peer messages, proposals and read requests, and takes
 * back a `Ready` saying what to persist, send and apply (see ready.ts for the order).
 *
 * Pure: no I/O, no clock, no timers, no global randomness. Election jitter comes from a
 * PRNG seeded by the config, so the same seed and the same inputs give the same outputs.
 * The log lives in memory (entries after the last snapshot); the driver persists it.
 *
 * Covers: elections with randomized timeouts and pre-vote (§5.2, thesis §9.6), check-quorum
 * and the leader lease against disruptive servers (thesis §6.2, §4.2.3), replication with
 * fast backtracking, pipelining and probe/replicate states (§5.3), commit by a quorum of the
 * current term (§5.4.2), read index (thesis §6.4), forwarded proposals, chunked snapshots
 * (§7), leadership transfer (thesis §3.10), and membership changes one server at a time
 * with learners (thesis §4.1, §4.2; configuration.ts says why not joint consensus).
 *
 * Membership rules, after the thesis: a configuration takes effect as soon as its entry is
 * appended, committed or not, and stops with it if the entry is overwritten (§4.1); a leader
 * proposes a change only once the previous one committed (§4.1) and once it committed an
 * entry of its own term (the fix to the single-server change bug found in 2015); only voters
 * of the configuration in effect count for commit, elections, read index and check-quorum;
 * learners receive the log and snapshots and never campaign (§4.2.1); a node that knows it
 * was removed never votes, so a removed member never decides anything again; a leader
 * that removed itself keeps leading without counting itself until the change commits, then
 * hands leadership to a caught-up voter and steps down (§4.2.2, §3.10). Every node processes
 * messages from servers outside its configuration (§4.1): a new member must hear the leader
 * before it learns it is a member.
 */
import { mark } from '../marks.js';
import { createPrng, type Prng } from '../prng.js';
import {
  applyChange, bootstrapConfiguration, encodeConfigEntry, isRefused, roleOf, VOTERS_MAX,
  type MembershipChange, type MembershipRefusal,
} from './configuration.js';
import {
  entryBytes, raftAssert, raftFail, RaftLog, type IndexedConfiguration,
} from './log.js';
import type { Message, PreVoteMessage, VoteMessage } from './messages.js';
import { Progress } from './progress.js';
import { committedIndex, voteResult } from './quorum.js';
import { READS_PENDING_MAX, ReadTracker, type PendingRead, type ReadAnswer } from './read-index.js';
import type {
  MembershipAnswer, MembershipResult, Ready, ReadState, ReceivedSnapshotStep, SoftState,
} from './ready.js';
import type {
  Configuration, Entry, HardState, PeerEntry, Role, Snapshot, SnapshotMeta,
} from './types.js';

export type {
  MembershipAnswer, MembershipResult, Ready, ReadState, ReceivedSnapshotStep, SoftState,
} from './ready.js';
export { VOTERS_MAX } from './configuration.js';

/** Largest data of one proposal; larger ones are dropped (`too-large`). */
export const PROPOSAL_BYTES_MAX = 64 * 1024 * 1024;
/** Uncommitted bytes a leader accepts before it drops proposals (`busy`). */
export const UNCOMMITTED_BYTES_MAX = 128 * 1024 * 1024;
/** Committed entry bytes one Ready hands out to apply (at least one entry). */
export const COMMITTED_BYTES_PER_READY_MAX = 8 * 1024 * 1024;
/** Snapshot chunks unacknowledged per follower. */
export const SNAPSHOT_CHUNKS_IN_FLIGHT_MAX = 4;
/** A snapshot stream whose acknowledgements stall this many heartbeats is resent. */
export const SNAPSHOT_STALL_HEARTBEATS = 3;
/**
 * Each resend with no acknowledgement since the last doubles the wait before the next, at
 * most this many times (3 heartbeats become 96: 4.8 s on a node, a heartbeat a 50 ms tick).
 */
export const SNAPSHOT_STALL_BACKOFF_MAX = 5;
/** The largest snapshot a follower accepts (8 GiB, past any machine's 4 GiB of memory). */
export const SNAPSHOT_BYTES_MAX = 8 * 1024 * 1024 * 1024;
/** A pending read fails after this many election timeouts. */
export const READ_DEADLINE_ELECTIONS = 2;
/** Messages one Ready may carry; beyond it messages are dropped (Raft resends). */
export const OUTBOX_MESSAGES_MAX = 65_536;
/** Bounds on config values, checked by `createRaft`. */
export const ELECTION_TICKS_MAX = 10_000;
export const INFLIGHT_APPENDS_MAX = 4096;
/**
 * A learner is caught up, and may be promoted, when it is replicating, answered within the
 * last election timeout, and lacks at most this many committed entries (thesis §4.2.1 asks
 * that catching up take less than an election timeout; a few hundred entries take far less).
 */
export const PROMOTE_LAG_ENTRIES_MAX = 512;
/** Membership answers one Ready may carry; beyond it they are dropped (the caller times out). */
export const MEMBERSHIP_ANSWERS_MAX = 1024;

export interface RaftConfig {
  /** This node's id; one of `voters` unless `voters` is empty. */
  readonly id: string;
  /**
   * The voting members the cluster starts with, this node included; 0..VOTERS_MAX distinct
   * ids. Empty for a node that joins an existing cluster: it learns its configuration from
   * the leader. A configuration in the restored log or snapshot always wins over this.
   */
  readonly voters: readonly string[];
  /** How to reach the starting voters (stored in their configuration); may be empty. */
  readonly peers?: readonly PeerEntry[];
  /** Election timeout in ticks, randomized in [electionTicks, 2*electionTicks); e.g. 10. */
  readonly electionTicks: number;
  /** Heartbeat interval in ticks, 1 <= heartbeatTicks < electionTicks; e.g. 1. */
  readonly heartbeatTicks: number;
  /** Seeds the election jitter. */
  readonly seed: number;
  /** Pipelined appends unacknowledged per follower, 1..INFLIGHT_APPENDS_MAX; e.g. 64. */
  readonly maxInflightAppends: number;
  /** Entry bytes per append message (one larger entry still goes alone); e.g. 1 MiB. */
  readonly maxEntriesBytesPerAppend: number;
  /** Bytes per snapshot chunk; e.g. 1 MiB. */
  readonly maxSnapshotChunkBytes: number;
  /** Ask for pre-votes before raising the term (thesis §9.6). */
  readonly preVote: boolean;
  /** Leader steps down without a live majority; followers keep a leader lease (§6.2). */
  readonly checkQuorum: boolean;
  /**
   * TEST ONLY, never set in production: a leader commits an index held by a majority even
   * when its entry is of an earlier term, which §5.4.2 forbids (the Figure 8 case). The
   * simulator's own test sets it to prove the simulator finds the resulting loss.
   */
  readonly testOnlyCommitWithoutCurrentTermRule?: boolean;
}

/** What the driver reloaded from storage at start-up. */
export interface Restored {
  readonly hardState: HardState;
  readonly snapshot: SnapshotMeta | null;
  /**
   * Length of the snapshot's data, to send it in chunks to followers behind the compacted
   * log (the driver reads the bytes from storage); null without a snapshot.
   */
  readonly snapshotDataBytes: number | null;
  /** Every entry after the snapshot, contiguous. */
  readonly entries: readonly Entry[];
}

export type DropReason = 'no-leader' | 'busy' | 'too-large' | 'transferring';

export type ProposeResult =
  | { readonly kind: 'proposed'; readonly index: number; readonly term: number }
  | { readonly kind: 'forwarded' }
  | { readonly kind: 'dropped'; readonly reason: DropReason };

/** A membership change: done or refused here, or forwarded to the leader (answer later). */
export type MembershipProposeResult = MembershipResult | { readonly kind: 'forwarded' };

export interface RaftStatus {
  readonly id: string;
  readonly role: Role;
  readonly leader: string | null;
  readonly term: number;
  readonly commitIndex: number;
  readonly appliedIndex: number;
  readonly lastIndex: number;
}

export interface RaftCore {
  /** One unit of logical time: elections, heartbeats and check-quorum count ticks. */
  tick(): void;
  /** Any message from a peer; messages not addressed to this node are ignored. */
  step(message: Message): void;
  /**
   * Leader: append with timeMs = max(last entry timeMs, nowMs) and return its index.
   * Follower with a known leader: forward to the leader. No leader: dropped. Bounded: a
   * leader drops when the uncommitted tail would pass UNCOMMITTED_BYTES_MAX.
   */
  propose(data: Uint8Array, nowMs: number): ProposeResult;
  /** Linearizable read (thesis §6.4); the answer comes as a ReadState in a later Ready. */
  readIndex(requestId: number): void;
  /** Leader: hand leadership to `to` (thesis §3.10). Ignored elsewhere. */
  transferLeadership(to: string): void;
  /**
   * Changes the configuration by one server (thesis §4.1). Leader: appends the `config`
   * entry or refuses; the change is done once that entry commits. Follower with a known
   * leader: forwards it; the answer comes in a later Ready's `membershipAnswers` under
   * `requestId`. No leader: refused (`no-leader`).
   */
  proposeMembership(change: MembershipChange, requestId: number): MembershipProposeResult;
  /** The configuration in effect (the newest in the log) and the index that set it. */
  configuration(): IndexedConfiguration;
  /** The configuration in effect at `index` (>= the snapshot's index, <= the last index). */
  configurationAt(index: number): Configuration;
  /** Leader: what it knows `id` holds (§5.3 matchIndex); null elsewhere or for a stranger. */
  matchIndexOf(id: string): number | null;
  /**
   * The driver snapshotted the machine at `meta.index` (<= applied) and the snapshot, of
   * `dataBytes` bytes, is durable in storage: drop the log to it. `meta` carries the
   * configuration at its index (`configurationAt`).
   */
  compact(meta: SnapshotMeta, dataBytes: number): void;
  hasReady(): boolean;
  /** At most one Ready outstanding; call advance() before the next ready(). */
  ready(): Ready;
  /**
   * The driver has taken `ready` (ready.ts): its entries and hard state are on their way to
   * disk, its committed entries applied. The next Ready may be taken at once, before they
   * are durable: that is what lets the driver write one batch while the last one's fsync runs.
   */
  advance(ready: Ready): void;
  /**
   * Every entry up to `index` (whose term is `term`) and every hard state handed out before
   * it are durable. Called in order, once per completed fsync. Only now may a leader count
   * its own copy toward commit (§10.2.1 of the thesis), and only now are the entries applied.
   */
  persisted(index: number, term: number): void;
  status(): RaftStatus;
  /** This node's term while it leads, else -1: `status()` without making an object. */
  leaderTerm(): number;
  /**
   * The largest snapshot this node's storage can take now (its free space less a margin;
   * default: no limit). A snapshot from the leader larger than this is refused before its
   * first byte: no chunk of it is taken or acknowledged, so the leader tries again later,
   * each time waiting twice as long as the last (up to SNAPSHOT_STALL_BACKOFF_MAX).
   */
  setSnapshotRoom(bytes: number): void;
  /**
   * Leader: the members it sends no entries and no snapshot to, heartbeats only (default
   * none; each call replaces the last). A member whose memory could not hold the state holds
   * back from catching up and drops what it is sent, so sending it would be for nothing: a
   * probe of up to maxEntriesBytesPerAppend on every heartbeat's answer. Once out of the
   * set, it is sent what it lacks at its next heartbeat's answer. A learner in the set is
   * not caught up, however close its log: its promotion is refused.
   */
  setReplicationPaused(members: readonly string[]): void;
  /** The last snapshot refused for want of room, with how many were; null: none yet. */
  lastSnapshotRefusal(): SnapshotRefusal | null;
  /**
   * Every byte of snapshot `index` from the leader is written (ready.ts, step 2): the core
   * installs it now, and the next Ready carries it as `snapshot`. Not before: a driver whose
   * storage refuses the bytes abandons it instead. Ignored unless it is the snapshot being
   * received and this node still follows (a node that stood for election meanwhile drops it).
   */
  snapshotWritten(index: number): void;
  /**
   * Storage refused the bytes of snapshot `index` being received (its volume ran out
   * midway): the core forgets it, with every chunk of it not yet handed out, and the leader
   * sends it again from the start once it learns so. False if it was not being received
   * (a newer one took its place).
   */
  abandonReceivedSnapshot(index: number): boolean;
}

/** A snapshot a follower refused for want of room (`setSnapshotRoom`). */
export interface SnapshotRefusal {
  readonly meta: SnapshotMeta;
  readonly totalBytes: number;
  readonly roomBytes: number;
  /** Refusals since start, this one included. */
  readonly count: number;
}

const EMPTY_BYTES = new Uint8Array(0);

/** Messages outside the term protocol: they carry term 0 and never change anyone's term. */
function isTermless(m: Message): boolean {
  const type = m.type;
  return type === 'propose' || type === 'readIndex' || type === 'readIndexResponse' ||
    type === 'membershipRequest' || type === 'membershipResponse';
}

function refused(refusal: MembershipRefusal, detail: string): MembershipResult {
  return { kind: 'refused', refusal, detail };
}

function isEarly(message: Message): boolean {
  const type = message.type;
  return type === 'append' || type === 'heartbeat' || type === 'snapshotChunk' ||
    type === 'timeoutNow';
}

function checkConfig(config: RaftConfig): void {
  const fail = (what: string): never => {
    throw new Error(`raft config: ${what}`);
  };
  const intIn = (value: number, min: number, max: number, name: string): void => {
    if (!Number.isSafeInteger(value) || value < min || value > max) {
      fail(`${name} must be an integer in [${min}, ${max}], got ${value}`);
    }
  };
  if (config.voters.length > VOTERS_MAX) fail(`at most ${VOTERS_MAX} voters`);
  if (new Set(config.voters).size !== config.voters.length) fail('voters must be distinct');
  if (config.voters.length > 0 && !config.voters.includes(config.id)) {
    fail(`voters must include id ${config.id}`);
  }
  intIn(config.electionTicks, 2, ELECTION_TICKS_MAX, 'electionTicks');
  intIn(config.heartbeatTicks, 1, config.electionTicks - 1, 'heartbeatTicks');
  intIn(config.maxInflightAppends, 1, INFLIGHT_APPENDS_MAX, 'maxInflightAppends');
  intIn(config.maxEntriesBytesPerAppend, 1, PROPOSAL_BYTES_MAX, 'maxEntriesBytesPerAppend');
  intIn(config.maxSnapshotChunkBytes, 1, SNAPSHOT_BYTES_MAX, 'maxSnapshotChunkBytes');
  if (!Number.isFinite(config.seed)) fail('seed must be finite');
}

/** Creates a core from its config and the state the driver recovered. Throws on a bad
 *  config or an inconsistent restored state. */
export function createRaft(config: RaftConfig, restored: Restored): RaftCore {
  checkConfig(config);
  return new Raft(config, restored);
}

/**
 * A snapshot being received in chunks (§7), in order. Its bytes go to the driver (Ready
 * `receivedSnapshot`) as they arrive; the core keeps only how far it got.
 */
interface IncomingSnapshot {
  readonly meta: SnapshotMeta;
  readonly totalBytes: number;
  receivedBytes: number;
  /** Who sent the last chunk: the installed snapshot is acknowledged to it. */
  from: string;
  /** Every chunk taken (an empty snapshot has one, of no bytes); the driver is writing it. */
  whole: boolean;
}

class Raft implements RaftCore {
  private readonly config: RaftConfig;
  private readonly id: string;
  /** The voters of the configuration in effect (`log.configuration()`), sorted. */
  private voters: readonly string[] = [];
  /** Voters and learners of the configuration in effect. */
  private members: readonly string[] = [];
  /** `log.configChanges` when `voters` and `members` were last taken from the log. */
  private seenConfigChanges = -1;
  private readonly prng: Prng;
  private readonly log: RaftLog;
  private term: number;
  private votedFor: string | null;
  private role: Role = 'follower';
  private leader: string | null = null;
  /** Ticks since the last election-timer reset (leader: since the last quorum check). */
  private electionElapsed = 0;
  private heartbeatElapsed = 0;
  /** Drawn in [electionTicks, 2*electionTicks) at every reset (§5.2). */
  private randomizedElectionTicks = 0;
  /** Ticks since start; read deadlines count in it. */
  private ticks = 0;
  /** Votes (or pre-votes) received in the current campaign. */
  private votes = new Map<string, boolean>();
  /** Leader only: one entry per voter, this node included (its match = stable index). */
  private progress = new Map<string, Progress>();
  private leadTransferee: string | null = null;
  /**
   * Leader: the tick at which members the newest change removed lose their Progress; -1
   * while the change is uncommitted, or when there are none (see `syncProgress`).
   */
  private retireAtTick = -1;
  /** Leader: Progress still holds members the newest change removed. */
  private keepsRemoved = false;
  /** Leader: bytes of entries proposed in this term and not yet committed. */
  private uncommittedBytes = 0;
  /** Leader: proposals arrived this turn; one append per follower goes out at ready(). */
  private broadcastPending = false;
  private readonly reads = new ReadTracker();
  /** Length of the data of `log.snapshot`, the snapshot this node can send; null: none. */
  private snapshotDataBytes: number | null;
  private incoming: IncomingSnapshot | null = null;
  /** Follower: the largest snapshot storage can take now (`setSnapshotRoom`). */
  private snapshotRoomBytes = Number.POSITIVE_INFINITY;
  /** Leader: members sent heartbeats only (`setReplicationPaused`). */
  private replicationPaused: ReadonlySet<string> = new Set();
  private snapshotRefusal: SnapshotRefusal | null = null;
  /** Steps of the incoming snapshot for the next Ready. */
  private receivedSnapshot: ReceivedSnapshotStep[] = [];
  private earlyOutbox: Message[] = [];
  private outbox: Message[] = [];
  private readStates: ReadState[] = [];
  private membershipAnswers: MembershipAnswer[] = [];
  private persistedHardState: HardState;
  /**
   * A term known durable: the restored one, or the term of an entry the driver reported
   * durable (storage makes a term durable before any entry of it, storage.ts).
   */
  private durableTerm = 0;
  private reportedSoftState: SoftState = { role: 'follower', leader: null };
  private readyOutstanding = false;

  constructor(config: RaftConfig, restored: Restored) {
    this.config = config;
    this.id = config.id;
    this.prng = createPrng(config.seed);
    const meta = restored.snapshot ??
      { index: 0, term: 0, timeMs: 0, ...bootstrapConfiguration(config.voters, config.peers) };
    this.log = new RaftLog(meta, restored.entries, restored.hardState.commitIndex);
    this.refreshConfiguration();
    raftAssert(restored.hardState.term >= this.log.lastTerm(), 'hard state term below log');
    this.term = restored.hardState.term;
    this.votedFor = restored.hardState.votedFor;
    this.snapshotDataBytes = restored.snapshot === null ? null : restored.snapshotDataBytes;
    this.persistedHardState = restored.hardState;
    this.durableTerm = restored.hardState.term;
    this.resetTimers();
  }

  // ---- inputs ---------------------------------------------------------------------------

  tick(): void {
    this.ticks++;
    this.expireReads();
    if (this.role === 'leader') {
      this.tickLeader();
      return;
    }
    this.electionElapsed++;
    // A single voter needs nobody's vote: it elects itself at once.
    const due = this.isSoleVoter() || this.electionElapsed >= this.randomizedElectionTicks;
    if (due) {
      this.electionElapsed = 0;
      // A node that may not campaign (a learner, or a voter that has not yet received the
      // entry that made it one) still stops trusting a leader it has not heard from for a
      // whole timeout. Otherwise its lease would be renewed by its own timer forever, and it
      // would ignore the (pre)votes of the voters whose configuration counts on it.
      if (!this.isVoter(this.id)) this.setLeader(null);
      this.campaign(this.config.preVote ? 'preVote' : 'election');
    }
  }

  private tickLeader(): void {
    this.heartbeatElapsed++;
    this.electionElapsed++;
    if (this.electionElapsed >= this.config.electionTicks) {
      this.electionElapsed = 0;
      if (this.config.checkQuorum && !this.quorumActive()) {
        mark('check-quorum-step-down');
        this.becomeFollower(this.term, null);
        return;
      }
      if (this.leadTransferee !== null) {
        mark('transfer-aborted');
        this.leadTransferee = null;
      }
    }
    this.tickSnapshotTransfers();
    if (this.heartbeatElapsed >= this.config.heartbeatTicks) {
      this.heartbeatElapsed = 0;
      this.broadcastHeartbeat();
    }
  }

  step(m: Message): void {
    // Not filtered by membership (thesis §4.1): a new member hears from a leader it does not
    // know yet; what a stranger says never counts (votes, acknowledgements: voters only).
    if (m.to !== this.id || m.from === this.id) {
      mark('step-ignores-foreign');
      return;
    }
    if (isTermless(m)) {
      this.stepTermless(m);
      return;
    }
    if (m.term === 0) return;
    if (m.term > this.term) {
      if (!this.acceptHigherTerm(m)) return;
    } else if (m.term < this.term) {
      this.stepLowerTerm(m);
      return;
    }
    this.stepCurrentTerm(m);
  }

  propose(data: Uint8Array, nowMs: number): ProposeResult {
    raftAssert(Number.isSafeInteger(nowMs) && nowMs >= 0, `nowMs must be a safe integer`);
    if (this.role === 'leader') return this.appendProposal(data, nowMs);
    if (this.leader === null) return { kind: 'dropped', reason: 'no-leader' };
    this.send({ type: 'propose', from: this.id, to: this.leader, term: 0, data, nowMs });
    return { kind: 'forwarded' };
  }

  readIndex(requestId: number): void {
    raftAssert(Number.isSafeInteger(requestId), 'requestId must be a safe integer');
    const read: PendingRead = { requestId, from: this.id, sinceTick: this.ticks };
    if (this.reads.isFull()) {
      mark('read-refused-full');
      this.answerReads([{ read, readIndex: -1 }]);
    } else if (this.role === 'leader') {
      this.leaderRead(read);
    } else if (this.leader !== null) {
      this.reads.addRemote(requestId, this.ticks);
      this.send({ type: 'readIndex', from: this.id, to: this.leader, term: 0, requestId });
    } else {
      this.answerReads([{ read, readIndex: -1 }]);
    }
  }

  transferLeadership(to: string): void {
    if (this.role !== 'leader' || to === this.id || !this.isVoter(to)) {
      mark('transfer-ignored');
      return;
    }
    if (this.leadTransferee === to) return;
    this.leadTransferee = to;
    // The transfer must finish within one election timeout or it is abandoned.
    this.electionElapsed = 0;
    const pr = this.progress.get(to)!;
    if (pr.matchIndex === this.log.lastIndex()) this.sendTimeoutNow(to);
    else this.replicateTo(to, false);
  }

  proposeMembership(change: MembershipChange, requestId: number): MembershipProposeResult {
    raftAssert(Number.isSafeInteger(requestId), 'requestId must be a safe integer');
    if (this.role === 'leader') return this.leaderMembership(change);
    if (this.leader === null) {
      return refused('no-leader', 'no leader is known; retry once one is elected');
    }
    this.send({ type: 'membershipRequest', from: this.id, to: this.leader, term: 0, requestId,
      change });
    return { kind: 'forwarded' };
  }

  configuration(): IndexedConfiguration {
    return this.log.configuration();
  }

  configurationAt(index: number): Configuration {
    return this.log.configurationAt(index).config;
  }

  matchIndexOf(id: string): number | null {
    if (this.role !== 'leader') return null;
    return this.progress.get(id)?.matchIndex ?? null;
  }

  compact(meta: SnapshotMeta, dataBytes: number): void {
    if (meta.index <= this.log.snapshot.index) {
      mark('compact-stale');
      return;
    }
    raftAssert(Number.isSafeInteger(dataBytes) && dataBytes >= 0, 'bad snapshot size');
    this.log.compact(meta);
    this.snapshotDataBytes = dataBytes;
  }

  leaderTerm(): number {
    return this.role === 'leader' ? this.term : -1;
  }

  setSnapshotRoom(bytes: number): void {
    raftAssert(bytes >= 0, 'negative snapshot room');
    this.snapshotRoomBytes = bytes;
  }

  setReplicationPaused(members: readonly string[]): void {
    this.replicationPaused = new Set(members);
  }

  lastSnapshotRefusal(): SnapshotRefusal | null {
    return this.snapshotRefusal;
  }

  snapshotWritten(index: number): void {
    const incoming = this.incoming;
    if (incoming === null || incoming.meta.index !== index || !incoming.whole) {
      mark('snapshot-written-stale');
      return;
    }
    const meta = incoming.meta;
    if (this.role !== 'follower' || meta.index <= this.log.commitIndex ||
      this.log.matchTerm(meta.index, meta.term)) {
      // It stood for election, or its log caught up past the snapshot meanwhile.
      mark('snapshot-written-unneeded');
      this.dropIncoming();
      return;
    }
    this.incoming = null;
    this.log.restore({ meta, dataBytes: incoming.totalBytes });
    // Installed, it is also the snapshot this node sends should it lead.
    this.snapshotDataBytes = incoming.totalBytes;
    mark('snapshot-installed');
    this.send({ type: 'snapshotChunkResponse', from: this.id, to: incoming.from,
      term: this.term, snapshotIndex: meta.index, nextOffset: incoming.totalBytes });
  }

  abandonReceivedSnapshot(index: number): boolean {
    const incoming = this.incoming;
    if (incoming === null || incoming.meta.index !== index) return false;
    mark('snapshot-abandoned-no-room');
    this.incoming = null;
    this.receivedSnapshot = this.receivedSnapshot.filter((step) =>
      step.type !== 'chunk' || step.meta.index !== index);
    return true;
  }

  status(): RaftStatus {
    return {
      id: this.id,
      role: this.role,
      leader: this.leader,
      term: this.term,
      commitIndex: this.log.commitIndex,
      appliedIndex: this.log.appliedIndex,
      lastIndex: this.log.lastIndex(),
    };
  }

  // ---- terms and elections (§5.1, §5.2, thesis §9.6, §4.2.3) ---------------------------------

  /** A follower that heard from a live leader within the election timeout holds a lease. */
  private inLease(): boolean {
    return this.config.checkQuorum && this.leader !== null &&
      this.electionElapsed < this.config.electionTicks;
  }

  /** Handles `m.term > term`. Returns false when the message is to be ignored. */
  private acceptHigherTerm(m: Message): boolean {
    if (m.type === 'preVote' || m.type === 'vote') {
      const forced = m.type === 'vote' && m.transfer;
      if (this.inLease() && !forced) {
        mark('lease-ignores-vote');
        return false;
      }
    }
    // A pre-vote never raises anyone's term; a granted pre-vote answer carries the term
    // the candidate asked about, which is not a newer leader's term.
    if (m.type === 'preVote') return true;
    if (m.type === 'preVoteResponse' && m.granted) return true;
    const fromLeader = m.type === 'append' || m.type === 'heartbeat' || m.type === 'snapshotChunk';
    const neverHeldTerm = this.term === 0;
    this.becomeFollower(m.term, fromLeader ? m.from : null);
    if (neverHeldTerm && showsHistory(m)) {
      // A node that never held a term has an empty directory. Told of a cluster that has a
      // log, it may be a voter that lost its files and came back under its old id, and may
      // have voted in this term before: a second vote could elect a second leader in it. So
      // the term counts as voted (for itself); it votes again from the next term on. A new
      // cluster's first election carries no log and is not held back.
      this.votedFor = this.id;
      mark('first-term-counts-as-voted');
    }
    return true;
  }

  private stepLowerTerm(m: Message): void {
    if ((this.config.checkQuorum || this.config.preVote) &&
        (m.type === 'append' || m.type === 'heartbeat')) {
      // A stale leader cut off by a partition learns our term and steps down; without
      // this, pre-vote or the lease could leave it stuck (thesis §9.6).
      mark('stale-leader-told');
      this.send({ type: 'appendResponse', from: this.id, to: m.from, term: this.term,
        success: false, matchIndex: 0, rejectedIndex: 0, hintIndex: 0, hintTerm: 0 });
    } else if (m.type === 'preVote') {
      this.send({ type: 'preVoteResponse', from: this.id, to: m.from, term: this.term,
        granted: false });
    }
  }

  private stepCurrentTerm(m: Message): void {
    switch (m.type) {
      case 'preVote': return this.handlePreVote(m);
      case 'vote': return this.handleVote(m);
      case 'preVoteResponse':
      case 'voteResponse': return this.handleVoteResponse(m.type, m.from, m.term, m.granted);
      case 'append':
      case 'heartbeat':
      case 'snapshotChunk':
      case 'timeoutNow': return this.stepFromLeader(m);
      case 'appendResponse':
      case 'heartbeatResponse':
      case 'snapshotChunkResponse': return this.stepAtLeader(m);
      case 'propose':
      case 'readIndex':
      case 'readIndexResponse':
      case 'membershipRequest':
      case 'membershipResponse': return this.stepTermless(m);
      default: {
        const never: never = m;
        throw new Error(`raft: unknown message ${JSON.stringify(never)}`);
      }
    }
  }

  private handlePreVote(m: PreVoteMessage): void {
    const granted = m.term > this.term && !this.knowsItWasRemoved() &&
      !this.refusesRemoved(m) && this.log.isUpToDate(m.lastLogIndex, m.lastLogTerm);
    this.send({ type: 'preVoteResponse', from: this.id, to: m.from,
      term: granted ? m.term : this.term, granted });
  }

  /**
   * Votes are granted whatever this node's configuration says (thesis §4.1): a learner, or a
   * node that has not even received the entry that added it, may already be a voter in the
   * candidate's configuration, which alone decides whether the vote counts, and the cluster
   * may need it (a promoted node that lost its unsynced log on a crash, say). The one
   * exception: a node that knows it was removed never decides anything again.
   */
  private handleVote(m: VoteMessage): void {
    const from = m.from;
    const canVote = this.votedFor === from || (this.votedFor === null && this.leader === null);
    const removed = this.knowsItWasRemoved();
    const granted = canVote && !removed && !this.refusesRemoved(m) &&
      this.log.isUpToDate(m.lastLogIndex, m.lastLogTerm);
    if (removed) mark('removed-member-denies-vote');
    if (granted) {
      this.votedFor = from;
      this.electionElapsed = 0;
    }
    this.send({ type: 'voteResponse', from: this.id, to: from, term: this.term, granted });
  }

  private handleVoteResponse(type: 'preVoteResponse' | 'voteResponse', from: string,
    term: number, granted: boolean): void {
    const pre = type === 'preVoteResponse';
    const expectedRole: Role = pre ? 'pre-candidate' : 'candidate';
    // Pre-vote answers that grant carry the term asked about: ours plus one.
    const expectedTerm = pre && granted ? this.term + 1 : this.term;
    if (this.role !== expectedRole || term !== expectedTerm) return;
    if (!this.isVoter(from)) {
      // A learner's or a stranger's vote never counts.
      mark('vote-from-non-voter-ignored');
      return;
    }
    if (!this.votes.has(from)) this.votes.set(from, granted);
    let yes = 0;
    let no = 0;
    for (const [voter, vote] of this.votes) {
      if (!this.isVoter(voter)) continue;
      if (vote) yes++;
      else no++;
    }
    const result = voteResult(this.voters.length, yes, no);
    if (result === 'won') {
      if (pre) this.campaign('election');
      else this.becomeLeader();
    } else if (result === 'lost') {
      this.becomeFollower(this.term, null);
    }
  }

  /** Starts a pre-vote, an election, or an election forced by TimeoutNow. */
  private campaign(kind: 'preVote' | 'election' | 'transfer'): void {
    // Learners, joining nodes and removed members never campaign (thesis §4.2.1, §4.2.2).
    if (!this.mayCampaign()) return;
    const pre = kind === 'preVote';
    if (pre) {
      this.role = 'pre-candidate';
    } else {
      this.term++;
      this.votedFor = this.id;
      this.role = 'candidate';
    }
    this.setLeader(null);
    this.resetTimers();
    this.votes = new Map([[this.id, true]]);
    // A node that its own change removed asks for votes without giving itself one.
    if (voteResult(this.voters.length, this.isVoter(this.id) ? 1 : 0, 0) === 'won') {
      if (pre) this.campaign('election');
      else this.becomeLeader();
      return;
    }
    const selfRemoved = this.isVoter(this.id) ? {} : { selfRemoved: true };
    for (const to of this.voters) {
      if (to === this.id) continue;
      const lastLogIndex = this.log.lastIndex();
      const lastLogTerm = this.log.lastTerm();
      if (pre) {
        this.send({ type: 'preVote', from: this.id, to, term: this.term + 1, lastLogIndex,
          lastLogTerm, ...selfRemoved });
      } else {
        this.send({ type: 'vote', from: this.id, to, term: this.term, lastLogIndex, lastLogTerm,
          transfer: kind === 'transfer', ...selfRemoved });
      }
    }
  }

  private becomeFollower(term: number, leader: string | null): void {
    if (term < this.term) raftFail(`term moves back from ${this.term} to ${term}`);
    if (term > this.term) {
      this.term = term;
      this.votedFor = null;
    }
    const wasLeader = this.role === 'leader';
    this.role = 'follower';
    if (wasLeader) this.answerReads(this.reads.failAll(this.id));
    this.setLeader(leader);
    this.resetTimers();
  }

  private becomeLeader(): void {
    raftAssert(this.role === 'candidate', 'only a candidate becomes leader');
    this.role = 'leader';
    this.setLeader(this.id);
    this.resetTimers();
    raftAssert(this.mayCampaign(), 'only a voter becomes leader');
    const next = this.log.lastIndex() + 1;
    // Itself too when its own change removed it: it leads until the change commits.
    for (const member of new Set([...this.members, this.id])) {
      const pr = new Progress(next);
      if (member === this.id) {
        pr.matchIndex = this.log.stableIndex;
        pr.recentActive = true;
      }
      this.progress.set(member, pr);
    }
    // §5.4.2 / §8: an empty entry of the new term lets the leader commit (and serve reads).
    // Its stamp is the log's last, so stamps stay monotone across leader changes.
    this.log.appendAfter(this.log.lastIndex(), [{ term: this.term, index: next,
      timeMs: this.log.lastTimeMs(), type: 'empty', data: EMPTY_BYTES }]);
    this.broadcastPending = true;
  }

  /** Changing leader fails reads asked of the old one: its answer may never come. */
  private setLeader(leader: string | null): void {
    if (leader === this.leader) return;
    if (this.role !== 'leader') this.answerReads(this.reads.failAll(this.id));
    this.leader = leader;
  }

  private resetTimers(): void {
    this.electionElapsed = 0;
    this.heartbeatElapsed = 0;
    const jitter = this.prng.nextBelow(this.config.electionTicks);
    this.randomizedElectionTicks = this.config.electionTicks + jitter;
    this.votes = new Map();
    this.leadTransferee = null;
    this.progress = new Map();
    this.keepsRemoved = false;
    this.retireAtTick = -1;
    this.uncommittedBytes = 0;
    this.broadcastPending = false;
  }

  /** Check-quorum (thesis §6.2): voters heard from since the last round, this one included
   *  only while it is a voter (a leader removing itself does not count itself, §4.2.2). */
  private quorumActive(): boolean {
    let active = 0;
    for (const [member, pr] of this.progress) {
      if (this.isVoter(member) && (member === this.id || pr.recentActive)) active++;
      if (member !== this.id) pr.recentActive = false;
    }
    return voteResult(this.voters.length, active, 0) === 'won';
  }

  // ---- membership (thesis §4.1, §4.2) ------------------------------------------------------

  private isVoter(id: string): boolean {
    return this.voters.includes(id);
  }

  /**
   * A (pre)vote from a candidate that campaigns though its own log removes it
   * (`selfRemoved`, see `mayCampaign`) is refused when this node's newest configuration
   * removes it too: such a candidate must never win once the removal commits, and it
   * cannot, since every majority of the new configuration then holds a voter with the change
   * in its log (simulator seed 1989508279). A voter without the change still answers, which
   * is what ends the stalemate `mayCampaign` is for.
   *
   * A candidate whose own log does not remove it is judged on its log alone, whatever this
   * node's newest configuration says. Its log lacks the removal (a removed id is never
   * added again), so if it wins a term, leader completeness says the removal had not
   * committed before that term: it never leads after its removal commits. Refusing it left a
   * voter holding a stale removal, one a later leader had already replaced, refusing the
   * only candidate that could overwrite it, while that candidate's other voters refused the
   * stale voter's shorter log: no leader ever (simulator seeds 376905612 and 1055386320).
   */
  private refusesRemoved(m: PreVoteMessage | VoteMessage): boolean {
    return m.selfRemoved === true && this.log.configuration().config.removed.includes(m.from);
  }

  /**
   * A voter may campaign; so may a node that the newest configuration in its log removes
   * while that change is not known committed, if the committed configuration lists it as a
   * voter. Such a node is a leader that appended its own removal (§4.2.2) and lost its
   * quorum before committing it: its log may be the only one that holds the change, and
   * the voters left (who count on the committed configuration) cannot elect one of their
   * own without its vote, which its longer log refuses them (simulator seed 263165206).
   * Elected, it counts only the new configuration's votes and acks, and steps down once
   * the change commits.
   */
  private mayCampaign(): boolean {
    if (this.isVoter(this.id)) return true;
    if (this.log.configuration().index <= this.log.commitIndex) return false;
    return this.log.configurationAt(this.log.commitIndex).config.voters.includes(this.id);
  }

  /** Listed by the configuration in effect, as a voter or a learner. */
  private isMember(id: string): boolean {
    return this.members.includes(id);
  }

  /** The committed configuration lists this node among the removed. */
  private knowsItWasRemoved(): boolean {
    // By the committed configuration only: a removal still in flight can be cut from the log
    // by the next leader, and a node that refused its vote for it could leave the voters who
    // still count on it without a majority (simulator seed 235418482).
    return this.log.configurationAt(this.log.commitIndex).config.removed.includes(this.id);
  }

  /** This node is the only voter: its own vote and acknowledgement are a majority. */
  private isSoleVoter(): boolean {
    return this.voters.length === 1 && this.voters[0] === this.id;
  }

  /**
   * Takes the configuration in effect from the log after any change to it (an appended or
   * overwritten `config` entry, a snapshot): it applies at once, committed or not (§4.1).
   */
  private refreshConfiguration(): void {
    if (this.log.configChanges === this.seenConfigChanges) return;
    this.seenConfigChanges = this.log.configChanges;
    const { config } = this.log.configuration();
    this.voters = config.voters;
    this.members = [...config.voters, ...config.learners];
    mark('configuration-changed');
    if (this.role === 'leader') {
      this.syncProgress();
    } else if (this.role !== 'follower' && !this.mayCampaign()) {
      // A candidate whose configuration no longer lists it as a voter stops campaigning.
      this.becomeFollower(this.term, null);
    }
    if (this.leadTransferee !== null && !this.isVoter(this.leadTransferee)) {
      mark('transfer-aborted');
      this.leadTransferee = null;
    }
  }

  /**
   * Leader: one Progress per member (and itself). A member that the newest change removes
   * keeps receiving the log until that change commits, and for one election timeout more,
   * so it learns that it was removed (it stops asking for votes) and that the removal
   * committed (it can answer the operator who asked it); it counts for nothing meanwhile.
   */
  private syncProgress(): void {
    for (const id of this.members) {
      if (this.progress.has(id)) continue;
      this.progress.set(id, new Progress(this.log.lastIndex() + 1));
      this.broadcastPending = true;
    }
    const { index } = this.log.configuration();
    const retiring = this.retireAtTick < 0 || this.ticks < this.retireAtTick;
    const previous = retiring && index > this.log.snapshot.index
      ? this.log.configurationAt(index - 1).config : null;
    let kept = false;
    for (const id of [...this.progress.keys()]) {
      if (id === this.id || this.isMember(id)) continue;
      if (previous !== null && roleOf(previous, id) !== null) kept = true;
      else this.progress.delete(id);
    }
    this.keepsRemoved = kept;
    if (!kept) this.retireAtTick = -1;
    else if (this.retireAtTick < 0 && index <= this.log.commitIndex) {
      this.retireAtTick = this.ticks + this.config.electionTicks;
    }
  }

  /** Leader side of `proposeMembership`: the rules of §4.1, then the entry. */
  private leaderMembership(change: MembershipChange): MembershipResult {
    if (this.leadTransferee !== null) {
      return refused('transferring', 'leadership is being handed over; retry shortly');
    }
    const { index: configIndex, config } = this.log.configuration();
    const commitIndex = this.log.commitIndex;
    if (configIndex > commitIndex) {
      return refused('change-in-progress', `the change at index ${configIndex} is not ` +
        `committed yet (commit index ${commitIndex}): one change at a time`);
    }
    if (this.log.term(commitIndex) !== this.term) {
      mark('membership-waits-for-term-commit');
      return refused('term-not-committed', 'this leader has not committed an entry of its ' +
        'own term yet; retry shortly');
    }
    const next = applyChange(config, change);
    if (isRefused(next)) return refused(next.refusal, next.detail);
    if (change.kind === 'promote') {
      const behind = this.learnerBehind(change.id);
      if (behind !== null) return refused('not-caught-up', behind);
    }
    const index = this.log.lastIndex() + 1;
    const entry: Entry = { term: this.term, index, timeMs: this.log.lastTimeMs(), type: 'config',
      data: encodeConfigEntry({ change, config: next }) };
    this.log.appendAfter(index - 1, [entry]);
    this.uncommittedBytes += entryBytes(entry);
    this.broadcastPending = true;
    this.refreshConfiguration();
    mark('membership-proposed');
    return { kind: 'proposed', index, term: this.term };
  }

  /** Null when learner `id` is caught up (PROMOTE_LAG_ENTRIES_MAX), else how far behind. */
  private learnerBehind(id: string): string | null {
    const pr = this.progress.get(id);
    raftAssert(pr !== undefined, `learner ${id} has no progress`);
    const commitIndex = this.log.commitIndex;
    const behind = Math.max(0, commitIndex - pr.matchIndex);
    const silentTicks = this.ticks - pr.lastHeardTick;
    // A learner sent heartbeats only takes nothing: promoted, it would be a voter that
    // cannot keep up (and one whose full volume stops every member's writes).
    const paused = this.replicationPaused.has(id);
    const caughtUp = pr.state === 'replicate' && behind <= PROMOTE_LAG_ENTRIES_MAX &&
      pr.lastHeardTick >= 0 && silentTicks < this.config.electionTicks && !paused;
    if (caughtUp) return null;
    mark('promote-refused-behind');
    const doing = paused ? 'it holds back from catching up (for want of memory or space), ' +
      'and is sent heartbeats only'
      : pr.state === 'snapshot' ? 'it is receiving a snapshot'
      : pr.state === 'probe' ? 'the leader is still finding where its log matches'
        : silentTicks >= this.config.electionTicks ? `it has not answered for ${silentTicks} ticks`
          : 'it is replicating';
    return `${id} is ${behind} committed entries behind (it holds up to index ` +
      `${pr.matchIndex}, the leader committed ${commitIndex}; at most ` +
      `${PROMOTE_LAG_ENTRIES_MAX} may be missing): ${doing}`;
  }

  /**
   * A leader that removed itself leads until the change commits, without counting itself
   * (§4.2.2); then it hands leadership to a voter that holds its whole log (§3.10), so the
   * cluster need not wait for an election timeout, and steps down for good.
   */
  private stepDownRemoved(): void {
    mark('removed-leader-steps-down');
    this.broadcastAppend();
    let target: string | null = null;
    for (const voter of this.voters) {
      const pr = this.progress.get(voter);
      if (pr !== undefined && pr.matchIndex === this.log.lastIndex()) {
        target = voter;
        break;
      }
    }
    if (target !== null) this.sendTimeoutNow(target);
    this.becomeFollower(this.term, null);
  }

  // ---- follower side of replication (§5.3, §7) ---------------------------------------------

  private stepFromLeader(m: Message): void {
    if (this.role === 'leader') {
      // Two leaders in one term would break election safety (§5.2).
      raftAssert(m.type === 'timeoutNow', `leader ${this.id} got ${m.type} in its own term`);
      return;
    }
    if (this.role !== 'follower') this.becomeFollower(this.term, m.from);
    this.setLeader(m.from);
    this.electionElapsed = 0;
    switch (m.type) {
      case 'append':
        this.handleAppend(m.from, m.prevLogIndex, m.prevLogTerm, m.entries, m.commitIndex);
        return this.refreshConfiguration();
      case 'heartbeat':
        this.log.commitTo(Math.min(m.commitIndex, this.log.lastIndex()));
        this.send({ type: 'heartbeatResponse', from: this.id, to: m.from, term: this.term,
          readContext: m.readContext });
        return;
      case 'snapshotChunk':
        this.handleSnapshotChunk(m.from, m.meta, m.offset, m.totalBytes, m.chunkBytes,
          m.data);
        return this.refreshConfiguration();
      case 'timeoutNow':
        if (!this.isVoter(this.id)) {
          mark('timeout-now-ignored-by-non-voter');
          return;
        }
        mark('timeout-now-campaign');
        return this.campaign('transfer');
      default:
        throw new Error(`raft: ${m.type} is not a leader's message`);
    }
  }

  private handleAppend(from: string, prevLogIndex: number, prevLogTerm: number,
    entries: readonly Entry[], commitIndex: number): void {
    const reply = (success: boolean, matchIndex: number, hintIndex: number): void => {
      this.send({ type: 'appendResponse', from: this.id, to: from, term: this.term, success,
        matchIndex, rejectedIndex: success ? 0 : prevLogIndex, hintIndex,
        hintTerm: success ? 0 : this.log.term(hintIndex) ?? 0 });
    };
    if (prevLogIndex < this.log.commitIndex) {
      // Everything up to our commit index matches any current leader's log.
      mark('append-below-commit');
      reply(true, this.log.commitIndex, 0);
      return;
    }
    const lastNew = this.log.maybeAppend(prevLogIndex, prevLogTerm, entries);
    if (lastNew !== null) {
      this.log.commitTo(Math.min(commitIndex, lastNew));
      reply(true, lastNew, 0);
      return;
    }
    // Fast backtracking: skip every entry whose term is above the leader's prevLogTerm.
    const hintIndex = this.log.findConflictByTerm(
      Math.min(prevLogIndex, this.log.lastIndex()), prevLogTerm);
    mark('append-rejected');
    reply(false, 0, hintIndex);
  }

  private handleSnapshotChunk(from: string, meta: SnapshotMeta, offset: number,
    totalBytes: number, chunkBytes: number, data: Uint8Array): void {
    const reply = (nextOffset: number): void => {
      this.send({ type: 'snapshotChunkResponse', from: this.id, to: from, term: this.term,
        snapshotIndex: meta.index, nextOffset });
    };
    if (meta.index <= this.log.commitIndex || this.log.matchTerm(meta.index, meta.term)) {
      // We already hold everything the snapshot covers.
      mark('snapshot-already-covered');
      this.log.commitTo(Math.min(meta.index, this.log.lastIndex()));
      this.dropIncoming();
      reply(totalBytes);
      return;
    }
    if (totalBytes > SNAPSHOT_BYTES_MAX || offset + data.length > totalBytes ||
      data.length !== chunkBytes) {
      return;
    }
    let incoming = this.incoming;
    const same = incoming !== null && incoming.meta.index === meta.index &&
      incoming.meta.term === meta.term && incoming.totalBytes === totalBytes;
    if (!same) {
      if (offset !== 0) return reply(0);
      this.dropIncoming();
      if (totalBytes > this.snapshotRoomBytes) return this.refuseSnapshot(meta, totalBytes);
      incoming = { meta, totalBytes, receivedBytes: 0, from, whole: false };
      this.incoming = incoming;
    }
    if (incoming === null) return reply(0);
    if (incoming.whole) {
      // Being written: `snapshotWritten` answers once it is.
      mark('snapshot-chunk-while-written');
      return;
    }
    if (offset !== incoming.receivedBytes) {
      mark('snapshot-chunk-out-of-order');
      return reply(incoming.receivedBytes);
    }
    this.receivedSnapshot.push({ type: 'chunk', meta, offset, totalBytes, data });
    incoming.receivedBytes += data.length;
    incoming.from = from;
    // The last chunk is answered, and the snapshot installed, once the driver wrote it all.
    if (incoming.receivedBytes < totalBytes) return reply(incoming.receivedBytes);
    incoming.whole = true;
    mark('snapshot-received');
  }

  /**
   * No room for the snapshot: nothing of it is taken, and no answer goes back, so the
   * leader's transfer stalls and starts again after its backoff (`tickSnapshotTransfers`).
   */
  private refuseSnapshot(meta: SnapshotMeta, totalBytes: number): void {
    mark('snapshot-refused-no-room');
    this.snapshotRefusal = { meta, totalBytes, roomBytes: this.snapshotRoomBytes,
      count: (this.snapshotRefusal?.count ?? 0) + 1 };
  }

  /** Forgets a snapshot being received; the driver removes what it wrote of it. */
  private dropIncoming(): void {
    if (this.incoming === null) return;
    this.receivedSnapshot.push({ type: 'abandon', meta: this.incoming.meta });
    this.incoming = null;
  }

  // ---- leader side of replication (§5.3, §5.4.2, §7) ---------------------------------------

  private stepAtLeader(m: Message): void {
    if (this.role !== 'leader') return;
    const pr = this.progress.get(m.from);
    if (pr === undefined) {
      // A removed member or a stranger: what it says never counts.
      mark('answer-from-non-member-ignored');
      return;
    }
    pr.recentActive = true;
    pr.lastHeardTick = this.ticks;
    switch (m.type) {
      case 'appendResponse':
        if (m.success) this.handleAppendSuccess(m.from, pr, m.matchIndex);
        else this.handleAppendReject(m.from, pr, m.rejectedIndex, m.hintIndex, m.hintTerm);
        return;
      case 'heartbeatResponse':
        return this.handleHeartbeatResponse(m.from, pr, m.readContext);
      case 'snapshotChunkResponse':
        return this.handleSnapshotAck(m.from, pr, m.snapshotIndex, m.nextOffset);
      default:
        throw new Error(`raft: ${m.type} is not a follower's answer`);
    }
  }

  private handleAppendSuccess(from: string, pr: Progress, matchIndex: number): void {
    // A probe answered at the known match index (after a snapshot, say) also ends probing.
    const probeAnswered = pr.state === 'probe' && matchIndex === pr.matchIndex;
    if (!pr.maybeUpdate(matchIndex) && !probeAnswered) return;
    if (pr.state === 'probe') pr.becomeReplicate();
    else if (pr.state === 'snapshot' && pr.matchIndex >= pr.transfer!.meta.index) {
      pr.becomeProbe();
    }
    if (this.maybeCommit()) this.broadcastPending = true;
    this.replicateTo(from, false);
    if (this.leadTransferee === from && pr.matchIndex === this.log.lastIndex()) {
      this.sendTimeoutNow(from);
    }
  }

  private handleAppendReject(from: string, pr: Progress, rejectedIndex: number,
    hintIndex: number, hintTerm: number): void {
    if (rejectedIndex === 0 && hintIndex === 0) return;
    // Skip, on our side too, every entry whose term is above the follower's hint term.
    const probeFrom = hintTerm > 0 ? this.log.findConflictByTerm(hintIndex, hintTerm) : hintIndex;
    if (!pr.maybeDecrease(rejectedIndex, probeFrom)) {
      mark('append-reject-stale');
      return;
    }
    this.replicateTo(from, true);
  }

  private handleHeartbeatResponse(from: string, pr: Progress, readContext: number): void {
    pr.probeSent = false;
    if (pr.state === 'replicate' && pr.isPaused(this.config.maxInflightAppends)) {
      // A full window and a live follower: an append was probably lost; make room.
      mark('inflight-freed-on-heartbeat');
      pr.inflightLastIndexes.shift();
    }
    // Even with nothing new to send: an empty append at nextIndex makes a follower that lost
    // appends (or restarted) reject it, which sends us back to probing where it stands.
    if (pr.matchIndex < this.log.lastIndex()) this.replicateTo(from, true);
    if (readContext > 0) {
      this.answerReads(this.reads.ack(from, readContext, this.voters));
    }
  }

  /** Sends what `to` lacks: pipelined in replicate state, one probe otherwise. */
  private replicateTo(to: string, allowEmpty: boolean): void {
    const pr = this.progress.get(to)!;
    let sent = this.sendAppend(to, pr, allowEmpty);
    for (let n = 1; sent && pr.state === 'replicate' && n < this.config.maxInflightAppends; n++) {
      sent = this.sendAppend(to, pr, false);
    }
  }

  private sendAppend(to: string, pr: Progress, allowEmpty: boolean): boolean {
    if (pr.isPaused(this.config.maxInflightAppends)) return false;
    if (this.replicationPaused.size > 0 && this.replicationPaused.has(to)) {
      mark('append-not-sent-to-paused');
      return false;
    }
    if (pr.nextIndex < this.log.firstIndex()) return this.startSnapshot(to, pr);
    const prevLogIndex = pr.nextIndex - 1;
    const prevLogTerm = this.log.term(prevLogIndex);
    if (prevLogTerm === null) raftFail(`no term at ${prevLogIndex} for ${to}`);
    const entries = this.log.slice(pr.nextIndex, this.log.lastIndex(),
      this.config.maxEntriesBytesPerAppend);
    if (entries.length === 0 && !allowEmpty) return false;
    this.send({ type: 'append', from: this.id, to, term: this.term, prevLogIndex, prevLogTerm,
      entries, commitIndex: this.log.commitIndex });
    pr.sentAppend(prevLogIndex + entries.length, entries.length);
    return entries.length > 0;
  }

  /** To every member but this one: learners receive the log like voters (§4.2.1). */
  private broadcastAppend(): void {
    for (const member of this.progress.keys()) {
      if (member !== this.id) this.replicateTo(member, true);
    }
  }

  private broadcastHeartbeat(): void {
    const readContext = this.reads.latestContext();
    for (const [voter, pr] of this.progress) {
      if (voter === this.id) continue;
      // Never tell a follower to commit past what it is known to hold.
      const commitIndex = Math.min(pr.matchIndex, this.log.commitIndex);
      this.send({ type: 'heartbeat', from: this.id, to: voter, term: this.term, commitIndex,
        readContext });
    }
  }

  /**
   * §5.4.2: commit the quorum's index only if it holds an entry of the current term. The
   * quorum is the voters of the configuration in effect; the leader's own copy counts only
   * while it is one of them (§4.2.2).
   */
  private maybeCommit(): boolean {
    const matches = this.voters.map((voter) => this.progress.get(voter)!.matchIndex);
    const quorumIndex = committedIndex(matches);
    if (quorumIndex <= this.log.commitIndex) return false;
    if (this.log.term(quorumIndex) !== this.term) {
      if (this.config.testOnlyCommitWithoutCurrentTermRule !== true) {
        mark('commit-waits-for-current-term');
        return false;
      }
      mark('test-only-commit-of-earlier-term');
    }
    const previous = this.log.commitIndex;
    this.log.commitTo(quorumIndex);
    for (let index = previous + 1; index <= quorumIndex; index++) {
      if (this.log.term(index) === this.term) {
        this.uncommittedBytes = Math.max(0,
          this.uncommittedBytes - this.log.entryBytesAt(index));
      }
    }
    this.reads.releaseAwaitingCommit();
    return true;
  }

  private appendProposal(data: Uint8Array, nowMs: number): ProposeResult {
    if (this.leadTransferee !== null) return { kind: 'dropped', reason: 'transferring' };
    if (data.length > PROPOSAL_BYTES_MAX) return { kind: 'dropped', reason: 'too-large' };
    const index = this.log.lastIndex() + 1;
    const entry: Entry = { term: this.term, index, type: 'normal', data,
      timeMs: Math.max(this.log.lastTimeMs(), nowMs) };
    const bytes = entryBytes(entry);
    if (this.uncommittedBytes > 0 && this.uncommittedBytes + bytes > UNCOMMITTED_BYTES_MAX) {
      mark('propose-dropped-busy');
      return { kind: 'dropped', reason: 'busy' };
    }
    this.log.appendAfter(index - 1, [entry]);
    this.uncommittedBytes += bytes;
    this.broadcastPending = true;
    return { kind: 'proposed', index, term: this.term };
  }

  private sendTimeoutNow(to: string): void {
    this.send({ type: 'timeoutNow', from: this.id, to, term: this.term });
  }

  // ---- snapshots to followers behind the compacted log (§7) --------------------------------

  private startSnapshot(to: string, pr: Progress): boolean {
    if (this.snapshotDataBytes === null) {
      // No snapshot in storage to send from until the next compact.
      mark('snapshot-unavailable');
      return false;
    }
    mark('snapshot-started');
    pr.becomeSnapshot(this.log.snapshot, this.snapshotDataBytes);
    this.sendSnapshotChunks(to, pr);
    return false;
  }

  /**
   * Streams chunks while fewer than SNAPSHOT_CHUNKS_IN_FLIGHT_MAX are unacknowledged. Each
   * names its range; the driver reads the bytes from storage (messages.ts).
   */
  private sendSnapshotChunks(to: string, pr: Progress): void {
    const transfer = pr.transfer!;
    const total = transfer.totalBytes;
    const chunkBytes = this.config.maxSnapshotChunkBytes;
    const windowBytes = chunkBytes * SNAPSHOT_CHUNKS_IN_FLIGHT_MAX;
    for (let n = 0; n < SNAPSHOT_CHUNKS_IN_FLIGHT_MAX; n++) {
      const more = transfer.sentBytes < total || !transfer.anySent;
      if (!more || transfer.sentBytes - transfer.ackedBytes >= windowBytes) return;
      const end = Math.min(total, transfer.sentBytes + chunkBytes);
      this.send({ type: 'snapshotChunk', from: this.id, to, term: this.term, meta: transfer.meta,
        offset: transfer.sentBytes, totalBytes: total, chunkBytes: end - transfer.sentBytes,
        data: EMPTY_BYTES });
      transfer.sentBytes = end;
      transfer.anySent = true;
    }
  }

  private handleSnapshotAck(from: string, pr: Progress, snapshotIndex: number,
    nextOffset: number): void {
    const transfer = pr.transfer;
    if (pr.state !== 'snapshot' || transfer === null || transfer.meta.index !== snapshotIndex) {
      return;
    }
    const total = transfer.totalBytes;
    if (nextOffset >= total) {
      // Installed: the follower's log restarts after the snapshot.
      pr.matchIndex = Math.max(pr.matchIndex, snapshotIndex);
      pr.becomeProbe();
      if (this.maybeCommit()) this.broadcastPending = true;
      this.replicateTo(from, true);
      return;
    }
    if (nextOffset < transfer.ackedBytes) {
      // The follower lost what it had (a restart): start over from what it holds.
      mark('snapshot-restarted');
      transfer.sentBytes = nextOffset;
      transfer.ackedBytes = nextOffset;
    } else if (nextOffset > transfer.ackedBytes) {
      transfer.ackedBytes = nextOffset;
      transfer.idleTicks = 0;
      transfer.stalls = 0;
    }
    this.sendSnapshotChunks(from, pr);
  }

  private tickSnapshotTransfers(): void {
    const stallTicks = this.config.heartbeatTicks * SNAPSHOT_STALL_HEARTBEATS;
    for (const [voter, pr] of this.progress) {
      const transfer = pr.transfer;
      if (pr.state !== 'snapshot' || transfer === null) continue;
      if (this.replicationPaused.has(voter)) continue;
      transfer.idleTicks++;
      if (transfer.idleTicks < stallTicks * 2 ** transfer.stalls) continue;
      if (transfer.meta.index < this.log.snapshot.index && this.snapshotDataBytes !== null) {
        // A newer snapshot exists (storage may no longer hold the old one): send that one.
        mark('snapshot-transfer-renewed');
        pr.becomeSnapshot(this.log.snapshot, this.snapshotDataBytes);
        this.sendSnapshotChunks(voter, pr);
        continue;
      }
      // Chunks or their acknowledgements were lost: resend from the last acknowledged byte.
      mark('snapshot-resent');
      transfer.idleTicks = 0;
      transfer.stalls = Math.min(transfer.stalls + 1, SNAPSHOT_STALL_BACKOFF_MAX);
      transfer.sentBytes = transfer.ackedBytes;
      transfer.anySent = transfer.ackedBytes > 0;
      this.sendSnapshotChunks(voter, pr);
    }
  }

  // ---- proposals and reads that cross from follower to leader ----------------------------

  private stepTermless(m: Message): void {
    switch (m.type) {
      case 'propose':
        if (this.role === 'leader') this.appendProposal(m.data, m.nowMs);
        // Never forwarded twice: a proposal that finds no leader is lost, and the client's
        // timeout answers it.
        else mark('forwarded-proposal-dropped');
        return;
      case 'readIndex': {
        const read: PendingRead = { requestId: m.requestId, from: m.from, sinceTick: this.ticks };
        if (this.role === 'leader' && !this.reads.isFull()) this.leaderRead(read);
        else this.answerReads([{ read, readIndex: -1 }]);
        return;
      }
      case 'readIndexResponse':
        if (this.reads.takeRemote(m.requestId)) {
          this.readStates.push({ requestId: m.requestId, readIndex: m.readIndex });
        }
        return;
      case 'membershipRequest':
        return this.answerMembershipRequest(m.from, m.requestId, m.change);
      case 'membershipResponse': {
        const result: MembershipResult = m.refusal === null
          ? { kind: 'proposed', index: m.index, term: m.entryTerm }
          : { kind: 'refused', refusal: m.refusal, detail: m.detail };
        if (this.membershipAnswers.length < MEMBERSHIP_ANSWERS_MAX) {
          this.membershipAnswers.push({ requestId: m.requestId, result });
        }
        return;
      }
      default:
        throw new Error(`raft: ${m.type} is not a termless message`);
    }
  }

  /** A member forwarded a change: only the leader decides, and says what it decided. */
  private answerMembershipRequest(from: string, requestId: number,
    change: MembershipChange): void {
    const result = this.role === 'leader' ? this.leaderMembership(change)
      : refused('no-leader', `${this.id} is no longer the leader; retry`);
    const accepted = result.kind === 'proposed';
    this.send({ type: 'membershipResponse', from: this.id, to: from, term: 0, requestId,
      index: accepted ? result.index : 0, entryTerm: accepted ? result.term : 0,
      refusal: accepted ? null : result.refusal, detail: accepted ? '' : result.detail });
  }

  private leaderRead(read: PendingRead): void {
    const committedInTerm = this.log.term(this.log.commitIndex) === this.term;
    if (!committedInTerm) mark('read-waits-for-term-commit');
    this.reads.addLeaderRead(read, committedInTerm);
  }

  /** Local reads become ReadStates; a follower's reads go back to it as messages. */
  private answerReads(answers: readonly ReadAnswer[]): void {
    for (const { read, readIndex } of answers) {
      if (read.from === this.id) {
        this.readStates.push({ requestId: read.requestId, readIndex });
      } else {
        this.send({ type: 'readIndexResponse', from: this.id, to: read.from, term: 0,
          requestId: read.requestId, readIndex });
      }
    }
  }

  private expireReads(): void {
    const deadline = this.config.electionTicks * READ_DEADLINE_ELECTIONS;
    const expired = this.reads.expire(this.ticks, deadline, this.id);
    if (expired.length > 0) mark('read-expired');
    this.answerReads(expired);
  }

  /**
   * A leader's appends may go out before its Ready is durable (§10.2.1), but never at a term
   * not yet known durable: a sole voter elects itself in the same turn that raises its term,
   * and a learner must not hold an entry of a term its leader could lose in a crash and then
   * reuse for another entry at the same index. Those wait, like votes, for the fsync.
   */
  private send(message: Message): void {
    const early = isEarly(message) && message.term <= this.durableTerm;
    if (isEarly(message) && !early) mark('early-message-waits-for-term');
    const box = early ? this.earlyOutbox : this.outbox;
    if (box.length >= OUTBOX_MESSAGES_MAX) {
      mark('outbox-full');
      return;
    }
    box.push(message);
  }

  // ---- Ready / advance ---------------------------------------------------------------------

  /** Work batched per turn: one append per follower for all proposals, one read round. */
  private flushTurn(): void {
    if (this.role !== 'leader') return;
    if (!this.isVoter(this.id) && this.log.configuration().index <= this.log.commitIndex) {
      this.stepDownRemoved();
      return;
    }
    if (this.keepsRemoved) this.syncProgress();
    if (this.broadcastPending) {
      this.broadcastPending = false;
      this.broadcastAppend();
    }
    if (!this.reads.hasQueued()) return;
    const context = this.reads.startRound(this.log.commitIndex, this.id);
    if (this.isSoleVoter()) {
      this.answerReads(this.reads.completeAll());
      return;
    }
    raftAssert(context > 0, 'a queued read must start a round');
    mark('read-round-started');
    this.broadcastHeartbeat();
  }

  private hardState(): HardState {
    return { term: this.term, votedFor: this.votedFor, commitIndex: this.durableCommitIndex() };
  }

  /**
   * The commit index written with the hard state: never past the entries known durable
   * here. The hard state reaches the disk before the entries of its Ready (storage.ts), so
   * a crash between them may keep it alone; had it claimed an index whose entry that Ready
   * was overwriting, the node would restart and apply the old entry there. The commit index
   * is volatile in Raft (Figure 2): what is written is only where to start applying.
   */
  private durableCommitIndex(): number {
    return Math.min(this.log.commitIndex, Math.max(this.log.stableIndex,
      this.persistedHardState.commitIndex));
  }

  private hardStateChanged(): boolean {
    const was = this.persistedHardState;
    return was.term !== this.term || was.votedFor !== this.votedFor ||
      was.commitIndex !== this.durableCommitIndex();
  }

  private softStateChanged(): boolean {
    return this.reportedSoftState.role !== this.role ||
      this.reportedSoftState.leader !== this.leader;
  }

  hasReady(): boolean {
    if (this.readyOutstanding) return false;
    const leaderWork = this.role === 'leader' && (this.broadcastPending || this.reads.hasQueued());
    return leaderWork || this.earlyOutbox.length > 0 || this.outbox.length > 0 ||
      this.readStates.length > 0 || this.membershipAnswers.length > 0 ||
      this.receivedSnapshot.length > 0 || this.log.hasUnpersisted() ||
      this.log.pendingSnapshot !== null || this.log.hasNextCommitted() ||
      this.hardStateChanged() || this.softStateChanged();
  }

  ready(): Ready {
    raftAssert(!this.readyOutstanding, 'ready() called again before advance()');
    this.flushTurn();
    const committedEntries = this.log.nextCommitted(COMMITTED_BYTES_PER_READY_MAX);
    // `at(-1)`, not `[length - 1]`: on an empty list (most turns) that reads the key -1,
    // which V8 looks up as a named property through a call into the runtime.
    const lastCommitted = committedEntries.at(-1);
    if (lastCommitted !== undefined) this.log.applyingIndex = lastCommitted.index;
    const snapshot: Snapshot | null = this.log.pendingSnapshot;
    const ready: Ready = {
      hardState: this.hardStateChanged() ? this.hardState() : null,
      entries: this.log.takeUnpersisted(),
      receivedSnapshot: this.receivedSnapshot,
      snapshot,
      earlyMessages: this.earlyOutbox,
      messages: this.outbox,
      committedEntries,
      readStates: this.readStates,
      membershipAnswers: this.membershipAnswers,
      softState: this.softStateChanged() ? { role: this.role, leader: this.leader } : null,
    };
    this.earlyOutbox = [];
    this.outbox = [];
    this.readStates = [];
    this.membershipAnswers = [];
    this.receivedSnapshot = [];
    this.readyOutstanding = true;
    return ready;
  }

  advance(ready: Ready): void {
    raftAssert(this.readyOutstanding, 'advance() without an outstanding ready()');
    this.readyOutstanding = false;
    if (ready.hardState !== null) this.persistedHardState = ready.hardState;
    if (ready.softState !== null) this.reportedSoftState = ready.softState;
    if (ready.snapshot !== null) this.log.snapshotPersisted(ready.snapshot.meta.index);
    const lastApplied = ready.committedEntries.at(-1);
    if (lastApplied !== undefined) this.log.appliedTo(lastApplied.index);
    raftAssert(this.log.appliedIndex <= this.log.commitIndex, 'applied passes committed');
  }

  persisted(index: number, term: number): void {
    this.log.stableTo(index, term);
    this.durableTerm = Math.max(this.durableTerm, term);
    if (this.role !== 'leader') return;
    // The leader's own copy counts toward commit only now that it is durable.
    const self = this.progress.get(this.id)!;
    if (self.maybeUpdate(this.log.stableIndex) && this.maybeCommit()) {
      this.broadcastPending = true;
    }
  }
}

/**
 * Whether a message of a higher term shows that the cluster already has a log (or, being an
 * answer, that this node's peers held a term before it did): what a new cluster's first
 * election never shows.
 */
function showsHistory(m: Message): boolean {
  switch (m.type) {
    case 'vote': case 'preVote': return m.lastLogIndex > 0;
    case 'append': return m.prevLogIndex > 0 || m.commitIndex > 0;
    case 'heartbeat': return m.commitIndex > 0;
    default: return true;
  }
}
