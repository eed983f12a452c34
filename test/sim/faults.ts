/**
 * Fault injection for the simulated adapters: which faults a run may inject and how often.
 *
 * Rates are drawn per seed, so each run tries a different mix; some kinds are off for a
 * given seed, which lets rare interleavings happen without being drowned by others. The
 * hooks (`faults.maybe("wal.torn-write")`) live only in the simulated network, storage and
 * the runner's nemesis, never in the production core or driver.
 *
 * Some seeds run the `churn` profile instead of the mixed one: leader churn with partial
 * replication, the schedule the Figure 8 case of the Raft paper needs (§5.4.2). New leaders
 * are cut off at once (their first entry stays theirs alone) or right after their first
 * commit (the next entries stay theirs); leaders are cut off with or without one follower;
 * appends are small and few are in flight, so a catch-up is acknowledged entry by entry. The
 * kinds that heal or reshape the network at random (partitions, clogs) are off there: they
 * would end these cuts early.
 */
import type { SimRandom } from './random.js';

/** Every kind of fault, with the range its rate is drawn from when the seed enables it. */
export const FAULT_RATE_RANGES = {
  /** Per frame sent. */
  'net.drop': [0.001, 0.1],
  'net.duplicate': [0.001, 0.05],
  /** Per frame: an extra delay, so later frames overtake it. */
  'net.reorder': [0.005, 0.2],
  /** Per nemesis step (every NEMESIS_STEP_MS). */
  'net.partition': [0.02, 0.2],
  'net.partition-asym': [0.02, 0.15],
  'net.clog': [0.02, 0.15],
  'node.crash': [0.01, 0.1],
  /** Per crash: unsynced writes partly reach the disk, the last record torn. */
  'wal.torn-write': [0.2, 0.9],
  /** Per recovery: a bit flips in what is read back (the checksum must catch it). */
  'disk.bit-flip': [0.02, 0.2],
  /** Per sync: the fsync fails, the driver must crash the node. */
  'disk.fsync-fail': [0.0005, 0.01],
  /** Per sync: a slow fsync (a latency spike). */
  'disk.slow-fsync': [0.005, 0.05],
  /**
   * Per nemesis step: cut the leader off (alone, or with one follower) for a moment, so it
   * appends entries nobody else holds while the others elect a new leader (Figure 8).
   */
  'net.isolate-leader': [0.03, 0.3],
  /** Per append on a leader: it crashes right after, before its own write is durable. */
  'node.crash-after-append': [0.002, 0.03],
  /** Per append on a leader: it is cut off right after, so the entry stays its own. */
  'net.isolate-after-append': [0.002, 0.03],
  /**
   * Per new leader: it is cut off a few milliseconds into its term, in the middle of catching
   * its followers up, so its entries and the ones it sends reach some followers only.
   */
  'net.isolate-new-leader': [0.02, 0.2],
  /**
   * Per leader, the first time it advances its commit index in its term: it is cut off at
   * once, before the appends that carry the new commit index (and the entries after it)
   * reach anyone, just as it settles in.
   */
  'net.isolate-after-first-commit': [0.02, 0.2],
  /** Per frame a crashed node still had in flight: lost with it (it was not sent yet). */
  'net.crash-drops-sends': [0.3, 1],
  /** Per nemesis step: the operator makes one membership change (add, promote, remove). */
  'member.change': [0.02, 0.15],
  /** Per nemesis step: the leader hands leadership to another voter (thesis §3.10). */
  'member.transfer': [0.01, 0.1],
  /**
   * Per room check (a tick of a follower): its volume has no room for a snapshot for up to
   * 10 s; one from the leader is refused, or fails midway, and its own is not taken.
   */
  'disk.no-room': [0.002, 0.03],
} as const satisfies Record<string, readonly [number, number]>;

export type FaultName = keyof typeof FAULT_RATE_RANGES;

export const FAULT_NAMES = Object.keys(FAULT_RATE_RANGES) as FaultName[];
/** Probability that a seed enables a given kind at all. */
const KIND_ENABLED_CHANCE = 0.6;
/**
 * Kinds added with membership changes and leader churn. They draw from the run's second
 * stream, so that a seed's older draws (and the schedule they make) stay what they were
 * until one of these faults actually fires.
 */
const SECOND_STREAM_KINDS: readonly FaultName[] = ['net.isolate-leader', 'node.crash-after-append',
  'net.isolate-after-append', 'net.isolate-new-leader', 'net.isolate-after-first-commit',
  'net.crash-drops-sends', 'member.change', 'member.transfer', 'disk.no-room'];

export type FaultProfile = 'mixed' | 'churn';
/** Seeds that run the churn profile. */
export const CHURN_PROFILE_CHANCE = 0.25;
/** In the churn profile these kinds are always on, at rates drawn from these ranges. */
const CHURN_RATE_RANGES: Partial<Record<FaultName, readonly [number, number]>> = {
  'net.isolate-new-leader': [0.5, 0.8],
  'net.isolate-after-first-commit': [0.9, 1],
  'net.isolate-leader': [0.05, 0.2],
};
/** ...and these are off. */
const CHURN_OFF: readonly FaultName[] = ['net.partition', 'net.partition-asym', 'net.clog'];

export class Faults {
  private readonly rates = new Map<FaultName, number>();
  private readonly hits = new Map<FaultName, number>();
  /** False in the liveness phase: every hook answers no. */
  active = true;

  /**
   * Draws the run's mix; `allowed` lists the kinds this run may enable (all by default);
   * `profile` is drawn per seed unless given.
   */
  constructor(private readonly rng: SimRandom, allowed: readonly FaultName[] = FAULT_NAMES,
    readonly profile: FaultProfile = 'mixed', private readonly second: SimRandom = rng) {
    for (const name of FAULT_NAMES) {
      if (!allowed.includes(name)) continue;
      const draw = this.streamOf(name);
      const churnRange = profile === 'churn' ? CHURN_RATE_RANGES[name] : undefined;
      const off = profile === 'churn' && CHURN_OFF.includes(name);
      const enabled = churnRange !== undefined || (!off && draw.chance(KIND_ENABLED_CHANCE));
      if (!enabled) continue;
      const [low, high] = churnRange ?? FAULT_RATE_RANGES[name];
      this.rates.set(name, low + (high - low) * draw.float());
    }
  }

  private streamOf(name: FaultName): SimRandom {
    return SECOND_STREAM_KINDS.includes(name) ? this.second : this.rng;
  }

  /** A mix with exactly these rates (tests that need a fault to fire, or never). */
  static fixed(rng: SimRandom, rates: Partial<Record<FaultName, number>>): Faults {
    const faults = new Faults(rng, []);
    for (const [name, rate] of Object.entries(rates)) faults.rates.set(name as FaultName, rate);
    return faults;
  }

  /** True when the fault fires now; counts it. Draws nothing when the kind is off. */
  maybe(name: FaultName): boolean {
    if (!this.active) return false;
    const rate = this.rates.get(name);
    if (rate === undefined || !this.streamOf(name).chance(rate)) return false;
    this.hits.set(name, (this.hits.get(name) ?? 0) + 1);
    return true;
  }

  enabled(name: FaultName): boolean {
    return this.rates.has(name);
  }

  /** `name=rate` for every enabled kind: printed at the start of a traced run. */
  describe(): string {
    const parts = [...this.rates].map(([name, rate]) => `${name}=${rate.toFixed(4)}`);
    return `${this.profile}: ${parts.length === 0 ? 'no faults' : parts.join(' ')}`;
  }

  hitCounts(): ReadonlyMap<FaultName, number> {
    return this.hits;
  }
}
