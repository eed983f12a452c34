/**
 * Idempotent retries against one real node (docs/http.md, "Idempotent retries"): a retry
 * with the same Idempotency-Key and request answers the first answer with
 * `Idempotent-Replayed: true` and applies nothing, on every write route; another request
 * under the key is 422; a bad key is 400; reads ignore the header; and a record outlives a
 * restart and a snapshot between the attempts.
 */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient, HivekvError } from '../../host/client/index.js';
import {
  call, kv, removeDir, startNode, tempDir, UNLIMITED_RATES, type NodeProcess,
} from '../helpers/node-process.js';

/** Snapshots after every 10 entries, so a few writes put a record into one. */
const ENV = { ...UNLIMITED_RATES, HIVEKV_SNAPSHOT_EVERY_ENTRIES: '10' };
const REPLAYED = 'idempotent-replayed';

let dir = '';
let node: NodeProcess | null = null;

function url(): string {
  if (node === null) throw new Error('no node');
  return node.url;
}

const keyed = (key: string) => ({ 'idempotency-key': key });
const incr = (key: string, delta = 1) => [{ op: 'incr', ns: 'idem', key, delta,
  forever: true }];

async function counter(key: string): Promise<unknown> {
  const r = await kv(url(), [{ op: 'get', ns: 'idem', key }]);
  return r.body.results[0].found ? r.body.results[0].value : 0;
}

function snapshotFiles(root: string): string[] {
  return readdirSync(root, { recursive: true, encoding: 'utf8' })
    .filter((name) => name.endsWith('.snap'))
    .map((name) => join(root, name));
}

beforeAll(async () => {
  dir = tempDir('idem');
  node = await startNode({ dataDir: dir, env: ENV });
}, 30_000);

afterAll(async () => {
  await node?.kill();
  removeDir(dir);
});

describe('idempotent retries on one node', () => {
  it('POST /api/v1/kv: the retry replays the first answer and counts once', async () => {
    const first = await kv(url(), incr('a'), keyed('retry-1'));
    expect(first.status).toBe(200);
    expect(first.headers.get(REPLAYED)).toBeNull();
    const retry = await kv(url(), incr('a'), keyed('retry-1'));
    expect(retry.status).toBe(200);
    expect(retry.headers.get(REPLAYED)).toBe('true');
    expect(retry.text).toBe(first.text);
    // The same request, spelled with other whitespace and member order, is the same request.
    const spelled = await call(url(), 'POST', '/api/v1/kv',
      '{ "operations" : [ {"forever":true, "delta":1, "key":"a", "ns":"idem", "op":"incr"} ] }',
      keyed('retry-1'));
    expect(spelled.headers.get(REPLAYED)).toBe('true');
    expect(await counter('a')).toBe(1);
    // Without the header every call applies.
    await kv(url(), incr('a'));
    await kv(url(), incr('a'));
    expect(await counter('a')).toBe(3);
  });

  it('the path routes and the transaction route replay too', async () => {
    const path = '/api/v1/kv/idem/p%2Fkey';
    const put1 = await call(url(), 'PUT', path, { value: { n: 1 }, forever: true },
      keyed('put-1'));
    const put2 = await call(url(), 'PUT', path, { value: { n: 1 }, forever: true },
      keyed('put-1'));
    expect(put2.headers.get(REPLAYED)).toBe('true');
    expect(put2.body).toEqual(put1.body);
    expect(put1.body.version).toBeGreaterThan(0);
    const del1 = await call(url(), 'DELETE', path, undefined, keyed('del-1'));
    expect(del1.body.applied).toBe(true);
    const del2 = await call(url(), 'DELETE', path, undefined, keyed('del-1'));
    expect(del2.headers.get(REPLAYED)).toBe('true');
    expect(del2.body).toEqual(del1.body);
    const body = { operations: [], requiredLeases: [], kv: incr('t') };
    const tx1 = await call(url(), 'POST', '/api/v1/transaction', body, keyed('tx-1'));
    const tx2 = await call(url(), 'POST', '/api/v1/transaction', body, keyed('tx-1'));
    expect(tx1.body.success).toBe(true);
    expect(tx2.headers.get(REPLAYED)).toBe('true');
    // The transaction id drawn for the retry is not the answer's: the first one is.
    expect(tx2.body).toEqual(tx1.body);
    expect(await counter('t')).toBe(1);
  });

  it('the same key with another request is 422, through the client too', async () => {
    await kv(url(), incr('r'), keyed('reuse'));
    const other = await kv(url(), incr('r', 2), keyed('reuse'));
    expect(other.status).toBe(422);
    expect(other.body).toMatchObject({ error: 'kv_bad_request',
      reason: 'kv_idempotency_key_reused' });
    // Another route with the same key is another request as well.
    const viaPath = await call(url(), 'PUT', '/api/v1/kv/idem/r', { value: 1, forever: true },
      keyed('reuse'));
    expect(viaPath.status).toBe(422);
    const client = createClient({ urls: url(), retries: 0 });
    const refused = await client.kv.incr('idem', 'r', 5, { forever: true,
      idempotencyKey: 'reuse' }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(HivekvError);
    expect(refused).toMatchObject({ status: 422, error: 'kv_bad_request',
      reason: 'kv_idempotency_key_reused' });
    expect(await counter('r')).toBe(1);
  });

  it('a bad key is 400 kv_bad_idempotency_key; reads ignore the header', async () => {
    for (const bad of ['x'.repeat(256), 'a\tb']) {
      const r = await kv(url(), incr('b'), keyed(bad));
      expect(r.status).toBe(400);
      expect(r.body).toMatchObject({ error: 'kv_bad_request',
        reason: 'kv_bad_idempotency_key' });
    }
    expect(await counter('b')).toBe(0);
    const longest = await kv(url(), incr('b'), keyed('k'.repeat(255)));
    expect(longest.status).toBe(200);
    for (let i = 0; i < 2; i++) {
      const read = await kv(url(), [{ op: 'get', ns: 'idem', key: 'b' }], keyed('x'.repeat(300)));
      expect(read.status).toBe(200);
      expect(read.headers.get(REPLAYED)).toBeNull();
    }
  });

  it('a record outlives a restart and a snapshot between the attempts', async () => {
    const first = await kv(url(), incr('s'), keyed('before-restart'));
    expect(first.status).toBe(200);
    expect(await node?.stop()).toBe(0);
    node = await startNode({ dataDir: dir, env: ENV });
    const afterRestart = await kv(url(), incr('s'), keyed('before-restart'));
    expect(afterRestart.headers.get(REPLAYED)).toBe('true');
    expect(afterRestart.text).toBe(first.text);

    const beforeSnapshot = await kv(url(), incr('s'), keyed('before-snapshot'));
    const snapshotsBefore = new Set(snapshotFiles(dir));
    const isNew = (): boolean => snapshotFiles(dir).some((f) => !snapshotsBefore.has(f));
    // Enough entries for the node to snapshot (HIVEKV_SNAPSHOT_EVERY_ENTRIES=10).
    for (let i = 0; i < 25; i++) await kv(url(), incr('filler'));
    const deadline = Date.now() + 10_000;
    while (!isNew() && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(isNew()).toBe(true);
    // Killed, not stopped: the restart restores the snapshot, then the log after it.
    await node.kill();
    node = await startNode({ dataDir: dir, env: ENV });
    expect(node.output()).toMatch(/snapshot/);
    const afterSnapshot = await kv(url(), incr('s'), keyed('before-snapshot'));
    expect(afterSnapshot.headers.get(REPLAYED)).toBe('true');
    expect(afterSnapshot.text).toBe(beforeSnapshot.text);
    expect((await kv(url(), incr('s', 7), keyed('before-snapshot'))).status).toBe(422);
    expect(await counter('s')).toBe(2);
  }, 60_000);

  it('the client says which results are replays', async () => {
    const client = createClient({ urls: url(), retries: 0 });
    const first = await client.kv.incr('idem', 'cl', 1, { forever: true,
      idempotencyKey: 'client-1' });
    expect(first).toMatchObject({ applied: true, value: 1 });
    expect(first.replayed).toBeUndefined();
    const again = await client.kv.incr('idem', 'cl', 1, { forever: true,
      idempotencyKey: 'client-1' });
    expect(again).toEqual({ ...first, replayed: true });
    const batch = () => client.kv.batch().incr('idem', 'cl', 1, { forever: true })
      .run({ idempotencyKey: 'client-2' });
    expect((await batch()).replayed).toBeUndefined();
    expect(await batch()).toMatchObject({ ok: true, replayed: true });
    const tx = () => client.transaction().kv.incr('idem', 'cl', 1, { forever: true })
      .commit({ idempotencyKey: 'client-3' });
    const committed = await tx();
    expect(committed.replayed).toBeUndefined();
    expect(await tx()).toEqual({ ...committed, replayed: true });
    expect(await counter('cl')).toBe(3);
  });

  it('/metrics shows the records held and the replays answered', async () => {
    await kv(url(), incr('m'), keyed('metrics-1'));
    await kv(url(), incr('m'), keyed('metrics-1'));
    const text = (await call(url(), 'GET', '/metrics')).text;
    const figure = (name: string): number =>
      Number(new RegExp(`^hivekv_${name} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
    expect(figure('idempotency_records')).toBeGreaterThanOrEqual(1);
    expect(figure('idempotency_bytes')).toBeGreaterThan(0);
    expect(figure('idempotency_replays')).toBeGreaterThanOrEqual(1);
    expect(figure('idempotency_evictions')).toBe(0);
  });
});
