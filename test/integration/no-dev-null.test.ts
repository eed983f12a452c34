/**
 * A node where /dev/null cannot be opened (a bare container's /dev) holds no reserve of
 * descriptors and reads none (host/node/main.ts, `watchDescriptors`): it says so and serves,
 * rather than stop at start. Runs where this user may make a mount namespace (`unshare -m`)
 * and mount an empty /dev in it; skipped elsewhere.
 */
import { spawn, spawnSync } from 'node:child_process';
import { afterAll, describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/cluster.js';
import { freePort, removeDir, tempDir } from '../helpers/node-process.js';

const ROOT = new URL('../../', import.meta.url).pathname;
const CAN_UNSHARE = process.platform === 'linux' &&
  spawnSync('unshare', ['-m', 'sh', '-c', 'mount -t tmpfs tmpfs /dev'], { timeout: 5000 })
    .status === 0;
const dirs: string[] = [];
const pids: number[] = [];

afterAll(() => {
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  for (const dir of dirs) removeDir(dir);
});

describe('a node without /dev/null', () => {
  it.runIf(CAN_UNSHARE)('warns that it keeps no descriptors in reserve, and serves', async () => {
    const dir = tempDir('no-dev-null');
    dirs.push(dir);
    const port = await freePort();
    const script = `mount -t tmpfs tmpfs /dev && exec "${process.execPath}" bin/hivekv.js ` +
      `serve --host 127.0.0.1 --port ${port} --data '${dir}'`;
    const child = spawn('unshare', ['-m', 'sh', '-c', script], { cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'] });
    pids.push(child.pid ?? -1);
    let output = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.stderr?.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    const health = await waitFor('the node to serve', 20_000, async () => {
      const answer = await fetch(`http://127.0.0.1:${port}/health`);
      return answer.status === 200 ? answer.json() : undefined;
    });
    expect(health).toMatchObject({ status: 'ok' });
    expect(output).toContain('descriptors cannot be held in reserve');
    child.kill('SIGTERM');
  }, 40_000);
});
