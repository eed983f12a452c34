/**
 * Spells in which a node's data directory is below HIVEKV_MIN_FREE_BYTES: its storage says
 * `isLowOnSpace()` (host/storage/file-storage.ts). What the node does then is the
 * production replica's: it refuses writes (503 `storage_full`); as a voter it makes every
 * member refuse them (`membersStorageFull`, heard at once here, as a status would say it);
 * as a learner it holds back from catching up (`catchUpHeldFor` 'space') and binds nothing,
 * and its leader sends it heartbeats only; promoted meanwhile it is refused.
 *
 * A spell belongs to the volume, so it outlives a crash of the process on it. Spells begin
 * at the nemesis's steps, from a stream of their own (spells.ts); one under way ends in the
 * liveness phase: the operator has made room.
 */
import type { Faults } from './faults.js';
import { Spells } from './spells.js';

const SPACE_STREAM_SALT = 0x7370_6163;
/** The range of the spells' rate per node and step, for a seed that has them. */
const SPELL_RATE_RANGE = [0.002, 0.02] as const;
/** A spell lasts up to this long (simulated). */
const SPELL_US_MAX = 4_000_000;

export class SpaceSpells extends Spells {
  /** `fixedRate`: exactly this rate per node and step (a test of the scenario); else drawn. */
  constructor(seed: number, faults: Faults, fixedRate?: number) {
    super(seed, SPACE_STREAM_SALT, faults, SPELL_RATE_RANGE, fixedRate);
  }

  /**
   * One nemesis step: each of `nodes` (the volumes of every node, up or down) not in a
   * spell may begin one; `onBegin` hears which and for how long.
   */
  step(nodes: readonly string[], nowUs: number,
    onBegin: (node: string, lengthUs: number) => void): void {
    for (const node of nodes) {
      if (this.inSpellNow(node, nowUs)) continue;
      const lengthUs = this.maybeBegin(node, nowUs, SPELL_US_MAX);
      if (lengthUs !== null) onBegin(node, lengthUs);
    }
  }
}
