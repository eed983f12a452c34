/**
 * `hivekv/machine` and `hivekv/replay` as a user imports them (package.json `exports`):
 * KvMachine answers as a node does with the clock in the caller's hands (a lifetime runs
 * out exactly when the clock says, never on the wall clock), the same calls give the same
 * digest, and a snapshot restores to it.
 */
import { describe, expect, it } from 'vitest';
import { KvMachine } from 'hivekv/machine';
import { ReplayError } from 'hivekv/replay';

const T0 = 1_750_000_000_000;

function workload(m: KvMachine): void {
  m.kv([{ op: 'put', ns: 'rl', key: 'a', value: { n: 1 }, ttlSeconds: 10 }]);
  m.advance(1000);
  m.kv([{ op: 'incr', ns: 'rl', key: 'hits', delta: 1, max: 2, forever: true }]);
  m.kv([{ op: 'incr', ns: 'rl', key: 'hits', delta: 1, max: 2, forever: true }]);
  m.kv([{ op: 'incr', ns: 'rl', key: 'hits', delta: 1, max: 2, forever: true }]);
  m.setQuota('00000000-0000-0000-0000-000000000002', { enabled: true, maxRows: 5,
    maxBytes: null, maxReadsPerSec: null, maxWritesPerSec: null });
}

describe('KvMachine', () => {
  it('answers as a node, with an explicit clock', () => {
    const m = KvMachine.create({ nowMs: T0 });
    const put = m.kv([{ op: 'put', ns: 'rl', key: 'a', value: { n: 1 }, ttlSeconds: 10 }]);
    expect(put).toMatchObject({ status: 200, index: 1,
      body: { results: [{ op: 'put', applied: true, version: 1 }] } });
    m.advance(9_999);
    expect(m.kv([{ op: 'get', ns: 'rl', key: 'a' }])).toMatchObject({ index: null,
      body: { results: [{ found: true, value: { n: 1 } }] } });
    m.advance(1);
    expect(m.kv([{ op: 'get', ns: 'rl', key: 'a' }]).body)
      .toMatchObject({ results: [{ found: false }] });
    expect(m.sweep()).toBe(1);
    const refused = m.kv([{ op: 'put', ns: 'rl', key: 'b', value: 1 }]);
    expect(refused.status).toBe(400);
    expect(refused.index).toBeNull();
    const limited = m.kv([{ op: 'incr', ns: 'rl', key: 'c', delta: 5, max: 2, forever: true }]);
    expect(limited.body).toMatchObject({ results: [{ applied: false, reason: 'limit' }] });
  });

  it('gives the same digest for the same calls, and after a snapshot restore', () => {
    const a = KvMachine.create({ nowMs: T0 });
    const b = KvMachine.create({ nowMs: T0 });
    workload(a);
    workload(b);
    expect(a.digest()).toBe(b.digest());
    expect(a.digest()).toBe(a.machine.recountDigest());
    const restored = KvMachine.restore(a.snapshot());
    expect(restored.digest()).toBe(a.digest());
    expect(restored.appliedIndex).toBe(a.appliedIndex);
    b.advance(1);
    b.kv([{ op: 'delete', ns: 'rl', key: 'hits' }]);
    expect(b.digest()).not.toBe(a.digest());
  });

  it('hivekv/replay exports its errors', () => {
    expect(new ReplayError('x').name).toBe('ReplayError');
  });
});
