/**
 * The peer transport's counters as Prometheus series, read when /metrics is scraped:
 * connections refused by kind (a handshake refusal, a port bound a stranger broke) and frames
 * dropped because a peer was not linked or its buffer was full. The kinds are a fixed, small
 * set (`ws-transport.ts`), so the label stays bounded.
 */
import { Counter, type Registry } from 'prom-client';
import type { TransportStats } from '../transport/ws-transport.js';

export function registerPeerMetrics(registry: Registry, stats: TransportStats): void {
  new Counter({
    name: 'hivekv_peer_connections_refused_total',
    help: 'Peer connections refused or closed, by kind (handshake-secret, port-deadline, ...).',
    labelNames: ['kind'],
    registers: [registry],
    collect() {
      this.reset();
      for (const [kind, count] of Object.entries(stats.refusals)) this.inc({ kind }, count);
    },
  });
  new Counter({
    name: 'hivekv_peer_frames_dropped_total',
    help: 'Raft frames dropped because their peer was not linked or its send buffer was full.',
    registers: [registry],
    collect() {
      this.reset();
      if (stats.droppedFrames > 0) this.inc(stats.droppedFrames);
    },
  });
}
