/**
 * The simulator's one source of randomness: xoshiro128** seeded through splitmix32.
 *
 * Every choice a run makes (delays, drops, faults, client ops, replica seeds) is drawn from
 * one `SimRandom`, in event order, so the same seed replays the same run bit for bit. Never
 * use Math.random or the clock in the simulator.
 */

const U32_RANGE = 0x1_0000_0000;
/** Draws `below` makes before it accepts a slightly biased value: keeps the loop bounded. */
const REJECTION_DRAWS_MAX = 32;

function rotl(x: number, k: number): number {
  return ((x << k) | (x >>> (32 - k))) >>> 0;
}

export class SimRandom {
  private s0: number;
  private s1: number;
  private s2: number;
  private s3: number;

  /** Any safe integer is a valid seed; its low 32 bits and the next 21 bits both count. */
  constructor(seed: number) {
    if (!Number.isSafeInteger(seed)) throw new Error(`sim random: bad seed ${seed}`);
    let state = (seed | 0) ^ Math.imul(Math.floor(seed / U32_RANGE) | 0, 0x27d4eb2d);
    const next = (): number => {
      state = (state + 0x9e3779b9) | 0;
      let z = state;
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
      return (z ^ (z >>> 16)) >>> 0;
    };
    this.s0 = next();
    this.s1 = next();
    this.s2 = next();
    this.s3 = next();
    // An all-zero state would only ever yield zeros.
    if ((this.s0 | this.s1 | this.s2 | this.s3) === 0) this.s0 = 1;
  }

  /** The next unsigned 32-bit value. */
  nextU32(): number {
    const result = Math.imul(rotl(Math.imul(this.s1, 5) >>> 0, 7), 9) >>> 0;
    const t = (this.s1 << 9) >>> 0;
    this.s2 = (this.s2 ^ this.s0) >>> 0;
    this.s3 = (this.s3 ^ this.s1) >>> 0;
    this.s1 = (this.s1 ^ this.s2) >>> 0;
    this.s0 = (this.s0 ^ this.s3) >>> 0;
    this.s2 = (this.s2 ^ t) >>> 0;
    this.s3 = rotl(this.s3, 11);
    return result;
  }

  /** A uniform integer in [0, bound). Precondition: 1 <= bound <= 2^32. */
  below(bound: number): number {
    if (!Number.isInteger(bound) || bound < 1 || bound > U32_RANGE) {
      throw new Error(`sim random: bound must be in [1, 2^32], got ${bound}`);
    }
    const limit = U32_RANGE - (U32_RANGE % bound);
    let value = this.nextU32();
    for (let draw = 1; draw < REJECTION_DRAWS_MAX && value >= limit; draw++) {
      value = this.nextU32();
    }
    return value % bound;
  }

  /** A uniform integer in [min, max], both inclusive. */
  between(min: number, max: number): number {
    if (max < min) throw new Error(`sim random: empty range [${min}, ${max}]`);
    return min + this.below(max - min + 1);
  }

  /** A float in [0, 1) with 32 bits of resolution. */
  float(): number {
    return this.nextU32() / U32_RANGE;
  }

  /** True with probability `p` (0 never draws true, 1 always does). */
  chance(p: number): boolean {
    if (p <= 0) return false;
    if (p >= 1) return true;
    return this.float() < p;
  }

  /** One element of a non-empty array. */
  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error('sim random: pick from an empty array');
    return items[this.below(items.length)] as T;
  }

  /** Shuffles `items` in place (Fisher-Yates) and returns it. */
  shuffle<T>(items: T[]): T[] {
    for (let i = items.length - 1; i > 0; i--) {
      const j = this.below(i + 1);
      const held = items[i] as T;
      items[i] = items[j] as T;
      items[j] = held;
    }
    return items;
  }

  /** A seed for a component that keeps its own generator (the Raft core's jitter). */
  seed31(): number {
    return this.nextU32() >>> 1;
  }
}
