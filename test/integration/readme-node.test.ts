/**
 * The README on one node, run as a new user runs it: every curl of "The routes, by example"
 * against a node started as `npm start` starts it, each answering as the README says; then
 * its "Replaying a data directory" commands on that node's directory, and its "Backups"
 * commands (a dump of the directory and of the live node, a directory imported from it and
 * served). Every command is read from README.md (test/helpers/readme-runner.ts); a README
 * whose commands stop working, or that grows one this test cannot run, fails here.
 * Bounded: two nodes, each stopped by the PID this test started.
 */
import { cpSync, readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hivekv } from '../helpers/hivekv-cli.js';
import { call, kv, type NodeProcess } from '../helpers/node-process.js';
import { curlRequest, sectionText, type ShellCommand } from '../helpers/readme-commands.js';
import { README, ReadmeRunner } from '../helpers/readme-runner.js';

const runner = new ReadmeRunner('node');
let node: NodeProcess;
/** Log entries the replay examples need: they read entries 1200..1205 and index 1100. */
const ENTRIES_WANTED = 1_300;
const WRITE_ATTEMPTS_MAX = 20_000;

beforeAll(async () => {
  node = await runner.startDefault(await runner.port('6632'), 'data');
});

afterAll(async () => {
  await runner.close();
});

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
 * Runs the routes section's calls on the node at `port`, each checked against what the README
 * says of it; says which calls only a cluster answers (readme-cluster.test.ts runs those).
 */
async function runRouteExamples(commands: readonly ShellCommand[], port: number):
  Promise<string[]> {
  const clusterOnly: string[] = [];
  for (const command of commands) {
    expect(command.words[0], command.text).toBe('curl');
    const request = curlRequest(command.words);
    const url = new URL(request.url);
    if (url.port !== String(port) || url.pathname.startsWith('/api/v1/system/members')) {
      clusterOnly.push(`${request.method} ${url.pathname}`);
      continue;
    }
    const answer = await runner.curl(request);
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
      const again = await runner.curl(request);
      expect(again.status).toBe(200);
      expect(again.headers.get('idempotent-replayed'), command.text).toBe('true');
      expect(again.text).toBe(answer.text);
    }
  }
  return clusterOnly;
}

/**
 * Writes `orders/order-9f1` until the log holds `entries` entries, one entry a call. The
 * route examples gave the default tenant a quota of 500 writes a second: a 429 waits.
 */
async function writeLogTo(entries: number): Promise<void> {
  for (let attempt = 0; attempt < WRITE_ATTEMPTS_MAX; attempt++) {
    if (attempt % 100 === 0 &&
      (await call(node.url, 'GET', '/health')).body.appliedIndex >= entries) {
      return;
    }
    const r = await kv(node.url, [{ op: 'put', ns: 'orders', key: 'order-9f1',
      value: { n: attempt }, forever: true }]);
    if (r.status === 429) await new Promise((resolve) => setTimeout(resolve, 50));
    else expect(r.status, r.text).toBe(200);
  }
  throw new Error(`the log did not reach ${entries} entries`);
}

describe('the README on one node', () => {
  it('answers every route example as the README says', async () => {
    const commands = await runner.section('## The routes, by example',
      '## The client and the command line');
    const section = sectionText(README, '## The routes, by example',
      '## The client and the command line');
    expect(commands.length, 'every curl of the section read')
      .toBe(section.match(/^curl /gm)?.length);
    const clusterOnly = await runRouteExamples(commands, node.port);
    expect(clusterOnly).toEqual(['GET /api/v1/system/cluster', 'GET /api/v1/system/members',
      'POST /api/v1/system/members', 'POST /api/v1/system/members',
      'DELETE /api/v1/system/members/n1']);
  });

  it('runs its replay commands on the node\'s directory', async () => {
    await writeLogTo(ENTRIES_WANTED);
    expect(await runner.stop(node)).toBe(0);
    cpSync(runner.path('data'), runner.path('data-copy'), { recursive: true });
    const commands = await runner.section('## Replaying a data directory', '## Backups', {
      '/var/lib/hivekv': runner.path('data'), '/data/n1': runner.path('data'),
      '/data/n2': runner.path('data-copy') });
    expect(commands.map((c) => c.words[1])).toEqual(['inspect', 'inspect', 'replay', 'replay',
      'replay', 'diff']);
    for (const command of commands) {
      const run = await runner.run(command);
      expect(run.code, `${command.text}\n${run.stdout}\n${run.stderr}`).toBe(0);
      if (command.words.includes('--entries')) {
        expect(run.lines.map((e: { index: number }) => e.index)).toEqual(
          [1200, 1201, 1202, 1203, 1204, 1205]);
      }
      if (command.words[1] === 'diff') expect(run.stdout).toContain('identical');
    }
  });

  it('runs its in-process machine example', async () => {
    const blocks = await runner.code('## Replaying a data directory', '## Backups', 'ts');
    expect(blocks).toHaveLength(1);
    // The example ends with the digest; print it, so that the run shows it was reached.
    const run = await runner.runModule(blocks[0]!.replace(/m\.digest\(\);\s*$/,
      'console.log(m.digest());\n'));
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/^[0-9a-f]{16}\n$/);
  });

  it('runs its backup commands: two dumps, an import, the import served', async () => {
    node = await runner.startDefault(await runner.port('6632'), 'data');
    const commands = await runner.section('## Backups', '## Fault testing', {
      '/var/lib/hivekv': runner.path('data'), 'dump.ndjson': runner.path('dump.ndjson'),
      './restored': runner.path('restored') });
    expect(commands.map((c) => c.words.slice(0, 2).join(' '))).toEqual(['hivekv export',
      'hivekv export', 'hivekv import', 'hivekv serve']);
    const [fromDirectory, fromNode, restore, serveRestored] = commands;
    for (const command of [fromDirectory!, fromNode!, restore!]) {
      const run = await runner.run(command);
      expect(run.code, `${command.text}\n${run.stderr}`).toBe(0);
    }
    const header = JSON.parse(readFileSync(runner.path('dump.ndjson'), 'utf8')
      .split('\n')[0]!) as { kind: string; index: number; digest: string };
    expect(header).toMatchObject({ kind: 'header', format: 'hivekv-dump' });
    expect(header.index).toBeGreaterThanOrEqual(ENTRIES_WANTED);
    const restored = await runner.serve(serveRestored!);
    const health = await call(restored.url, 'GET', '/health');
    // Serving, the node may already have applied its new term's first entry past the dump.
    expect(health.body.appliedIndex).toBeGreaterThanOrEqual(header.index);
    const row = await kv(restored.url, [{ op: 'get', ns: 'orders', key: 'order-9f1' }]);
    expect(row.body.results[0].found).toBe(true);
    expect(await runner.stop(restored)).toBe(0);
    // "with the same digest at that index"
    const atDump = await hivekv(['replay', '--data', runner.path('restored'), '--to',
      String(header.index)]);
    expect(atDump.code, atDump.stderr).toBe(0);
    expect(atDump.stdout).toContain(`end index ${header.index} `);
    expect(atDump.stdout).toContain(`digest ${header.digest}`);
  });
});
