/**
 * Live: this node's KV calls per second, p50 and p99 latency of those calls, p50 and p99
 * fsync latency, and refusals per second by reason, from `/metrics` once a second, for the
 * last five minutes (`sampler.ts` keeps the history while other views are shown).
 */
import { useEffect, useState } from 'preact/hooks';
import { Chart, PALETTE } from './chart.js';
import { formatCount, formatNumber } from './format.js';
import type { LiveSampler } from './sampler.js';
import { RefusalBox } from './widgets.js';

function useSampler(sampler: LiveSampler): number {
  const [version, setVersion] = useState(0);
  useEffect(() => sampler.subscribe(() => setVersion((n) => n + 1)), [sampler]);
  return version;
}

function Figure({ label, value, unit, test }:
  { label: string; value: number | null | undefined; unit: string; test: string }) {
  return (
    <div class="figure">
      <span class="figure-label">{label}</span>
      <span class="figure-value" data-test={test}>{formatNumber(value)}</span>
      <span class="muted"> {unit}</span>
    </div>
  );
}

export function LivePage({ sampler, node }: { sampler: LiveSampler; node: string }) {
  useSampler(sampler);
  const h = sampler.history;
  const latest = sampler.latest;
  const reasons = [...h.refusals.keys()];
  return (
    <section aria-labelledby="live-title">
      <h1 id="live-title">Live <span class="muted">· node {node}, last 5 minutes</span></h1>
      {sampler.error === null ? null : <RefusalBox refusal={sampler.error}
        title="Metrics unavailable" />}
      <div class="figures">
        <Figure label="KV calls" value={latest?.callsPerSec} unit="/s" test="calls-per-sec" />
        <Figure label="p50" value={latest?.latencyP50Ms} unit="ms" test="latency-p50" />
        <Figure label="p99" value={latest?.latencyP99Ms} unit="ms" test="latency-p99" />
        <Figure label="fsync p50" value={latest?.fsyncP50Ms} unit="ms" test="fsync-p50" />
        <Figure label="fsync p99" value={latest?.fsyncP99Ms} unit="ms" test="fsync-p99" />
      </div>
      <div class="charts">
        <Chart title="KV calls per second" unit="calls/s"
          series={[{ label: 'calls/s', color: PALETTE[0]! }]} data={[h.at, h.calls]} />
        <Chart title="KV call latency" unit="ms" data={[h.at, h.latencyP50, h.latencyP99]}
          series={[{ label: 'p50', color: PALETTE[0]! }, { label: 'p99', color: PALETTE[1]! }]} />
        <Chart title="fsync latency" unit="ms" data={[h.at, h.fsyncP50, h.fsyncP99]}
          series={[{ label: 'p50', color: PALETTE[0]! }, { label: 'p99', color: PALETTE[1]! }]} />
        <Chart title="Refusals per second" unit="refusals/s"
          data={[h.at, ...reasons.map((r) => h.refusals.get(r) ?? [])]}
          series={reasons.map((r, i) => ({ label: r, color: PALETTE[i % PALETTE.length]! }))} />
      </div>
      <h2>Refusals since this node started</h2>
      <table class="compact" data-test="refusal-totals">
        <thead><tr><th scope="col">Reason</th><th scope="col">Count</th></tr></thead>
        <tbody>{[...sampler.refusalTotals].sort((a, b) => b[1] - a[1]).map(([r, n]) => (
          <tr key={r}><td class="mono">{r}</td><td class="num">{formatCount(n)}</td></tr>))}
        </tbody>
      </table>
    </section>
  );
}
