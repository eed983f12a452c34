/**
 * What the simulator's spells share (memory-spells.ts, space-spells.ts): a node is in a
 * spell until a simulated time, spells begin at a rate drawn per seed, and every draw comes
 * from a stream of the spell kind's own (the seed mixed with a salt), so a seed's other
 * draws, and the schedule they make, stay what they were until a spell begins. None begins
 * in the liveness phase (`faults.active` false), and one under way ends then.
 */
import type { Faults } from './faults.js';
import { SimRandom } from './random.js';

/** Chance that a seed has spells (or stops, graceful-stops.ts) of a kind at all. */
const SPELLS_ENABLED_CHANCE = 0.3;

/**
 * A seed's rate for a kind of fault with its own stream: `fixedRate` when given (a test of
 * the scenario), else null for most seeds and a draw from `range` for the others.
 */
export function seedRate(rng: SimRandom, range: readonly [number, number],
  fixedRate?: number): number | null {
  if (fixedRate !== undefined) return fixedRate;
  const [low, high] = range;
  return rng.chance(SPELLS_ENABLED_CHANCE) ? low + (high - low) * rng.float() : null;
}

export class Spells {
  private readonly rng: SimRandom;
  private readonly rate: number | null;
  private readonly untilUs = new Map<string, number>();
  /** Spells begun. */
  begun = 0;

  /** `fixedRate`: exactly this rate per draw (a test of the scenario); else drawn. */
  constructor(seed: number, salt: number, protected readonly faults: Faults,
    rateRange: readonly [number, number], fixedRate?: number) {
    this.rng = new SimRandom(seed ^ salt);
    this.rate = seedRate(this.rng, rateRange, fixedRate);
  }

  /** Whether `node` is in a spell at `nowUs`. */
  inSpellNow(node: string, nowUs: number): boolean {
    return this.faults.active && nowUs < (this.untilUs.get(node) ?? 0);
  }

  /**
   * One draw for `node`, not in a spell: at the seed's rate a spell of up to `lengthUsMax`
   * begins, and its length is returned; null when none begins.
   */
  protected maybeBegin(node: string, nowUs: number, lengthUsMax: number): number | null {
    if (!this.faults.active || this.rate === null || !this.rng.chance(this.rate)) return null;
    const lengthUs = 1 + this.rng.below(lengthUsMax);
    this.untilUs.set(node, nowUs + lengthUs);
    this.begun++;
    return lengthUs;
  }
}
