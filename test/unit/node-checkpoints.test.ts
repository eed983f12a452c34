// When a leader proposes a checkpoint (host/node/checkpoints.ts): at each multiple of the
// interval it reaches, one at a time per term, never while its log runs far ahead of what it
// applied, never as a follower, never with checkpoints off.
import { describe, expect, it } from 'vitest';
import {
  CHECKPOINT_LAG_MAX, CheckpointSchedule, DivergenceError,
} from '../../host/node/checkpoints.js';

describe('checkpoint schedule', () => {
  it('is due once the applied index reaches the next multiple, then waits for the next', () => {
    const s = new CheckpointSchedule(100);
    expect(s.due('leader', 1, 99, 99)).toBe(false);
    expect(s.due('leader', 1, 130, 131)).toBe(true);
    s.noteProposed(130, 132, 1);
    // Proposed at 132 and applied: the next is due at 200, not before.
    expect(s.due('leader', 1, 199, 199)).toBe(false);
    expect(s.due('leader', 1, 200, 200)).toBe(true);
  });

  it('waits for its last checkpoint of this term to apply, not for one of an older term', () => {
    const s = new CheckpointSchedule(10);
    s.noteProposed(10, 12, 3);
    expect(s.due('leader', 3, 11, 30)).toBe(false);
    expect(s.due('leader', 3, 25, 30)).toBe(true);
    s.noteProposed(25, 31, 3);
    // A new term's leader does not wait for an entry its predecessor's term may have lost.
    expect(s.due('leader', 4, 30, 31)).toBe(true);
  });

  it('never as a follower, with checkpoints off, or with the log far ahead', () => {
    expect(new CheckpointSchedule(10).due('follower', 1, 50, 50)).toBe(false);
    expect(new CheckpointSchedule(0).due('leader', 1, 50, 50)).toBe(false);
    const s = new CheckpointSchedule(10);
    expect(s.due('leader', 1, 50, 50 + CHECKPOINT_LAG_MAX)).toBe(false);
    expect(s.due('leader', 1, 50, 49 + CHECKPOINT_LAG_MAX)).toBe(true);
  });

  it('names the index and both digests when a replica diverged', () => {
    const error = new DivergenceError(47, { kind: 'checkpoint', verdict: 'diverged', index: 40,
      expected: '6a7dda5c67ee0ec3', own: '0f3c8e11d2a94b70' });
    expect(error.message).toContain('at index 40 the leader\'s digest is 6a7dda5c67ee0ec3 ' +
      'and this node\'s is 0f3c8e11d2a94b70 (checkpoint entry 47)');
  });
});
