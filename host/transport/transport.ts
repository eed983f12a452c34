/**
 * The peer link's seam: opaque frames between members of the cluster. Two implementations:
 * `ws-transport.ts` (WebSocket with `ws`) and the simulator's network (test/sim), which can
 * delay, drop, duplicate, reorder and partition.
 *
 * Delivery is best effort: a frame to an unreachable peer is dropped, and Raft resends.
 * Per-peer queues are bounded; a full queue drops the newest frame.
 */
import type { PeerAddress } from '../node/config.js';

export interface Transport {
  /** Starts listening and dialling. `onFrame` is called once per received frame. */
  start(onFrame: (from: string, frame: Uint8Array) => void): Promise<void>;
  /** Queues a frame for `to`. Never throws for a missing peer. */
  send(to: string, frame: Uint8Array): void;
  /**
   * Writes now what `send` queued in this turn of the event loop (a transport may hold a
   * turn's frames to write them together): the caller is about to block the loop.
   */
  flush(): void;
  /**
   * The members to reach (this node excluded), after a configuration change: new ids are
   * dialled, links this node dialled to ids no longer listed are closed, a changed address is
   * redialled. A peer that reached this node may still be answered while it is not listed
   * (a node being added learns who leads only from the leader's messages).
   */
  setPeers(peers: readonly PeerAddress[]): void;
  close(): Promise<void>;
}
