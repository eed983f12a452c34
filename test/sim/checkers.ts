/**
 * The safety invariants the simulator checks while a run goes on:
 * - at most one leader per term (Raft §5.2, Election Safety);
 * - log matching between any two nodes' logs (§5.3);
 * - a committed entry never changes or disappears, across crashes: every applied
 *   (index, term, data) must agree with what any node ever applied at that index, and a
 *   restarted node must still hold what it applied before (§5.4, State Machine Safety);
 * - a new leader holds every entry committed in an earlier term (§5.4.1, Leader
 *   Completeness);
 * - every replica has the same machine digest at the same applied index;
 * - the driver's order: an entry is durable before it is applied, a vote is durable before
 *   it is granted, an append is durable before it is acknowledged (ready.ts);
 * - membership (thesis chapter 4): a member removed by a committed change never decides
 *   anything again: it never leads a later term, no later leader's configuration lists it
 *   (so neither its votes nor its acknowledgements count), and a node that knows it was
 *   removed never grants a vote; a learner never leads.
 *
 * A hook never throws (it runs inside the driver's promise chains, where an exception would
 * look like a node fault): it records the first violation, and the runner stops on it.
 */
import { decodeConfigEntry, roleOf } from '../../host/core/raft/configuration.js';
import type { Message } from '../../host/core/raft/messages.js';
import type { Configuration, Entry } from '../../host/core/raft/types.js';
import { fnv1a, type SimDisk } from './storage.js';
import type { Trace } from './trace.js';

interface CommittedEntry {
  readonly term: number;
  readonly timeMs: number;
  readonly hash: number;
  readonly length: number;
  readonly by: string;
}

/** A node's log as the checker reads it: entries after a snapshot at `snapshotIndex`. */
export interface LogView {
  readonly snapshotIndex: number;
  readonly snapshotTerm: number;
  readonly entries: readonly Entry[];
}

export class Checkers {
  private readonly leaders = new Map<number, string>();
  private readonly committed = new Map<number, CommittedEntry>();
  private readonly digests = new Map<number, { digest: string; by: string }>();
  /** Per node: the highest index it ever applied, across incarnations. */
  private readonly appliedMax = new Map<string, number>();
  private maxCommittedIndex = 0;
  /** The newest committed configuration (applied by some node) and its index. */
  private config: { index: number; config: Configuration } | null = null;
  /** Ids removed by a committed change -> the term of that change's entry. */
  private readonly removedInTerm = new Map<string, number>();
  violation: string | null = null;
  checksRun = 0;

  constructor(private readonly trace: Trace) {}

  fail(text: string): void {
    if (this.violation !== null) return;
    this.violation = text;
    this.trace.log('sim', `VIOLATION ${text}`);
  }

  /** At most one leader per term; a new leader holds every earlier-term committed entry. */
  observeLeader(id: string, term: number, log: LogView): void {
    const known = this.leaders.get(term);
    if (known === id) return;
    if (known !== undefined) {
      this.fail(`two leaders in term ${term}: ${known} and ${id} (election safety, §5.2)`);
      return;
    }
    this.leaders.set(term, id);
    this.trace.log(id, `is leader of term ${term}`);
    const removedIn = this.removedInTerm.get(id);
    if (removedIn !== undefined && term > removedIn) {
      this.fail(`${id} leads term ${term} though a change of term ${removedIn} removed it ` +
        '(a removed member never decides anything again)');
      return;
    }
    for (let index = log.snapshotIndex + 1; index <= this.maxCommittedIndex; index++) {
      const want = this.committed.get(index);
      if (want === undefined || want.term >= term) continue;
      const have = log.entries[index - log.snapshotIndex - 1];
      if (have === undefined || have.term !== want.term || hashOf(have) !== want.hash) {
        this.fail(`leader ${id} of term ${term} lacks committed entry ${index} ` +
          `(t${want.term}, applied by ${want.by}); it has ${have === undefined ? 'nothing'
            : `t${have.term}`} (leader completeness, §5.4.1)`);
        return;
      }
    }
  }

  /** A node applies `entry` (read from its own log): it must be durable and agree. */
  observeApply(node: string, index: number, timeMs: number, entry: Entry | null,
    disk: SimDisk): void {
    this.checksRun++;
    if (entry === null || entry.index !== index) {
      this.fail(`${node} applies ${index}, which is not in its log`);
      return;
    }
    if (disk.durableEntry(index) === null && (disk.snapshot?.meta.index ?? 0) < index) {
      this.fail(`${node} applies ${index} before it is durable (driver order, ready.ts)`);
      return;
    }
    if (timeMs !== entry.timeMs) this.fail(`${node} applies ${index} at ${timeMs}, not its stamp`);
    const seen = this.committed.get(index);
    const hash = hashOf(entry);
    if (seen === undefined) {
      this.committed.set(index, { term: entry.term, timeMs, hash, length: entry.data.length,
        by: node });
      this.maxCommittedIndex = Math.max(this.maxCommittedIndex, index);
      if (entry.type === 'config') this.observeCommittedConfig(index, entry);
    } else if (seen.term !== entry.term || seen.hash !== hash || seen.timeMs !== timeMs) {
      this.fail(`${node} applies ${index} as t${entry.term} #${hash.toString(16)}, but ` +
        `${seen.by} applied t${seen.term} #${seen.hash.toString(16)} (state machine safety)`);
    }
    if (index > (this.appliedMax.get(node) ?? 0)) this.appliedMax.set(node, index);
  }

  /** Every replica has the same digest at the same applied index. */
  observeDigest(node: string, index: number, digest: string): void {
    const seen = this.digests.get(index);
    if (seen === undefined) this.digests.set(index, { digest, by: node });
    else if (seen.digest !== digest) {
      this.fail(`${node} has digest ${digest} at applied ${index}; ${seen.by} had ${seen.digest}`);
    }
  }

  /** After a restart: the node still holds every entry it applied before the crash. */
  observeRecovered(node: string, log: LogView): void {
    const applied = this.appliedMax.get(node) ?? 0;
    for (let index = log.snapshotIndex + 1; index <= applied; index++) {
      const want = this.committed.get(index);
      const have = log.entries[index - log.snapshotIndex - 1];
      if (want === undefined) continue;
      if (have === undefined || have.term !== want.term || hashOf(have) !== want.hash) {
        this.fail(`${node} restarted without committed entry ${index} it had applied ` +
          `(durability)`);
        return;
      }
    }
  }

  /** Log matching (§5.3): equal (index, term) implies equal entries up to there. */
  checkLogMatching(a: string, logA: LogView, b: string, logB: LogView): void {
    this.checksRun++;
    const from = Math.max(logA.snapshotIndex, logB.snapshotIndex) + 1;
    const lastA = logA.snapshotIndex + logA.entries.length;
    const lastB = logB.snapshotIndex + logB.entries.length;
    let matched = false;
    for (let index = Math.min(lastA, lastB); index >= from; index--) {
      const x = logA.entries[index - logA.snapshotIndex - 1] as Entry;
      const y = logB.entries[index - logB.snapshotIndex - 1] as Entry;
      if (!matched && x.term !== y.term) continue;
      matched = true;
      if (x.term !== y.term || hashOf(x) !== hashOf(y)) {
        this.fail(`log matching: ${a} and ${b} agree on a later (index, term) but differ at ` +
          `${index}: t${x.term} vs t${y.term} (§5.3)`);
        return;
      }
    }
  }

  /** Driver order: what a message promises must already be durable on its sender. */
  observeSend(from: string, message: Message, disk: SimDisk): void {
    if (message.type === 'preVote' || message.type === 'preVoteResponse' ||
      message.term === 0) return;
    const durable = disk.hardState;
    if (message.term > durable.term) {
      this.fail(`${from} sends ${message.type} at term ${message.term} with term ` +
        `${durable.term} durable (persist before send, §5.1)`);
    } else if (message.type === 'voteResponse' && message.granted &&
      message.term === durable.term && durable.votedFor !== message.to) {
      this.fail(`${from} grants its vote to ${message.to} in term ${message.term} with ` +
        `votedFor=${durable.votedFor} durable (persist before send, §5.2)`);
    } else if (message.type === 'appendResponse' && message.success &&
      disk.lastDurableIndex() < message.matchIndex) {
      this.fail(`${from} acknowledges ${message.matchIndex} with only ` +
        `${disk.lastDurableIndex()} durable (persist before send, §5.3)`);
    }
  }

  /** A `config` entry committed: the configuration in force, and whom it removed. */
  private observeCommittedConfig(index: number, entry: Entry): void {
    const decoded = decodeConfigEntry(entry.data);
    if (decoded === null) {
      this.fail(`the config entry at ${index} does not decode`);
      return;
    }
    if (this.config === null || index > this.config.index) {
      this.config = { index, config: decoded.config };
    }
    for (const id of decoded.config.removed) {
      if (this.removedInTerm.has(id)) continue;
      this.removedInTerm.set(id, entry.term);
      this.trace.log('sim', `${id} removed by the change committed at ${index} (t${entry.term})`);
    }
  }

  /** The newest committed configuration, or null while the starting one is in force. */
  committedConfiguration(): { index: number; config: Configuration } | null {
    return this.config;
  }

  /** A leader's configuration when it starts its term: no removed member, not a learner. */
  observeLeaderConfiguration(id: string, term: number, config: Configuration): void {
    if (roleOf(config, id) === 'learner') {
      this.fail(`learner ${id} leads term ${term} (learners never campaign, thesis §4.2.1)`);
      return;
    }
    for (const [removed, removedIn] of this.removedInTerm) {
      if (term > removedIn && roleOf(config, removed) !== null) {
        this.fail(`${id}, leader of term ${term}, still counts ${removed}, removed by a change ` +
          `committed in term ${removedIn} (leader completeness, thesis §4.1)`);
        return;
      }
    }
  }

  /**
   * A node grants a vote: a member that knows it was removed never decides anything again.
   * `config` is the sender's committed configuration: a removal still in flight can be taken
   * back by the next leader, and the voters may still need the vote meanwhile.
   */
  observeVoteGranted(id: string, config: Configuration): void {
    if (config.removed.includes(id)) {
      this.fail(`${id} grants a vote though its committed configuration says it was removed`);
    }
  }

  committedCount(): number {
    return this.committed.size;
  }
}

function hashOf(entry: Entry): number {
  return fnv1a(entry.data, (entry.term * 0x9e3779b1 + entry.timeMs) >>> 0);
}
