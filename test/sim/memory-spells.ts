/**
 * Spells in which a node's memory could not hold the state a member holds: the hold of
 * host/node/replica.ts (`refreshCatchUpHold`). For a spell the node takes neither entries
 * nor snapshots from its leader, and its leader, which hears of it as a status would say,
 * sends it heartbeats only (`setReplicationPaused`); when the spell ends it catches up.
 *
 * The spells draw from a stream of their own (spells.ts).
 */
import type { Faults } from './faults.js';
import { Spells } from './spells.js';

const MEMORY_STREAM_SALT = 0x6d65_6d6f;
/** The range of the spells' rate per check, for a seed that has them. */
const SPELL_RATE_RANGE = [0.0005, 0.005] as const;
/** A spell lasts up to this long (simulated). */
const SPELL_US_MAX = 5_000_000;
/** What a member says it holds in a spell: past any room a node has. */
export const SPELL_STATE_BYTES = 2 ** 40;
/** The room every simulated node restores: finite, so that its hold is worked out. */
export const SIM_RESTORE_ROOM_BYTES = 2 ** 30;

export class MemorySpells extends Spells {
  /** `fixedRate`: exactly this rate per check (a test of the scenario); else drawn. */
  constructor(seed: number, faults: Faults, fixedRate?: number) {
    super(seed, MEMORY_STREAM_SALT, faults, SPELL_RATE_RANGE, fixedRate);
  }

  /**
   * Whether `node` is in a spell at `nowUs`; asked once a tick of a follower (and at each
   * start), which may begin one. `onBegin` hears a spell's length as it begins.
   */
  inSpell(node: string, nowUs: number, onBegin: (lengthUs: number) => void): boolean {
    if (this.inSpellNow(node, nowUs)) return true;
    const lengthUs = this.maybeBegin(node, nowUs, SPELL_US_MAX);
    if (lengthUs === null) return false;
    onBegin(lengthUs);
    return true;
  }
}
