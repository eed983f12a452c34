/**
 * Nodes started with a memory budget (HIVEKV_MAX_STATE_BYTES) near the state the cluster
 * holds, as an operator may start one on a smaller machine. What follows is the production
 * replica's: a voter's budget binds every member's growing writes (503 `memory_full`, its
 * smallest budget heard at once here, as a status would say it), a learner's binds nothing
 * and it holds back once the state passes it; every replica applies every committed entry
 * whatever its budget, so their states never part (the checkpoints compare them).
 *
 * A budget is drawn as a node starts while faults are on, from a stream of its own (the
 * seed mixed with BUDGET_STREAM_SALT), so a seed's other draws stay what they were. In the
 * liveness phase the operator restarts each such node with the default budget.
 */
import type { Faults } from './faults.js';
import { SimRandom } from './random.js';

const BUDGET_STREAM_SALT = 0x6275_6467;
/** Chance that a seed has small budgets at all, and that a start then draws one. */
const BUDGETS_ENABLED_CHANCE = 0.3;
const SMALL_BUDGET_CHANCE = 0.3;
/** A small budget is the largest state a member holds times a factor from this range. */
const BUDGET_FACTOR_RANGE = [0.6, 2] as const;
/** Below this state, no small budget is drawn: it would bind before any write. */
const STATE_BYTES_MIN = 1_024;

export class StateBudgets {
  private readonly rng: SimRandom;
  private readonly enabled: boolean;
  /** Small budgets drawn. */
  drawn = 0;

  /** `always`: every start while faults are on draws one (a test of the scenario). */
  constructor(seed: number, private readonly faults: Faults, private readonly always = false) {
    this.rng = new SimRandom(seed ^ BUDGET_STREAM_SALT);
    this.enabled = always || this.rng.chance(BUDGETS_ENABLED_CHANCE);
  }

  /** The budget a node starts with, given the largest state a member holds; null: default. */
  draw(largestStateBytes: number): number | null {
    if (!this.enabled || !this.faults.active || largestStateBytes < STATE_BYTES_MIN) return null;
    if (!this.always && !this.rng.chance(SMALL_BUDGET_CHANCE)) return null;
    const [low, high] = BUDGET_FACTOR_RANGE;
    this.drawn++;
    return Math.round(largestStateBytes * (low + (high - low) * this.rng.float()));
  }
}
