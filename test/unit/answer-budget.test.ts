// The bounds on answers waiting for slow clients (host/http/answer-budget.ts) and on bodies
// held (body-budget.ts): what is kept, what is closed or refused, and that stalled answers
// give way to new ones, stalest first.
import { describe, expect, it } from 'vitest';

import { AnswerBudget, STALLED_MS } from '../../host/http/answer-budget.js';
import { BodyBudget } from '../../host/http/body-budget.js';

function harness(maxBytes: number) {
  const clock = { ms: 0 };
  const budget = new AnswerBudget(maxBytes, () => clock.ms);
  const closed: string[] = [];
  const admit = (name: string, bytes: number) => {
    const answer = budget.admit(bytes, () => {
      closed.push(name);
      // As a connection's abort handler does.
      if (answer !== null) budget.release(answer);
    });
    return answer;
  };
  return { budget, clock, closed, admit };
}

describe('AnswerBudget', () => {
  it('keeps answers within the bound, and always the first whatever its size', () => {
    const { budget, admit } = harness(100);
    const huge = admit('huge', 500);
    expect(huge).not.toBeNull();
    expect(admit('more', 1)).toBeNull();
    expect(budget.closedConnections).toBe(1);
    budget.release(huge!);
    budget.release(huge!);
    expect(budget.waitingBytes).toBe(0);
    expect(admit('a', 60)).not.toBeNull();
    expect(admit('b', 40)).not.toBeNull();
    expect(admit('c', 1)).toBeNull();
    expect(budget.waitingBytes).toBe(100);
  });

  it('closes stalled answers, stalest first, to make room; answers that move are kept', () => {
    const { budget, clock, closed, admit } = harness(100);
    const a = admit('a', 40)!;
    clock.ms = 100;
    admit('b', 40);
    clock.ms = 200;
    admit('c', 20);
    clock.ms = 100 + STALLED_MS;
    budget.progressed(a, 30);
    expect(budget.waitingBytes).toBe(90);
    // b stalled for STALLED_MS; a moved just now and c is younger than STALLED_MS.
    expect(admit('d', 30)).not.toBeNull();
    expect(closed).toEqual(['b']);
    expect(budget.waitingBytes).toBe(80);
    expect(admit('e', 30)).toBeNull();
    expect(closed).toEqual(['b']);
    expect(budget.closedConnections).toBe(2);
  });
});

describe('BodyBudget', () => {
  it('holds bodies within the bound, always the first, and counts what it refuses', () => {
    const budget = new BodyBudget(100);
    expect(budget.hold(250)).toBe(true);
    expect(budget.hold(1)).toBe(false);
    budget.release(250);
    expect(budget.hold(60)).toBe(true);
    expect(budget.hold(40)).toBe(true);
    expect(budget.hold(1)).toBe(false);
    expect(budget).toMatchObject({ heldBytes: 100, refusedCalls: 2 });
    budget.release(100);
    expect(() => budget.release(1)).toThrow(/below zero/);
  });

  it('closes stalled uploads, stalest first, to make room; never one still arriving', () => {
    const clock = { ms: 0 };
    const budget = new BodyBudget(100, () => clock.ms);
    const closed: string[] = [];
    const upload = (name: string, bytes: number) => {
      const u = { progressAtMs: 0, bodyBytesHeld: bytes, evict: () => {
        closed.push(name);
        budget.release(bytes, u);
      } };
      return u;
    };
    const a = upload('a', 40);
    const b = upload('b', 40);
    expect(budget.hold(40, a)).toBe(true);
    clock.ms = 100;
    expect(budget.hold(40, b)).toBe(true);
    // Neither has stalled yet: the next body is refused.
    clock.ms = 900;
    expect(budget.hold(40, upload('c', 40))).toBe(false);
    expect(closed).toEqual([]);
    // `a` stalls; `b` keeps sending.
    clock.ms = 1200;
    b.progressAtMs = 1150;
    const d = upload('d', 40);
    expect(budget.hold(40, d)).toBe(true);
    expect(closed).toEqual(['a']);
    expect(budget).toMatchObject({ heldBytes: 80, closedUploads: 1, refusedCalls: 1 });
    // A body that has all come is never closed, however long it waits for its answer.
    budget.arrived(b);
    budget.arrived(d);
    clock.ms = 10_000;
    expect(budget.hold(40)).toBe(false);
    expect(closed).toEqual(['a']);
  });

  it('closes none when closing every stalled upload would still leave too little room', () => {
    const clock = { ms: 0 };
    const budget = new BodyBudget(100, () => clock.ms);
    expect(budget.hold(70)).toBe(true);
    const stalled = { progressAtMs: 0, bodyBytesHeld: 20,
      evict: () => budget.release(20, stalled) };
    expect(budget.hold(20, stalled)).toBe(true);
    clock.ms = 5000;
    expect(budget.hold(40)).toBe(false);
    expect(budget).toMatchObject({ heldBytes: 90, closedUploads: 0, refusedCalls: 1 });
    expect(budget.hold(30)).toBe(true);
    expect(budget).toMatchObject({ heldBytes: 100, closedUploads: 1 });
  });
});
