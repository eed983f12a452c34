/**
 * Membership on a running node, beside the driver loop of replica.ts:
 * - the configuration in effect (the newest in the log, thesis §4.1) tells the transport
 *   whom to reach, as soon as it changes, so a leader reaches a learner it just added;
 * - an operator's change (add a learner, promote it, remove a member) goes to the core, here
 *   or forwarded to the leader, and is answered once its `config` entry is committed and
 *   applied on this node, or refused with the reason; transient refusals (no leader yet, a
 *   leader that has not committed in its term, a hand-over under way) are retried until the
 *   request's deadline;
 * - removing the leader hands leadership to a caught-up voter first (thesis §3.10), and the
 *   new leader removes the old one;
 * - GET /members and the role /health reports.
 *
 * The configuration is durable with the log: in `config` entries and in every snapshot's
 * meta, so nothing here is persisted. Everything queued is bounded; every request ends by its
 * deadline at the latest.
 */
import {
  peerAddressOf, roleOf, type MembershipChange, type MembershipRefusal,
} from '../core/raft/configuration.js';
import type { MembershipAnswer, MembershipResult, RaftCore } from '../core/raft/raft.js';
import type { Configuration, Entry } from '../core/raft/types.js';
import type { Transport } from '../transport/transport.js';
import type { PeerAddress } from './config.js';
import type { Scheduler, TimerHandle } from './scheduler.js';
import type { MemberView, MembersResult, MembersView, Unavailable } from './service.js';

/** Membership changes waiting on one node at once; more answer 503 `overloaded`. */
export const MEMBERSHIP_PENDING_MAX = 16;
/** Config entries applied here that are remembered, for answers that arrive late. */
const APPLIED_CONFIGS_KEPT = 16;
const RETRY_AFTER_SECONDS = 1;
/** Refusals that say "not now": nothing was appended, so asking again is safe. */
const TRANSIENT: readonly MembershipRefusal[] = ['no-leader', 'term-not-committed', 'transferring'];

export interface MembershipOptions {
  readonly selfId: string;
  /** False for a node without a peer listener: it cannot reach a member it adds. */
  readonly peerLink: boolean;
  /** Addresses from `--peers`, used for members whose configuration holds none. */
  readonly bootstrapPeers: readonly PeerAddress[];
  readonly tickMs: number;
  readonly electionTicks: number;
  readonly requestTimeoutMs: number;
  /** The id of this incarnation's first membership request (replica.ts, firstRequestId). */
  readonly firstRequestId: number;
}

export interface MembershipDeps {
  readonly core: () => RaftCore;
  readonly transport: Transport;
  readonly scheduler: Scheduler;
  /** Runs the driver loop, so what the core queued goes out. */
  readonly pump: () => void;
  readonly isRunning: () => boolean;
}

interface PendingChange {
  readonly change: MembershipChange;
  readonly requestId: number;
  readonly deadlineMs: number;
  readonly settle: (result: MembersResult) => void;
  /** The leader's `config` entry for it; 0 until the leader appended one. */
  index: number;
  term: number;
  /** Forwarded to the leader, its answer not in yet: never sent twice (it may be in). */
  awaitingAnswer: boolean;
  /** Removing the leader itself: hand leadership over before asking anyone. */
  handingOver: boolean;
}

function unavailable(reason: Unavailable['reason'], detail: string): Unavailable {
  return { kind: 'unavailable', reason, detail, retryAfterSeconds: RETRY_AFTER_SECONDS };
}

/** `host:port` as a transport address; null when it does not parse. */
function addressOf(id: string, text: string): PeerAddress | null {
  const colon = text.lastIndexOf(':');
  const port = Number(text.slice(colon + 1));
  if (colon <= 0 || !Number.isInteger(port) || port < 1 || port > 65535) return null;
  return { id, host: text.slice(0, colon), port };
}

export class Membership {
  private readonly pending = new Map<number, PendingChange>();
  private nextRequestId: number;
  private retryTimer: TimerHandle | null = null;
  /** The configuration last handed to the transport. */
  private syncedConfig: Configuration | null = null;
  /** index -> term of the newest config entries applied here. */
  private readonly appliedConfigs = new Map<number, number>();
  /** The highest index applied here, as last reported. */
  private appliedIndex = 0;

  constructor(private readonly options: MembershipOptions, private readonly deps: MembershipDeps) {
    this.nextRequestId = options.firstRequestId;
  }

  // ---------------------------------------------------------------- the transport

  /** Tells the transport the members of the configuration in effect, when it changed. */
  syncPeers(): void {
    const { config } = this.deps.core().configuration();
    if (config === this.syncedConfig) return;
    this.syncedConfig = config;
    const peers: PeerAddress[] = [];
    for (const { id, address } of config.peers) {
      if (id === this.options.selfId) continue;
      const known = address === '' ? this.options.bootstrapPeers.find((p) => p.id === id) ?? null
        : addressOf(id, address);
      if (known !== null) peers.push({ id, host: known.host, port: known.port });
    }
    this.deps.transport.setPeers(peers);
  }

  // ---------------------------------------------------------------- views

  /** voter, learner, joining (not added yet) or removed, from the configuration in effect. */
  localRole(): 'voter' | 'learner' | 'joining' | 'removed' {
    const { config } = this.deps.core().configuration();
    const role = roleOf(config, this.options.selfId);
    if (role !== null) return role;
    return config.removed.includes(this.options.selfId) ? 'removed' : 'joining';
  }

  view(): MembersView {
    const core = this.deps.core();
    const status = core.status();
    const { index, config } = core.configuration();
    const members: MemberView[] = [];
    for (const { id } of config.peers) {
      const role = roleOf(config, id);
      if (role === null) continue;
      members.push({ id, peer: this.peerText(config, id), role, match: core.matchIndexOf(id) });
    }
    return { members, leader: status.leader, term: status.term, configIndex: index,
      committed: index <= status.commitIndex,
      source: status.role === 'leader' ? 'leader' : 'follower', answeredBy: this.options.selfId };
  }

  private peerText(config: Configuration, id: string): string {
    const address = peerAddressOf(config, id) ?? '';
    if (address !== '') return address;
    const known = this.options.bootstrapPeers.find((p) => p.id === id);
    return known === undefined ? '' : `${known.host}:${known.port}`;
  }

  /** The voter that holds most of the leader's log, other than this node; null if none. */
  transferTarget(): string | null {
    const core = this.deps.core();
    let best: string | null = null;
    let bestMatch = -1;
    for (const voter of core.configuration().config.voters) {
      if (voter === this.options.selfId) continue;
      const match = core.matchIndexOf(voter) ?? 0;
      if (match > bestMatch) {
        best = voter;
        bestMatch = match;
      }
    }
    return best;
  }

  // ---------------------------------------------------------------- changes

  change(change: MembershipChange): Promise<MembersResult> {
    return new Promise((settle) => {
      if (!this.deps.isRunning()) {
        return settle(unavailable('shutting_down', 'the node is not serving'));
      }
      if (!this.options.peerLink) {
        return settle({ kind: 'refused', refusal: 'no-peer-link', detail: 'this node was ' +
          'started without a peer listener; restart it with --peers (and --peer-listen) ' +
          'to grow the cluster' });
      }
      if (this.pending.size >= MEMBERSHIP_PENDING_MAX) {
        return settle(unavailable('overloaded', 'too many membership changes waiting'));
      }
      const core = this.deps.core();
      // With no other voter the core refuses the change (last voter): no hand-over first.
      const removesLeader = change.kind === 'remove' && change.id === this.options.selfId &&
        core.status().role === 'leader' && this.transferTarget() !== null;
      const pending: PendingChange = {
        change, settle, requestId: this.nextRequestId++, index: 0, term: 0,
        deadlineMs: this.deps.scheduler.nowMs() + this.options.requestTimeoutMs,
        awaitingAnswer: false, handingOver: removesLeader,
      };
      this.pending.set(pending.requestId, pending);
      this.advance(pending);
      this.armRetry();
    });
  }

  /** Moves one request on: hand over, propose (or forward), or give up at its deadline. */
  private advance(pending: PendingChange): void {
    if (this.deps.scheduler.nowMs() >= pending.deadlineMs) {
      return this.finish(pending, pending.index > 0 || pending.awaitingAnswer
        ? unavailable('timeout', 'the change was not confirmed in time: its outcome is ' +
          'unknown; GET /api/v1/system/members tells')
        : unavailable('no_leader', 'no leader took the change in time; nothing changed'));
    }
    if (pending.index > 0 || pending.awaitingAnswer) return;
    const core = this.deps.core();
    if (pending.handingOver) {
      if (core.status().role === 'leader') return this.handOver();
      pending.handingOver = false;
    }
    this.onResult(pending, core.proposeMembership(pending.change, pending.requestId));
    this.deps.pump();
  }

  /** Removing the leader: it hands leadership to a caught-up voter first (thesis §3.10). */
  private handOver(): void {
    const target = this.transferTarget();
    if (target !== null) this.deps.core().transferLeadership(target);
    this.deps.pump();
  }

  private onResult(pending: PendingChange,
    result: MembershipResult | { readonly kind: 'forwarded' }): void {
    switch (result.kind) {
      case 'forwarded':
        pending.awaitingAnswer = true;
        return;
      case 'proposed':
        pending.awaitingAnswer = false;
        pending.index = result.index;
        pending.term = result.term;
        return this.checkApplied(pending);
      case 'refused':
        pending.awaitingAnswer = false;
        if (TRANSIENT.includes(result.refusal)) return;
        return this.finish(pending,
          { kind: 'refused', refusal: result.refusal, detail: result.detail });
    }
  }

  /** The leader answered changes this node forwarded (`Ready.membershipAnswers`). */
  onAnswers(answers: readonly MembershipAnswer[]): void {
    for (const answer of answers) {
      const pending = this.pending.get(answer.requestId);
      if (pending !== undefined && pending.awaitingAnswer) this.onResult(pending, answer.result);
    }
  }

  /** Committed entries were applied here: a change whose entry is among them is done. */
  onApplied(entries: readonly Entry[], appliedIndex: number): void {
    this.appliedIndex = Math.max(this.appliedIndex, appliedIndex);
    for (const entry of entries) {
      if (entry.type !== 'config') continue;
      this.appliedConfigs.set(entry.index, entry.term);
      if (this.appliedConfigs.size > APPLIED_CONFIGS_KEPT) {
        this.appliedConfigs.delete(this.appliedConfigs.keys().next().value as number);
      }
    }
    for (const pending of this.pending.values()) {
      if (pending.index > 0 && pending.index <= appliedIndex) this.checkApplied(pending);
    }
  }

  /** A snapshot from the leader replaced the log: what it covered is not known entry by entry. */
  onSnapshotRestored(index: number): void {
    this.appliedIndex = Math.max(this.appliedIndex, index);
    for (const pending of this.pending.values()) {
      if (pending.index > 0 && pending.index <= index && !this.appliedConfigs.has(pending.index)) {
        this.finish(pending, unavailable('timeout', 'a snapshot replaced the log before the ' +
          'change was seen: its outcome is unknown; GET /api/v1/system/members tells'));
      }
    }
  }

  private checkApplied(pending: PendingChange): void {
    if (pending.index > this.appliedIndex) return;
    const term = this.appliedConfigs.get(pending.index);
    if (term === pending.term) {
      this.finish(pending, { kind: 'done', value: this.view() });
    } else {
      // Another entry committed at that index: the leader lost its term before the change
      // committed, and the change was never made.
      this.finish(pending, unavailable('no_leader', 'leadership changed before the change ' +
        'committed; nothing changed: retry'));
    }
  }

  private finish(pending: PendingChange, result: MembersResult): void {
    if (!this.pending.delete(pending.requestId)) return;
    pending.settle(result);
  }

  /**
   * Every waiting change ends now (the node stops): one the leader appended, or forwarded
   * and not answered, may yet commit, so its outcome is unknown (as at its deadline).
   */
  failAll(detail: string): void {
    for (const pending of [...this.pending.values()]) {
      this.finish(pending, pending.index > 0 || pending.awaitingAnswer
        ? unavailable('timeout', 'the node stopped before the change was confirmed: its ' +
          'outcome is unknown; GET /api/v1/system/members tells')
        : unavailable('shutting_down', detail));
    }
    this.retryTimer?.cancel();
    this.retryTimer = null;
  }

  /** While changes wait: every tick, retry what may be retried and expire what is late. */
  private armRetry(): void {
    if (this.retryTimer !== null || this.pending.size === 0) return;
    this.retryTimer = this.deps.scheduler.after(this.options.tickMs, () => {
      this.retryTimer = null;
      if (!this.deps.isRunning()) return this.failAll('the node is shutting down');
      for (const pending of [...this.pending.values()]) this.advance(pending);
      this.armRetry();
    });
  }
}
