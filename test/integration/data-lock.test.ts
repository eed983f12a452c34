/**
 * The data-directory lock across real processes: a node SIGKILLed and still a zombie (its
 * parent has not reaped it) does not keep a new node from starting on its directory at once,
 * and a second live node on a directory is refused with a message that names the holder. A
 * directory that cannot be created stops the start with its path, under /proc too, where
 * Node's own recursive mkdir would spin forever.
 */
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/cluster.js';
import { call, removeDir, startNode, tempDir, type NodeProcess } from '../helpers/node-process.js';

const ROOT = new URL('../../', import.meta.url).pathname;
const TEST_SECRET = 'port-test-secret-0123456789abcdef';
const started: NodeProcess[] = [];
const dirs: string[] = [];
const parents: number[] = [];

afterEach(async () => {
  for (const node of started.splice(0)) await node.kill();
  for (const pid of parents.splice(0)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  for (const dir of dirs.splice(0)) removeDir(dir);
});

/** The state letter of a process in /proc (R, S, Z...), or null once it is gone. */
function processState(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
  } catch {
    return null;
  }
}

/**
 * Starts a node under a parent that never reaps its children (`sh` that execs `sleep`), so
 * a SIGKILLed node stays a zombie. Resolves with the node's pid once it serves.
 */
async function startUnreaped(dir: string): Promise<{ nodePid: number; port: number }> {
  const script = `node bin/hivekv.js serve --host 127.0.0.1 --port 0 --data '${dir}' & ` +
    'echo "node-pid $!"; exec sleep 120';
  const parent = spawn('sh', ['-c', script], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, HIVEKV_LOG_LEVEL: 'info' } });
  parents.push(parent.pid ?? -1);
  let output = '';
  parent.stdout?.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  return waitFor('the unreaped node to serve', 20_000, async () => {
    const pid = /node-pid (\d+)/.exec(output)?.[1];
    const port = /"port":(\d+)[^\n]*"msg":"serving"/.exec(output)?.[1];
    return pid !== undefined && port !== undefined
      ? { nodePid: Number(pid), port: Number(port) } : undefined;
  });
}

describe('the data-directory lock', () => {
  it('lets a node start at once on the directory of a SIGKILLed node that is still a zombie',
    async () => {
      if (process.platform !== 'linux') return;
      const dir = tempDir('lock-zombie');
      dirs.push(dir);
      const { nodePid, port } = await startUnreaped(dir);
      const put = await call(`http://127.0.0.1:${port}`, 'POST', '/api/v1/kv', { operations: [
        { op: 'put', ns: 'lock', key: 'k', value: 1, forever: true }] });
      expect(put.body.results[0].applied).toBe(true);
      process.kill(nodePid, 'SIGKILL');
      await waitFor('the killed node to be a zombie', 5000, async () =>
        (processState(nodePid) === 'Z' ? true : undefined));
      const next = await startNode({ dataDir: dir });
      started.push(next);
      expect(processState(nodePid)).toBe('Z');
      const got = await call(next.url, 'POST', '/api/v1/kv', { operations: [
        { op: 'get', ns: 'lock', key: 'k' }] });
      expect(got.body.results[0]).toMatchObject({ found: true, value: 1 });
    }, 60_000);

  it('refuses a second live node on the same directory, naming the holder', async () => {
    const dir = tempDir('lock-live');
    dirs.push(dir);
    const first = await startNode({ dataDir: dir });
    started.push(first);
    await expect(startNode({ dataDir: dir })).rejects.toThrow(
      new RegExp(`exited with 1[\\s\\S]*data directory \\S+ is in use by process ${first.pid}`));
    expect((await call(first.url, 'GET', '/health')).status).toBe(200);
  }, 30_000);
});

describe('a data directory that cannot be created', () => {
  it.runIf(process.platform === 'linux')('stops the start with the path, also under /proc',
    () => {
      const started = spawnSync(process.execPath, ['bin/hivekv.js', 'serve', '--host',
        '127.0.0.1', '--port', '0', '--data', '/proc/hivekv-data/n1'],
      { cwd: ROOT, timeout: 15_000, encoding: 'utf8' });
      expect(started.signal).toBeNull();
      expect(started.status).toBe(1);
      expect(started.stderr + started.stdout).toContain(
        'cannot create directory /proc/hivekv-data/n1: at /proc/hivekv-data: ENOENT');
    }, 20_000);
});

describe('a port in use', () => {
  it('stops the start naming the port and its flag, the HTTP port and the peer port', async () => {
    const holder = createServer();
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    const taken = (holder.address() as AddressInfo).port;
    const dir = tempDir('port-in-use');
    dirs.push(dir);
    try {
      const start = (args: string[]) => spawnSync(process.execPath, ['bin/hivekv.js', 'serve',
        '--host', '127.0.0.1', '--data', dir, ...args], { cwd: ROOT, timeout: 15_000,
        encoding: 'utf8', env: { ...process.env, HIVEKV_CLUSTER_SECRET: TEST_SECRET } });
      const http = start(['--port', String(taken)]);
      expect(http.status).toBe(1);
      expect(http.stderr + http.stdout).toContain(
        `127.0.0.1:${taken} is already in use; stop the process on it or choose another --port`);
      const peer = start(['--port', '0', '--id', 'n1', '--peers',
        `n1=127.0.0.1:${taken},n2=127.0.0.1:1`]);
      expect(peer.status).toBe(1);
      expect(peer.stderr + peer.stdout).toContain(`127.0.0.1:${taken} is already in use; stop ` +
        'the process on it or choose another --peer-listen');
    } finally {
      holder.close();
    }
  }, 40_000);
});

describe('a data directory started under another member id', () => {
  it('is refused, naming the member it belongs to', async () => {
    const dir = tempDir('member-id');
    dirs.push(dir);
    const node = await startNode({ dataDir: dir, args: ['--id', 'n2'] });
    expect(await node.stop()).toBe(0);
    const again = spawnSync(process.execPath, ['bin/hivekv.js', 'serve', '--host', '127.0.0.1',
      '--port', '0', '--data', dir, '--id', 'n3'], { cwd: ROOT, timeout: 15_000,
      encoding: 'utf8' });
    expect(again.status).toBe(1);
    expect(again.stderr + again.stdout).toContain(`belongs to member n2 (MEMBER_ID); start it ` +
      'with --id n2');
    const same = await startNode({ dataDir: dir, args: ['--id', 'n2'] });
    started.push(same);
  }, 40_000);
});
