import { defineConfig } from 'vitest/config';

// Two groups, one after the other. The pure tests (the state machine, the Raft simulator,
// the model and unit tests) are CPU-bound and share nothing: they run two files at a time.
// The tests that start real node processes, bind ports and wait on elections and timers
// (integration, browser) run one file at a time afterwards, so no file's timings depend on
// another's load.
const SHARED = { pool: 'forks' as const, testTimeout: 60_000, hookTimeout: 60_000 };

export default defineConfig({
  test: {
    reporters: ['default'],
    projects: [
      { test: { ...SHARED, name: 'pure', maxWorkers: 2,
        include: ['test/{unit,model,sim,interaction}/**/*.test.ts'],
        sequence: { groupOrder: 0 } } },
      { test: { ...SHARED, name: 'processes', maxWorkers: 1,
        include: ['test/**/*.test.ts'],
        exclude: ['test/{unit,model,sim,interaction}/**', '**/node_modules/**'],
        sequence: { groupOrder: 1 } } },
    ],
  },
});
