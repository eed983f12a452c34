/**
 * Fault injection for the simulated adapters: which faults a run may inject and how often.
 *
 * Rates are drawn per seed, so each run tries a different mix; some kinds are off for a
 * given seed, which lets rare interleavings happen without being drowned by others. The
 * hooks (`faults.maybe("wal.torn-write")`) live only in the simulated network, storage and
 * the runner's nemesis, never in the production core or driver.
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
} as const satisfies Record<string, readonly [number, number]>;

export type FaultName = keyof typeof FAULT_RATE_RANGES;

export const FAULT_NAMES = Object.keys(FAULT_RATE_RANGES) as FaultName[];
/** Probability that a seed enables a given kind at all. */
const KIND_ENABLED_CHANCE = 0.6;

export class Faults {
  private readonly rates = new Map<FaultName, number>();
  private readonly hits = new Map<FaultName, number>();
  /** False in the liveness phase: every hook answers no. */
  active = true;

  /** Draws the run's mix; `allowed` lists the kinds this run may enable (all by default). */
  constructor(private readonly rng: SimRandom, allowed: readonly FaultName[] = FAULT_NAMES) {
    for (const name of FAULT_NAMES) {
      if (!allowed.includes(name) || !rng.chance(KIND_ENABLED_CHANCE)) continue;
      const [low, high] = FAULT_RATE_RANGES[name];
      this.rates.set(name, low + (high - low) * rng.float());
    }
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
    if (rate === undefined || !this.rng.chance(rate)) return false;
    this.hits.set(name, (this.hits.get(name) ?? 0) + 1);
    return true;
  }

  enabled(name: FaultName): boolean {
    return this.rates.has(name);
  }

  /** `name=rate` for every enabled kind: printed at the start of a traced run. */
  describe(): string {
    const parts = [...this.rates].map(([name, rate]) => `${name}=${rate.toFixed(4)}`);
    return parts.length === 0 ? 'no faults' : parts.join(' ');
  }

  hitCounts(): ReadonlyMap<FaultName, number> {
    return this.hits;
  }
}
