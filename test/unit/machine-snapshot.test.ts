/**
 * The machine's byte total, its snapshots in slices and its restores in chunks, claim by
 * claim (docs/codec.md, "Snapshot"; assembly/snapshot-out.ts, snapshot-in.ts).
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { StateMachine } from '../../host/machine/state-machine.js';
import { restoreFromBytes, snapshotToBytes } from '../../host/machine/snapshot-bytes.js';
import { FORMAT_VERSION, FORMAT_VERSION_NO_DEDUP } from '../../host/machine/abi.js';
import {
  Harness, NS, del, get, getPrefix, put, quotaOf, ttl,
} from '../model/machine-harness.js';
import { rowCapacity } from '../model/reference-model.js';

const ROW_HEADER = 32;
const ROW_OVERHEAD = 64;
/** What a row of the default namespace costs: its buffer's capacity and the overhead. */
const footprint = (key: string, valueJson: string): number => rowCapacity(ROW_HEADER + 4 +
  Buffer.byteLength(NS) + 1 + Buffer.byteLength(key) + Buffer.byteLength(valueJson)) +
  ROW_OVERHEAD;
const tenantFootprint = (name: string): number => 192 + 3 * Buffer.byteLength(name);
const DEFAULT = '00000000-0000-0000-0000-000000000001';

/**
 * The digest of the v1 fixture's state (docs/codec.md, "Digest": a row's key and value
 * hashed a word at a time with the tail as one more word, its integers one word each; the
 * byte-wise digest was c5074def9be418cf, the word-wise one with byte tails 2a44fa82282bc330).
 */
const V1_FIXTURE_DIGEST = '6ce2d53c08079bc3';
const v1Fixture = (): Uint8Array => new Uint8Array(readFileSync(
  new URL('../fixtures/machine-snapshot-v1.bin', import.meta.url)));

function loaded(keys: number): Harness {
  const h = new Harness();
  for (let i = 0; i < keys; i += 50) {
    const ops = [];
    for (let j = i; j < Math.min(keys, i + 50); j++) {
      ops.push(put(`key-${j}`, `"${'v'.repeat(j % 90)}"`));
    }
    h.ok(ops);
  }
  return h;
}

describe('the state byte total', () => {
  it('counts rowFootprint of every row plus the tenant table, in O(1)', () => {
    const h = new Harness();
    expect(h.m.memoryUse()).toMatchObject({ stateBytes: 0, preimageBytes: 0 });
    h.one(put('k', '1'));
    expect(h.m.memoryUse().stateBytes).toBe(footprint('k', '1') + tenantFootprint(DEFAULT));
    h.one(put('k', '"longer"'));
    expect(h.m.memoryUse().stateBytes).toBe(footprint('k', '"longer"') + tenantFootprint(DEFAULT));
    h.one(del('k'));
    expect(h.m.memoryUse().stateBytes).toBe(tenantFootprint(DEFAULT));
    h.entry({ kind: 'setQuota', tenant: 'other', quota: quotaOf({}) });
    expect(h.m.memoryUse().stateBytes).toBe(tenantFootprint(DEFAULT) + tenantFootprint('other'));
  });
  it('an undone call leaves the total as it was', () => {
    const h = new Harness();
    h.one(put('a', '1'));
    const before = h.m.memoryUse().stateBytes;
    expect(h.call([put('a', '"xxxxxxxx"'), put('b', '2'), { ...get('zz'), op: 'check',
      expect: 5, required: true } as never]).status).toBe('precondition');
    expect(h.m.memoryUse().stateBytes).toBe(before);
  });
  it('restore recomputes it; clearState empties the state to index 0', () => {
    const h = loaded(300);
    const restored = new Harness();
    restoreFromBytes(restored.m, snapshotToBytes(h.m));
    expect(restored.m.memoryUse().stateBytes).toBe(h.m.memoryUse().stateBytes);
    restored.m.clearState();
    expect(restored.m.memoryUse().stateBytes).toBe(0);
    expect(restored.m.appliedIndex).toBe(0);
    expect(restored.m.liveKeyCount()).toBe(0);
  });
});

describe('row garbage', () => {
  it('is counted reclaimed once a cycle of the collector ends, with no full collection', () => {
    // A million keys overwritten in entries of 256 once reached the collection line every
    // 3 GiB of rows retired, and each full collection paused the machine 140 to 160 ms,
    // though the collector's cycles had long freed those rows (assembly/memory-use.ts).
    const keys = 2_000;
    const value = `"${'x'.repeat(400)}"`;
    const h = new Harness();
    let retired = 0;
    for (let round = 0; round < 40; round++) {
      for (let i = 0; i < keys; i += 50) {
        const ops = [];
        for (let j = i; j < i + 50; j++) ops.push(put(`key-${j}`, value));
        h.ok(ops);
        if (round > 0) {
          for (let j = i; j < i + 50; j++) retired += footprint(`key-${j}`, value);
        }
      }
    }
    const use = h.m.memoryUse();
    expect(retired).toBeGreaterThan(35 * 1024 * 1024);
    expect(use.fullCollections).toBe(0);
    // Not yet reclaimed: at most the rows retired since the last cycle began, a few MiB.
    expect(use.retiredBytes).toBeGreaterThanOrEqual(0);
    expect(use.retiredBytes).toBeLessThan(retired / 4);
  });
});

describe('dead rows the expiry heap keeps alive', () => {
  it('are counted as they leave, and no longer once a compaction has dropped them', () => {
    // 10M TTL keys overwritten kept up to 10M dead rows alive through their heap entries,
    // 2.2 GB beside the state, and the machine ran out of memory (assembly/state.ts).
    const h = new Harness();
    const v = '"0123456789"';
    const rowCost = footprint('t-0', v);
    h.ok(Array.from({ length: 40 }, (_, i) => put(`t-${i % 10}`, v, { expiry: ttl(60) })));
    // 10 live rows; the 30 rows they replaced each keep an entry of their own.
    expect(h.m.memoryUse().heapDeadBytes).toBe(30 * rowCost);
    // Forever rows have no entry; a row that replaces one leaves nothing behind either.
    h.one(put('f', v));
    h.one(put('f', v));
    expect(h.m.memoryUse().heapDeadBytes).toBe(30 * rowCost);
    // A delete leaves its row's entry behind.
    h.one(del('t-9'));
    expect(h.m.memoryUse().heapDeadBytes).toBe(31 * rowCost);
    // A row a sweep removes had its entry taken first.
    h.one(put('soon', v, { expiry: ttl(1) }));
    h.now += 1000;
    expect(h.entry({ kind: 'sweep', maxKeys: 10 })).toEqual({ kind: 'sweep', removedKeys: 1 });
    expect(h.m.memoryUse().heapDeadBytes).toBe(31 * rowCost);
    // Dead entries past twice the TTL rows (and a slack of 4,096) start a compaction, which
    // runs in slices after entries; when it ends, what it began with is taken off.
    for (let round = 0; round < 90; round++) {
      h.ok(Array.from({ length: 50 }, (_, i) => put(`t-${i % 9}`, v, { expiry: ttl(60) })));
    }
    for (let i = 0; i < 8; i++) h.entry({ kind: 'noop' });
    const left = h.m.memoryUse().heapDeadBytes;
    // 4,531 counted; the rows replaced after the compaction began (400 here) stay counted.
    expect(left % rowCost).toBe(0);
    expect(left).toBeGreaterThan(0);
    expect(left).toBeLessThan(1000 * rowCost);
  });

  it('start a compaction once their bytes pass 256 MiB, whatever their count', () => {
    // Large rows: 300 dead entries are far under the count's rule (twice the TTL rows plus
    // 4,096), but 300 rows of 1 MB held alive would be 300 MB beside the state.
    const h = new Harness();
    const v = `"${'x'.repeat(999_990)}"`;
    const rowCost = footprint('big', v);
    const line = 256 * 1024 * 1024;
    let before = 0;
    let fell = 0;
    for (let i = 0; i < 300; i++) {
      h.one(put('big', v, { expiry: ttl(60) }));
      const dead = h.m.memoryUse().heapDeadBytes;
      // Checked after each entry: the line is passed by at most the row that crossed it.
      expect(dead).toBeLessThanOrEqual(line + rowCost);
      if (dead < before) fell++;
      before = dead;
    }
    // Past the line after 268 rows; a heap of that size compacts by the next entry's end.
    expect(fell).toBe(1);
    expect(before).toBeLessThan(40 * rowCost);
    expect(h.read([get('big')])[0]).toMatchObject({ valueJson: v });
  });
});

describe('a restored tree', () => {
  it('orders new keys in a leaf its deletes emptied, as a tree never restored does', () => {
    // A restored leaf of one key takes the whole key as its shared prefix; once a delete
    // empties it, a shorter key and a longer one must still land in order. They once did
    // not: the longer key was compared past the end of the shorter one's (with its value's
    // first byte, 'n' of null, which sorts after 'k'), and the two keys became three rows.
    const live = new Harness();
    live.one(put('kk', '1'));
    const restored = new Harness();
    restoreFromBytes(restored.m, snapshotToBytes(live.m));
    restored.index = live.index;
    for (const h of [live, restored]) {
      h.one(del('kk'));
      h.one(put('k', 'null'));
      h.one(put('kk', '3'));
      h.one(put('k', '4'));
      h.one(put('kkk', '5'));
      h.one(put('j', '6'));
    }
    expect(restored.m.liveKeyCount()).toBe(4);
    expect(restored.m.digest()).toBe(live.m.digest());
    expect(restored.m.recountDigest()).toBe(live.m.digest());
    const page = restored.ok([getPrefix('k')])[0]!;
    expect(page.kind === 'getPrefix' ? page.rows.map((r) => [r.key, r.valueJson]) : page)
      .toEqual([['k', '4'], ['kk', '3'], ['kkk', '5']]);
  });
});

describe('snapshots in slices', () => {
  it('keep the rows a write replaces after begin, and only while needed', () => {
    const h = loaded(200);
    const total = h.m.snapshotBegin();
    const first = h.m.snapshotNext(1);
    expect(first.length).toBeGreaterThan(0);
    // key-0 .. (sorted first) are written; an overwrite of the last key keeps its preimage.
    h.one(put('key-99', '"new"'));
    expect(h.m.memoryUse().preimageBytes).toBe(footprint('key-99', `"${'v'.repeat(9)}"`));
    // A key written after begin has no preimage, and a second overwrite keeps the first one.
    h.one(put('new-key', '1'));
    h.one(put('key-99', '"newer"'));
    expect(h.m.memoryUse().preimageBytes).toBe(footprint('key-99', `"${'v'.repeat(9)}"`));
    const rest: Uint8Array[] = [first];
    for (let s = h.m.snapshotNext(4096); s.length > 0; s = h.m.snapshotNext(4096)) rest.push(s);
    expect(Buffer.concat(rest).length).toBe(total);
    expect(h.m.memoryUse().preimageBytes).toBe(0);
    expect(h.m.snapshotNext(4096).length).toBe(0);
  });
  it('a key the cursor has passed keeps no preimage', () => {
    const h = loaded(3);
    h.m.snapshotBegin();
    h.m.snapshotNext(10_000); // everything
    h.m.snapshotBegin();
    expect(h.m.snapshotNext(1).length).toBeGreaterThan(0); // the head alone
    expect(h.m.snapshotNext(1).length).toBeGreaterThan(0); // key-0, the first row
    h.one(put('key-0', '"x"'));
    expect(h.m.memoryUse().preimageBytes).toBe(0);
    h.m.snapshotAbort();
  });
  it('abort drops the preimages; a new snapshot can begin', () => {
    const h = loaded(50);
    h.m.snapshotBegin();
    h.one(del('key-7'));
    expect(h.m.memoryUse().preimageBytes).toBeGreaterThan(0);
    h.m.snapshotAbort();
    expect(h.m.memoryUse().preimageBytes).toBe(0);
    const again = snapshotToBytes(h.m);
    const r = new Harness();
    restoreFromBytes(r.m, again, 7);
    expect(r.m.digest()).toBe(h.m.digest());
  });
  it('opening a second snapshot while one is open is a bug: the machine traps', () => {
    const h = loaded(2);
    h.m.snapshotBegin();
    expect(() => h.m.snapshotBegin()).toThrow(/machine aborted/);
  });
  it('write format version 3 with empty dedup and idempotency sections', () => {
    const bytes = snapshotToBytes(loaded(1).m);
    expect(new DataView(bytes.buffer).getUint32(4, true)).toBe(FORMAT_VERSION);
    expect(FORMAT_VERSION).toBe(3);
  });
});

describe('restore in chunks', () => {
  it('restores a version 1 snapshot (before the dedup section) to the same state', () => {
    const v1 = v1Fixture();
    expect(new DataView(v1.buffer).getUint32(4, true)).toBe(FORMAT_VERSION_NO_DEDUP);
    for (const chunk of [1, 3, 64, 1 << 20]) {
      const h = new Harness();
      restoreFromBytes(h.m, v1, chunk);
      expect(h.m.digest()).toBe(V1_FIXTURE_DIGEST);
      expect(h.m.appliedIndex).toBe(5);
      expect(h.m.quota('tenant-2')).toEqual(quotaOf({ maxRows: 100, maxReadsPerSec: 50 }));
      expect(h.read([{ ...get('a'), ns: 'orders' }], { tenant: 'default' })[0])
        .toMatchObject({ valueJson: '{"n":2}' });
      const recount = h.m.recountStateBytes();
      expect(h.m.memoryUse().stateBytes).toBe(recount.rowBytes + recount.tenantBytes);
    }
    // Written again, it is the same bytes with version 3 and the dedup and idempotency
    // sections, each its length and an empty table (count 0).
    const h = new Harness();
    restoreFromBytes(h.m, v1);
    const v2 = snapshotToBytes(h.m);
    expect(v2.length).toBe(v1.length + 8 + 8);
    const r = new Harness();
    restoreFromBytes(r.m, v2, 5);
    expect(r.m.digest()).toBe(V1_FIXTURE_DIGEST);
  });
  it('refuses every truncation and any trailing byte, leaving the state untouched', () => {
    const bytes = snapshotToBytes(loaded(20).m);
    const h = loaded(3);
    const digest = h.m.digest();
    for (let cut = 0; cut < bytes.length; cut += 7) {
      expect(() => restoreFromBytes(h.m, bytes.subarray(0, cut), 5)).toThrow(/invalid snapshot/);
      expect(h.m.digest()).toBe(digest);
    }
    const longer = Buffer.concat([bytes, Buffer.from([0])]);
    expect(() => restoreFromBytes(h.m, longer, 1000)).toThrow(/trailing bytes/);
    expect(h.m.digest()).toBe(digest);
    expect(h.m.appliedIndex).toBe(1);
  });
  it('refuses a row marked dead', () => {
    const h = loaded(2);
    const bytes = snapshotToBytes(h.m);
    const rowAt = bytes.length - (4 + 32 + 4 + NS.length + 1 + 'key-1'.length + 3);
    const dead = bytes.slice();
    dead[rowAt + 4 + 28] = 1;
    expect(() => restoreFromBytes(new Harness().m, dead)).toThrow(/bad row/);
  });
  it('a restore can be abandoned; a chunk without a restore is refused', () => {
    const h = loaded(5);
    const digest = h.m.digest();
    h.m.restoreBegin();
    h.m.restoreChunk(snapshotToBytes(loaded(9).m).subarray(0, 100));
    h.m.restoreAbort();
    expect(h.m.digest()).toBe(digest);
    expect(() => h.m.restoreChunk(new Uint8Array(3))).toThrow(/no restore under way/);
    expect(() => h.m.restoreEnd()).toThrow(/no restore under way/);
  });
  it('a restore swaps in over an open snapshot, which it drops', () => {
    const h = loaded(10);
    const other = snapshotToBytes(loaded(4).m);
    h.m.snapshotBegin();
    h.one(put('key-5', '1'));
    restoreFromBytes(h.m, other);
    expect(h.m.memoryUse().preimageBytes).toBe(0);
    expect(h.m.snapshotNext(100).length).toBe(0);
  });
});

describe('memory under churn', () => {
  // The failure this guards against shows at gigabytes (bench/machine-memory.ts); here, a
  // sanity bound: the state stays the same size and memory does not grow with the garbage.
  it('overwriting large rows here and there reuses their memory', () => {
    const h = new Harness();
    const big = (n: number): string => `"${'x'.repeat(59_990)}${String(n).padStart(8, '0')}"`;
    const keys = Array.from({ length: 640 }, (_, i) => `big-${String(i).padStart(4, '0')}`);
    for (let i = 0; i < keys.length; i += 16) {
      h.ok(keys.slice(i, i + 16).map((k, j) => put(k, big(i + j))));
    }
    const live = h.m.memoryUse().stateBytes;
    // 8,000 overwrites of keys spread over the state: 480 MB of rows replaced, 12 times the
    // state, each freed block between live ones.
    let x = 12345;
    for (let n = 0; n < 8000; n += 4) {
      const ops = [];
      for (let j = 0; j < 4; j++) {
        x = (x * 1103515245 + 12345) % 2147483648;
        ops.push(put(keys[x % keys.length]!, big(n + j)));
      }
      h.ok([...new Map(ops.map((o) => [o.op === 'put' ? o.key : '', o])).values()]);
    }
    expect(h.m.memoryUse().stateBytes).toBe(live);
    expect(h.m.memoryBytes()).toBeLessThanOrEqual(4 * live);
  });
});
