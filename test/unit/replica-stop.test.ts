/**
 * What a stopping node answers the calls still waiting on it. A write it already proposed
 * may yet commit (through the other members, or from its own log at its restart), so its
 * outcome is unknown: 503 `timeout`, never `shutting_down`, which says that nothing changed
 * and that the call may go to another node as it is (an `incr` sent again would count
 * twice). A write that waited for a leader was never proposed: `shutting_down`.
 *
 * The same for a membership change. Real replicas over a real FileStorage; the call is held
 * where each case needs it: its fsync never ends (one voter), or no leader is ever elected
 * (three voters, peers silent).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { KvCall } from '../../host/machine/commands.js';
import { StateMachine } from '../../host/machine/state-machine.js';
import type { PeerAddress } from '../../host/node/config.js';
import { Replica, type ReplicaOptions } from '../../host/node/replica.js';
import { realScheduler } from '../../host/node/scheduler.js';
import { execute } from '../../host/node/service.js';
import { FileStorage } from '../../host/storage/file-storage.js';
import type { Transport } from '../../host/transport/transport.js';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** Peers that never answer: every frame is dropped. */
class SilentPeers implements Transport {
  async start(): Promise<void> {}
  send(): void {}
  flush(): void {}
  setPeers(_peers: readonly PeerAddress[]): void {}
  async close(): Promise<void> {}
}

const incr: KvCall = { tenant: 'default', readBytesCeiling: 1 << 20, ops: [{ op: 'incr',
  ns: 'ns', key: 'hits', delta: '1', min: null, max: null, expiry: { kind: 'forever' },
  required: false }] };

function options(voters: readonly string[]): ReplicaOptions {
  return {
    id: 'n1', voters, seed: 7, incarnation: 1, peerLink: true,
    peers: voters.map((id, i) => ({ id, host: '127.0.0.1', port: 1 + i })),
    tickMs: 20, electionTicks: 10, requestTimeoutMs: 60_000, requireGrant: false,
    expireEveryMs: 1000, expireBatch: 100, snapshotEveryEntries: 1_000_000,
    snapshotEveryBytes: 1 << 30,
  };
}

/**
 * Starts a replica, makes one call (`send`) once `hold` holds it, stops the replica, and
 * returns the call's answer.
 */
async function answerAtStop<T>(voters: readonly string[], hold: (storage: FileStorage) => void,
  send: (replica: Replica) => Promise<T>): Promise<T> {
  const dir = mkdtempSync(join(tmpdir(), 'hivekv-replica-stop-'));
  dirs.push(dir);
  const storage = new FileStorage(dir);
  let fatal: Error | null = null;
  const replica = new Replica(options(voters), { storage, transport: new SilentPeers(),
    machine: StateMachine.create(), scheduler: realScheduler,
    onFatal: (error) => { fatal = error; } });
  await replica.start();
  hold(storage);
  let answer: T | null = null;
  void send(replica).then((result) => { answer = result; });
  await new Promise((resolve) => setTimeout(resolve, 300));
  expect(answer).toBeNull();
  await replica.stop();
  expect(fatal).toBeNull();
  expect(answer).not.toBeNull();
  return answer as unknown as T;
}

/** From here on no fsync ends: what the leader appends is never committed. */
function syncsNeverEnd(storage: FileStorage): void {
  storage.sync = () => new Promise<void>(() => {});
}

describe('a stopping node answers the calls still waiting', () => {
  it('a proposed write whose fsync has not ended: outcome unknown (timeout)', async () => {
    const answer = await answerAtStop(['n1'], syncsNeverEnd, (r) => execute(r, incr));
    expect(answer).toMatchObject({ kind: 'unavailable', reason: 'timeout' });
    expect(answer.kind === 'unavailable' && answer.detail).toContain('outcome is unknown');
  });

  it('a write that waited for a leader: shutting_down, nothing changed', async () => {
    const answer = await answerAtStop(['n1', 'n2', 'n3'], () => {}, (r) => execute(r, incr));
    expect(answer).toMatchObject({ kind: 'unavailable', reason: 'shutting_down' });
  });

  it('a membership change the leader appended: outcome unknown (timeout)', async () => {
    const answer = await answerAtStop(['n1'], syncsNeverEnd,
      (r) => r.changeMembers({ kind: 'addLearner', id: 'n2', peer: '127.0.0.1:2' }));
    expect(answer).toMatchObject({ kind: 'unavailable', reason: 'timeout' });
    expect(answer.kind === 'unavailable' && answer.detail).toContain('outcome is unknown');
  });

  it('a membership change that waited for a leader: shutting_down', async () => {
    const answer = await answerAtStop(['n1', 'n2', 'n3'], () => {},
      (r) => r.changeMembers({ kind: 'addLearner', id: 'n4', peer: '127.0.0.1:4' }));
    expect(answer).toMatchObject({ kind: 'unavailable', reason: 'shutting_down' });
  });
});
