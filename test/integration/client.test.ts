/**
 * `hivekv/client` against one real node: every method of `client.kv`, the batch builder, the
 * transaction rider, `health`, `request`, and the typed error for the node's refusals.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createClient, HivekvError, type HivekvClient, type Row,
} from '../../host/client/index.js';
import {
  removeDir, startNode, tempDir, UNLIMITED_RATES, type NodeProcess,
} from '../helpers/node-process.js';

let node: NodeProcess;
let dir: string;
let client: HivekvClient;

beforeAll(async () => {
  dir = tempDir('client');
  node = await startNode({ dataDir: dir, env: UNLIMITED_RATES });
  client = createClient({ urls: [node.url] });
});

afterAll(async () => {
  expect(await node.stop()).toBe(0);
  removeDir(dir);
});

let keySeq = 0;
const fresh = (name: string) => `${name}-${++keySeq}`;
const lifetimeSeconds = (row: { expiresAt: string | null; updatedAt: string }) =>
  (Date.parse(row.expiresAt ?? '') - Date.parse(row.updatedAt)) / 1000;

describe('reads and writes', () => {
  it('puts with a TTL string and gets the row back', async () => {
    const key = fresh('9137');
    const put = await client.kv.put('orders', key, { status: 'paid' }, { ttl: '30d' });
    expect(put).toMatchObject({ op: 'put', applied: true, key, value: { status: 'paid' } });
    const row = await client.kv.get<{ status: string }>('orders', key);
    if (!row.found) throw new Error('the key was just written');
    expect(row).toMatchObject({ found: true, value: { status: 'paid' }, version: put.version });
    expect(lifetimeSeconds(row)).toBe(30 * 86_400);
    expect(await client.kv.get('orders', fresh('absent'))).toMatchObject({ found: false });
  });

  it('turns until into whole seconds, rounded up', async () => {
    const key = fresh('until');
    await client.kv.put('orders', key, 1, { until: new Date(Date.now() + 90_500) });
    const row = await client.kv.get('orders', key);
    if (!row.found) throw new Error('the key was just written');
    expect(lifetimeSeconds(row)).toBe(91);
    await expect(client.kv.put('orders', key, 1, { until: new Date(Date.now() - 1) }))
      .rejects.toThrow(RangeError);
  });

  it('keeps forever keys without expiry and null as a value', async () => {
    const key = fresh('null');
    await client.kv.put('orders', key, null, { forever: true });
    expect(await client.kv.get('orders', key)).toMatchObject({ found: true, value: null,
      expiresAt: null });
  });

  it('compares and swaps on expect, and a loser sees the current row', async () => {
    const key = fresh('cas');
    const first = await client.kv.put('orders', key, { status: 'paid' }, { ttl: '30d' });
    const won = await client.kv.put('orders', key, { status: 'shipped' },
      { ttl: '30d', expect: first.version });
    expect(won.applied).toBe(true);
    const lost = await client.kv.put('orders', key, { status: 'lost' },
      { ttl: '30d', expect: first.version });
    expect(lost).toMatchObject({ applied: false, reason: 'version', value: { status: 'shipped' },
      version: won.version });
    expect(await client.kv.put('orders', fresh('none'), 1, { ttl: '1h', expect: 5 }))
      .toMatchObject({ applied: false, reason: 'absent', value: null, version: 0 });
  });

  it('gives putIfAbsent and once one winner', async () => {
    const key = fresh('ord');
    const answers = await Promise.all(['a', 'b', 'c'].map((charge) =>
      client.kv.putIfAbsent('orders', key, { charge }, { ttl: '7d' })));
    const winners = answers.filter((answer) => answer.applied);
    expect(winners).toHaveLength(1);
    for (const loser of answers.filter((answer) => !answer.applied)) {
      expect(loser).toMatchObject({ reason: 'exists', value: winners[0]?.value });
    }
    const marker = fresh('once');
    expect(await client.kv.once('idem', marker, { ttl: '24h' })).toMatchObject({ won: true,
      value: true });
    expect(await client.kv.once('idem', marker, { ttl: '24h', value: 'second' }))
      .toMatchObject({ won: false, value: true });
  });

  it('deletes, with and without expect', async () => {
    const key = fresh('del');
    const put = await client.kv.put('orders', key, 'v', { ttl: '1h' });
    expect(await client.kv.delete('orders', key, { expect: put.version + 1 }))
      .toMatchObject({ applied: false, reason: 'version' });
    expect(await client.kv.delete('orders', key)).toMatchObject({ applied: true, value: 'v' });
    expect(await client.kv.delete('orders', key)).toMatchObject({ applied: false,
      reason: 'absent' });
  });

  it('counts with incr, bounded by min and max, with a create-only TTL', async () => {
    const key = fresh('api:acme:minute');
    const seen: boolean[] = [];
    for (let i = 0; i < 4; i++) {
      seen.push((await client.kv.incr('limits', key, 1, { max: 3, ttl: '2m' })).applied);
    }
    expect(seen).toEqual([true, true, true, false]);
    expect(await client.kv.incr('limits', key, 1, { max: 3, ttl: '2m' }))
      .toMatchObject({ applied: false, reason: 'limit', value: 3 });
    expect(await client.kv.incr('limits', key, -5, { min: 0, ttl: '2m' }))
      .toMatchObject({ applied: false, reason: 'limit' });
    expect((await client.kv.incr('limits', key, 0.5, { ttl: '1h' })).value).toBe(3.5);
    const text = fresh('text');
    await client.kv.put('limits', text, 'not a number', { ttl: '1h' });
    expect(await client.kv.incr('limits', text, 1, { ttl: '1h' }))
      .toMatchObject({ applied: false, reason: 'type' });
  });

  it('checks a version without writing', async () => {
    const key = fresh('chk');
    expect(await client.kv.check('orders', key, 0)).toMatchObject({ applied: true });
    const put = await client.kv.put('orders', key, 1, { ttl: '1h' });
    expect(await client.kv.check('orders', key, put.version)).toMatchObject({ applied: true });
    expect(await client.kv.check('orders', key, 0)).toMatchObject({ applied: false,
      reason: 'exists' });
    expect(await client.kv.check('orders', key, put.version + 1)).toMatchObject({
      applied: false, reason: 'version', version: put.version });
  });

  it('folds a lost required into the write result', async () => {
    const key = fresh('req');
    await client.kv.put('orders', key, 1, { ttl: '1h' });
    expect(await client.kv.putIfAbsent('orders', key, 2, { ttl: '1h', required: true }))
      .toMatchObject({ applied: false, precondition: true, reason: 'exists', failedIndex: 0,
        value: 1 });
  });
});

describe('several keys', () => {
  const ns = 'scan';
  const prefix = fresh('p') + ':';
  const keys = ['e', 'a', 'c', 'b', 'd'].map((k) => prefix + k);

  beforeAll(async () => {
    const batch = client.kv.batch();
    keys.forEach((key, i) => batch.put(ns, key, { i }, { ttl: '1h' }));
    expect((await batch.run()).ok).toBe(true);
  });

  it('reads several keys with getMany, absence listed', async () => {
    const many = await client.kv.getMany(ns, [prefix + 'c', prefix + 'zz', prefix + 'a']);
    expect(many.rows.map((row) => row.key)).toEqual([prefix + 'a', prefix + 'c']);
    expect(many.missing).toEqual([prefix + 'zz']);
    expect(many.truncated).toBe(false);
  });

  it('pages a prefix, and walks every page with listAll', async () => {
    const page = await client.kv.getPrefix(ns, prefix, { limit: 2 });
    expect(page.rows.map((row) => row.key)).toEqual([prefix + 'a', prefix + 'b']);
    expect(page).toMatchObject({ truncated: true, nextAfter: prefix + 'b' });
    const walked: string[] = [];
    for await (const row of client.kv.listAll(ns, prefix, { limit: 2 })) walked.push(row.key);
    expect(walked).toEqual([...keys].sort());
    const keysOnly = await client.kv.getPrefix(ns, prefix,
      { keysOnly: true, after: page.nextAfter });
    expect(keysOnly.rows).toHaveLength(3);
    expect('value' in (keysOnly.rows[0] as Row)).toBe(false);
  });
});

describe('batch and transaction', () => {
  it('runs several operations as one call whose reads see its writes', async () => {
    const key = fresh('b');
    const result = await client.kv.batch()
      .get('orders', key)
      .put('orders', key, { status: 'paid' }, { ttl: '30d' })
      .incr('stats', fresh('count'), 2, { forever: true })
      .check('orders', key, 0)
      .add({ op: 'getMany', ns: 'orders', keys: [key] })
      .run();
    if (!result.ok) throw new Error('nothing was required');
    expect(result.results.map((r) => r.op)).toEqual(['get', 'put', 'incr', 'check', 'getMany']);
    expect(result.results[0]).toMatchObject({ found: true, value: { status: 'paid' } });
    expect(result.results[3]).toMatchObject({ applied: false, reason: 'exists' });
  });

  it('aborts the whole call on a lost required, writing nothing', async () => {
    const marker = fresh('ord');
    const counter = fresh('charges');
    const gate = () => client.kv.batch()
      .putIfAbsent('orders', marker, { chargeId: 'ch_1' }, { ttl: '7d', required: true })
      .incr('stats', counter, 1, { forever: true })
      .run();
    expect((await gate()).ok).toBe(true);
    expect(await gate()).toEqual({ ok: false, reason: 'kv_precondition', failedIndex: 0,
      kvReason: 'exists', version: expect.any(Number), value: { chargeId: 'ch_1' } });
    expect(await client.kv.get('stats', counter)).toMatchObject({ value: 1 });
  });

  it('commits a transaction, and answers a redelivery with the verdict', async () => {
    const marker = fresh('ord');
    const send = () => client.transaction()
      .once('orders', marker, { ttl: '7d', value: { chargeId: 'ch_2' } })
      .kv.incr('stats', 'tx-charges', 1, { forever: true })
      .kv.get('orders', marker)
      .commit();
    const committed = await send();
    if (!committed.success) throw new Error('the marker was fresh');
    expect(committed.results.map((r) => [r.opIndex, r.type, r.op]))
      .toEqual([[0, 'kv', 'putIfAbsent'], [1, 'kv', 'incr'], [2, 'kv', 'get']]);
    expect(await send()).toMatchObject({ success: false, ok: false, reason: 'kv_precondition',
      failedIndex: 0, kvReason: 'exists', results: [] });
    expect(() => client.transaction().kv.getPrefix()).toThrow(/not allowed inside a transaction/);
    await expect(client.transaction().commit()).rejects.toThrow(/no operations/);
  });
});

describe('refusals and the rest', () => {
  it('rejects with HivekvError carrying the envelope', async () => {
    const cases: Array<[() => Promise<unknown>, object]> = [
      [() => client.kv.put('Bad NS', 'k', 1, { ttl: '1h' }),
        { status: 400, error: 'kv_bad_request', reason: 'kv_bad_namespace' }],
      [() => client.kv.put('orders', 'k', 1),
        { status: 400, error: 'kv_bad_request', reason: 'kv_expiry_not_specified' }],
      [() => client.kv.put('orders', 'k', 'x'.repeat(70_000), { ttl: '1h' }),
        { status: 413, error: 'payload_too_large', reason: 'kv_value_too_large' }],
      [() => client.kv.getPrefix('orders', 'k', { limit: 'ten' as unknown as number }),
        { status: 400, reason: 'kv_bad_request' }],
    ];
    for (const [send, fields] of cases) {
      const error = await send().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(HivekvError);
      expect(error).toMatchObject({ ...fields, attempts: 1, retryAfterSeconds: null,
        url: node.url });
      expect((error as HivekvError).detail).not.toBe('');
    }
  });

  it('reports health, and calls any route through request', async () => {
    const health = await client.health();
    expect(health).toMatchObject({ url: node.url, ok: true, health: { status: 'ok', id: 'n1',
      role: 'leader' } });
    expect(await client.health({ url: node.url + '/' })).toMatchObject({ ok: true });
    const tenant = '00000000-0000-0000-0000-000000000001';
    const quota = await client.request<{ tenant: string }>({ method: 'GET',
      path: `/api/v1/system/kv-quota/${tenant}` });
    expect(quota.tenant).toBe(tenant);
    await expect(client.request({ method: 'GET', path: '/nope' }))
      .rejects.toMatchObject({ status: 404, error: 'not_found' });
  });
});
