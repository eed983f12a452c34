/**
 * A data directory deleted under a running node: the node cannot keep what it would
 * acknowledge, so it stops with a message that says why instead of answering writes. A
 * follower, which takes no call, stops too: its log's files stay open, so it would go on
 * acknowledging its leader's entries into files that are gone.
 */
import { rmSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { agreedLeader, memberPorts, peersFlag, waitFor } from '../helpers/cluster.js';
import { kv, removeDir, startNode, tempDir, type NodeProcess } from '../helpers/node-process.js';

const started: NodeProcess[] = [];
const dirs: string[] = [];

afterEach(async () => {
  for (const node of started.splice(0)) await node.kill();
  for (const dir of dirs.splice(0)) removeDir(dir);
});

describe('a data directory deleted under a running node', () => {
  it('stops the node at the next write, naming the directory', async () => {
    const dir = tempDir('gone');
    dirs.push(dir);
    const node = await startNode({ dataDir: dir });
    started.push(node);
    const put = { op: 'put', ns: 'n', key: 'k', value: 1, forever: true };
    expect((await kv(node.url, [put])).status).toBe(200);
    rmSync(dir, { recursive: true, force: true });
    // The free-space check runs at most once a second: keep writing until it notices.
    await waitFor('the node to stop', 10_000, async () => {
      await kv(node.url, [put]).catch(() => null);
      return node.output().includes('the data directory cannot be checked') ? true : undefined;
    });
    expect(await node.exited).toBe(1);
    expect(node.output()).toContain('fatal: the node stops');
    expect(node.output()).toContain(dir);
  });

  it('stops a follower that takes no call, naming the directory', async () => {
    const peers = peersFlag(await memberPorts(3));
    const nodes = new Map<string, NodeProcess>();
    for (const id of ['n1', 'n2', 'n3']) {
      const dir = tempDir(`gone-${id}`);
      dirs.push(dir);
      const node = await startNode({ dataDir: dir, args: ['--id', id, '--peers', peers] });
      started.push(node);
      nodes.set(id, node);
    }
    const leaderId = await agreedLeader([...nodes.values()]);
    const followerId = ['n1', 'n2', 'n3'].find((id) => id !== leaderId)!;
    const follower = nodes.get(followerId)!;
    const dir = dirs[['n1', 'n2', 'n3'].indexOf(followerId)]!;
    rmSync(dir, { recursive: true, force: true });
    await waitFor('the follower to stop', 10_000, async () =>
      follower.output().includes('the data directory cannot be checked') ? true : undefined);
    expect(await follower.exited).toBe(1);
    expect(follower.output()).toContain('fatal: the node stops');
    expect(follower.output()).toContain(dir);
  }, 60_000);
});
