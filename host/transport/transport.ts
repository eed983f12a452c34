/**
 * The peer link's seam: opaque frames between members of the cluster. Two implementations:
 * `ws-transport.ts` (WebSocket with `ws`) and the simulator's network (test/sim), which can
 * delay, drop, duplicate, reorder and partition.
 *
 * Delivery is best effort: a frame to an unreachable peer is dropped, and Raft resends.
 * Per-peer queues are bounded; a full queue drops the newest frame.
 */
export interface Transport {
  /** Starts listening and dialling. `onFrame` is called once per received frame. */
  start(onFrame: (from: string, frame: Uint8Array) => void): Promise<void>;
  /** Queues a frame for `to`. Never throws for a missing peer. */
  send(to: string, frame: Uint8Array): void;
  close(): Promise<void>;
}
