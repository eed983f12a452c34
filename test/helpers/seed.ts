import { createUnitRandom } from '../../host/core/prng.js';

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

/** Uniform numbers in [0, 1), replayable from the seed. */
export function seededRandom(seed: number): () => number {
  return createUnitRandom(seed);
}
