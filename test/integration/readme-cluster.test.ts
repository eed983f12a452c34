/**
 * The README's cluster, run as a new user runs it: "A three-node cluster on one machine"
 * started with its own command lines, the routes section's cluster views on the nodes they
 * name, "The client and the command line"'s script and commands against it, then
 * "Growing, replacing and shrinking a cluster": a fourth node joins, is added and promoted,
 * and the first is removed, with the README's own `hivekv members` commands. Every command
 * is read from README.md (test/helpers/readme-runner.ts); a README whose commands stop
 * working, or that grows one this test cannot run, fails here. Bounded: four nodes, each
 * stopped by the PID this test started.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agreedLeader, waitFor } from '../helpers/cluster.js';
import { kv, type NodeProcess } from '../helpers/node-process.js';
import { curlRequest, type ShellCommand } from '../helpers/readme-commands.js';
import { ReadmeRunner } from '../helpers/readme-runner.js';

const WAIT_MS = 30_000;
const runner = new ReadmeRunner('cluster');
let nodes: NodeProcess[] = [];
let clusterId = '';

beforeAll(async () => {
  const commands = await runner.section('## A three-node cluster on one machine',
    '## Operating a cluster');
  const [exported, ...rest] = commands;
  expect(exported?.words).toEqual(['export', 'HIVEKV_CLUSTER_SECRET=$(openssl rand -hex 32)']);
  runner.env.HIVEKV_CLUSTER_SECRET = randomBytes(32).toString('hex');
  const serves = rest.filter((c) => c.words[1] === 'hivekv');
  expect(serves).toHaveLength(3);
  for (const serve of serves) expect(serve.background, serve.text).toBe(true);
  nodes = await Promise.all(serves.map((c) => runner.serve(c)));
  const health = rest.filter((c) => c.words[0] === 'curl');
  expect(health).toHaveLength(1);
  const answer = await runner.curl(curlRequest(health[0]!.words));
  expect(answer.status, answer.text).toBe(200);
  clusterId = String(JSON.parse(answer.text).clusterId);
  expect(await agreedLeader(nodes, WAIT_MS)).toMatch(/^n[123]$/);
});

afterAll(async () => {
  await runner.close();
});

/** A `hivekv` command of the README that must exit 0; its stdout as JSON. */
async function succeeds(command: ShellCommand): Promise<unknown> {
  const run = await runner.run(command);
  expect(run.code, `${command.text}\n${run.stderr}`).toBe(0);
  return run.json ?? run.lines;
}

describe('the README\'s cluster', () => {
  it('serves a request on any node, and shows its members where the README says', async () => {
    // "Every node accepts every request": a write on one node is read on another.
    const written = await kv(nodes[1]!.url, [{ op: 'put', ns: 'readme', key: 'k',
      value: 'v', forever: true }]);
    expect(written.body.results[0].applied).toBe(true);
    const read = await kv(nodes[2]!.url, [{ op: 'get', ns: 'readme', key: 'k' }]);
    expect(read.body.results[0]).toMatchObject({ found: true, value: 'v' });

    const views = (await runner.section('## The routes, by example',
      '## The client and the command line')).filter((c) => {
      const request = curlRequest(c.words);
      return request.method === 'GET' && (request.url.endsWith('/api/v1/system/cluster') ||
        request.url.endsWith('/api/v1/system/members'));
    });
    expect(views).toHaveLength(2);
    for (const view of views) {
      const answer = await runner.curl(curlRequest(view.words));
      expect(answer.status, `${view.text}\n${answer.text}`).toBe(200);
      const body = JSON.parse(answer.text) as { members: Array<Record<string, unknown>> };
      expect(body.members.map((m) => m.id).sort()).toEqual(['n1', 'n2', 'n3']);
    }
  });

  it('runs the client example against it', async () => {
    const blocks = await runner.code('## The client and the command line', '## Errors', 'js');
    expect(blocks).toHaveLength(1);
    const run = await runner.runModule(blocks[0]!);
    expect(run.code, run.stderr).toBe(0);
    const row = await kv(nodes[2]!.url, [{ op: 'get', ns: 'orders', key: '9137' }]);
    expect(row.body.results[0]).toMatchObject({ found: true, value: { status: 'paid' } });
  });

  it('runs the command-line examples against it', async () => {
    const commands = await runner.section('## The client and the command line', '## Errors');
    const [exported, ...rest] = commands;
    expect(exported?.words[0]).toBe('export');
    const [name, value] = exported!.words[1]!.split('=');
    expect(name).toBe('HIVEKV_URL');
    runner.env[name!] = value!;
    expect(rest.map((c) => c.words.slice(1, 4).join(' '))).toEqual(['hivekv kv put',
      'hivekv kv get', 'hivekv kv incr', 'hivekv health --all']);
    for (const command of rest) await succeeds(command);
    delete runner.env.HIVEKV_URL;
  });

  it('grows to four nodes and removes the first with its members commands', async () => {
    const growing = await runner.section('## Growing, replacing and shrinking a cluster',
      '## The operator console', {
        "<the cluster's secret>": runner.env.HIVEKV_CLUSTER_SECRET!,
        "<the cluster's id>": clusterId });
    expect(growing.map((c) => c.words.slice(0, 4).join(' '))).toEqual([
      'npx hivekv serve --port', 'npx hivekv members add', 'npx hivekv members promote',
      'npx hivekv members list', 'npx hivekv members remove']);
    const [joinCommand, add, promote, list, remove] = growing;
    expect(joinCommand!.background).toBe(true);
    const n4 = await runner.serve(joinCommand!);
    await succeeds(add!);
    await succeeds(promote!);
    const listed = await succeeds(list!) as { members: Array<{ id: string; role: string }> };
    expect(listed.members.find((m) => m.id === 'n4')?.role).toBe('voter');

    await succeeds(remove!);
    const after = await waitFor('the removal seen on n4', WAIT_MS, async () => {
      const answer = await fetch(`${n4.url}/api/v1/system/members`);
      const members = (await answer.json() as { members: Array<{ id: string }> }).members;
      return members.length === 3 ? members : undefined;
    });
    expect(after.map((m) => m.id).sort()).toEqual(['n2', 'n3', 'n4']);
    // "the removed node then answers 503 not_a_member (/health says "role":"removed")"
    const n1 = nodes[0]!;
    await waitFor('n1 to say it was removed', WAIT_MS, async () => {
      const health = await (await fetch(`${n1.url}/health`)).json() as { role?: string };
      return health.role === 'removed' ? true : undefined;
    });
    const refused = await kv(n1.url, [{ op: 'get', ns: 'readme', key: 'k' }]);
    expect(refused.status).toBe(503);
    expect(refused.body.reason).toBe('not_a_member');
  });
});
