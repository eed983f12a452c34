/**
 * Sweeps only when due: the leader proposes a sweep entry only once the machine's next expiry
 * has come. A node holding only `forever` keys, or keys that expire far ahead, appends no
 * entries however many sweep periods pass; a key that expires gets the one sweep it needs.
 * The sweep period is 50 ms here, so a second is twenty chances to append for nothing.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sleep, waitFor } from '../helpers/cluster.js';
import {
  call, kv, removeDir, startNode, tempDir, UNLIMITED_RATES, type NodeProcess,
} from '../helpers/node-process.js';

const SWEEP_EVERY_MS = 50;
let node: NodeProcess;
let dir = '';

beforeAll(async () => {
  dir = tempDir('sweep');
  node = await startNode({ dataDir: dir, env: { ...UNLIMITED_RATES,
    QUEEN_KV_EXPIRE_EVERY_MS: String(SWEEP_EVERY_MS) } });
});

afterAll(async () => {
  await node?.kill();
  removeDir(dir);
});

async function commitIndex(): Promise<number> {
  return (await call(node.url, 'GET', '/health')).body.commitIndex as number;
}

async function sweptKeys(): Promise<number> {
  const text = (await call(node.url, 'GET', '/metrics')).text;
  return Number(/^hivekv_swept_keys_total (\d+)/m.exec(text)?.[1] ?? 0);
}

describe('sweeps', () => {
  it('appends nothing while no key is due, and exactly one sweep for a key that expires',
    async () => {
      const put = await kv(node.url, [
        ...Array.from({ length: 5 }, (_, i) => ({ op: 'put', ns: 's', key: `forever${i}`,
          value: i, forever: true })),
        { op: 'put', ns: 's', key: 'far', value: 1, ttlSeconds: 3600 }]);
      expect(put.body.results.every((r: { applied: boolean }) => r.applied)).toBe(true);
      const idle = await commitIndex();
      await sleep(20 * SWEEP_EVERY_MS);
      expect(await commitIndex()).toBe(idle);

      const soon = await kv(node.url, [{ op: 'put', ns: 's', key: 'soon', value: 1,
        ttlSeconds: 1 }]);
      expect(soon.body.results[0].applied).toBe(true);
      const afterPut = await commitIndex();
      expect(afterPut).toBe(idle + 1);
      await waitFor('the sweep of the expired key', 5000, async () =>
        ((await sweptKeys()) === 1 ? true : undefined));
      expect(await commitIndex()).toBe(afterPut + 1);
      await sleep(20 * SWEEP_EVERY_MS);
      expect(await commitIndex()).toBe(afterPut + 1);
      const got = await kv(node.url, [{ op: 'getMany', ns: 's', keys: ['soon', 'far',
        'forever0'] }]);
      expect(got.body.results[0].missing).toEqual(['soon']);
    }, 30_000);
});
