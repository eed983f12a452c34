/**
 * Checkpoint entries on a real three-node cluster: the leader proposes its digest every
 * HIVEKV_DIGEST_EVERY entries and every replica counts the checkpoints it passed in
 * /metrics; `hivekv replay` verifies every checkpoint in a data directory. A follower whose
 * log was edited (re-checksummed with the storage code's own framing, so only the content
 * tells) is restarted: it stops at the next checkpoint with exit status 3 and a message that
 * names the index and both digests, the others go on serving, and replaying its directory
 * exits 3 too.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { plantDivergence } from '../helpers/plant-divergence.js';
import { agreedLeader, memberPorts, peersFlag, sleep, waitFor } from '../helpers/cluster.js';
import {
  call, kv, removeDir, startNode, tempDir, UNLIMITED_RATES, type NodeProcess,
} from '../helpers/node-process.js';
import { hivekv } from '../helpers/hivekv-cli.js';

const EVERY = 20;
const WRITES = 70;
const MARKER = 'planted-marker-value';
/** Writes after the restart, at most, while waiting for the edited follower to stop. */
const MORE_WRITES_MAX = 200;
const INCR = { op: 'incr', ns: 'c', key: 'n', delta: 1, forever: true };
const DIVERGED = new RegExp('state diverged: at index (\\d+) the leader\'s digest is ' +
  '([0-9a-f]{16}) and this node\'s is ([0-9a-f]{16})');

function passedCheckpoints(metricsText: string): number {
  const m = /^hivekv_checkpoints_total\{verdict="passed"\} (\d+)/m.exec(metricsText);
  return m === null ? -1 : Number(m[1]);
}

/** Starts a node expected to stop on its own: its exit status and output either way. */
async function startExpectingStop(start: () => Promise<NodeProcess>,
  whileRunning: (node: NodeProcess) => Promise<void>): Promise<{ code: number | null;
  output: string }> {
  let node: NodeProcess;
  try {
    node = await start();
  } catch (error) {
    // It may stop before it serves: while catching up on its own log at start.
    const m = /node exited with (\d+) before serving:\n([\s\S]*)$/.exec(String(error));
    if (m === null) throw error;
    return { code: Number(m[1]), output: m[2]! };
  }
  try {
    await whileRunning(node);
    const code = await Promise.race([node.exited, sleep(20_000).then(() => 'running' as const)]);
    if (code === 'running') throw new Error(`the edited follower still runs:\n${node.output()}`);
    return { code, output: node.output() };
  } finally {
    await node.kill();
  }
}

describe('checkpoints on a three-node cluster', () => {
  const dirs: string[] = [];
  afterAll(() => {
    for (const dir of dirs) removeDir(dir);
  });

  it('pass on every replica, and stop a replica whose state was made to differ', async () => {
    const members = await memberPorts(3);
    const env = { ...UNLIMITED_RATES, HIVEKV_DIGEST_EVERY: String(EVERY),
      HIVEKV_SNAPSHOT_EVERY_ENTRIES: '1000000', HIVEKV_TICK_MS: '20' };
    const start = (i: number) => startNode({ dataDir: dirs[i]!, env,
      args: ['--id', members[i]!.id, '--peers', peersFlag(members)] });
    const nodes: NodeProcess[] = [];
    for (const m of members) dirs.push(tempDir(`checkpoint-${m.id}`));
    try {
      for (let i = 0; i < 3; i++) nodes.push(await start(i));
      await agreedLeader(nodes);
      for (let i = 0; i < WRITES; i++) {
        // The marker's key is written once: the edited state stays different for good
        // (an overwrite would make the replicas agree again before a checkpoint saw it).
        const marked = i === WRITES / 2;
        const r = await kv(nodes[i % 3]!.url, [{ op: 'put', ns: 'c',
          key: marked ? 'marker' : `k${i % 9}`, value: marked ? MARKER : { i }, forever: true }]);
        expect(r.status).toBe(200);
      }
      for (const node of nodes) {
        await waitFor('a checkpoint passed on every replica', 10_000, async () => {
          const metrics = await call(node.url, 'GET', '/metrics');
          return passedCheckpoints(String(metrics.text)) >= 2 ? true : undefined;
        });
      }
      const follower = await followerIndex(nodes);
      await nodes[follower]!.stop();
      const plantedAt = plantDivergence(dirs[follower]!, MARKER);
      const others = nodes.filter((_, i) => i !== follower);
      let more = 0;
      const stopped = await startExpectingStop(() => start(follower), async (node) => {
        nodes[follower] = node;
        while (more < MORE_WRITES_MAX && await Promise.race([node.exited.then(() => true),
          sleep(0).then(() => false)]) === false) {
          await kv(others[more % 2]!.url, [INCR]);
          more++;
        }
      });
      expect(stopped.code, stopped.output).toBe(3);
      const m = DIVERGED.exec(stopped.output);
      expect(m, stopped.output).not.toBeNull();
      expect(Number(m![1])).toBeGreaterThanOrEqual(plantedAt);
      expect(m![2]).not.toBe(m![3]);
      // The others go on.
      const after = await kv(others[0]!.url, [INCR]);
      expect(after.status).toBe(200);
      for (const node of others) await node.stop();
      // Replay verifies the checkpoints in each log: the edited one diverges where it did.
      const healthy = await hivekv(['replay', '--data', dirs[(follower + 1) % 3]!, '--json']);
      expect(healthy.code, healthy.stderr).toBe(0);
      const end = healthy.lines.at(-1);
      expect(end.checkpoints.passed).toBeGreaterThanOrEqual(2);
      expect(end.checkpoints.diverged).toBe(0);
      const inspect = await hivekv(['inspect', '--data', dirs[(follower + 1) % 3]!]);
      const commands = JSON.parse(inspect.stdout).commands;
      expect(commands.checkpoint.count).toBe(end.checkpoints.passed + end.checkpoints.diverged +
        end.checkpoints.unverifiable);
      expect(commands.call.count).toBeGreaterThanOrEqual(WRITES);
      const edited = await hivekv(['replay', '--data', dirs[follower]!, '--json']);
      expect(edited.code).toBe(3);
      expect(edited.lines.at(-1).checkpoints.diverged).toBeGreaterThanOrEqual(1);
      expect(edited.stderr).toContain(`digest at index ${m![1]} is ${m![2]}`);
    } finally {
      for (const node of nodes) await node.kill();
    }
  }, 120_000);
});

/** A node that is not the leader. */
async function followerIndex(nodes: readonly NodeProcess[]): Promise<number> {
  const healths = await Promise.all(nodes.map((n) => call(n.url, 'GET', '/health')));
  const i = healths.findIndex((h) => h.body.role === 'follower');
  if (i < 0) throw new Error('no follower');
  return i;
}
