/**
 * A follower's answers released by one fsync, thinned (host/node/append-answers.ts): of the
 * successes to one leader in one term only the highest match index goes out; refusals and
 * every other message go out as they were, in their order. What one fsync releases, from
 * every Ready that waited for it, is thinned as one list; later Readies keep waiting.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { AppendResponseMessage, Message } from '../../host/core/raft/messages.js';
import {
  type AwaitingSync, releaseAfterSync, thinAppendAnswers,
} from '../../host/node/append-answers.js';
import { testSeed } from '../helpers/seed.js';

function success(to: string, term: number, matchIndex: number): AppendResponseMessage {
  return { type: 'appendResponse', from: 'n2', to, term, success: true, matchIndex,
    rejectedIndex: 0, hintIndex: 0, hintTerm: 0 };
}

function refusal(to: string, term: number, rejectedIndex: number): AppendResponseMessage {
  return { type: 'appendResponse', from: 'n2', to, term, success: false, matchIndex: 0,
    rejectedIndex, hintIndex: rejectedIndex - 1, hintTerm: term };
}

function heartbeatAnswer(to: string, term: number, readContext: number): Message {
  return { type: 'heartbeatResponse', from: 'n2', to, term, readContext };
}

describe('thinAppendAnswers', () => {
  it('keeps the success with the highest match index, in its own place', () => {
    const messages = [success('n1', 3, 10), heartbeatAnswer('n1', 3, 7), success('n1', 3, 14),
      success('n1', 3, 12)];
    expect(thinAppendAnswers(messages)).toEqual([heartbeatAnswer('n1', 3, 7),
      success('n1', 3, 14)]);
  });

  it('keeps every refusal, and one success per leader and term', () => {
    const messages = [success('n1', 3, 10), refusal('n1', 3, 9), success('n1', 4, 11),
      success('n3', 4, 11), success('n1', 4, 12), refusal('n1', 4, 5)];
    expect(thinAppendAnswers(messages)).toEqual([success('n1', 3, 10), refusal('n1', 3, 9),
      success('n3', 4, 11), success('n1', 4, 12), refusal('n1', 4, 5)]);
  });

  it('returns the list itself when nothing is superseded', () => {
    const messages = [success('n1', 3, 10), refusal('n1', 3, 9), success('n3', 3, 10)];
    expect(thinAppendAnswers(messages)).toBe(messages);
    const none: Message[] = [];
    expect(thinAppendAnswers(none)).toBe(none);
  });

  it('over generated lists: order kept, nothing but superseded successes dropped', () => {
    const seed = testSeed();
    const message = fc.oneof(
      fc.record({ to: fc.constantFrom('n1', 'n3'), term: fc.integer({ min: 1, max: 3 }),
        index: fc.integer({ min: 0, max: 30 }) }).map(({ to, term, index }) =>
        success(to, term, index)),
      fc.record({ to: fc.constantFrom('n1', 'n3'), term: fc.integer({ min: 1, max: 3 }),
        index: fc.integer({ min: 1, max: 30 }) }).map(({ to, term, index }) =>
        refusal(to, term, index)),
      fc.integer({ min: 1, max: 9 }).map((context) => heartbeatAnswer('n1', 2, context)),
    );
    fc.assert(fc.property(fc.array(message, { maxLength: 20 }), (messages) => {
      const thinned = thinAppendAnswers(messages);
      // A subsequence, made of the same objects.
      let at = 0;
      for (const kept of thinned) {
        while (at < messages.length && messages[at] !== kept) at++;
        expect(at).toBeLessThan(messages.length);
        at++;
      }
      const isSuccess = (m: Message): m is AppendResponseMessage =>
        m.type === 'appendResponse' && m.success;
      expect(thinned.filter((m) => !isSuccess(m))).toEqual(messages.filter((m) => !isSuccess(m)));
      const best = new Map<string, number>();
      for (const m of messages.filter(isSuccess)) {
        const key = `${m.to}/${m.term}`;
        best.set(key, Math.max(best.get(key) ?? -1, m.matchIndex));
      }
      const keptSuccesses = thinned.filter(isSuccess);
      expect(keptSuccesses).toHaveLength(best.size);
      for (const m of keptSuccesses) expect(m.matchIndex).toBe(best.get(`${m.to}/${m.term}`));
    }), { seed, numRuns: 2000 });
  });
});

describe('releaseAfterSync', () => {
  it('sends what the fsync released as one thinned list, and leaves later Readies waiting',
    () => {
      const waiting: AwaitingSync[] = [
        { messages: [refusal('n1', 3, 8), success('n1', 3, 10)], afterSync: 4 },
        { messages: [heartbeatAnswer('n1', 3, 2), success('n1', 3, 12)], afterSync: 5 },
        { messages: [success('n1', 3, 13)], afterSync: 6 },
      ];
      expect(releaseAfterSync(waiting, 5)).toEqual([refusal('n1', 3, 8),
        heartbeatAnswer('n1', 3, 2), success('n1', 3, 12)]);
      expect(waiting.map((batch) => batch.afterSync)).toEqual([6]);
      expect(releaseAfterSync(waiting, 5)).toEqual([]);
      expect(releaseAfterSync(waiting, 6)).toEqual([success('n1', 3, 13)]);
      expect(waiting).toEqual([]);
    });
});
