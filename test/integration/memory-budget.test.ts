/**
 * The state's memory budget on a real node (HIVEKV_MAX_STATE_BYTES set to 1 MiB): filled
 * past it, the node refuses writes that grow the state with 503 `kv_unavailable`, reason
 * `memory_full`, and keeps serving reads and deletes; freed, it takes writes again; /health
 * and /metrics report the figures; a restart brings every acknowledged key back.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  call, kv, removeDir, startNode, tempDir, UNLIMITED_RATES, type NodeProcess,
} from '../helpers/node-process.js';

const BUDGET = 1024 * 1024;
const ENV = { ...UNLIMITED_RATES, HIVEKV_MAX_STATE_BYTES: String(BUDGET) };
const VALUE = 'x'.repeat(60_000);

let node: NodeProcess;
let dir: string;

beforeAll(async () => {
  dir = tempDir('budget');
  node = await startNode({ dataDir: dir, env: ENV });
});

afterAll(async () => {
  await node.kill();
  removeDir(dir);
});

function metric(text: string, name: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return Number(line?.split(' ')[1]);
}

describe('a node at its memory budget', () => {
  const acked: string[] = [];

  it('refuses puts and incrs past the budget with 503 memory_full, never crashing', async () => {
    let refused = null;
    for (let i = 0; i < 40 && refused === null; i++) {
      const r = await kv(node.url, [{ op: 'put', ns: 'fill', key: `k${i}`, value: VALUE,
        forever: true }]);
      if (r.status === 200) acked.push(`k${i}`);
      else refused = r;
    }
    expect(refused?.status).toBe(503);
    expect(refused?.body).toMatchObject({ error: 'kv_unavailable', reason: 'memory_full' });
    expect(refused?.headers.get('retry-after')).toBe('1');
    expect(acked.length).toBeGreaterThanOrEqual(15);
    // Filling on past the budget: refusals, every time, and the node stays up.
    for (let i = 0; i < 20; i++) {
      const r = await kv(node.url, [{ op: 'incr', ns: 'fill', key: 'n', delta: 1,
        forever: true }]);
      expect(r.status).toBe(503);
    }
    const health = await call(node.url, 'GET', '/health');
    expect(health.status).toBe(200);
    expect(health.body.stateBytes).toBeGreaterThanOrEqual(BUDGET);
    expect(health.body.stateBytesMax).toBe(BUDGET);
    const metrics = (await call(node.url, 'GET', '/metrics')).text;
    expect(metric(metrics, 'hivekv_state_bytes')).toBe(health.body.stateBytes);
    expect(metric(metrics, 'hivekv_state_bytes_max')).toBe(BUDGET);
    // Forever rows have no expiry-heap entry: none is kept alive after it left the state.
    expect(metric(metrics, 'hivekv_machine_heap_dead_bytes')).toBe(0);
  });

  it('still reads and deletes, and takes writes again once below the budget', async () => {
    const got = await kv(node.url, [{ op: 'getMany', ns: 'fill', keys: acked }]);
    expect(got.status).toBe(200);
    expect(got.body.results[0].missing).toEqual([]);
    const gone = acked.splice(0, 3);
    const del = await kv(node.url, gone.map((key) => ({ op: 'delete', ns: 'fill', key })));
    expect(del.body.results.map((r: { applied: boolean }) => r.applied)).toEqual(
      [true, true, true]);
    const put = await kv(node.url, [{ op: 'put', ns: 'fill', key: 'again', value: 1,
      forever: true }]);
    expect(put.status).toBe(200);
    acked.push('again');
  });

  it('brings every acknowledged key back after a restart', async () => {
    expect(await node.stop()).toBe(0);
    node = await startNode({ dataDir: dir, env: ENV });
    const got = await kv(node.url, [{ op: 'getMany', ns: 'fill', keys: acked }]);
    expect(got.body.results[0].missing).toEqual([]);
  });
});
