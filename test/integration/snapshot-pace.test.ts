/**
 * A real node writes its own snapshots at the pace HIVEKV_SNAPSHOT_BYTES_PER_SEC sets, keeps
 * answering writes while one is written, and shows it in /metrics: the snapshot in progress,
 * the events, the time one took, the newest one held; after a restart, the one restored. The
 * snapshot an export waits for is written without the pace.
 */
import { describe, expect, it } from 'vitest';
import {
  call, kv, removeDir, startNode, tempDir, UNLIMITED_RATES, type NodeProcess,
} from '../helpers/node-process.js';

const MiB = 1024 * 1024;
/** State written before the snapshot: at 1 MiB/s its slices take about three seconds. */
const STATE_BYTES = 3 * MiB;
const VALUE_BYTES = 60_000;

/** The value of one series in a Prometheus text, or null when it is absent. */
function series(text: string, name: string): number | null {
  const line = text.split('\n').find((l) => l.startsWith(name + ' '));
  return line === undefined ? null : Number(line.slice(name.length + 1));
}

async function metricsOf(node: NodeProcess): Promise<string> {
  return (await call(node.url, 'GET', '/metrics')).text;
}

/** About STATE_BYTES of 60 KB values, keys k0, k1, ... */
async function fillState(node: NodeProcess): Promise<void> {
  const value = 'v'.repeat(VALUE_BYTES);
  for (let i = 0; i * VALUE_BYTES < STATE_BYTES; i += 8) {
    const operations = Array.from({ length: 8 }, (_, j) => ({ op: 'put', ns: 'pace',
      key: `k${i + j}`, value, forever: true }));
    expect((await kv(node.url, operations)).status).toBe(200);
  }
}

/** Writes one small put at a time until a snapshot is taken; the writes seen during it. */
async function writeUntilSnapshotTaken(node: NodeProcess): Promise<number> {
  let writesDuring = 0;
  for (let round = 0; round < 400; round++) {
    const r = await kv(node.url, [{ op: 'put', ns: 'pace', key: `during${round}`,
      value: 'x', forever: true }]);
    expect(r.status).toBe(200);
    const text = await metricsOf(node);
    if (series(text, 'hivekv_snapshot_in_progress') === 1) writesDuring++;
    if ((series(text, 'hivekv_snapshots_total{event="taken"}') ?? 0) >= 1) break;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  return writesDuring;
}

/**
 * Writes past the newest snapshot, exports (which takes a new one), and returns how long that
 * snapshot took, from the duration histogram's `sum` and `count` before it.
 */
async function exportSnapshotSeconds(node: NodeProcess, sumBefore: number,
  countBefore: number): Promise<number> {
  for (let i = 0; i < 20; i++) {
    expect((await kv(node.url, [{ op: 'put', ns: 'pace', key: `k${i}`, value: 'y',
      forever: true }])).status).toBe(200);
  }
  expect((await call(node.url, 'GET', '/api/v1/system/export')).status).toBe(200);
  const text = await metricsOf(node);
  expect(series(text, 'hivekv_snapshot_duration_seconds_count')).toBe(countBefore + 1);
  return (series(text, 'hivekv_snapshot_duration_seconds_sum') ?? 0) - sumBefore;
}

describe('a paced snapshot', () => {
  it('takes the time its pace sets, while writes go on, and shows in /metrics', async () => {
    const dir = tempDir('snapshot-pace');
    // Snapshots only when asked by the entry count below; the pace is the slowest allowed.
    const env = { ...UNLIMITED_RATES, HIVEKV_SNAPSHOT_EVERY_ENTRIES: '100000',
      HIVEKV_SNAPSHOT_BYTES_PER_SEC: String(MiB) };
    let node: NodeProcess | null = null;
    try {
      node = await startNode({ dataDir: dir, env });
      await fillState(node);
      const before = await metricsOf(node);
      expect(series(before, 'hivekv_snapshot_in_progress')).toBe(0);
      expect(series(before, 'hivekv_snapshots_total{event="begun"}')).toBe(0);
      expect(await node.stop()).toBe(0);

      // Restarted with a snapshot due after every 10 entries: the next writes begin one.
      node = await startNode({ dataDir: dir, env: { ...env,
        HIVEKV_SNAPSHOT_EVERY_ENTRIES: '10' } });
      const startedAt = Date.now();
      const writesDuring = await writeUntilSnapshotTaken(node);
      const after = await metricsOf(node);
      // Writes were answered while the snapshot was written, not held back by it.
      expect(writesDuring).toBeGreaterThan(10);
      expect(series(after, 'hivekv_snapshots_total{event="taken"}')).toBeGreaterThanOrEqual(1);
      expect(series(after, 'hivekv_snapshot_last_bytes')).toBeGreaterThan(STATE_BYTES);
      // 3 MiB and more at 1 MiB/s: at least two seconds between the first slice and the last.
      const sum = series(after, 'hivekv_snapshot_duration_seconds_sum') ?? 0;
      const count = series(after, 'hivekv_snapshot_duration_seconds_count') ?? 0;
      expect(count).toBeGreaterThanOrEqual(1);
      expect(sum / count).toBeGreaterThanOrEqual(2);
      expect(Date.now() - startedAt).toBeGreaterThanOrEqual(2000);
      const lastIndex = series(after, 'hivekv_snapshot_last_index') ?? 0;
      expect(lastIndex).toBeGreaterThan(0);

      // An export past that snapshot takes a new one, unpaced: its client waits for it.
      // At the pace it could not take under two seconds (3 MiB at 1 MiB/s).
      expect(await exportSnapshotSeconds(node, sum, count)).toBeLessThan(1.5);
      expect(await node.stop()).toBe(0);

      // A restart restores the newest snapshot, and says so.
      node = await startNode({ dataDir: dir, env });
      const restarted = await metricsOf(node);
      expect(series(restarted, 'hivekv_snapshots_total{event="restored"}')).toBe(1);
      expect(series(restarted, 'hivekv_snapshot_last_index')).toBeGreaterThan(lastIndex);
      const read = await kv(node.url, [{ op: 'get', ns: 'pace', key: 'k30' }]);
      expect(read.body.results[0].value).toBe('v'.repeat(VALUE_BYTES));
    } catch (error) {
      throw new Error(`${(error as Error).message}\n${node?.output() ?? ''}`);
    } finally {
      await node?.kill();
      removeDir(dir);
    }
  }, 90_000);
});
