/**
 * `npm run bench:node` rewrites its section of bench/RESULTS.md and keeps the run it replaces
 * below the new one: that run's commit and figures, and not the run before that.
 */
import { describe, expect, it } from 'vitest';

import { previousRunOf } from '../../bench/results-section.js';

const RUN_B = [
  '## Node', '',
  '`npm run bench:node`, commit bbbbbbb, Node v20.20.2, 2 x CPU, wrk 10 s per row.', '',
  '| workload | conns | calls/s |', '|---|---|---|', '| put | 64 | 20000 |', '',
  'One connection: put p50 0.400 ms; the put is 0.2 ms above it.', '',
  '### The run before (commit aaaaaaa)', '',
  '| workload | conns | calls/s |', '|---|---|---|', '| put | 64 | 15000 |', '',
].join('\n');

describe('the run bench:node keeps', () => {
  it('is the replaced run\'s commit and figures, without the run before it', () => {
    expect(previousRunOf(RUN_B)).toBe([
      '### The run before (commit bbbbbbb)', '',
      '| workload | conns | calls/s |', '|---|---|---|', '| put | 64 | 20000 |', '',
      'One connection: put p50 0.400 ms; the put is 0.2 ms above it.', '',
    ].join('\n'));
  });

  it('is nothing when the section holds no figures', () => {
    expect(previousRunOf('## Node\n\nNot run yet.\n')).toBe('');
  });
});
