/**
 * Seeds for randomized tests: `SEED=<n>` replays a run; otherwise a fresh seed is drawn and
 * printed, so a failure can always be replayed.
 */
export function testSeed(): number {
  const fromEnv = process.env['SEED'];
  const seed = fromEnv !== undefined && fromEnv !== '' ? Number(fromEnv)
    : Math.floor(Math.random() * 2 ** 31);
  if (!Number.isSafeInteger(seed)) throw new Error(`SEED=${fromEnv} is not an integer`);
  console.log(`seed ${seed} (replay with SEED=${seed})`);
  return seed;
}

/** mulberry32: a small, fast, deterministic generator of numbers in [0, 1). */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
