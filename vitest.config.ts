import { defineConfig } from 'vitest/config';

// Integration tests start real child processes and bind ports; they run in forks with a
// generous timeout. Everything else is pure and fast.
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    pool: 'forks',
    testTimeout: 60_000,
    hookTimeout: 60_000,
    reporters: ['default'],
  },
});
