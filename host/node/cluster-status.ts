/**
 * What this node knows of every member: each node sends its own status to every peer about
 * once a second (a status frame, `status-frame.ts`, over the transport's ordinary `send`),
 * and keeps the last status it heard from each. `GET /api/v1/system/cluster` answers the
 * table with each entry's age, so a member that stopped talking is `down` once its last
 * status is older than STATUS_STALE_MS, whatever its clock says.
 *
 * The table follows the members the node knows (`members()`, read on every round and every
 * view): a status from a non-member is dropped, and a member that left is forgotten.
 * Ages are measured on this node's monotonic clock at receipt, never from the sender's clock.
 * Never throws on a frame: a malformed or misaddressed status is dropped.
 *
 * Besides the rounds, a status goes to a peer the moment its link comes up (`linkUp`), and in
 * answer to a member heard for the first time or after it went stale: frames sent before a
 * link is up are dropped, and a leader holds its first proposals until it knows a majority
 * of the voters' clocks (replica.ts, `clockKnown`), so members learn each other's clocks
 * within a round trip of linking instead of at the next round.
 */
import type { VoterClocks } from './cluster-clock.js';
import type { NodeHealth } from './service.js';
import type { Scheduler, TimerHandle } from './scheduler.js';
import {
  decodeStatusFrame, encodeStatusFrame, isStatusFrame, type MemberStatus,
} from './status-frame.js';

/** How often a node sends its status to each peer. */
export const STATUS_SEND_EVERY_MS = 1000;
/** A member not heard from for longer than this is `down` (two and a half rounds missed). */
export const STATUS_STALE_MS = 2500;
/** Members tracked at most; a Raft configuration is far smaller (15 voters). */
export const MEMBERS_TRACKED_MAX = 64;
const NONE: readonly string[] = [];

export interface ClusterStatusDeps {
  /** Only `send` is used: a status is one more frame on the peer link. */
  readonly transport: { send(to: string, frame: Uint8Array): void };
  readonly scheduler: Scheduler;
  /** Monotonic milliseconds, for ages. */
  readonly monotonicMs: () => number;
  /** The members this node knows now, itself included. */
  readonly members: () => readonly string[];
  /** The voters among them. */
  readonly voters: () => readonly string[];
  /** This node's own health, as `/health` reports it. */
  readonly health: () => NodeHealth;
  /** Whether this node's data directory is below HIVEKV_MIN_FREE_BYTES free. */
  readonly storageFull: () => boolean;
  /**
   * What this node holds back from catching up for (`memory`, `space`), or null while it
   * does not (default: never).
   */
  readonly catchUpHeldFor?: () => string | null;
}

/** One member as `GET /api/v1/system/cluster` shows it. */
export interface MemberView {
  readonly id: string;
  /** True for the node that answers. */
  readonly self: boolean;
  /** `up`: heard within STATUS_STALE_MS; `down`: heard before, not since; `unknown`: never. */
  readonly state: 'up' | 'down' | 'unknown';
  /** Milliseconds since its last status arrived here; 0 for this node, null if never heard. */
  readonly ageMs: number | null;
  /** Its last status; null if never heard. */
  readonly status: Omit<MemberStatus, 'id' | 'sentAtMs'> & { readonly sentAt: string } | null;
  /** The leader's commit index minus this member's applied index; null with no leader up. */
  readonly lagEntries: number | null;
}

export interface ClusterView {
  readonly self: string;
  /** The up member that reports itself leader in the highest term, or null. */
  readonly leader: string | null;
  readonly staleAfterMs: number;
  readonly members: readonly MemberView[];
}

interface Heard {
  readonly status: MemberStatus;
  readonly receivedAtMs: number;
}

/** A member and a figure of bytes from its status. */
export interface MemberBytes {
  readonly member: string;
  readonly bytes: number;
  /** The index the member had applied when it said so. */
  readonly appliedIndex: number;
}

export class ClusterStatus {
  private readonly heard = new Map<string, Heard>();
  private timer: TimerHandle | null = null;
  private url: string | null = null;
  /** How many statuses held say their member's storage is full (stale ones too). */
  private storageFullCount = 0;

  constructor(
    private readonly selfId: string,
    private readonly deps: ClusterStatusDeps,
  ) {}

  /** Starts sending this node's status, reachable at `url`, now and every round after. */
  start(url: string): void {
    if (this.timer !== null) throw new Error('cluster status: started twice');
    this.url = url;
    this.sendRound();
  }

  stop(): void {
    this.timer?.cancel();
    this.timer = null;
  }

  /**
   * Sends this node's status to every member now, besides the rounds (nothing before
   * `start`): a change the others act on, a hold begun or ended, reaches them within a round
   * trip instead of up to a round later. A leader that heard a learner's hold a round late
   * could promote it meanwhile.
   */
  announce(): void {
    if (this.url === null || this.timer === null) return;
    this.sendToMembers(this.currentMembers());
  }

  /**
   * Takes `frame` if it is a status frame (true, whether it was valid or not), or leaves it
   * to the Raft core (false). A status must come from the member it names.
   */
  accept(from: string, frame: Uint8Array): boolean {
    if (!isStatusFrame(frame)) return false;
    const status = decodeStatusFrame(frame);
    if (status === null || status.id !== from || from === this.selfId) return true;
    if (!this.currentMembers().includes(from)) return true;
    const now = this.deps.monotonicMs();
    const before = this.heard.get(from);
    this.heard.set(from, { status, receivedAtMs: now });
    if (status.storageFull || before?.status.storageFull === true) this.countStorageFull();
    // Each side answers at most once a stale period, so two members never bounce statuses.
    if (before === undefined || now - before.receivedAtMs > STATUS_STALE_MS) this.sendTo(from);
    return true;
  }

  /** The link to `peer` came up: it hears this node's status now, not at the next round. */
  linkUp(peer: string): void {
    if (peer !== this.selfId && this.currentMembers().includes(peer)) this.sendTo(peer);
  }

  /** This node's own status now. */
  selfStatus(): MemberStatus {
    const health = this.deps.health();
    const heldFor = this.deps.catchUpHeldFor?.() ?? null;
    return {
      id: this.selfId,
      status: health.status,
      role: health.role,
      leader: health.leader,
      term: health.term,
      commitIndex: health.commitIndex,
      appliedIndex: health.appliedIndex,
      digest: typeof health.digest === 'string' && health.digest !== '' ? health.digest : null,
      url: this.url ?? 'http://unknown.invalid',
      sentAtMs: this.deps.scheduler.nowMs(),
      storageFull: this.deps.storageFull(),
      stateBytesMax: health.stateBytesMax,
      stateBytes: health.stateBytes,
      catchUpHeld: heldFor !== null,
      catchUpHeldFor: heldFor,
    };
  }

  /**
   * The other members whose last status, heard within STATUS_STALE_MS, says they hold back
   * from catching up: a leader sends them heartbeats only (RaftCore.setReplicationPaused).
   */
  membersHoldingCatchUp(): readonly string[] {
    const now = this.deps.monotonicMs();
    const holding: string[] = [];
    for (const [id, heard] of this.heard) {
      if (heard.status.catchUpHeld && now - heard.receivedAtMs <= STATUS_STALE_MS) {
        holding.push(id);
      }
    }
    return holding;
  }

  /**
   * The largest state a member said it holds, heard within STATUS_STALE_MS, with that
   * member; null when none said. Every member reaches the same state, so a follower behind
   * learns here the state it would catch up to (replica.ts, `refreshCatchUpHold`).
   */
  largestState(): MemberBytes | null {
    return this.extremeBytes((status) => status.stateBytes, (a, b) => a > b);
  }

  /**
   * The smallest memory budget among the other voters heard within STATUS_STALE_MS, with
   * the voter that has it; null when none said. Every voter holds the same state, so a voter
   * whose budget is smaller than this node's would grow past it on writes this node admits
   * (replica.ts, `stateBudget`). A learner's budget binds nothing: it holds back once the
   * state passes it (replica.ts, `refreshCatchUpHold`).
   */
  smallestStateBudget(): MemberBytes | null {
    return this.extremeBytes((status) => status.stateBytesMax, (a, b) => a < b,
      this.deps.voters());
  }

  /**
   * The member heard within STATUS_STALE_MS whose `field` is `before` every other's, among
   * `among` when given.
   */
  private extremeBytes(field: (status: MemberStatus) => number | null,
    before: (a: number, b: number) => boolean, among?: readonly string[]): MemberBytes | null {
    const now = this.deps.monotonicMs();
    let found: MemberBytes | null = null;
    for (const [id, heard] of this.heard) {
      const bytes = field(heard.status);
      if (bytes === null || now - heard.receivedAtMs > STATUS_STALE_MS) continue;
      if (among !== undefined && !among.includes(id)) continue;
      if (found === null || before(bytes, found.bytes)) {
        found = { member: id, bytes, appliedIndex: heard.status.appliedIndex };
      }
    }
    return found;
  }

  /**
   * The other voters whose last status, heard within STATUS_STALE_MS, says their data
   * directory is low on free space. Every voter replicates every entry, and a voter out of
   * space stops on ENOSPC, so writes are refused on every member while one is (as etcd
   * raises its NOSPACE alarm cluster-wide); a member down or unheard counts as not full. A
   * learner low on space holds back from catching up instead (replica.ts,
   * `refreshCatchUpHold`): nothing waits on it, and a node added on too small a volume must
   * not stop the cluster's writes.
   */
  membersStorageFull(): readonly string[] {
    // Asked on every write: nothing is worked out or made while no member said it was full.
    if (this.storageFullCount === 0) return NONE;
    const now = this.deps.monotonicMs();
    const voters = this.deps.voters();
    const full: string[] = [];
    for (const [id, heard] of this.heard) {
      if (heard.status.storageFull && now - heard.receivedAtMs <= STATUS_STALE_MS &&
        voters.includes(id)) full.push(id);
    }
    return full;
  }

  /** What `member`'s last status says it holds back for, or null (not held, or unheard). */
  catchUpHeldFor(member: string): string | null {
    return this.heard.get(member)?.status.catchUpHeldFor ?? null;
  }

  /** Counts the statuses held that say their member's storage is full. */
  private countStorageFull(): void {
    let count = 0;
    for (const heard of this.heard.values()) if (heard.status.storageFull) count += 1;
    this.storageFullCount = count;
  }

  /**
   * The voters' clocks as this node estimates them now (cluster-clock.ts): each voter heard
   * within STATUS_STALE_MS, at the clock its status was sent with plus the time since it
   * arrived here; `ownMs` for this node when it is a voter.
   */
  voterClocks(ownMs: number): VoterClocks {
    const voters = this.deps.voters();
    const now = this.deps.monotonicMs();
    const clocksMs: number[] = [];
    for (const id of voters) {
      if (id === this.selfId) {
        clocksMs.push(ownMs);
        continue;
      }
      const heard = this.heard.get(id);
      const ageMs = heard === undefined ? Number.POSITIVE_INFINITY : now - heard.receivedAtMs;
      if (heard !== undefined && ageMs <= STATUS_STALE_MS) {
        clocksMs.push(heard.status.sentAtMs + Math.max(0, ageMs));
      }
    }
    return { voterCount: voters.length, clocksMs };
  }

  /** Every member the node knows, in member order, with its last status and its age. */
  view(): ClusterView {
    const members = this.currentMembers();
    this.forgetNonMembers(members);
    const now = this.deps.monotonicMs();
    const self = this.selfStatus();
    const known = members.map((id) => {
      if (id === this.selfId) return { id, status: self, ageMs: 0 };
      const heard = this.heard.get(id);
      if (heard === undefined) return { id, status: null, ageMs: null };
      return { id, status: heard.status, ageMs: Math.max(0, Math.round(now - heard.receivedAtMs)) };
    });
    let leader: MemberStatus | null = null;
    for (const { status, ageMs } of known) {
      if (status === null || ageMs === null || ageMs > STATUS_STALE_MS) continue;
      if (status.role === 'leader' && (leader === null || status.term > leader.term)) {
        leader = status;
      }
    }
    const leaderCommit = leader?.commitIndex ?? null;
    return {
      self: this.selfId,
      leader: leader?.id ?? null,
      staleAfterMs: STATUS_STALE_MS,
      members: known.map(({ id, status, ageMs }): MemberView => ({
        id,
        self: id === this.selfId,
        state: ageMs === null ? 'unknown' : ageMs > STATUS_STALE_MS ? 'down' : 'up',
        ageMs,
        status: status === null ? null : statusView(status),
        lagEntries: status === null || leaderCommit === null ? null
          : Math.max(0, leaderCommit - status.appliedIndex),
      })),
    };
  }

  private sendRound(): void {
    const members = this.currentMembers();
    this.forgetNonMembers(members);
    this.sendToMembers(members);
    this.timer = this.deps.scheduler.after(STATUS_SEND_EVERY_MS, () => this.sendRound());
  }

  private sendToMembers(members: readonly string[]): void {
    const frame = encodeStatusFrame(this.selfStatus());
    for (const id of members) {
      if (id !== this.selfId) this.deps.transport.send(id, frame);
    }
  }

  /** Sends this node's status to one member; nothing before `start` (no URL to give yet). */
  private sendTo(peer: string): void {
    if (this.url === null || this.timer === null) return;
    this.deps.transport.send(peer, encodeStatusFrame(this.selfStatus()));
  }

  private currentMembers(): readonly string[] {
    const members = this.deps.members();
    return members.length <= MEMBERS_TRACKED_MAX ? members : members.slice(0, MEMBERS_TRACKED_MAX);
  }

  private forgetNonMembers(members: readonly string[]): void {
    for (const id of this.heard.keys()) {
      if (!members.includes(id)) this.heard.delete(id);
    }
    this.countStorageFull();
  }
}

function statusView(status: MemberStatus): NonNullable<MemberView['status']> {
  const { id: _id, sentAtMs, ...rest } = status;
  return { ...rest, sentAt: new Date(sentAtMs).toISOString() };
}
