/**
 * The node's Prometheus metrics: its own registry, the series the operator reads, and the
 * bounds on label cardinality.
 */

import { register as globalRegistry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import {
  LABEL_VALUES_MAX,
  NodeMetrics,
  OVERFLOW_LABEL,
  TENANT_USAGE_SERIES_MAX,
} from '../../host/node/metrics.js';

const KV_ROUTE = '/api/v1/kv/:ns/:key';
const TENANT_A = '3f2504e0-4f89-11d3-9a0c-0305e82c3301';
const TENANT_B = '00000000-0000-0000-0000-000000000001';
const LATENCY = 'hivekv_http_request_duration_seconds';

describe('NodeMetrics', () => {
  it('renders every series it records', async () => {
    const metrics = new NodeMetrics();
    metrics.observeRequest(KV_ROUTE, 'get', 200, 0.0004);
    metrics.observeRequest(KV_ROUTE, 'GET', 200, 0.002);
    metrics.observeRequest('/api/v1/kv', 'POST', 429, 0.0001);
    metrics.refusal('rate_limited');
    metrics.observeFsync(0.003);
    metrics.setRaft({ term: 7, commitIndex: 41, appliedIndex: 40, lastIndex: 42, isLeader: true });
    metrics.sweptKeys(12);
    metrics.sweptKeys(3);
    metrics.setTenantUsage([{ tenant: TENANT_A, rows: 5, bytes: 640 }]);
    const text = await metrics.render();
    const lines = [
      `hivekv_http_requests_total{route="${KV_ROUTE}",method="GET",status="200"} 2`,
      'hivekv_http_requests_total{route="/api/v1/kv",method="POST",status="429"} 1',
      `${LATENCY}_bucket{le="0.0005",route="${KV_ROUTE}",method="GET"} 1`,
      `${LATENCY}_bucket{le="0.0025",route="${KV_ROUTE}",method="GET"} 2`,
      `${LATENCY}_bucket{le="0.0001",route="/api/v1/kv",method="POST"} 1`,
      `${LATENCY}_count{route="${KV_ROUTE}",method="GET"} 2`,
      'hivekv_fsync_duration_seconds_bucket{le="0.005"} 1',
      'hivekv_fsync_duration_seconds_bucket{le="10"} 1',
      'hivekv_refusals_total{reason="rate_limited"} 1',
      'hivekv_swept_keys_total 15',
      'hivekv_raft_term 7',
      'hivekv_raft_commit_index 41',
      'hivekv_raft_applied_index 40',
      'hivekv_raft_last_index 42',
      'hivekv_raft_is_leader 1',
      `hivekv_tenant_live_keys{tenant="${TENANT_A}"} 5`,
      `hivekv_tenant_live_bytes{tenant="${TENANT_A}"} 640`,
    ];
    for (const line of lines) expect(text).toContain(line);
    expect(text).toMatch(/^hivekv_process_resident_memory_bytes \d+/m);
    expect(metrics.contentType).toMatch(/^text\/plain/);
  });

  it('counts snapshots by event, times the ones taken and shows one being written',
    async () => {
      const metrics = new NodeMetrics({ defaultMetrics: false });
      const idle = await metrics.render();
      expect(idle).toContain('hivekv_snapshots_total{event="taken"} 0');
      expect(idle).toContain('hivekv_snapshot_in_progress 0');
      metrics.snapshotMilestone({ kind: 'restored', index: 100, dataBytes: 4000, ms: 30 });
      metrics.snapshotMilestone({ kind: 'begun', index: 200, dataBytes: 9000, ms: 0 });
      const writing = await metrics.render();
      expect(writing).toContain('hivekv_snapshot_in_progress 1');
      // Begun is not durable yet: the newest held is still the restored one.
      expect(writing).toContain('hivekv_snapshot_last_index 100');
      metrics.snapshotMilestone({ kind: 'taken', index: 200, dataBytes: 9000, ms: 2400 });
      metrics.snapshotMilestone({ kind: 'begun', index: 300, dataBytes: 9500, ms: 0 });
      metrics.snapshotMilestone({ kind: 'abandoned', index: 300, dataBytes: 9500, ms: 80 });
      const text = await metrics.render();
      for (const line of [
        'hivekv_snapshots_total{event="begun"} 2',
        'hivekv_snapshots_total{event="taken"} 1',
        'hivekv_snapshots_total{event="abandoned"} 1',
        'hivekv_snapshots_total{event="restored"} 1',
        'hivekv_snapshots_total{event="installed"} 0',
        'hivekv_snapshot_in_progress 0',
        'hivekv_snapshot_last_index 200',
        'hivekv_snapshot_last_bytes 9000',
        'hivekv_snapshot_duration_seconds_bucket{le="1"} 0',
        'hivekv_snapshot_duration_seconds_bucket{le="2.5"} 1',
        'hivekv_snapshot_duration_seconds_count 1',
      ]) expect(text).toContain(line);
    });

  it('uses a registry of its own: two nodes in one process do not clash', async () => {
    const one = new NodeMetrics();
    const two = new NodeMetrics();
    one.refusal('forbidden');
    expect(await one.render()).toContain('hivekv_refusals_total{reason="forbidden"} 1');
    expect(await two.render()).not.toContain('reason="forbidden"');
    expect(await globalRegistry.metrics()).not.toContain('hivekv_');
  });

  it('setTenantUsage replaces the series with the list given', async () => {
    const metrics = new NodeMetrics({ defaultMetrics: false });
    metrics.setTenantUsage([
      { tenant: TENANT_A, rows: 1, bytes: 10 },
      { tenant: TENANT_B, rows: 2, bytes: 20 },
    ]);
    metrics.setTenantUsage([{ tenant: TENANT_B, rows: 3, bytes: 30 }]);
    const text = await metrics.render();
    expect(text).not.toContain(TENANT_A);
    expect(text).toContain(`hivekv_tenant_live_keys{tenant="${TENANT_B}"} 3`);
    metrics.setTenantUsage([]);
    expect(await metrics.render()).not.toContain(TENANT_B);
  });

  it(`keeps the ${TENANT_USAGE_SERIES_MAX} largest tenants by bytes`, async () => {
    const metrics = new NodeMetrics({ defaultMetrics: false });
    const list = Array.from({ length: TENANT_USAGE_SERIES_MAX + 5 }, (_, i) => ({
      tenant: `t${i}`,
      rows: 1,
      bytes: i,
    }));
    metrics.setTenantUsage(list);
    const text = await metrics.render();
    const series = text.split('\n').filter((l) => l.startsWith('hivekv_tenant_live_bytes{'));
    expect(series).toHaveLength(TENANT_USAGE_SERIES_MAX);
    expect(text).not.toContain('tenant="t4"}');
    expect(text).toContain('tenant="t5"}');
  });

  it(`bounds route, method and reason labels to ${LABEL_VALUES_MAX} values`, async () => {
    const metrics = new NodeMetrics({ defaultMetrics: false });
    for (let i = 0; i < LABEL_VALUES_MAX + 10; i++) {
      metrics.observeRequest(`/r${i}`, 'GET', 200, 0.001);
      metrics.refusal(`reason${i}`);
    }
    metrics.observeRequest('/r0', 'GET', 999, 0.001);
    const text = await metrics.render();
    const requestSeries = text
      .split('\n')
      .filter((line) => line.startsWith('hivekv_http_requests_total{'));
    expect(requestSeries).toHaveLength(LABEL_VALUES_MAX + 2);
    expect(text).toContain(`route="${OVERFLOW_LABEL}",method="GET",status="200"} 10`);
    expect(text).toContain(`route="/r0",method="GET",status="${OVERFLOW_LABEL}"} 1`);
    expect(text).toContain(`hivekv_refusals_total{reason="${OVERFLOW_LABEL}"} 10`);
  });

  it('counts each request in its own series when routes and methods alternate', async () => {
    const metrics = new NodeMetrics({ defaultMetrics: false });
    const calls: Array<[string, string, number]> = [
      [KV_ROUTE, 'GET', 200], ['/api/v1/kv', 'POST', 200], [KV_ROUTE, 'GET', 404],
      [KV_ROUTE, 'PUT', 200], [KV_ROUTE, 'PUT', 200], [KV_ROUTE, 'GET', 200],
    ];
    for (const [route, method, status] of calls) {
      metrics.observeRequest(route, method, status, 0.001);
    }
    const text = await metrics.render();
    const count = (route: string, method: string, status: number): string =>
      `hivekv_http_requests_total{route="${route}",method="${method}",status="${status}"}`;
    expect(text).toContain(`${count(KV_ROUTE, 'GET', 200)} 2\n`);
    expect(text).toContain(`${count(KV_ROUTE, 'GET', 404)} 1\n`);
    expect(text).toContain(`${count(KV_ROUTE, 'PUT', 200)} 2\n`);
    expect(text).toContain(`${count('/api/v1/kv', 'POST', 200)} 1\n`);
  });

  it('ignores nonsense observations instead of throwing into a request', async () => {
    const metrics = new NodeMetrics({ defaultMetrics: false });
    metrics.observeRequest(KV_ROUTE, 'GET', 200, Number.NaN);
    metrics.observeFsync(-1);
    metrics.sweptKeys(0);
    const text = await metrics.render();
    expect(text).toContain(`status="200"} 1`);
    expect(text).toContain('hivekv_fsync_duration_seconds_count 0');
    expect(text).toContain('hivekv_swept_keys_total 0');
  });
});
