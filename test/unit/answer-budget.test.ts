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
});
