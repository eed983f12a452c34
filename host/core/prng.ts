/**
 * A small seeded pseudo-random generator (xoshiro128**, seeded through splitmix32) for the
 * Raft core's election jitter.
 *
 * Pure: no global randomness, no clock. The same seed yields the same sequence on every
 * platform, so a simulator run replays exactly from its seed.
 */

/** A deterministic source of 32-bit integers. */
export interface Prng {
  /** The next unsigned 32-bit value. */
  nextU32(): number;
  /** A uniform integer in [0, bound). Precondition: 1 <= bound <= 2^32. */
  nextBelow(bound: number): number;
}

const U32_RANGE = 0x1_0000_0000;
/** Draws one `nextBelow` may take before it accepts a value regardless. */
const REJECTION_DRAWS_MAX = 64;

function splitmix32(state: { value: number }): number {
  state.value = (state.value + 0x9e3779b9) | 0;
  let z = state.value;
  z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
  z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
  return (z ^ (z >>> 16)) >>> 0;
}

function rotl(x: number, k: number): number {
  return ((x << k) | (x >>> (32 - k))) >>> 0;
}

/**
 * Creates a xoshiro128** generator. Any finite number is a valid seed; its low 32 bits and
 * the next 21 bits both feed the seeding, so seeds up to 2^53 stay distinct in practice.
 */
export function createPrng(seed: number): Prng {
  if (!Number.isFinite(seed)) throw new Error(`prng: seed must be finite, got ${seed}`);
  const whole = Math.trunc(seed);
  const high = Math.floor(whole / U32_RANGE) | 0;
  const seeder = { value: (whole | 0) ^ Math.imul(high, 0x27d4eb2d) };
  const s = [splitmix32(seeder), splitmix32(seeder), splitmix32(seeder), splitmix32(seeder)];
  // An all-zero state would emit zeros forever; splitmix32 cannot produce four zeros in a
  // row from one stream, but the guard keeps the claim checked rather than assumed.
  if ((s[0]! | s[1]! | s[2]! | s[3]!) === 0) s[0] = 1;
  let s0 = s[0]!;
  let s1 = s[1]!;
  let s2 = s[2]!;
  let s3 = s[3]!;
  const nextU32 = (): number => {
    const result = Math.imul(rotl(Math.imul(s1, 5) >>> 0, 7), 9) >>> 0;
    const t = (s1 << 9) >>> 0;
    s2 = (s2 ^ s0) >>> 0;
    s3 = (s3 ^ s1) >>> 0;
    s1 = (s1 ^ s2) >>> 0;
    s0 = (s0 ^ s3) >>> 0;
    s2 = (s2 ^ t) >>> 0;
    s3 = rotl(s3, 11);
    return result;
  };
  const nextBelow = (bound: number): number => {
    if (!Number.isInteger(bound) || bound < 1 || bound > U32_RANGE) {
      throw new Error(`prng: bound must be an integer in [1, 2^32], got ${bound}`);
    }
    // Rejection sampling keeps the result uniform. The rejected zone is under half of the
    // range, so running out of draws has probability below 2^-64; the loop stays bounded
    // and then accepts a value with a negligible bias.
    const limit = U32_RANGE - (U32_RANGE % bound);
    let value = nextU32();
    for (let draw = 1; draw < REJECTION_DRAWS_MAX && value >= limit; draw++) value = nextU32();
    return value % bound;
  };
  return { nextU32, nextBelow };
}

/** A generator of uniform numbers in [0, 1) over `createPrng`, for tests and benchmarks. */
export function createUnitRandom(seed: number): () => number {
  const prng = createPrng(seed);
  return () => prng.nextU32() / U32_RANGE;
}
