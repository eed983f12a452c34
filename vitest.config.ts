import { defineConfig } from 'vitest/config';

// Two groups, one after the other. The pure tests (the state machine, the Raft simulator,
// the model and unit tests) are CPU-bound and share nothing: they run two files at a time.
// The tests that start real node processes (integration, browser) come afterwards, also two
// files at a time: they spend most of their time waiting on elections, timers and fsyncs,
// every one binds free ports and its own directories, and none may depend on a quiet machine
// (a node under another file's load is what a user's node sees). Two at a time takes the
// group from about 580 s to about 310 s on two cores.
const SHARED = { pool: 'forks' as const, testTimeout: 60_000, hookTimeout: 60_000 };

export default defineConfig({
  test: {
    reporters: ['default'],
    projects: [
      { test: { ...SHARED, name: 'pure', maxWorkers: 2,
        include: ['test/{unit,model,sim,interaction}/**/*.test.ts'],
        sequence: { groupOrder: 0 } } },
      { test: { ...SHARED, name: 'processes', maxWorkers: 2,
        setupFiles: ['test/helpers/stop-started.ts'],
        include: ['test/**/*.test.ts'],
        exclude: ['test/{unit,model,sim,interaction}/**', '**/node_modules/**'],
        sequence: { groupOrder: 1 } } },
    ],
  },
});
