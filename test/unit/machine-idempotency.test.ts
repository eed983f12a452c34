/**
 * The machine's idempotency table (assembly/idempotency.ts, docs/codec.md "Idempotency
 * records"), claim by claim: a keyed call is recorded in its own entry; a retry with the same
 * key and request answers the record (flagged replayed) and applies nothing; another request
 * under the key is 422; records expire and are swept; bounds evict the oldest; records are
 * the same on every replica, and travel in snapshots.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { StateMachine, type AppliedEntrySink } from '../../host/machine/state-machine.js';
import { encodeCommand } from '../../host/machine/codec.js';
import { decodeCommand } from '../../host/machine/command-decode.js';
import { restoreFromBytes, snapshotToBytes } from '../../host/machine/snapshot-bytes.js';
import {
  FORMAT_VERSION, FORMAT_VERSION_NO_IDEMPOTENCY, IDEMPOTENCY_BYTES_MAX,
  IDEMPOTENCY_BYTES_PER_TENANT_MAX, IDEMPOTENCY_RECORDS_PER_TENANT_MAX,
} from '../../host/machine/abi.js';
import type { Answer, ApplyOutcome, KvCall, KvOp } from '../../host/machine/commands.js';
import { encodeEnvelope } from '../../host/node/envelope.js';
import type { AnswerHeader } from '../../host/machine/codec.js';
import { Harness, NS, FOREVER, get, incr, put } from '../model/machine-harness.js';

const TENANT = '00000000-0000-0000-0000-000000000001';
const DAY = 86_400;

function callOf(ops: KvOp[], o: { tenant?: string; shape?: KvCall['shape'];
  transactionId?: string } = {}): KvCall {
  return { tenant: o.tenant ?? TENANT, ops, readBytesCeiling: 4 * 1024 * 1024,
    ...(o.shape === undefined ? {} : { shape: o.shape }),
    ...(o.transactionId === undefined ? {} : { transactionId: o.transactionId }) };
}

/** Applies a keyed call as the next entry; its answer. */
function keyed(h: Harness, key: string, ops: KvOp[], o: { tenant?: string; ttl?: number;
  shape?: KvCall['shape']; transactionId?: string } = {}): Answer {
  const out: ApplyOutcome = h.entry({ kind: 'call', call: callOf(ops, o),
    flags: { requireGrant: false }, idempotency: { key, ttlSeconds: o.ttl ?? DAY } });
  if (out.kind !== 'call' || out.answer === null) throw new Error(JSON.stringify(out));
  return out.answer;
}

const text = (a: Answer): string => Buffer.from(a.body).toString('utf8');
const json = (a: Answer): Record<string, unknown> => JSON.parse(text(a)) as never;
const counter = (h: Harness, key = 'c'): unknown => h.read([get(key)])[0];

describe('record and replay', () => {
  it('a retry answers the first answer, flagged replayed, and applies nothing', () => {
    const h = new Harness();
    const first = keyed(h, 'k1', [incr('c', '1')]);
    expect(first.status).toBe(200);
    expect(first.replayed).toBeUndefined();
    const retry = keyed(h, 'k1', [incr('c', '1')]);
    expect(retry).toMatchObject({ status: 200, replayed: true });
    expect(text(retry)).toBe(text(first));
    expect(counter(h)).toMatchObject({ valueJson: '1', version: 1 });
    // Another key is another call.
    expect(json(keyed(h, 'k2', [incr('c', '1')]))).toMatchObject({ results: [{ value: 2 }] });
    expect(h.m.idempotencyStats()).toMatchObject({ records: 2, replays: 1 });
  });
  it('the fingerprint is the request, not the entry: a new transaction id replays', () => {
    const h = new Harness();
    const first = keyed(h, 'tx', [incr('c', '5')], { shape: 'transaction',
      transactionId: 'first-id' });
    const retry = keyed(h, 'tx', [incr('c', '5')], { shape: 'transaction',
      transactionId: 'second-id' });
    expect(retry.replayed).toBe(true);
    expect(json(retry)).toMatchObject({ transactionId: 'first-id', success: true });
    expect(counter(h)).toMatchObject({ valueJson: '5' });
  });
  it('the same key with another request is 422 kv_idempotency_key_reused', () => {
    const h = new Harness();
    keyed(h, 'k', [incr('c', '1')]);
    const others = [[incr('c', '2')], [incr('d', '1')], [put('c', '1', { expiry: FOREVER })]];
    for (const other of others) {
      const reused = keyed(h, 'k', other);
      expect(reused.status).toBe(422);
      expect(json(reused)).toMatchObject({ error: 'kv_bad_request',
        reason: 'kv_idempotency_key_reused' });
    }
    // Same ops on the path route (another shape) is another request too.
    expect(keyed(h, 'k', [incr('c', '1')], { shape: 'single' }).status).toBe(422);
    expect(counter(h)).toMatchObject({ valueJson: '1' });
    expect(h.read([get('d')])[0]).toMatchObject({ found: false });
  });
  it('keys are per tenant', () => {
    const h = new Harness();
    keyed(h, 'k', [incr('c', '1')]);
    const other = keyed(h, 'k', [incr('c', '1')], { tenant: 'tenant-b' });
    expect(other.replayed).toBeUndefined();
    expect(h.read([get('c')], { tenant: 'tenant-b' })[0]).toMatchObject({ valueJson: '1' });
  });
  it('a lost required (a 200) is recorded; a refusal of the whole entry is not', () => {
    const h = new Harness();
    const lost = keyed(h, 'p', [put('x', '1', { expect: 3, required: true, expiry: FOREVER })]);
    expect(json(lost)).toMatchObject({ ok: false, reason: 'kv_precondition' });
    h.one(put('x', '0', { expiry: FOREVER }));
    h.one(put('x', '0', { expiry: FOREVER }));
    // expect 3 would now hold, but the retry answers what the call answered.
    const retry = keyed(h, 'p', [put('x', '1', { expect: 3, required: true, expiry: FOREVER })]);
    expect(retry.replayed).toBe(true);
    expect(text(retry)).toBe(text(lost));
    h.entry({ kind: 'setPaused', paused: true });
    expect(keyed(h, 'q', [incr('c', '1')]).status).toBe(503);
    h.entry({ kind: 'setPaused', paused: false });
    const applied = keyed(h, 'q', [incr('c', '1')]);
    expect(applied).toMatchObject({ status: 200 });
    expect(applied.replayed).toBeUndefined();
    expect(counter(h)).toMatchObject({ valueJson: '1' });
  });
  it('an answer too large to keep replays as 409 and still applies nothing', () => {
    const h = new Harness();
    const big = '"' + 'v'.repeat(1024 * 1024 - 2) + '"';
    expect(keyed(h, 'big', [put('b', big, { expiry: FOREVER })]).status).toBe(200);
    const retry = keyed(h, 'big', [put('b', big, { expiry: FOREVER })]);
    expect(retry.status).toBe(409);
    expect(json(retry)).toMatchObject({ error: 'conflict',
      reason: 'kv_idempotency_answer_not_kept' });
    expect(h.read([get('b')])[0]).toMatchObject({ found: true, version: 1 });
  });
  it('a keyed command decodes back to the call with its key', () => {
    const command = { kind: 'call' as const, call: callOf([incr('c', '1')]),
      flags: { requireGrant: false }, idempotency: { key: 'a key', ttlSeconds: 60 } };
    expect(decodeCommand(encodeCommand(command))).toEqual({ ok: true,
      command: { ...command, call: { ...command.call, shape: 'batch' } } });
  });
});

describe('expiry', () => {
  it('a record answers until entry time + ttl, then the key is new; sweeps remove it', () => {
    const h = new Harness();
    keyed(h, 'k', [incr('c', '1')], { ttl: 10 });
    expect(h.m.nextExpiryMs()).toBe(h.now + 10_000);
    h.now += 9_999;
    expect(keyed(h, 'k', [incr('c', '1')], { ttl: 10 }).replayed).toBe(true);
    h.now += 1;
    expect(keyed(h, 'k', [incr('c', '1')], { ttl: 10 }).replayed).toBeUndefined();
    expect(counter(h)).toMatchObject({ valueJson: '2' });
    expect(h.m.idempotencyStats().records).toBe(1);
    h.now += 10_000;
    h.entry({ kind: 'sweep', maxKeys: 100 });
    expect(h.m.idempotencyStats()).toMatchObject({ records: 0, bytes: 0 });
    expect(h.m.nextExpiryMs()).toBeNull();
  });
});

describe('bounds', () => {
  it('past the per-tenant byte bound the tenant\'s oldest record goes; past the total, any',
    () => {
      const h = new Harness();
      const value = '"' + 'v'.repeat(1_000_000) + '"';
      const perTenant = Math.floor(IDEMPOTENCY_BYTES_PER_TENANT_MAX / 1_000_400);
      for (let i = 0; i < perTenant; i++) keyed(h, `a${i}`, [put('k', value, { expiry: FOREVER })]);
      expect(h.m.idempotencyStats()).toMatchObject({ records: perTenant, evictions: 0 });
      keyed(h, 'a-last', [put('k', value, { expiry: FOREVER })]);
      expect(h.m.idempotencyStats()).toMatchObject({ records: perTenant, evictions: 1 });
      // a0 was evicted: its retry applies again (version moves); a1 still replays.
      expect(keyed(h, 'a1', [put('k', value, { expiry: FOREVER })]).replayed).toBe(true);
      expect(keyed(h, 'a0', [put('k', value, { expiry: FOREVER })]).replayed).toBeUndefined();
      const stats = h.m.idempotencyStats();
      expect(stats.bytes).toBeLessThanOrEqual(IDEMPOTENCY_BYTES_PER_TENANT_MAX);
      // Two more tenants take the table past its total: the oldest records of any go, A's.
      for (const tenant of ['tenant-b', 'tenant-c']) {
        for (let i = 0; i < perTenant; i++) {
          keyed(h, `k${i}`, [put('k', value, { expiry: FOREVER })], { tenant });
        }
      }
      const after = h.m.idempotencyStats();
      expect(after.bytes).toBeLessThanOrEqual(IDEMPOTENCY_BYTES_MAX);
      expect(after.bytes).toBeGreaterThan(IDEMPOTENCY_BYTES_MAX - 2_000_000);
      expect(after.evictions).toBeGreaterThan(stats.evictions + perTenant / 2);
      expect(keyed(h, 'a2', [put('k', value, { expiry: FOREVER })]).replayed).toBeUndefined();
      expect(keyed(h, `k${perTenant - 1}`, [put('k', value, { expiry: FOREVER })],
        { tenant: 'tenant-c' }).replayed).toBe(true);
    });
});

describe('the count bound', () => {
  it(`a tenant keeps at most ${IDEMPOTENCY_RECORDS_PER_TENANT_MAX} records, oldest out first`,
    () => {
      const h = new Harness();
      // One encoded entry, its key's digits patched in place: 250,000 entries stay cheap.
      const template = encodeCommand({ kind: 'call', call: callOf([incr('c', '1')]),
        flags: { requireGrant: false }, idempotency: { key: 'k0000000', ttlSeconds: DAY } });
      const at = Buffer.from(template).indexOf('k0000000') + 1;
      const entryFor = (n: number): Uint8Array => {
        const bytes = template.slice();
        bytes.set(Buffer.from(String(n).padStart(7, '0')), at);
        return bytes;
      };
      for (let n = 0; n < IDEMPOTENCY_RECORDS_PER_TENANT_MAX; n++) {
        h.m.apply(++h.index, h.now, entryFor(n));
      }
      expect(h.m.idempotencyStats()).toMatchObject({
        records: IDEMPOTENCY_RECORDS_PER_TENANT_MAX, evictions: 0 });
      h.m.apply(++h.index, h.now, entryFor(IDEMPOTENCY_RECORDS_PER_TENANT_MAX));
      expect(h.m.idempotencyStats()).toMatchObject({
        records: IDEMPOTENCY_RECORDS_PER_TENANT_MAX, evictions: 1 });
      const replayOf = (n: number) => h.m.apply(++h.index, h.now, entryFor(n));
      expect(replayOf(1)).toMatchObject({ kind: 'call', answer: { replayed: true } });
      // k0000000 was evicted: it applies again (and evicts k0000002, now the oldest).
      expect(replayOf(0)).not.toMatchObject({ answer: { replayed: true } });
      expect(counter(h)).toMatchObject({ valueJson: String(IDEMPOTENCY_RECORDS_PER_TENANT_MAX +
        2) });
    }, 60_000);
});

class Collect implements AppliedEntrySink {
  answers = new Map<number, { header: AnswerHeader; body: string }>();
  answer(seq: number, header: AnswerHeader, body: Uint8Array): void {
    this.answers.set(seq, { header, body: Buffer.from(body).toString('utf8') });
  }
  done(): void {}
  admin(): void {}
  swept(): void {}
  checkpoint(): void {}
  invalid(): void {}
}

describe('replicas and snapshots', () => {
  it('every replica records; a retry proposed by another node replays there', () => {
    const a = StateMachine.create();
    const b = StateMachine.create();
    a.setOrigin('n1', 1);
    b.setOrigin('n2', 2);
    const command = encodeCommand({ kind: 'call', call: callOf([incr('c', '1')]),
      flags: { requireGrant: false }, idempotency: { key: 'k', ttlSeconds: DAY } });
    const entries = [
      { term: 1, index: 1, timeMs: 1000, type: 'normal' as const,
        data: encodeEnvelope({ nodeId: 'n1', incarnation: 1 }, 1, command) },
      { term: 2, index: 2, timeMs: 2000, type: 'normal' as const,
        data: encodeEnvelope({ nodeId: 'n2', incarnation: 2 }, 1, command) },
    ];
    const sa = new Collect();
    const sb = new Collect();
    a.applyEntries(entries, sa);
    b.applyEntries(entries, sb);
    expect(sa.answers.get(1)?.header.replayed).toBe(false);
    expect(sb.answers.get(1)?.header.replayed).toBe(true);
    expect(sb.answers.get(1)?.body).toBe(sa.answers.get(1)?.body);
    expect(a.digest()).toBe(b.digest());
    expect(a.idempotencyStats()).toMatchObject({ records: 1 });
    expect(snapshotToBytes(a)).toEqual(snapshotToBytes(b));
  });
  it('records travel in the snapshot (format 3) and answer after a restore', () => {
    const h = new Harness();
    const first = keyed(h, 'k', [incr('c', '1')], { ttl: 100 });
    keyed(h, 'other', [incr('d', '1')], { tenant: 'tenant-b' });
    const bytes = snapshotToBytes(h.m);
    expect(new DataView(bytes.buffer).getUint32(4, true)).toBe(FORMAT_VERSION);
    for (const chunk of [1, 7, 1 << 20]) {
      const r = new Harness();
      restoreFromBytes(r.m, bytes, chunk);
      r.index = h.index;
      r.now = h.now;
      expect(r.m.idempotencyStats()).toMatchObject({ records: 2, bytes: h.m.idempotencyStats()
        .bytes });
      const retry = keyed(r, 'k', [incr('c', '1')], { ttl: 100 });
      expect(retry.replayed).toBe(true);
      expect(text(retry)).toBe(text(first));
      expect(keyed(r, 'k', [incr('c', '9')]).status).toBe(422);
      expect(counter(r)).toMatchObject({ valueJson: '1' });
      // The record keeps its expiry across the restore.
      r.now += 100_000;
      expect(keyed(r, 'k', [incr('c', '1')]).replayed).toBeUndefined();
    }
    // Written again, the same bytes.
    const again = new Harness();
    restoreFromBytes(again.m, bytes);
    expect(snapshotToBytes(again.m)).toEqual(bytes);
  });
  it('refuses a corrupted idempotency section, leaving the state untouched', () => {
    const h = new Harness();
    keyed(h, 'k', [incr('c', '1')]);
    const bytes = snapshotToBytes(h.m);
    // The key's first byte: header 33, tenants (count 4 + one tenant 4+36+1), dedup (4+4),
    // section length 4, record count 4, tenant string 4+36, key length 4.
    const at = 33 + 4 + 41 + 8 + 4 + 4 + 40 + 4;
    expect(String.fromCharCode(bytes[at]!)).toBe('k');
    const bad = bytes.slice();
    bad[at] = 0x0a;
    const r = new Harness();
    r.one(put('keep', '1', { expiry: FOREVER }));
    const digest = r.m.digest();
    expect(() => restoreFromBytes(r.m, bad)).toThrow(/idempotency/);
    expect(r.m.digest()).toBe(digest);
  });
  it('a format 2 snapshot (before the section) restores with no records', () => {
    const v2 = new Uint8Array(readFileSync(
      new URL('../fixtures/machine-snapshot-v2.bin', import.meta.url)));
    expect(new DataView(v2.buffer).getUint32(4, true)).toBe(FORMAT_VERSION_NO_IDEMPOTENCY);
    for (const chunk of [1, 5, 1 << 20]) {
      const h = new Harness();
      restoreFromBytes(h.m, v2, chunk);
      // The digest of the fixture's state, rows hashed as docs/codec.md "Digest" says.
      expect(h.m.digest()).toBe('74623450efe57a46');
      expect(h.m.appliedIndex).toBe(4);
      expect(h.m.idempotencyStats().records).toBe(0);
      expect(h.read([{ ...get('a'), ns: NS }], { tenant: 'default' })[0])
        .toMatchObject({ valueJson: '{"n":1}' });
    }
    const h = new Harness();
    restoreFromBytes(h.m, v2);
    // Written again: version 3 with an empty section (4 bytes of length, 4 of count).
    expect(snapshotToBytes(h.m).length).toBe(v2.length + 8);
  });
});
