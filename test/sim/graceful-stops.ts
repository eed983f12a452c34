/**
 * Graceful stops, as SIGTERM gives a node (host/node/main.ts): a leader hands leadership
 * over, then the replica stops and answers every call still waiting on it (replica.ts,
 * `failEverything`): a write it already proposed with 503 `timeout` (its outcome unknown),
 * everything else with `shutting_down`, which the run records as taking no effect. A write
 * answered `shutting_down` that applied after all would fail the final reads. The
 * supervisor then starts the node again.
 *
 * Stops begin at the nemesis's steps and draw from a stream of their own (the seed mixed
 * with STOP_STREAM_SALT), so a seed's other draws, and the schedule they make, stay what
 * they were until a stop happens. None happens in the liveness phase.
 */
import type { Faults } from './faults.js';
import { SimRandom } from './random.js';
import { seedRate } from './spells.js';

const STOP_STREAM_SALT = 0x7374_6f70;
/** The range of the stops' rate per step, for a seed that has them. */
const STOP_RATE_RANGE = [0.01, 0.06] as const;

export class GracefulStops {
  private readonly rng: SimRandom;
  private readonly rate: number | null;
  /** Stops begun. */
  begun = 0;

  /** `fixedRate`: exactly this rate per step (a test of the scenario); else drawn. */
  constructor(seed: number, private readonly faults: Faults, fixedRate?: number) {
    this.rng = new SimRandom(seed ^ STOP_STREAM_SALT);
    this.rate = seedRate(this.rng, STOP_RATE_RANGE, fixedRate);
  }

  /** One nemesis step: the node of `running` to stop now, or null. */
  pick<T>(running: readonly T[]): T | null {
    if (!this.faults.active || this.rate === null || running.length === 0) return null;
    if (!this.rng.chance(this.rate)) return null;
    this.begun++;
    return this.rng.pick(running);
  }
}
