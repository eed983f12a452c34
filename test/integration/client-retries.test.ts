/**
 * The client's retries against real nodes: a node stopped and started again while a write
 * is being retried, a node's own 429 with `Retry-After`, a dead first URL, and the tenant
 * header on a node that reads it.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createClient, HivekvError, type FetchFunction } from '../../host/client/index.js';
import {
  freePort, removeDir, startNode, tempDir, UNLIMITED_RATES, type NodeProcess,
} from '../helpers/node-process.js';

const cleanups: Array<() => Promise<void>> = [];

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function node(env: Record<string, string>, port?: number,
  dataDir?: string): Promise<NodeProcess> {
  const dir = dataDir ?? tempDir('client-retry');
  const started = await startNode({ dataDir: dir, env, ...(port === undefined ? {} : { port }) });
  cleanups.push(async () => {
    await started.stop();
    if (dataDir === undefined) removeDir(dir);
  });
  return started;
}

/** A fetch that records the URL and `Idempotency-Key` of every attempt. */
function recordingFetch(): { fetch: FetchFunction; attempts: Array<[string, string | null]> } {
  const attempts: Array<[string, string | null]> = [];
  const fetchFn: FetchFunction = (input, init) => {
    const headers = new Headers(init.headers);
    attempts.push([input, headers.get('idempotency-key')]);
    return fetch(input, init);
  };
  return { fetch: fetchFn, attempts };
}

describe('retries against real nodes', () => {
  it('carries a write across a node restart, with one key on every attempt', async () => {
    const dir = tempDir('client-restart');
    cleanups.push(async () => removeDir(dir));
    const port = await freePort();
    const first = await node(UNLIMITED_RATES, port, dir);
    const recorder = recordingFetch();
    const client = createClient({ urls: [first.url], retries: 12, retryBaseMs: 100,
      retryCapMs: 800, fetch: recorder.fetch });
    await client.kv.put('orders', 'before', 1, { forever: true });
    expect(await first.stop()).toBe(0);
    const pending = client.kv.incr('stats', 'restarts', 1, { forever: true });
    // Let at least one attempt fail against the stopped node before it comes back.
    for (let waits = 0; recorder.attempts.length < 3 && waits < 500; waits++) {
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(recorder.attempts.length).toBeGreaterThanOrEqual(3);
    await node(UNLIMITED_RATES, port, dir);
    expect(await pending).toMatchObject({ applied: true, value: 1 });
    const writeAttempts = recorder.attempts.slice(1);
    expect(writeAttempts.length).toBeGreaterThanOrEqual(3);
    expect(new Set(writeAttempts.map(([, key]) => key)).size).toBe(1);
    expect(writeAttempts[0]?.[1]).not.toBe(recorder.attempts[0]?.[1]);
    expect(await client.kv.get('orders', 'before')).toMatchObject({ found: true, value: 1 });
  });

  it('waits out the node\'s 429 Retry-After, then writes', async () => {
    const limited = await node({ QUEEN_KV_WRITE_RATE: '1', QUEEN_KV_WRITE_BURST: '1',
      QUEEN_KV_READ_RATE: '0' });
    const recorder = recordingFetch();
    const client = createClient({ urls: [limited.url], fetch: recorder.fetch });
    await client.kv.put('quota', 'a', 1, { ttl: '1h' });
    const startedMs = Date.now();
    expect(await client.kv.put('quota', 'b', 2, { ttl: '1h' })).toMatchObject({ applied: true });
    expect(Date.now() - startedMs).toBeGreaterThanOrEqual(1000);
    expect(recorder.attempts).toHaveLength(3);
    expect(recorder.attempts[1]?.[1]).toBe(recorder.attempts[2]?.[1]);
    const impatient = createClient({ urls: [limited.url], retries: 0 });
    const error = await impatient.kv.put('quota', 'c', 3, { ttl: '1h' })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(HivekvError);
    expect(error).toMatchObject({ status: 429, error: 'rate_limited', retryAfterSeconds: 1 });
  });

  it('moves past a first URL where nothing listens, and stays on the live one', async () => {
    const live = await node(UNLIMITED_RATES);
    const dead = `http://127.0.0.1:${await freePort()}`;
    const recorder = recordingFetch();
    const client = createClient({ urls: [dead, live.url], fetch: recorder.fetch });
    expect(await client.kv.put('orders', 'k', 1, { ttl: '1h' })).toMatchObject({ applied: true });
    expect(await client.kv.get('orders', 'k')).toMatchObject({ found: true });
    expect(recorder.attempts.map(([url]) => new URL(url).origin))
      .toEqual([dead, live.url, live.url]);
  });

  it('sends the tenant, and tenants do not see each other\'s keys', async () => {
    const tenanted = await node({ ...UNLIMITED_RATES, QUEEN_TENANCY_HEADER: 'true',
      QUEEN_KV_TRUSTED_PROXY: 'true', QUEEN_KV_REQUIRE_GRANT: 'false' });
    const acme = createClient({ urls: [tenanted.url],
      tenant: '0d9c7a52-3c1e-4f63-9a0e-6f4c1b2a9e11' });
    const globex = createClient({ urls: [tenanted.url],
      tenant: '5b2f1e0a-8c4d-4e7f-9a1b-2c3d4e5f6a7b' });
    await acme.kv.put('orders', 'shared', 'acme', { ttl: '1h' });
    expect(await globex.kv.get('orders', 'shared')).toMatchObject({ found: false });
    await globex.kv.put('orders', 'shared', 'globex', { ttl: '1h' });
    expect(await acme.kv.get('orders', 'shared')).toMatchObject({ value: 'acme' });
  });
});
