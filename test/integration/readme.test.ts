/**
 * The README, run as a new user runs it: the curl examples of "The routes, by example"
 * against one node started as `npm start` starts it; then "A three-node cluster on one
 * machine" with its own command lines, and "Growing, replacing and shrinking a cluster": a
 * fourth node joins, is added and promoted, and the first is removed, with the README's own
 * `hivekv members` commands. Every command is read from README.md itself
 * (test/helpers/readme-commands.ts), its ports moved to free ones and its data directories
 * into a temporary one. A README whose commands stop working, or that grows a command this
 * test cannot run, fails here. Bounded: four nodes, each stopped by the PID this test started.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { agreedLeader, waitFor } from '../helpers/cluster.js';
import { hivekv } from '../helpers/hivekv-cli.js';
import {
  freePort, kv, removeDir, startNode, tempDir, UNLIMITED_RATES, type NodeProcess,
} from '../helpers/node-process.js';
import {
  bashBlocks, curlRequest, shellCommands, type CurlRequest, type ShellCommand,
} from '../helpers/readme-commands.js';

const README = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
/** The ports the README names: HTTP 6632 to 6635, peers 7001 to 7004. */
const README_PORT = /\b(663[2-5]|700[1-4])\b/g;
const WAIT_MS = 30_000;

const dir = tempDir('readme');
const started: NodeProcess[] = [];
const ports = new Map<string, number>();

afterAll(async () => {
  for (const node of started) await node.kill();
  removeDir(dir);
});

/** The README's port `p` moved to a free one, the same one every time it is named. */
async function portFor(p: string): Promise<number> {
  let port = ports.get(p);
  if (port === undefined) {
    port = await freePort();
    ports.set(p, port);
  }
  return port;
}

/**
 * A section's commands, with its ports moved and the `<placeholders>` that `fill` names
 * filled (any other left outside a comment is refused by the reader: `<` is not a word).
 */
async function sectionCommands(from: string, to: string,
  fill: Record<string, string> = {}): Promise<ShellCommand[]> {
  const commands: ShellCommand[] = [];
  for (const block of bashBlocks(README, from, to)) {
    for (const p of new Set(block.match(README_PORT) ?? [])) await portFor(p);
    const text = block.replace(README_PORT, (p) => String(ports.get(p)))
      .replace(/<[^<>\n]+>/g, (placeholder) => fill[placeholder] ?? placeholder);
    commands.push(...shellCommands(text));
  }
  return commands;
}

interface CurlAnswer {
  readonly status: number;
  readonly headers: Headers;
  readonly text: string;
}

async function runCurl(request: CurlRequest): Promise<CurlAnswer> {
  const response = await fetch(request.url, { method: request.method,
    headers: request.headers, body: request.body });
  return { status: response.status, headers: response.headers, text: await response.text() };
}

/** `npx hivekv serve ...` from the README, started from this test (its PID is kept). */
async function serve(command: ShellCommand, env: Record<string, string>): Promise<NodeProcess> {
  const words = command.words;
  expect(words.slice(0, 3), command.text).toEqual(['npx', 'hivekv', 'serve']);
  expect(command.background, `${command.text}: started in the background`).toBe(true);
  const args: string[] = [];
  let port: number | undefined;
  let dataDir: string | undefined;
  for (let n = 3; n < words.length; n++) {
    if (words[n] === '--port') port = Number(words[++n]);
    else if (words[n] === '--data') dataDir = join(dir, words[++n]!);
    else args.push(words[n]!);
  }
  if (port === undefined || dataDir === undefined) {
    throw new Error(`${command.text}: names no --port or no --data`);
  }
  const node = await startNode({ port, dataDir, args,
    env: { ...UNLIMITED_RATES, ...env, ...command.env } });
  started.push(node);
  return node;
}

/** `npx hivekv members ...` from the README: it must exit 0; its stdout as JSON. */
async function members(command: ShellCommand, env: Record<string, string>): Promise<unknown> {
  expect(command.words.slice(0, 3), command.text).toEqual(['npx', 'hivekv', 'members']);
  const run = await hivekv(command.words.slice(2), { env: { ...env, ...command.env } });
  expect(run.code, `${command.text}\n${run.stderr}`).toBe(0);
  return run.json;
}

/** The keys a comment such as `# {status, id, role}` promises. */
function promisedKeys(comment: string): string[] | null {
  const m = /^\{([A-Za-z, ]+)\}/.exec(comment);
  return m === null ? null : m[1]!.split(',').map((k) => k.trim());
}

/** The object a comment such as `# {"kv":true}: ...` shows. */
function promisedObject(comment: string): Record<string, unknown> | null {
  const m = /^(\{"[^{}]*\})/.exec(comment);
  return m === null ? null : JSON.parse(m[1]!) as Record<string, unknown>;
}

/**
 * Runs the routes section's calls on the one node at `port`, each checked against what the
 * README says of it; the calls only a cluster can answer are left to the cluster test.
 */
async function runRouteExamples(commands: readonly ShellCommand[], port: number): Promise<void> {
  const clusterOnly: string[] = [];
  for (const command of commands) {
    expect(command.words[0], command.text).toBe('curl');
    const request = curlRequest(command.words);
    const url = new URL(request.url);
    if (url.port !== String(port) || url.pathname.startsWith('/api/v1/system/members')) {
      clusterOnly.push(`${request.method} ${url.pathname}`);
      continue;
    }
    const answer = await runCurl(request);
    expect(answer.status, `${command.text}\n${answer.text}`).toBe(200);
    if (url.pathname === '/metrics') {
      expect(answer.text).toContain('# TYPE');
      continue;
    }
    const body = JSON.parse(answer.text) as Record<string, unknown>;
    const keys = promisedKeys(command.comment);
    if (keys !== null) {
      expect(Object.keys(body), command.text).toEqual(expect.arrayContaining(keys));
    }
    const shown = promisedObject(command.comment);
    if (shown !== null) expect(body, command.text).toMatchObject(shown);
    if (request.showHeaders && request.method === 'GET' && body.found === true) {
      expect(answer.headers.get('etag'), command.text).toBe(`"${String(body.version)}"`);
    }
    if (request.headers['idempotency-key'] !== undefined) {
      const again = await runCurl(request);
      expect(again.status).toBe(200);
      expect(again.headers.get('idempotent-replayed'), command.text).toBe('true');
      expect(again.text).toBe(answer.text);
    }
  }
  // What only a cluster shows: run in the next test, the membership changes through the
  // command line (the same requests as the HTTP examples).
  expect(clusterOnly).toEqual(['GET /api/v1/system/cluster', 'GET /api/v1/system/members',
    'POST /api/v1/system/members', 'POST /api/v1/system/members',
    'DELETE /api/v1/system/members/n1']);
}

/** The routes section's two cluster views, on the nodes it names: each lists n1 to n3. */
async function runClusterViews(): Promise<void> {
  const views = (await sectionCommands('## The routes, by example',
    '## The client and the command line')).filter((c) => {
    const request = curlRequest(c.words);
    return request.method === 'GET' && (request.url.endsWith('/api/v1/system/cluster') ||
      request.url.endsWith('/api/v1/system/members'));
  });
  expect(views).toHaveLength(2);
  for (const view of views) {
    const answer = await runCurl(curlRequest(view.words));
    expect(answer.status, `${view.text}\n${answer.text}`).toBe(200);
    const body = JSON.parse(answer.text) as { members: Array<Record<string, unknown>> };
    expect(body.members.map((m) => m.id).sort()).toEqual(['n1', 'n2', 'n3']);
  }
}

describe('the README', () => {
  it('runs its route examples against one node, each answering as it says', async () => {
    const commands = await sectionCommands('## The routes, by example',
      '## The client and the command line');
    const section = README.slice(README.indexOf('## The routes, by example'),
      README.indexOf('## The client and the command line'));
    expect(commands.length, 'every curl of the section read')
      .toBe(section.match(/^curl /gm)?.length);

    const single = await portFor('6632');
    const node = await startNode({ port: single, dataDir: join(dir, 'data'),
      env: UNLIMITED_RATES });
    let exitCode: number | null = null;
    try {
      await runRouteExamples(commands, single);
    } finally {
      exitCode = await node.stop();
    }
    expect(exitCode).toBe(0);
  }, 120_000);

  it('starts its three-node cluster, grows it to four and removes the first node', async () => {
    const env: Record<string, string> = {};
    const cluster = await sectionCommands('## A three-node cluster on one machine',
      '## Operating a cluster');
    const [exported, ...rest] = cluster;
    expect(exported?.words).toEqual(['export', 'HIVEKV_CLUSTER_SECRET=$(openssl rand -hex 32)']);
    env.HIVEKV_CLUSTER_SECRET = randomBytes(32).toString('hex');
    const serves = rest.filter((c) => c.words[1] === 'hivekv');
    expect(serves).toHaveLength(3);
    const nodes = await Promise.all(serves.map((c) => serve(c, env)));
    const [health] = rest.filter((c) => c.words[0] === 'curl');
    const n2 = curlRequest(health!.words);
    const first = await runCurl(n2);
    expect(first.status, first.text).toBe(200);
    expect(await agreedLeader(nodes, WAIT_MS)).toMatch(/^n[123]$/);

    // "Every node accepts every request": a write on one node is read on another.
    const written = await kv(nodes[1]!.url, [{ op: 'put', ns: 'readme', key: 'k',
      value: 'v', forever: true }]);
    expect(written.body.results[0].applied).toBe(true);
    const read = await kv(nodes[2]!.url, [{ op: 'get', ns: 'readme', key: 'k' }]);
    expect(read.body.results[0]).toMatchObject({ found: true, value: 'v' });

    await runClusterViews();

    const clusterId = String(JSON.parse(first.text).clusterId);
    const growing = await sectionCommands('## Growing, replacing and shrinking a cluster',
      '## The operator console', { "<the cluster's secret>": env.HIVEKV_CLUSTER_SECRET,
        "<the cluster's id>": clusterId });
    expect(growing.map((c) => c.words.slice(0, 4).join(' '))).toEqual([
      'npx hivekv serve --port', 'npx hivekv members add', 'npx hivekv members promote',
      'npx hivekv members list', 'npx hivekv members remove']);
    const [joinCommand, add, promote, list, remove] = growing;
    const n4 = await serve(joinCommand!, env);
    await members(add!, env);
    await members(promote!, env);
    const listed = await members(list!, env) as { members: Array<{ id: string; role: string }> };
    expect(listed.members.find((m) => m.id === 'n4')?.role).toBe('voter');

    await members(remove!, env);
    const after = await waitFor('the removal seen on n4', WAIT_MS, async () => {
      const answer = await runCurl({ method: 'GET', url: `${n4.url}/api/v1/system/members`,
        headers: {}, body: undefined, showHeaders: false });
      const body = JSON.parse(answer.text) as { members: Array<{ id: string }> };
      return body.members.length === 3 ? body : undefined;
    });
    expect(after.members.map((m) => m.id).sort()).toEqual(['n2', 'n3', 'n4']);
    // "the removed node then answers 503 not_a_member (/health says "role":"removed")"
    const n1 = nodes[0]!;
    await waitFor('n1 to say it was removed', WAIT_MS, async () => {
      const h = await runCurl({ method: 'GET', url: `${n1.url}/health`, headers: {},
        body: undefined, showHeaders: false });
      return (JSON.parse(h.text) as { role?: string }).role === 'removed' ? true : undefined;
    });
    const refused = await kv(n1.url, [{ op: 'get', ns: 'readme', key: 'k' }]);
    expect(refused.status).toBe(503);
    expect(refused.body.reason).toBe('not_a_member');
  }, 180_000);
});
