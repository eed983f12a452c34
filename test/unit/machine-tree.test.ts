/**
 * The ordered store at scale: thousands of keys inserted, overwritten and deleted in random
 * order (so B+tree leaves and inner nodes split many times), with prefix pages compared to
 * a sorted list and point reads to a Map; then the same after snapshot -> restore (bulk
 * build). Prints its seed; replay with SEED=<n>.
 */
import { describe, expect, it } from 'vitest';
import { Harness, put, del, getPrefix, getMany, FOREVER } from '../model/machine-harness.js';
import { byteCompare } from '../model/reference-model.js';
import type { OpResult } from '../../host/machine/commands.js';
import { createUnitRandom } from '../../host/core/prng.js';
import { restoreFromBytes, snapshotToBytes } from '../../host/machine/snapshot-bytes.js';

const SEED = process.env.SEED !== undefined ? Number(process.env.SEED) : Date.now() % 2 ** 31;
const KEYS = 12_000;
const BATCH = 200;


const ALPHABET = ['a', 'b', 'é', '日', '/', 'z', '0', '\u{1F600}'];

function walk(h: Harness, prefix: string, limit: number): string[] {
  const keys: string[] = [];
  let after = '';
  for (let page = 0; page < KEYS; page++) {
    const [r] = h.read([getPrefix(prefix, { after, limit, keysOnly: page % 2 === 0 })]);
    if (r?.kind !== 'getPrefix') throw new Error('not a page');
    keys.push(...r.rows.map((x) => x.key));
    if (!r.truncated) return keys;
    after = r.nextAfter!;
  }
  throw new Error('walk did not end');
}

function check(h: Harness, model: Map<string, string>): void {
  // The key index beside the tree names only the tree's rows under their own keys (it traps
  // otherwise), with the leaf each is in; it may leave out a key whose probe run would be
  // too long, a handful in ten thousand at its load.
  const index = h.m.keyIndexCheck();
  expect(index.indexed + index.notIndexed).toBe(index.rows);
  expect(index.notIndexed).toBeLessThanOrEqual(Math.ceil(index.rows / 200));
  expect(index.staleLeaves).toBe(0);
  const sorted = [...model.keys()].sort(byteCompare);
  expect(walk(h, 'k', 997)).toEqual(sorted);
  for (const p of ['ka', 'k日', 'kz/']) {
    expect(walk(h, p, 37)).toEqual(sorted.filter((k) => k.startsWith(p)));
  }
  const probe = sorted.filter((_, i) => i % 97 === 0).concat(['kmissing']);
  const [r] = h.read([getMany(...probe)]) as [OpResult];
  if (r.kind !== 'getMany') throw new Error('not getMany');
  expect(r.rows.map((x) => [x.key, x.valueJson])).toEqual(
    probe.filter((k) => model.has(k)).sort(byteCompare).map((k) => [k, model.get(k)]));
}

describe('ordered store at scale', () => {
  it(`random inserts, overwrites and deletes keep order (seed ${SEED})`, () => {
    console.log(`machine-tree seed: ${SEED} (replay with SEED=${SEED})`);
    const rand = createUnitRandom(SEED);
    const h = new Harness();
    const model = new Map<string, string>();
    const names: string[] = [];
    for (let i = 0; i < KEYS; i++) {
      let k = 'k';
      const len = 1 + Math.floor(rand() * 6);
      for (let j = 0; j < len; j++) k += ALPHABET[Math.floor(rand() * ALPHABET.length)];
      names.push(k + i.toString(36));
    }
    for (let round = 0; round < 3; round++) {
      for (let i = 0; i < KEYS; i += BATCH) {
        const ops = [];
        const used = new Set<string>();
        for (let j = 0; j < BATCH; j++) {
          const k = names[Math.floor(rand() * names.length)]!;
          if (used.has(k)) continue;
          used.add(k);
          if (round > 0 && rand() < 0.3) {
            ops.push(del(k));
            model.delete(k);
          } else {
            const v = JSON.stringify(`r${round}j${j}`);
            ops.push(put(k, v, { expiry: FOREVER }));
            model.set(k, v);
          }
        }
        h.ok(ops);
      }
      check(h, model);
    }
    // Other namespaces and tenants sort before and after this one in the same tree: their
    // inserts break the prefixes the outer nodes shared.
    const others: Array<{ ns: string; tenant: string }> = [{ ns: 'aa', tenant: 't0' },
      { ns: 'zz', tenant: 't0' }, { ns: 'orders', tenant: 'zz-tenant' }];
    for (const o of others) {
      for (let i = 0; i < 3000; i += BATCH) {
        h.ok(names.slice(i, i + BATCH).map((k) => ({ ...put(k, '7'), ns: o.ns })),
          { tenant: o.tenant === 't0' ? undefined : o.tenant });
      }
    }
    check(h, model);
    const [aa] = h.read([{ ...getPrefix('k', { limit: 1000 }), ns: 'aa' }]);
    expect(aa).toMatchObject({ truncated: true });
    const [zt] = h.read([getMany(names[5]!)], { tenant: 'zz-tenant' });
    expect(zt).toMatchObject({ rows: [{ valueJson: '7' }] });
    const restored = new Harness();
    restoreFromBytes(restored.m, snapshotToBytes(h.m));
    expect(restored.m.digest()).toBe(h.m.digest());
    check(restored, model);
    restored.index = restored.m.appliedIndex;
    restored.ok([put('k!', '1'), put('k\u{1F600}\u{1F600}', '2')]);
    model.set('k!', '1');
    model.set('k\u{1F600}\u{1F600}', '2');
    check(restored, model);
  });

  it('keys arriving in order fill their nodes, and keep order through later changes', () => {
    const h = new Harness();
    const model = new Map<string, string>();
    const ascending = Array.from({ length: KEYS }, (_, i) => `k${String(i).padStart(6, '0')}`);
    for (let i = 0; i < KEYS; i += BATCH) {
      h.ok(ascending.slice(i, i + BATCH).map((k) => put(k, '1', { expiry: FOREVER })));
      for (const k of ascending.slice(i, i + BATCH)) model.set(k, '1');
    }
    check(h, model);
    // An ordered load builds what a restore builds: full nodes but the last of each level.
    const restored = new Harness();
    restoreFromBytes(restored.m, snapshotToBytes(h.m));
    expect(h.m.structureBytes()).toBeLessThanOrEqual(restored.m.structureBytes() * 1.01);
    // Keys below and between the ordered ones, then deletes: every split kind again.
    const rand = createUnitRandom(SEED);
    for (let i = 0; i < KEYS; i += BATCH) {
      const ops = [];
      for (let j = 0; j < BATCH; j++) {
        const k = rand() < 0.5 ? `k!${String(i + j).padStart(6, '0')}`
          : `k${String(Math.floor(rand() * KEYS)).padStart(6, '0')}x`;
        if (model.has(k)) continue;
        ops.push(put(k, '2', { expiry: FOREVER }));
        model.set(k, '2');
      }
      h.ok(ops);
    }
    h.ok(ascending.filter((_, i) => i % 3 === 0).slice(0, BATCH).map((k) => del(k)));
    for (const k of ascending.filter((_, i) => i % 3 === 0).slice(0, BATCH)) model.delete(k);
    check(h, model);
  });

  it('the key index doubles in slices, and finds every key while it zeroes and drains', () => {
    // 30,000 keys in entries of 50: the index doubles at 768, 1,536, ... 24,576 keys. The
    // last doublings take several entries (the next table is zeroed 256 KiB per entry, the
    // old one drained 4,096 slots per entry and 8 per insert), so the checks between entries
    // see both phases, with overwrites and deletes of keys in either table among the inserts.
    const h = new Harness();
    const model = new Map<string, string>();
    const rand = createUnitRandom(SEED + 2);
    const phases = new Set<number>();
    let checks = 0;
    for (let i = 0; i < 30_000; i += 50) {
      const ops = [];
      const used = new Set<string>();
      for (let j = 0; j < 50; j++) {
        const k = `k${((i + j) * 7919 % 30_000).toString(36)}`;
        used.add(k);
        ops.push(put(k, '1', { expiry: FOREVER }));
        model.set(k, '1');
      }
      // Earlier keys, rewritten or deleted: some still in the old table, some moved.
      for (let j = 0; j < 10 && i > 0; j++) {
        const k = `k${(Math.floor(rand() * i) * 7919 % 30_000).toString(36)}`;
        if (used.has(k)) continue;
        used.add(k);
        if (rand() < 0.5 && model.has(k)) {
          ops.push(del(k));
          model.delete(k);
        } else {
          ops.push(put(k, JSON.stringify(`v${i}`), { expiry: FOREVER }));
          model.set(k, JSON.stringify(`v${i}`));
        }
      }
      h.ok(ops);
      const phase = h.m.keyIndexCheck().growPhase;
      if (phase !== 0 || i % 6_000 === 0) {
        phases.add(phase);
        check(h, model);
        checks++;
      }
    }
    expect([...phases].sort()).toEqual([0, 1, 2]);
    expect(checks).toBeGreaterThan(16);
    check(h, model);
  });

  it('the key index follows rows that splits move, through writes, deletes and a restore', () => {
    const h = new Harness();
    const model = new Map<string, string>();
    const rand = createUnitRandom(SEED + 1);
    const keys = Array.from({ length: KEYS }, (_, i) => `k${(i * 7919 % KEYS).toString(36)}`);
    for (let i = 0; i < KEYS; i += BATCH) {
      h.ok(keys.slice(i, i + BATCH).map((k) => put(k, '1', { expiry: FOREVER })));
      for (const k of keys.slice(i, i + BATCH)) model.set(k, '1');
    }
    // Keys inserted in scattered order split leaves that already held indexed rows: each
    // split records the new leaf of the rows it moved (check: no stale leaf).
    check(h, model);
    // Overwrites and deletes through the index.
    for (let i = 0; i < KEYS; i += BATCH) {
      const ops = keys.slice(i, i + BATCH).map((k) => {
        if (rand() < 0.2) {
          model.delete(k);
          return del(k);
        }
        const v = JSON.stringify(`v${i}`);
        model.set(k, v);
        return put(k, v, { expiry: FOREVER });
      });
      h.ok(ops);
    }
    expect(h.m.keyIndexCheck().rows).toBe(model.size);
    check(h, model);
    // A restore builds a new index from the rows.
    const restored = new Harness();
    restoreFromBytes(restored.m, snapshotToBytes(h.m));
    expect(restored.m.keyIndexCheck().rows).toBe(model.size);
    check(restored, model);
    // And keeps it as the restored state changes.
    restored.index = restored.m.appliedIndex;
    restored.ok(keys.slice(0, BATCH).map((k) => del(k)));
    for (const k of keys.slice(0, BATCH)) model.delete(k);
    check(restored, model);
  });
});
