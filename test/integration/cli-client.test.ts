/**
 * `hivekv kv ...` and `hivekv health` as a user runs them, against a real node: exit status
 * (0 applied or found, 1 not, 2 refused or failed), the JSON answer on stdout, the envelope
 * (or one line of usage text) on stderr.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  freePort, removeDir, startNode, tempDir, UNLIMITED_RATES, type NodeProcess,
} from '../helpers/node-process.js';
import { hivekv as runHivekv, type Run } from '../helpers/hivekv-cli.js';


let node: NodeProcess;
let dir: string;

beforeAll(async () => {
  dir = tempDir('cli-client');
  node = await startNode({ dataDir: dir, env: UNLIMITED_RATES });
});

afterAll(async () => {
  expect(await node.stop()).toBe(0);
  removeDir(dir);
});

/** Runs `hivekv ...args` with HIVEKV_URL pointing at the node (unless `env` says else). */
function hivekv(args: string[], options: { env?: Record<string, string>;
  stdin?: string } = {}): Promise<Run> {
  return runHivekv(args, { env: { HIVEKV_URL: node.url, ...options.env },
    stdin: options.stdin ?? '' });
}

describe('hivekv kv', () => {
  it('puts and gets: exit 0 with the answer on stdout', async () => {
    const put = await hivekv(['kv', 'put', 'orders', '9137', '{"status":"paid"}', '--ttl', '30d']);
    expect(put).toMatchObject({ code: 0, stderr: '' });
    expect(put.json).toMatchObject({ op: 'put', applied: true, value: { status: 'paid' } });
    const get = await hivekv(['kv', 'get', 'orders', '9137']);
    expect(get.code).toBe(0);
    expect(get.json).toMatchObject({ found: true, value: { status: 'paid' },
      version: put.json.version });
    expect(Date.parse(get.json.expiresAt) - Date.parse(get.json.updatedAt)).toBe(2_592_000_000);
    const missing = await hivekv(['kv', 'get', 'orders', 'nobody']);
    expect(missing.code).toBe(1);
    expect(missing.json).toMatchObject({ found: false });
  });

  it('exits 1 when a write does not apply, with the verdict on stdout', async () => {
    await hivekv(['kv', 'put', 'orders', 'cas', '1', '--forever']);
    const lost = await hivekv(['kv', 'put', 'orders', 'cas', '2', '--forever', '--expect', '999']);
    expect(lost.code).toBe(1);
    expect(lost.json).toMatchObject({ applied: false, reason: 'version', value: 1 });
    const absent = await hivekv(['kv', 'put-if-absent', 'orders', 'cas', '3', '--ttl', '1h']);
    expect(absent.code).toBe(1);
    expect(absent.json).toMatchObject({ applied: false, reason: 'exists' });
    const gate = await hivekv(['kv', 'put-if-absent', 'orders', 'cas', '3', '--ttl', '1h',
      '--required']);
    expect(gate.code).toBe(1);
    expect(gate.json).toMatchObject({ applied: false, precondition: true, failedIndex: 0 });
  });

  it('counts with incr and its bounds, a negative delta included', async () => {
    const first = await hivekv(['kv', 'incr', 'quota', 'acme', '--max', '2', '--ttl', '1h']);
    expect(first.code).toBe(0);
    expect(first.json).toMatchObject({ applied: true, value: 1 });
    await hivekv(['kv', 'incr', 'quota', 'acme', '--max', '2', '--ttl', '1h']);
    const over = await hivekv(['kv', 'incr', 'quota', 'acme', '--max', '2', '--ttl', '1h']);
    expect(over.code).toBe(1);
    expect(over.json).toMatchObject({ applied: false, reason: 'limit', value: 2 });
    const down = await hivekv(['kv', 'incr', 'quota', 'acme', '-5', '--min', '-10', '--ttl',
      '1h']);
    expect(down.json).toMatchObject({ applied: true, value: -3 });
  });

  it('deletes and checks', async () => {
    await hivekv(['kv', 'put', 'orders', 'gone', '"x"', '--ttl', '1h']);
    expect((await hivekv(['kv', 'check', 'orders', 'gone', '--expect', '0'])).code).toBe(1);
    expect((await hivekv(['kv', 'delete', 'orders', 'gone'])).code).toBe(0);
    expect((await hivekv(['kv', 'delete', 'orders', 'gone'])).json)
      .toMatchObject({ applied: false, reason: 'absent' });
    expect((await hivekv(['kv', 'check', 'orders', 'gone', '--expect', '0'])).code).toBe(0);
  });

  it('reads a prefix: one page, or every row as JSON lines with --all', async () => {
    const rows3 = ['p:1', 'p:2', 'p:3'].map((key) => ({ op: 'put', ns: 'scan', key, value: 1,
      ttl: '1h' }));
    expect((await hivekv(['kv', 'batch', '-'], { stdin: JSON.stringify(rows3) })).code).toBe(0);
    const page = await hivekv(['kv', 'prefix', 'scan', 'p:', '--limit', '2']);
    expect(page.code).toBe(0);
    expect(page.json).toMatchObject({ truncated: true, nextAfter: 'p:2' });
    const all = await hivekv(['kv', 'prefix', 'scan', 'p:', '--limit', '2', '--all',
      '--keys-only']);
    expect(all.code).toBe(0);
    const rows = all.stdout.trim().split('\n').map((line) => JSON.parse(line));
    expect(rows.map((row) => row.key)).toEqual(['p:1', 'p:2', 'p:3']);
    expect(rows[0]).not.toHaveProperty('value');
    expect((await hivekv(['kv', 'prefix', 'scan', 'none:'])).code).toBe(1);
  });

  it('sends a batch from stdin or a file as one call', async () => {
    const ops = JSON.stringify([
      { op: 'putIfAbsent', ns: 'orders', key: 'ord_1', value: true, ttl: '7d', required: true },
      { op: 'incr', ns: 'stats', key: 'charges', delta: 1, forever: true },
    ]);
    const first = await hivekv(['kv', 'batch'], { stdin: ops });
    expect(first.code).toBe(0);
    expect(first.json.results.map((r: { applied: boolean }) => r.applied)).toEqual([true, true]);
    const file = join(dir, 'batch.json');
    writeFileSync(file, JSON.stringify({ operations: JSON.parse(ops) }));
    const again = await hivekv(['kv', 'batch', file]);
    expect(again.code).toBe(1);
    expect(again.json).toMatchObject({ ok: false, reason: 'kv_precondition', failedIndex: 0 });
    const bad = await hivekv(['kv', 'batch'], { stdin: '{"op":"get"}' });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/a JSON list of operations/);
  });

  it('exits 2 with the envelope on stderr when the node refuses', async () => {
    const refused = await hivekv(['kv', 'put', 'orders', 'k', '1']);
    expect(refused).toMatchObject({ code: 2, stdout: '' });
    expect(JSON.parse(refused.stderr)).toEqual({ error: 'kv_bad_request',
      reason: 'kv_expiry_not_specified', detail: expect.any(String), status: 400,
      retryAfterSeconds: null });
  });

  it('refuses a bare word as a value, with a hint to quote it', async () => {
    const bare = await hivekv(['kv', 'put', 'orders', 'k', 'hello', '--ttl', '1h']);
    expect(bare.code).toBe(2);
    expect(bare.stderr).toContain(`quoted: '"hello"'`);
    const ttl = await hivekv(['kv', 'put', 'orders', 'k', '1', '--ttl', '1h30m']);
    expect(ttl.code).toBe(2);
    expect(ttl.stderr).toMatch(/'90s', '2m', '1h', '30d'/);
    const usage = await hivekv(['kv', 'get', 'orders']);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toMatch(/missing required argument/);
  });

  it('exits 2 with a status-0 envelope when no node answers', async () => {
    const dead = `http://127.0.0.1:${await freePort()}`;
    const run = await hivekv(['kv', 'get', 'orders', 'k', '--url', dead, '--retries', '0']);
    expect(run.code).toBe(2);
    expect(JSON.parse(run.stderr)).toMatchObject({ status: 0, error: 'kv_unavailable',
      reason: 'connection_failed' });
  });

  it('prints help that points to the documentation', async () => {
    const helps = [['--help'], ['kv', 'put', '--help']];
    for (const args of helps) {
      const help = await hivekv(args);
      expect(help.code).toBe(0);
      expect(help.stdout).toMatch(/docs\/cli\.md/);
    }
  });
});

describe('hivekv health', () => {
  it('reports the node, and every node with --all', async () => {
    const one = await hivekv(['health']);
    expect(one.code).toBe(0);
    expect(one.json).toMatchObject({ ok: true, health: { status: 'ok', role: 'leader' } });
    const dead = `http://127.0.0.1:${await freePort()}`;
    const all = await hivekv(['health', '--all', '--url', `${node.url},${dead}`,
      '--retries', '0']);
    expect(all.code).toBe(1);
    expect(all.json).toMatchObject([{ url: node.url, ok: true },
      { url: dead, ok: false, error: { reason: 'connection_failed' } }]);
    const none = await hivekv(['health', '--url', dead, '--retries', '0']);
    expect(none.code).toBe(2);
  });
});
