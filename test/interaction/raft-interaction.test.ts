/**
 * Scripted Raft scenarios: each file in scenarios/ runs through the interpreter and its
 * transcript must match the committed one in transcripts/ (update with `vitest -u` only
 * after reading the diff).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { runScenario } from './interpreter.js';

const here = dirname(fileURLToPath(import.meta.url));
const scenarios = readdirSync(join(here, 'scenarios')).filter((f) => f.endsWith('.txt')).sort();

describe('raft interaction scenarios', () => {
  it.each(scenarios)('%s', async (file) => {
    const transcript = runScenario(readFileSync(join(here, 'scenarios', file), 'utf8'));
    await expect(transcript).toMatchFileSnapshot(join(here, 'transcripts', file));
  });

  it('a transcript replays identically (determinism)', () => {
    const script = readFileSync(join(here, 'scenarios', 'partition.txt'), 'utf8');
    expect(runScenario(script)).toBe(runScenario(script));
  });
});
