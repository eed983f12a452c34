/**
 * The operator of the simulated cluster: membership changes, one at a time, through the
 * same call the HTTP routes make on a running node (`Replica.changeMembers`), so forwarding
 * to the leader, the hand-over before removing the leader and every refusal are the
 * production ones.
 *
 * - Repairs (the model of seed 901265): a node whose files are damaged is removed, then a new
 *   node with a new id and an empty disk (`serve --join`) is added as a learner and promoted
 *   once it has caught up. At most one node is damaged at a time, and only while the
 *   configuration in force has three voters or more, so a majority of voters always lives.
 * - Under the `member.change` fault: add a learner, promote one, or remove a member (the
 *   leader too), keeping the voter count within one of the starting count (at least two);
 *   under `member.transfer`: the leader hands leadership over (thesis §3.10).
 * - A node whose removal committed is shut down a moment later and never started again.
 *
 * Every decision draws from the run's PRNG; every wait is bounded by the node's own request
 * deadline, after which the operator looks at the committed configuration again.
 */
import {
  bootstrapConfiguration, roleOf, type MembershipChange,
} from '../../host/core/raft/configuration.js';
import type { Configuration } from '../../host/core/raft/types.js';
import type { MembersResult } from '../../host/node/service.js';
import type { SimCluster, SimNode } from './cluster.js';
import type { Faults } from './faults.js';
import type { SimRandom } from './random.js';
import type { Trace } from './trace.js';

/** Nodes the operator may add in one run (repairs and random additions together). */
export const NODES_ADDED_MAX = 6;
/** How long after its removal committed a removed node is shut down, at most. */
const RETIRE_DELAY_MS_MAX = 2_000;

interface Repair {
  readonly lost: string;
  stage: 'remove' | 'add' | 'promote';
  /** The replacement's id, once created. */
  replacement: string | null;
}

export class Operator {
  private busy = false;
  /** Numbers each request, so an answer that comes after its deadline is ignored. */
  private asked = 0;
  private readonly repairs: Repair[] = [];
  /** Nodes started with --join whose addition is not known to have committed. */
  private readonly joining = new Set<string>();
  private readonly retiring = new Set<string>();
  private nodesAdded = 0;
  changesDone = 0;
  changesRefused = 0;
  /** Damaged nodes replaced (removed, and a new node promoted in their place). */
  repairsDone = 0;

  constructor(private readonly cluster: SimCluster, private readonly rng: SimRandom,
    private readonly faults: Faults, private readonly trace: Trace) {
    cluster.onLost = (node) => this.onLost(node);
    cluster.mayDamage = (node) => this.mayDamage(node);
  }

  /** The configuration in force: the newest committed one, else the starting voters. */
  configInForce(): Configuration {
    return this.cluster.checkers.committedConfiguration()?.config ??
      bootstrapConfiguration(this.cluster.initialIds);
  }

  /** True while the operator still has work that liveness waits for. */
  idle(): boolean {
    return !this.busy && this.repairs.length === 0;
  }

  /** One step: shut down removed nodes, then repair, or (faults on) change something. */
  step(): void {
    this.retireRemoved();
    if (this.busy) return;
    const repair = this.repairs[0];
    if (repair !== undefined) return this.repair(repair);
    if (this.faults.maybe('member.transfer')) this.transfer();
    if (this.faults.maybe('member.change')) this.randomChange();
  }

  private onLost(node: SimNode): void {
    this.trace.log('op', `${node.id} has damaged files: replace it`);
    this.repairs.push({ lost: node.id, stage: 'remove', replacement: null });
  }

  /**
   * One damaged node at a time, a voter or learner, while every configuration that may take
   * effect has three voters or more: the committed one and the newest on every node's log
   * (a change not committed yet counts too: a node that appended its own removal no longer
   * campaigns, and its log may be the one a majority needs).
   */
  private mayDamage(node: SimNode): boolean {
    const config = this.configInForce();
    if (!this.idle() || roleOf(config, node.id) === null) return false;
    if (this.cluster.nodes.some((n) => n.lost && roleOf(config, n.id) !== null)) return false;
    return this.configsInPlay().every((c) => c.voters.length >= 3);
  }

  /** The committed configuration and the newest one each node holds (pending ones too). */
  private configsInPlay(): Configuration[] {
    const configs = [this.configInForce()];
    for (const node of this.cluster.nodes) {
      if (node.retired || node.lost) continue;
      const latest = node.running()?.replica.configuration() ?? node.disk.latestConfiguration();
      if (latest !== null) configs.push(latest);
    }
    return configs;
  }

  private repair(repair: Repair): void {
    const config = this.configInForce();
    switch (repair.stage) {
      case 'remove':
        if (roleOf(config, repair.lost) === null) {
          repair.stage = 'add';
          return this.repair(repair);
        }
        return this.ask({ kind: 'remove', id: repair.lost }, (r) => {
          if (r.kind === 'done') repair.stage = 'add';
        });
      case 'add': {
        const id = repair.replacement ?? this.newNode();
        if (id === null) return;
        repair.replacement = id;
        if (roleOf(config, id) !== null) {
          repair.stage = 'promote';
          return this.repair(repair);
        }
        return this.ask({ kind: 'addLearner', id, peer: `sim-${id}:7000` }, (r) => {
          if (r.kind === 'done' || (r.kind === 'refused' && r.refusal === 'member-exists')) {
            repair.stage = 'promote';
          }
        });
      }
      case 'promote': {
        const id = repair.replacement as string;
        if (roleOf(config, id) === 'voter') {
          this.repairs.shift();
          this.repairsDone++;
          this.trace.log('op', `${repair.lost} replaced by ${id}`);
          return;
        }
        return this.ask({ kind: 'promote', id }, (r) => {
          if (r.kind === 'refused' && r.refusal === 'unknown-member') repair.stage = 'add';
        });
      }
    }
  }

  /** Starts a new empty node with a fresh id; null when the run added enough already. */
  private newNode(): string | null {
    if (this.nodesAdded >= NODES_ADDED_MAX) return null;
    this.nodesAdded++;
    const id = `n${this.cluster.nodes.length + 1}`;
    const node = this.cluster.addNode(id);
    this.cluster.start(node);
    this.joining.add(id);
    return id;
  }

  private randomChange(): void {
    const config = this.configInForce();
    const initial = this.cluster.initialIds.length;
    const members = config.voters.length + config.learners.length;
    const choices: Array<() => void> = [];
    if (members < initial + 2) choices.push(() => this.addLearner());
    const learner = config.learners.find((id) => this.cluster.node(id).running() !== null);
    if (learner !== undefined && config.voters.length < initial + 1) {
      choices.push(() => this.ask({ kind: 'promote', id: learner }));
    }
    const removable = [...config.learners,
      ...(config.voters.length - 1 >= Math.max(2, initial - 1) ? config.voters : [])];
    if (removable.length > 0) {
      choices.push(() => this.ask({ kind: 'remove', id: this.rng.pick(removable) }));
    }
    if (choices.length > 0) this.rng.pick(choices)();
  }

  private addLearner(): void {
    const waiting = [...this.joining].find((id) => !this.cluster.node(id).retired);
    const id = waiting ?? this.newNode();
    if (id !== null) this.ask({ kind: 'addLearner', id, peer: `sim-${id}:7000` });
  }

  /** The leader hands leadership to its most caught-up voter (thesis §3.10). */
  private transfer(): void {
    const leader = this.cluster.runningNodes()
      .find((n) => n.running()?.replica.raftStatus().role === 'leader');
    if (leader === undefined) return;
    this.trace.log('op', `${leader.id} hands leadership over`);
    void leader.running()?.replica.transferLeadership(1_000);
  }

  /**
   * Asks a running member (now and then the leader itself) for `change`; `then` sees the
   * answer. Busy until it comes: one change at a time, as the cluster allows.
   */
  private ask(change: MembershipChange, then?: (result: MembersResult) => void): void {
    const config = this.configInForce();
    const running = this.cluster.runningNodes();
    const members = running.filter((n) => roleOf(config, n.id) !== null);
    const leader = running.find((n) => n.running()?.replica.raftStatus().role === 'leader');
    const pool = members.length > 0 ? members : running;
    const node = leader !== undefined && this.rng.chance(0.5) ? leader
      : pool.length > 0 ? this.rng.pick(pool) : null;
    const replica = node?.running()?.replica;
    if (node === null || replica === undefined) return;
    this.busy = true;
    const token = ++this.asked;
    const what = change.kind === 'addLearner' ? `add learner ${change.id}`
      : `${change.kind} ${change.id}`;
    this.trace.log('op', `asks ${node.id}: ${what}`);
    // A node that crashes never answers: give up after its own deadline and look again.
    const giveUpUs = (this.cluster.settingsTimeoutMs() + 1_000) * 1000;
    this.cluster.scheduler.atDelayUs(giveUpUs, '', () => {
      if (this.asked === token) this.busy = false;
    });
    replica.changeMembers(change).then((result) => {
      if (this.asked !== token || !this.busy) return;
      this.busy = false;
      if (result.kind === 'done') this.changesDone++;
      else this.changesRefused++;
      this.trace.log('op', `${what}: ${result.kind === 'done' ? 'done'
        : result.kind === 'refused' ? `refused ${result.refusal}` : `503 ${result.reason}`}`);
      then?.(result);
    }, () => {
      if (this.asked === token) this.busy = false;
    });
  }

  /** Shuts down, a moment later, every node that a committed change removed. */
  private retireRemoved(): void {
    const config = this.configInForce();
    for (const id of config.removed) {
      if (this.retiring.has(id) || !this.cluster.nodes.some((n) => n.id === id)) continue;
      this.retiring.add(id);
      this.joining.delete(id);
      const node = this.cluster.node(id);
      this.cluster.scheduler.atDelayUs(this.rng.between(0, RETIRE_DELAY_MS_MAX) * 1000, '',
        () => this.cluster.retire(node));
    }
    for (const id of this.joining) if (roleOf(config, id) !== null) this.joining.delete(id);
  }
}
