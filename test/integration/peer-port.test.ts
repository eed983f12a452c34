/**
 * The peer port faces whoever can reach it. A stranger's bytes may cost the stranger its
 * connection, never the node its process: this file probes a real node's peer port the way
 * an attacker or a broken client would, and checks that the node still serves afterwards.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { frameHeader, runScript, upgradeRequest } from '../jepsen/peer-probe.js';
import {
  call, freePort, removeDir, startNode, tempDir, type NodeProcess,
} from '../helpers/node-process.js';

const SECRET = 'peer-port-test-secret-0123456789';

let node: NodeProcess;
let dir = '';
let peerPort = 0;

beforeAll(async () => {
  dir = tempDir('peer-port');
  const ports = await Promise.all([freePort(), freePort(), freePort()]);
  peerPort = ports[0] ?? 0;
  const peers = ports.map((p, i) => `n${i + 1}=127.0.0.1:${p}`).join(',');
  node = await startNode({
    dataDir: dir,
    env: { HIVEKV_CLUSTER_SECRET: SECRET },
    args: ['--id', 'n1', '--peers', peers],
  });
});

afterAll(async () => {
  await node?.kill();
  removeDir(dir);
});

async function stillServing(): Promise<void> {
  const health = await call(node.url, 'GET', '/health');
  expect(health.status).toBe(200);
  expect(health.body.id).toBe('n1');
}

describe('the peer port', () => {
  it('survives a frame header announcing 2^40 bytes, on every upgrade path', async () => {
    const target = { host: '127.0.0.1', port: peerPort };
    for (const path of ['/raft/n2', '/raft/n9', '/raft/v1', '/']) {
      const outcome = await runScript(target, [
        { bytes: upgradeRequest(target, path), pauseMs: 100 },
        { bytes: frameHeader({ opcode: 2, length: 2 ** 40 }) },
        { bytes: Buffer.alloc(1024, 7) },
      ]);
      expect(outcome.closedByNode).toBe(true);
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
    await stillServing();
  });
});
