/**
 * Table tests for every rule of the spec the machine decides: the closed reason taxonomy
 * (kv-routes.md), expect 0 / N (WIRE.md "Result elements"), incr (WIRE.md "incr"), TTL by
 * entry time, required aborts, reads after writes, ceilings, versions, pause, grant, quota.
 */
import { describe, expect, it } from 'vitest';
import { StateMachine } from '../../host/machine/state-machine.js';
import {
  Harness, put, putIfAbsent, del, incr, get, getMany, getPrefix, check, ttl, quotaOf, w, NS,
} from '../model/machine-harness.js';
import { restoreFromBytes, snapshotToBytes } from '../../host/machine/snapshot-bytes.js';
import { ReferenceModel } from '../model/reference-model.js';
import { DEFAULT_TENANT, type Command } from '../../host/machine/commands.js';
import { createUnitRandom } from '../../host/core/prng.js';

describe('reason taxonomy (kv-routes.md, "The closed reason taxonomy")', () => {
  it('exists: put with expect 0 over a live row; the loser gets the winner', () => {
    const h = new Harness();
    expect(h.one(putIfAbsent('ord_8812', '{"chargeId":"ch_8812"}'))).toEqual(
      w(true, null, 'ord_8812', '{"chargeId":"ch_8812"}', 1));
    expect(h.one(putIfAbsent('ord_8812', '{"chargeId":"other"}'))).toEqual(
      w(false, 'exists', 'ord_8812', '{"chargeId":"ch_8812"}', 1));
  });
  it('absent: put or delete with expect N > 0 and no live row; never creates', () => {
    const h = new Harness();
    expect(h.one(put('k', '1', { expect: 7 }))).toEqual(w(false, 'absent', 'k', 'null', 0));
    expect(h.one(del('k', { expect: 7 }))).toEqual(w(false, 'absent', 'k', 'null', 0));
    expect(h.one(get('k'))).toEqual({ kind: 'get', found: false, key: 'k' });
  });
  it('version: put or delete with expect N > 0 on another version', () => {
    const h = new Harness();
    h.one(put('k', '"a"'));
    expect(h.one(put('k', '"b"', { expect: 9 }))).toEqual(w(false, 'version', 'k', '"a"', 1));
    expect(h.one(del('k', { expect: 9 }))).toEqual(w(false, 'version', 'k', '"a"', 1));
    expect(h.one(put('k', '"b"', { expect: 1 }))).toEqual(w(true, null, 'k', '"b"', 2));
  });
  it('limit: incr past max, or delta itself outside min/max', () => {
    const h = new Harness();
    expect(h.one(incr('c', '1', { max: '2' }))).toEqual(w(true, null, 'c', '1', 1));
    expect(h.one(incr('c', '1', { max: '2' }))).toEqual(w(true, null, 'c', '2', 2));
    expect(h.one(incr('c', '1', { max: '2' }))).toEqual(w(false, 'limit', 'c', '2', 2));
    expect(h.one(incr('c', '-5', { min: '-3' }))).toEqual(w(false, 'limit', 'c', '2', 2));
    expect(h.one(incr('new', '5', { max: '3' }))).toEqual(w(false, 'limit', 'new', '0', 0));
  });
  it('type: incr on a live non-number', () => {
    const h = new Harness();
    h.one(put('c', '{"n":1}'));
    expect(h.one(incr('c', '1'))).toEqual(w(false, 'type', 'c', '{"n":1}', 1));
  });
});

describe('expect and delete (WIRE.md, "Result elements")', () => {
  it('expect 0 wins over an expired row the sweeper has not pruned', () => {
    const h = new Harness();
    h.one(put('k', '"old"', { expiry: ttl(1) }));
    h.now += 1000;
    expect(h.one(putIfAbsent('k', '"new"'))).toEqual(w(true, null, 'k', '"new"', 2));
  });
  it('delete of an absent or expired key is absent; expect 0 applies when absent', () => {
    const h = new Harness();
    expect(h.one(del('k'))).toEqual(w(false, 'absent', 'k', 'null', 0));
    expect(h.one(del('k', { expect: 0 }))).toEqual(w(true, null, 'k', 'null', 0));
    h.one(put('k', '5', { expiry: ttl(1) }));
    expect(h.one(del('k', { expect: 0 }))).toEqual(w(false, 'exists', 'k', '5', 1));
    h.now += 1000;
    expect(h.one(del('k'))).toEqual(w(false, 'absent', 'k', 'null', 0));
  });
  it('delete applied returns the deleted value and its last version', () => {
    const h = new Harness();
    h.one(put('k', '[1]'));
    expect(h.one(del('k', { expect: 1 }))).toEqual(w(true, null, 'k', '[1]', 1));
    expect(h.one(get('k'))).toEqual({ kind: 'get', found: false, key: 'k' });
  });
  it('null is a value: found with value null', () => {
    const h = new Harness();
    h.one(put('k', 'null'));
    expect(h.one(get('k'))).toMatchObject({ found: true, valueJson: 'null', version: 1 });
  });
  it('check asserts a version and writes nothing', () => {
    const h = new Harness();
    expect(h.one(check('k', 0))).toEqual(w(true, null, 'k', 'null', 0));
    h.one(put('k', '1'));
    expect(h.one(check('k', 1))).toEqual(w(true, null, 'k', '1', 1));
    expect(h.one(check('k', 2))).toEqual(w(false, 'version', 'k', '1', 1));
    expect(h.one(check('k', 0))).toEqual(w(false, 'exists', 'k', '1', 1));
    expect(h.one(check('x', 3))).toEqual(w(false, 'absent', 'x', 'null', 0));
  });
});

describe('incr (WIRE.md, "incr")', () => {
  it('exact decimals: 0.1 + 0.2 stores 0.3', () => {
    const h = new Harness();
    h.one(incr('c', '0.1'));
    expect(h.one(incr('c', '0.2'))).toMatchObject({ applied: true, valueJson: '0.3' });
  });
  it.each([
    ['1e2', '1', '101'], ['-0', '0.5', '0.5'], ['2.50', '-2.5', '0'], ['1E-3', '0.001', '0.002'],
    ['9007199254740990', '1', '9007199254740991'], ['12.5e1', '-125', '0'],
  ])('stored %s + %s = %s', (stored, delta, sum) => {
    const h = new Harness();
    h.one(put('c', stored));
    expect(h.one(incr('c', delta))).toMatchObject({ applied: true, valueJson: sum });
  });
  it.each(['abc', '', '-', '01', '1.', '.5', '1e', '1e+', '--1', '1 '])(
    'a delta that is not a JSON number (%j) makes the command invalid', (delta) => {
      const h = new Harness();
      expect(h.entry({ kind: 'call', call: { tenant: 't', readBytesCeiling: 10,
        ops: [incr('c', delta)] }, flags: { requireGrant: false } }))
        .toMatchObject({ kind: 'invalid' });
    });
  it.each(['1e5', '-0.5E-2', '0', '2.50e+1'])('%s is a JSON number delta', (delta) => {
    const h = new Harness();
    expect(h.one(incr('c', delta))).toMatchObject({ applied: true });
  });
  it('|result| > 2^53 - 1 is limit', () => {
    const h = new Harness();
    h.one(put('c', '9007199254740991'));
    expect(h.one(incr('c', '1'))).toEqual(w(false, 'limit', 'c', '9007199254740991', 1));
    expect(h.one(incr('d', '-9007199254740991.5'))).toEqual(w(false, 'limit', 'd', '0', 0));
  });
  it('TTL is create-only: a live counter keeps its expiry', () => {
    const h = new Harness();
    h.one(incr('c', '1', { expiry: ttl(10) }));
    h.now += 5000;
    h.one(incr('c', '1', { expiry: ttl(100) }));
    const r = h.read([getMany('c')])[0]!;
    expect(r).toMatchObject({ rows: [{ valueJson: '2', expiresAtMs: 1_010_000,
      updatedAtMs: 1_005_000 }] });
  });
  it('an expired counter, numeric or not, counts from zero with the new TTL', () => {
    const h = new Harness();
    h.one(put('c', '"text"', { expiry: ttl(1) }));
    h.one(put('n', '41', { expiry: ttl(1) }));
    h.now += 1000;
    expect(h.one(incr('c', '1', { expiry: ttl(5) }))).toMatchObject({ applied: true,
      valueJson: '1' });
    expect(h.one(incr('n', '1', { expiry: ttl(5) }))).toMatchObject({ applied: true,
      valueJson: '1' });
    expect(h.read([getMany('c')])[0]).toMatchObject({ rows: [{ expiresAtMs: 1_006_000 }] });
  });
  it('the rate limiter example: max 1000 admits exactly 1000', () => {
    const h = new Harness();
    let admitted = 0;
    for (let i = 0; i < 1005; i++) {
      const r = h.one(incr('acme:2026-08-17T14', '1', { max: '1000', expiry: ttl(3600) }));
      if (r.kind === 'write' && r.applied) admitted++;
    }
    expect(admitted).toBe(1000);
  });
});

describe('TTL by entry time', () => {
  it('a key is invisible exactly at expiresAt', () => {
    const h = new Harness();
    h.one(put('k', '1', { expiry: ttl(2) }));
    expect(h.read([get('k')], { now: h.now + 1999 })[0]).toMatchObject({ found: true });
    expect(h.read([get('k')], { now: h.now + 2000 })[0]).toMatchObject({ found: false });
  });
  it('put replaces value and expiry', () => {
    const h = new Harness();
    h.one(put('k', '1', { expiry: ttl(2) }));
    h.one(put('k', '2'));
    expect(h.read([get('k')], { now: h.now + 5000 })[0]).toMatchObject({ found: true,
      valueJson: '2', expiresAtMs: null });
  });
  it('a read evaluates expiry at max(now, last entry time)', () => {
    const h = new Harness();
    h.one(put('k', '1', { expiry: ttl(1) }));
    h.now += 1000;
    h.entry({ kind: 'noop' });
    expect(h.read([get('k')], { now: 0 })[0]).toMatchObject({ found: false });
  });
  it('sweep removes up to N expired keys and reports the count', () => {
    const h = new Harness();
    h.ok(['a', 'b', 'c'].map((k) => put(k, '1', { expiry: ttl(1) })));
    h.one(put('keep', '1'));
    h.now += 1000;
    expect(h.entry({ kind: 'sweep', maxKeys: 2 })).toEqual({ kind: 'sweep', removedKeys: 2 });
    expect(h.entry({ kind: 'sweep', maxKeys: 2 })).toEqual({ kind: 'sweep', removedKeys: 1 });
    expect(h.m.liveKeyCount()).toBe(1);
  });
  it('names the next expiry: none for forever rows, the earliest live one otherwise', () => {
    const h = new Harness();
    expect(h.m.nextExpiryMs()).toBeNull();
    h.one(put('keep', '1'));
    expect(h.m.nextExpiryMs()).toBeNull();
    const t0 = h.now;
    h.one(put('a', '1', { expiry: ttl(5) }));
    h.one(put('b', '1', { expiry: ttl(9) }));
    expect(h.m.nextExpiryMs()).toBe(t0 + 5000);
    // Rewritten as forever, `a` leaves a dead heap entry behind; the answer looks past it.
    h.one(put('a', '2'));
    expect(h.m.nextExpiryMs()).toBe(t0 + 9000);
    h.one(del('b'));
    expect(h.m.nextExpiryMs()).toBeNull();
  });
  it('a sweep stamped before the next expiry removes nothing; at it, the row goes', () => {
    const h = new Harness();
    h.one(put('a', '1', { expiry: ttl(3) }));
    const next = h.m.nextExpiryMs()!;
    h.now = next - 1;
    expect(h.entry({ kind: 'sweep', maxKeys: 10 })).toEqual({ kind: 'sweep', removedKeys: 0 });
    h.now = next;
    expect(h.entry({ kind: 'sweep', maxKeys: 10 })).toEqual({ kind: 'sweep', removedKeys: 1 });
    expect(h.m.nextExpiryMs()).toBeNull();
  });
  it('past many dead heap entries, answers a lower bound that one sweep moves forward', () => {
    const h = new Harness();
    for (let i = 0; i < 300; i++) {
      h.one(put('churn', String(i), { expiry: ttl(60) }));
      h.now += 10;
    }
    const live = h.read([get('churn')])[0] as { expiresAtMs: number };
    const bound = h.m.nextExpiryMs()!;
    expect(bound).toBeLessThanOrEqual(live.expiresAtMs);
    h.now = bound;
    expect(h.entry({ kind: 'sweep', maxKeys: 10 })).toEqual({ kind: 'sweep', removedKeys: 0 });
    expect(h.m.nextExpiryMs()!).toBeGreaterThan(bound);
  });
});

describe('the expiry heap under churn', () => {
  it('compacted many times, sweeps in (expiresAt, version) order, as a restored copy does', () => {
    // 60 keys rewritten 140 times with TTLs that cross: 8,400 entries pushed. The heap
    // compacts when it passes twice its 60 live rows plus 4,096, at the 4,217th push and the
    // 8,374th: the sweeps below pop from a heap compacted 26 pushes before.
    const h = new Harness();
    const KEYS = 60;
    for (let round = 0; round < 140; round++) {
      for (let k = 0; k < KEYS; k++) {
        h.one(put(`k${k}`, String(round), { expiry: ttl(1 + ((k * 7 + round * 3) % 40)) }));
      }
      h.now += 3;
    }
    const copy = new Harness();
    restoreFromBytes(copy.m, snapshotToBytes(h.m));
    copy.index = h.index;
    copy.now = h.now;
    const rows = h.read(Array.from({ length: KEYS }, (_, k) => get(`k${k}`))) as Array<
      { key: string; version: number; expiresAtMs: number }>;
    const order = [...rows].sort((a, b) => (a.expiresAtMs - b.expiresAtMs) ||
      (a.version - b.version)).map((r) => r.key);
    let removed = 0;
    for (let step = 0; removed < KEYS && step < 200; step++) {
      // The restored copy's heap holds no dead entries, so its next expiry is exact; the
      // churned one may answer earlier (a lower bound, past dead entries), never later.
      const due = copy.m.nextExpiryMs()!;
      expect(h.m.nextExpiryMs()).toBeLessThanOrEqual(due);
      h.now = due;
      copy.now = due;
      const a = h.entry({ kind: 'sweep', maxKeys: 5 });
      const b = copy.entry({ kind: 'sweep', maxKeys: 5 });
      expect(b).toEqual(a);
      removed += (a as { removedKeys: number }).removedKeys;
      const left = h.read(order.map((k) => get(k))).map((r) => (r as { found: boolean }).found);
      expect(left).toEqual(order.map((_, i) => i >= removed));
    }
    expect(removed).toBe(KEYS);
    expect(h.m.digest()).toBe(copy.m.digest());
  });
  it('churned with sweeps in between, agrees with the reference model through compactions',
    () => {
      // 12,000 entries over 80 keys with TTLs of 1 to 30 s, 5 ms apart, and a sweep every
      // 97th: the heap compacts between sweeps while rows expire throughout. Every sweep must
      // remove what the model removes, and the states agree.
      const h = new Harness();
      const model = new ReferenceModel();
      const random = createUnitRandom(20261202);
      for (let step = 0; step < 12_000; step++) {
        const command: Command = step % 97 === 0
          ? { kind: 'sweep', maxKeys: 1 + Math.floor(random() * 20) }
          : { kind: 'call', flags: { requireGrant: false }, call: { tenant: DEFAULT_TENANT,
            readBytesCeiling: 1 << 20, ops: [put(`k${Math.floor(random() * 80)}`, String(step),
              { expiry: ttl(1 + Math.floor(random() * 30)) })] } };
        h.now += 5;
        const got = h.entry(command);
        const want = model.apply(h.index, h.now, command);
        if (command.kind === 'sweep') expect(got, `step ${step}`).toEqual(want);
      }
      expect(h.m.digest()).toBe(model.digest());
    });
  it('rate-limit counters renewed by incr are swept as the reference model sweeps them', () => {
    // An incr that renews a live TTL counter keeps its expiry and takes no heap entry of its
    // own: the entry of the row it replaced stands for it, and becomes its own at a sweep or
    // a compaction. 12,000 entries, 5 ms apart, over a window of 40 keys that moves on by one
    // key every 100 entries (a key is busy for about 20 s, then left to expire): half an incr
    // with a TTL window of 1 to 30 s (kept while the counter lives), half a put with a new
    // TTL of up to 300 s that pushes an entry and leaves one behind. The heap passes 4,256
    // entries and compacts with entries standing for heirs in it, and every sweep must
    // remove what the model removes.
    const h = new Harness();
    const model = new ReferenceModel();
    const random = createUnitRandom(20261203);
    let swept = 0;
    for (let step = 0; step < 12_000; step++) {
      const key = `k${Math.floor(step / 100) + Math.floor(random() * 40)}`;
      const seconds = 1 + Math.floor(random() * 30);
      const command: Command = step % 97 === 0
        ? { kind: 'sweep', maxKeys: 1 + Math.floor(random() * 20) }
        : { kind: 'call', flags: { requireGrant: false }, call: { tenant: DEFAULT_TENANT,
          readBytesCeiling: 1 << 20, ops: [random() < 0.5
            ? incr(key, '1', { expiry: ttl(seconds) })
            : put(key, String(step), { expiry: ttl(seconds * 10) })] } };
      h.now += 5;
      const got = h.entry(command);
      const want = model.apply(h.index, h.now, command);
      if (command.kind === 'sweep') {
        expect(got, `step ${step}`).toEqual(want);
        swept += (got as { removedKeys: number }).removedKeys;
      }
    }
    expect(swept).toBeGreaterThan(5);
    expect(h.m.digest()).toBe(model.digest());
  });
  it('spread over many chunks while the collector runs, sweeps what it should', () => {
    // The heap holds its rows in chunks of 4,096 (assembly/row-chunks.ts), each store through
    // the collector's write barrier. 3,000 TTL keys rewritten one put per entry keep up to
    // three chunks busy, sifts and compactions moving rows between chunks, while the collector
    // marks over dozens of entries at a time. A row freed while the heap named it would come
    // back as another row, and reading the heap's entry would find a version it never pushed
    // (an assertion that stops the machine), or a sweep would remove a row it should not. The
    // next expiry the machine names must never be later than the earliest row's.
    const h = new Harness();
    const random = createUnitRandom(4096);
    const KEYS = 3_000;
    // key -> [expiresAt, write order]: a sweep removes the expired rows in that order.
    const rows = new Map<string, [number, number]>();
    let swept = 0;
    for (let step = 0; step < 24_000; step++) {
      h.now += 5;
      if (step % 97 === 0) {
        let earliest = Infinity;
        for (const [at] of rows.values()) earliest = Math.min(earliest, at);
        if (rows.size > 0) expect(h.m.nextExpiryMs()!).toBeLessThanOrEqual(earliest);
        const maxKeys = 1 + Math.floor(random() * 40);
        const due = [...rows].filter(([, [at]]) => at <= h.now)
          .sort((a, b) => (a[1][0] - b[1][0]) || (a[1][1] - b[1][1])).slice(0, maxKeys);
        const out = h.entry({ kind: 'sweep', maxKeys }) as { removedKeys: number };
        expect(out.removedKeys, `step ${step}`).toBe(due.length);
        for (const [key] of due) rows.delete(key);
        swept += due.length;
        expect(h.m.liveKeyCount(), `step ${step}`).toBe(rows.size);
      } else {
        const key = `k${Math.floor(random() * KEYS)}`;
        const seconds = 1 + Math.floor(random() * 30);
        h.one(put(key, String(step), { expiry: ttl(seconds) }));
        rows.set(key, [h.now + seconds * 1000, step]);
      }
    }
    expect(swept).toBeGreaterThan(1_000);
    const unexpired = [...rows].filter(([, [at]]) => at > h.now).map(([k]) => k);
    const left = h.read(unexpired.map((k) => get(k)));
    expect(left.filter((r) => !(r as { found: boolean }).found)).toEqual([]);
    expect(h.m.liveKeyCount()).toBe(rows.size);
  });
  it('compacts in slices: pushes wait, and a sweep inside a compaction finishes it first', () => {
    // 9,000 TTL keys written, then rewritten until the heap holds 22,097 entries, past twice
    // its live rows plus 4,096: the entry that passes it starts a compaction, whose first
    // slice reads 16,384 of them. The put after it arrives mid-compaction and must wait
    // beside the heap; the sweep after that must finish the compaction before it pops. Every
    // sweep then removes what a restored copy (whose heap was built from its rows) removes.
    const h = new Harness();
    const random = createUnitRandom(16_384);
    const KEYS = 9_000;
    const expiry = (): ReturnType<typeof ttl> => ttl(1 + Math.floor(random() * 50));
    for (let n = 0; n < 22_097; n++) {
      h.now += 1;
      const key = `k${n < KEYS ? n : Math.floor(random() * KEYS)}`;
      h.one(put(key, String(n), { expiry: expiry() }));
    }
    h.now += 1;
    h.one(put(`k${Math.floor(random() * KEYS)}`, '"mid-compaction"', { expiry: expiry() }));
    const copy = new Harness();
    restoreFromBytes(copy.m, snapshotToBytes(h.m));
    copy.index = h.index;
    expect(copy.m.digest()).toBe(h.m.digest());
    let removed = 0;
    for (let round = 0; round < 200 && removed < KEYS; round++) {
      h.now = copy.now = h.now + 400;
      const a = h.entry({ kind: 'sweep', maxKeys: 97 }) as { removedKeys: number };
      const b = copy.entry({ kind: 'sweep', maxKeys: 97 });
      expect(a, `round ${round}`).toEqual(b);
      expect(h.m.digest(), `round ${round}`).toBe(copy.m.digest());
      removed += a.removedKeys;
    }
    expect(removed).toBe(KEYS);
  });
});

describe('calls (WIRE.md, "Calls with writes")', () => {
  it('reads see the writes of their own call, whatever their position', () => {
    const h = new Harness();
    const [g, p] = h.ok([get('k'), put('k', '"v"')]);
    expect(g).toMatchObject({ kind: 'get', found: true, valueJson: '"v"', version: 1 });
    expect(p).toEqual(w(true, null, 'k', '"v"', 1));
  });
  it('a lost required aborts everything: the spec example', () => {
    const h = new Harness();
    h.one(putIfAbsent('ord_8812', '{"chargeId":"ch_8812"}'));
    const out = h.call([putIfAbsent('ord_8812', '{"x":1}', { required: true }),
      put('other', '1')]);
    expect(out).toEqual({ status: 'precondition', failedIndex: 0, kvReason: 'exists',
      version: 1, valueJson: '{"chargeId":"ch_8812"}' });
    expect(h.one(get('other'))).toMatchObject({ found: false });
  });
  it('the lowest failed index wins, a check below a failed write included', () => {
    const h = new Harness();
    h.one(put('a', '1'));
    const out = h.call([put('z', '1'), check('a', 5, true), del('q', { required: true })]);
    expect(out).toMatchObject({ status: 'precondition', failedIndex: 1, kvReason: 'version',
      version: 1, valueJson: '1' });
    expect(h.read([get('z')])[0]).toMatchObject({ found: false });
  });
  it('versions of an aborted call are never reused', () => {
    const h = new Harness();
    h.call([put('a', '1'), del('nope', { required: true })]);
    expect(h.one(put('b', '1'))).toMatchObject({ version: 2 });
  });
  it('non-required losers do not stop the others', () => {
    const h = new Harness();
    const r = h.ok([put('a', '1', { expect: 3 }), put('b', '2')]);
    expect(r.map((x) => x.kind === 'write' && x.applied)).toEqual([false, true]);
  });
});

describe('reads', () => {
  it('getMany: rows in key byte order, missing in request order', () => {
    const h = new Harness();
    h.ok([put('b', '1'), put('é', '2'), put('a', '3')]);
    const [r] = h.read([getMany('zz', 'é', 'b', 'y', 'a')]);
    expect(r).toMatchObject({ rows: [{ key: 'a' }, { key: 'b' }, { key: 'é' }],
      missing: ['zz', 'y'], truncated: false });
  });
  it('getPrefix pages (after, limit, nextAfter); a key equal to the prefix is under it', () => {
    const h = new Harness();
    h.ok(['ord', 'ord/1', 'ord/2', 'ord/3', 'orc', 'ore'].map((k) => put(k, '0')));
    const [p1] = h.read([getPrefix('ord', { limit: 2 })]);
    expect(p1).toMatchObject({ rows: [{ key: 'ord' }, { key: 'ord/1' }], truncated: true,
      nextAfter: 'ord/1' });
    const [p2] = h.read([getPrefix('ord', { limit: 2, after: 'ord/1' })]);
    expect(p2).toMatchObject({ rows: [{ key: 'ord/2' }, { key: 'ord/3' }], truncated: false,
      nextAfter: null });
    const [k] = h.read([getPrefix('ord/', { keysOnly: true })]);
    expect(k).toMatchObject({ rows: [{ key: 'ord/1', valueJson: null }, { key: 'ord/2' },
      { key: 'ord/3' }] });
  });
  it('the byte ceiling keeps the crossing row, then stops with truncated', () => {
    const h = new Harness();
    h.ok(['ka', 'kb', 'kc', 'kd'].map((k) => put(k, '"xxxx"')));
    const [m] = h.read([getMany('kb', 'ka', 'zz')], { ceiling: 1 });
    expect(m).toEqual({ kind: 'getMany', rows: [expect.objectContaining({ key: 'ka' })],
      missing: [], truncated: true });
    const [p, n, g] = h.read([getPrefix('k'), getMany('kc'), get('kd')], { ceiling: 7 });
    expect(p).toMatchObject({ rows: [{ key: 'ka' }, { key: 'kb' }], truncated: true,
      nextAfter: 'kb' });
    expect(n).toEqual({ kind: 'getMany', rows: [], missing: [], truncated: true });
    expect(g).toMatchObject({ found: true });
    const [all] = h.read([getPrefix('k')], { ceiling: 24 });
    expect(all).toMatchObject({ truncated: false, nextAfter: null });
  });
  it('tenants never see each other', () => {
    const h = new Harness();
    h.ok([put('k', '1')], { tenant: 't1' });
    expect(h.read([get('k')], { tenant: 't2' })[0]).toMatchObject({ found: false });
    expect(h.read([getPrefix('k')], { tenant: 't2' })[0]).toMatchObject({ rows: [] });
    // The machine remembers the last call's tenant by its bytes: tenants of one length that
    // differ in one byte, early or late, must never pass for each other.
    const uuids = ['00000000-0000-0000-0000-000000000001', '00000000-0000-0000-0000-000000000002',
      '10000000-0000-0000-0000-000000000001'];
    for (const [i, tenant] of uuids.entries()) h.ok([put('u', String(i))], { tenant });
    for (const [i, tenant] of [...uuids.entries(), ...uuids.entries()]) {
      expect(h.read([get('u')], { tenant })[0]).toMatchObject({ valueJson: String(i) });
    }
  });
});

describe('versions, pause, grant, quota', () => {
  it('versions: one counter, strictly increasing across delete and re-create and restore', () => {
    const h = new Harness();
    h.one(put('k', '1'));
    h.one(del('k'));
    expect(h.one(put('k', '1'))).toMatchObject({ version: 2 });
    const h2 = new Harness();
    restoreFromBytes(h2.m, snapshotToBytes(h.m));
    h2.index = h.index;
    expect(h2.one(put('j', '1'))).toMatchObject({ version: 3 });
  });
  it('paused refuses calls and reads; resume lets them through', () => {
    const h = new Harness();
    h.entry({ kind: 'setPaused', paused: true });
    expect(h.m.isPaused()).toBe(true);
    expect(h.call([put('k', '1')])).toEqual({ status: 'paused' });
    h.entry({ kind: 'setPaused', paused: false });
    expect(h.call([put('k', '1')]).status).toBe('ok');
  });
  it('grant: a write needs an enabled quota row when grants are required', () => {
    const h = new Harness();
    expect(h.call([put('k', '1')], { requireGrant: true })).toEqual({ status: 'notGranted' });
    h.entry({ kind: 'setQuota', tenant: 't', quota: quotaOf({ enabled: false }) });
    expect(h.call([put('k', '1')], { tenant: 't', requireGrant: true }).status)
      .toBe('notGranted');
    h.entry({ kind: 'setQuota', tenant: 't', quota: quotaOf({ maxRows: 5 }) });
    expect(h.call([put('k', '1')], { tenant: 't', requireGrant: true }).status).toBe('ok');
    expect(h.m.quota('t')).toEqual(quotaOf({ maxRows: 5 }));
    expect(h.m.quota('nobody')).toBeNull();
  });
  it('quota: a call that grows past maxRows is refused whole; deletes always pass', () => {
    const h = new Harness();
    h.entry({ kind: 'setQuota', tenant: 't', quota: quotaOf({ maxRows: 2 }) });
    h.ok([put('a', '1'), put('b', '1')], { tenant: 't' });
    expect(h.call([put('c', '1'), put('a', '2')], { tenant: 't' }))
      .toEqual({ status: 'quotaExceeded' });
    expect(h.read([get('a')], { tenant: 't' })[0]).toMatchObject({ valueJson: '1' });
    h.entry({ kind: 'setQuota', tenant: 't', quota: quotaOf({ maxRows: 1 }) });
    expect(h.call([del('a')], { tenant: 't' }).status).toBe('ok');
    expect(h.m.usage('t')).toEqual({ rows: 1, bytes: 2 });
  });
  it('quota bytes count key UTF-8 bytes plus value JSON bytes', () => {
    const h = new Harness();
    h.ok([put('é', '"日"')], { tenant: 't' });
    expect(h.m.usage('t')).toEqual({ rows: 1, bytes: 2 + 5 });
    expect(h.m.tenantsUsage(10)).toEqual([{ tenant: 't', rows: 1, bytes: 7 }]);
  });
});

describe('the wrapper', () => {
  it('appliedIndex advances; an index not after it is refused', () => {
    const h = new Harness();
    h.entry({ kind: 'noop' });
    expect(h.m.appliedIndex).toBe(1);
    expect(() => h.m.apply(1, h.now, new Uint8Array([5]))).toThrow(/not after/);
  });
  it('a malformed command is invalid and still advances appliedIndex', () => {
    const h = new Harness();
    expect(h.m.apply(1, 5, new Uint8Array([1, 0, 1]))).toMatchObject({ kind: 'invalid' });
    expect(h.m.appliedIndex).toBe(1);
  });
  it('restore refuses a header integer beyond 2^53 - 1 (a fuzz find)', () => {
    const h = new Harness();
    h.one(put('k', '1'));
    const snap = snapshotToBytes(h.m);
    snap[14] = 0x40; // appliedIndex, bytes 8..15: now about 2^54
    expect(() => restoreFromBytes(StateMachine.create(), snap)).toThrow(/invalid snapshot/);
  });
  it('restore refuses bytes that are not a snapshot and keeps the state', () => {
    const h = new Harness();
    h.one(put('k', '1'));
    const d = h.m.digest();
    expect(() => restoreFromBytes(h.m, new Uint8Array([1, 2, 3]))).toThrow(/invalid snapshot/);
    expect(h.m.digest()).toBe(d);
  });
});
