// `hivekv members` as a user runs it: a child process against a loopback HTTP server that
// answers like a node. JSON on stdout and exit 0 on success; the error envelope on stderr
// and exit 2 on a refusal or when no node answers; the token travels as a bearer header.
import { spawn } from 'node:child_process';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const ROOT = new URL('../../', import.meta.url).pathname;
let server: Server;
let base = '';
const seen: Array<{ method: string; url: string; auth: string; body: string }> = [];

function bodyOf(req: IncomingMessage): Promise<string> {
  return new Promise((resolve) => {
    let text = '';
    req.on('data', (chunk: Buffer) => { text += chunk.toString(); });
    req.on('end', () => resolve(text));
  });
}

beforeAll(async () => {
  server = createServer((req, res) => {
    void bodyOf(req).then((body) => {
      seen.push({ method: req.method ?? '', url: req.url ?? '',
        auth: req.headers.authorization ?? '', body });
      const refused = body.includes('"n9"');
      res.writeHead(refused ? 409 : 200, { 'content-type': 'application/json' });
      res.end(refused ? '{"error":"conflict","reason":"members_not_caught_up","detail":"far"}'
        : '{"members":[],"leader":"n1"}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  base = `http://127.0.0.1:${typeof address === 'object' && address !== null ? address.port : 0}`;
});

afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

function run(...args: string[]): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['bin/hivekv.js', 'members', ...args], { cwd: ROOT,
      env: { ...process.env, HIVEKV_TOKEN: '', HIVEKV_URL: '' } });
    let out = '';
    let err = '';
    child.stdout.on('data', (chunk: Buffer) => { out += chunk.toString(); });
    child.stderr.on('data', (chunk: Buffer) => { err += chunk.toString(); });
    child.on('exit', (code) => resolve({ code, out, err }));
  });
}

describe('hivekv members', () => {
  it('list, add, promote and remove send the routes and print JSON', async () => {
    const listed = await run('list', '--url', base, '--token', 'T1');
    expect(listed.err).toBe('');
    expect(listed.code).toBe(0);
    expect(JSON.parse(listed.out)).toEqual({ members: [], leader: 'n1' });
    expect((await run('add', 'n4', '10.0.0.4:7001', '--url', base)).code).toBe(0);
    expect((await run('promote', 'n4', '--url', base)).code).toBe(0);
    expect((await run('remove', 'n4', '--url', base)).code).toBe(0);
    expect(seen.map((s) => `${s.method} ${s.url} ${s.body}`)).toEqual([
      'GET /api/v1/system/members ',
      'POST /api/v1/system/members {"id":"n4","peer":"10.0.0.4:7001","role":"learner"}',
      'POST /api/v1/system/members {"id":"n4","role":"voter"}',
      'DELETE /api/v1/system/members/n4 ',
    ]);
    expect(seen[0]?.auth).toBe('Bearer T1');
  }, 30_000);

  it('a refusal prints the envelope on stderr and exits 2', async () => {
    const refused = await run('promote', 'n9', '--url', base);
    expect(refused.code).toBe(2);
    expect(refused.out).toBe('');
    expect(JSON.parse(refused.err)).toMatchObject({ reason: 'members_not_caught_up',
      status: 409 });
  }, 30_000);

  it('an unreachable node or a bad URL exits 2', async () => {
    const down = await run('list', '--url', 'http://127.0.0.1:1');
    expect(down.code).toBe(2);
    expect(JSON.parse(down.err)).toMatchObject({ reason: 'unreachable', status: 0 });
    // A second URL is asked when the first does not answer.
    expect((await run('list', '--url', `http://127.0.0.1:1,${base}`)).code).toBe(0);
    const usage = await run('list', '--url', 'ftp://x');
    expect(usage.code).toBe(2);
    expect(usage.err).toMatch(/--url/);
    expect((await run('list', '--url', base, '--timeout', 'soon')).code).toBe(2);
  }, 30_000);
});
