/**
 * A real node whose loop is held (the process stopped for 400 ms with SIGSTOP, as a host
 * that gives it no core would) says so in its log and counts it in /metrics. That a loop
 * running freely says nothing is the unit test's (node-loop-stalls.test.ts): on a loaded
 * machine a real node's loop may be held anyway.
 */
import { describe, expect, it } from 'vitest';
import {
  call, removeDir, startNode, tempDir, UNLIMITED_RATES, type NodeProcess,
} from '../helpers/node-process.js';

const METRIC = 'hivekv_event_loop_stalls_total';
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function stalls(node: NodeProcess): Promise<number> {
  const text = (await call(node.url, 'GET', '/metrics')).text;
  const line = text.split('\n').find((l) => l.startsWith(METRIC + ' '));
  expect(line).toBeDefined();
  return Number(line!.slice(METRIC.length + 1));
}

const stallLines = (node: NodeProcess) => node.output().split('\n')
  .filter((l) => l.includes('"msg":"event loop stalled"'));

describe('event loop stalls', () => {
  it('a held loop is told in the log and counted', async () => {
    const dataDir = tempDir('loop-stalls');
    const node = await startNode({ dataDir, env: UNLIMITED_RATES });
    try {
      await sleep(300);
      // A loaded machine may hold a free node's loop too: count from here.
      const before = await stalls(node);
      process.kill(node.pid, 'SIGSTOP');
      await sleep(400);
      process.kill(node.pid, 'SIGCONT');
      await sleep(300);
      expect(await stalls(node)).toBeGreaterThanOrEqual(before + 1);
      // Told at once, or at the end of the window of a stall told just before (10 s).
      const deadline = Date.now() + 12_000;
      let held: { level: number; stalls: number; longestMs: number } | undefined;
      while (held === undefined && Date.now() < deadline) {
        held = stallLines(node).map((l) => JSON.parse(l) as NonNullable<typeof held>)
          .find((l) => l.longestMs >= 250);
        if (held === undefined) await sleep(100);
      }
      expect(held).toBeDefined();
      expect(held!.level).toBe(40);
      expect(held!.stalls).toBeGreaterThanOrEqual(1);
      expect(await node.stop()).toBe(0);
    } finally {
      await node.kill();
      removeDir(dataDir);
    }
  });
});
