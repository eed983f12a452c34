/**
 * Spells in which a node's memory could not hold the state a member holds: the hold of
 * host/node/replica.ts (`refreshCatchUpHold`). For a spell the node takes neither entries
 * nor snapshots from its leader, and its leader, which hears of it as a status would say,
 * sends it heartbeats only (`setReplicationPaused`); when the spell ends it catches up.
 *
 * The spells draw from a stream of their own (the seed mixed with MEMORY_STREAM_SALT), so
 * every other draw of a seed, and the schedule it makes, stays what it was until a spell
 * begins. None begins in the liveness phase (`faults.active` false), and one under way ends.
 */
import type { Faults } from './faults.js';
import { SimRandom } from './random.js';

const MEMORY_STREAM_SALT = 0x6d65_6d6f;
/** Chance that a seed has spells at all, and the range of their rate per check. */
const SPELLS_ENABLED_CHANCE = 0.3;
const SPELL_RATE_RANGE = [0.0005, 0.005] as const;
/** A spell lasts up to this long (simulated). */
const SPELL_US_MAX = 5_000_000;
/** What a member says it holds in a spell: past any room a node has. */
export const SPELL_STATE_BYTES = 2 ** 40;
/** The room every simulated node restores: finite, so that its hold is worked out. */
export const SIM_RESTORE_ROOM_BYTES = 2 ** 30;

export class MemorySpells {
  private readonly rng: SimRandom;
  private readonly rate: number | null;
  private readonly untilUs = new Map<string, number>();
  /** Spells begun. */
  begun = 0;

  /** `fixedRate`: exactly this rate per check (a test of the scenario); else drawn. */
  constructor(seed: number, private readonly faults: Faults, fixedRate?: number) {
    this.rng = new SimRandom(seed ^ MEMORY_STREAM_SALT);
    if (fixedRate !== undefined) {
      this.rate = fixedRate;
    } else {
      const [low, high] = SPELL_RATE_RANGE;
      this.rate = this.rng.chance(SPELLS_ENABLED_CHANCE)
        ? low + (high - low) * this.rng.float() : null;
    }
  }

  /**
   * Whether `node` is in a spell at `nowUs`; asked once a tick of a follower (and at each
   * start), which may begin one. `onBegin` hears a spell's length as it begins.
   */
  inSpell(node: string, nowUs: number, onBegin: (lengthUs: number) => void): boolean {
    if (!this.faults.active) return false;
    if (nowUs < (this.untilUs.get(node) ?? 0)) return true;
    if (this.rate === null || !this.rng.chance(this.rate)) return false;
    const lengthUs = 1 + this.rng.below(SPELL_US_MAX);
    this.untilUs.set(node, nowUs + lengthUs);
    this.begun++;
    onBegin(lengthUs);
    return true;
  }
}
