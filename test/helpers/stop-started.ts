/**
 * Set up for every test file that starts node processes (vitest.config.ts): once the file's
 * own hooks have run, any node it started that is still running is killed by its PID, and
 * the file fails saying how many, so a leak is fixed where it is rather than found later as
 * a port another file cannot take.
 */
import { afterAll, expect } from 'vitest';
import { stopStartedNodes } from './node-process.js';

afterAll(async () => {
  const left = await stopStartedNodes();
  expect(left, `${left} node process(es) this file started were still running at its end`)
    .toBe(0);
});
