/**
 * The transport of a single-node cluster: there is nobody to talk to, so nothing is sent
 * and nothing arrives. A frame addressed to a peer here is a bug in the caller.
 */
import type { PeerAddress } from '../node/config.js';
import type { Transport } from './transport.js';

export class NoPeersTransport implements Transport {
  async start(): Promise<void> {}

  send(to: string): void {
    throw new Error(`a single node has no peer ${to} to send to`);
  }

  /** Nothing is ever queued. */
  flush(): void {}

  /** Only an empty list: a node without a peer listener refuses membership changes first. */
  setPeers(peers: readonly PeerAddress[]): void {
    if (peers.length > 0) {
      throw new Error(`a node without a peer listener cannot reach ${peers.map((p) => p.id)}`);
    }
  }

  async close(): Promise<void> {}
}
