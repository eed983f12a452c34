/**
 * A real node polls its loop for a moment once no call is in flight (HIVEKV_IDLE_POLL_US),
 * reports that time in /metrics, polls no gap for longer than the window, sleeps once the
 * calls stop, and with 0 never polls.
 */
import { describe, expect, it } from 'vitest';
import {
  call, kv, removeDir, startNode, tempDir, UNLIMITED_RATES, type NodeProcess,
} from '../helpers/node-process.js';

const PUTS = 200;
const METRIC = 'hivekv_idle_poll_seconds_total';

async function polledSeconds(node: NodeProcess): Promise<number> {
  const text = (await call(node.url, 'GET', '/metrics')).text;
  const line = text.split('\n').find((l) => l.startsWith(METRIC + ' '));
  expect(line).toBeDefined();
  return Number(line!.slice(METRIC.length + 1));
}

async function putOneAtATime(node: NodeProcess): Promise<void> {
  for (let i = 0; i < PUTS; i++) {
    const r = await kv(node.url, [{ op: 'put', ns: 'poll', key: `k${i}`, value: i,
      forever: true }]);
    expect(r.status).toBe(200);
  }
}

async function withNode(env: Record<string, string>,
  body: (node: NodeProcess) => Promise<void>): Promise<void> {
  const dataDir = tempDir('idle-poll');
  const node = await startNode({ dataDir, env: { ...UNLIMITED_RATES, ...env } });
  try {
    await body(node);
    expect(await node.stop()).toBe(0);
  } finally {
    await node.kill();
    removeDir(dataDir);
  }
}

describe('idle poll', () => {
  it('polls each idle gap for at most its window, and sleeps once calls stop', async () => {
    await withNode({}, async (node) => {
      await putOneAtATime(node);
      const afterPuts = await polledSeconds(node);
      // The first idle gap is always polled; no gap counts more than the 200 µs window.
      expect(afterPuts).toBeGreaterThan(0);
      expect(afterPuts).toBeLessThanOrEqual((PUTS + 2) * 200e-6);
      await new Promise((resolve) => setTimeout(resolve, 300));
      const later = await polledSeconds(node);
      // 300 ms without a call: at most the two gaps after the scrapes were polled.
      expect(later - afterPuts).toBeLessThanOrEqual(2 * 200e-6 + 1e-9);
    });
  });

  it('never polls with HIVEKV_IDLE_POLL_US=0', async () => {
    await withNode({ HIVEKV_IDLE_POLL_US: '0' }, async (node) => {
      await putOneAtATime(node);
      expect(await polledSeconds(node)).toBe(0);
    });
  });
});
