/**
 * A node restarted on a data directory whose volume is full serves: it takes a new term (its
 * vote is written in place, host/storage/hard-state-file.ts), answers reads, refuses writes
 * with 503 storage_full, and takes writes again once space is freed. With the hard state
 * replaced through a temp file, the start stopped with ENOSPC ("fatal: the node stops").
 *
 * The volume is a 200 MiB ext4 image on a loop device, mounted by this test; it runs where
 * this user may mount one (root with loop devices), and is skipped elsewhere.
 */
import { spawnSync } from 'node:child_process';
import { closeSync, mkdirSync, openSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

import { waitFor } from '../helpers/cluster.js';
import { call, startNode, tempDir, type NodeProcess } from '../helpers/node-process.js';

const PROBE = `set -e; d=$(mktemp -d); trap 'umount "$d/m" 2>/dev/null; rm -rf "$d"' EXIT
truncate -s 8M "$d/img"; mkfs.ext4 -q -F "$d/img"; mkdir "$d/m"; mount -o loop "$d/img" "$d/m"`;
const CAN_MOUNT_LOOP = process.platform === 'linux' && process.getuid?.() === 0 &&
  spawnSync('sh', ['-c', PROBE], { timeout: 20_000 }).status === 0;
const IMAGE_BYTES = 200 * 1024 * 1024;
const root = tempDir('full-disk');
const mountPoint = join(root, 'volume');
const nodes: NodeProcess[] = [];
let mounted = false;

afterAll(async () => {
  for (const node of nodes) await node.kill().catch(() => undefined);
  if (mounted) spawnSync('umount', [mountPoint]);
  rmSync(root, { recursive: true, force: true });
});

function run(command: string, args: string[]): void {
  const result = spawnSync(command, args, { timeout: 30_000, encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`${command} ${args.join(' ')}: ${result.stderr}`);
}

/** Writes zeros to `path` until the volume refuses a byte more. */
function fillVolume(path: string): void {
  const fd = openSync(path, 'w');
  try {
    for (const chunkBytes of [1024 * 1024, 64 * 1024, 4096, 1024]) {
      const chunk = Buffer.alloc(chunkBytes);
      for (let written = 0; written < IMAGE_BYTES; written += chunkBytes) {
        try {
          writeSync(fd, chunk);
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code !== 'ENOSPC') throw error;
          break;
        }
      }
    }
  } finally {
    closeSync(fd);
  }
}

const put = (url: string, key: string) => call(url, 'PUT', `/api/v1/kv/disk/${key}`,
  { value: { key }, forever: true });

describe('a full volume', () => {
  it.runIf(CAN_MOUNT_LOOP)('a node restarted on it serves reads, and writes once space is freed',
    async () => {
      const image = join(root, 'volume.img');
      run('truncate', ['-s', String(IMAGE_BYTES), image]);
      run('mkfs.ext4', ['-q', '-F', '-m', '0', image]);
      mkdirSync(mountPoint);
      run('mount', ['-o', 'loop', image, mountPoint]);
      mounted = true;
      const dataDir = join(mountPoint, 'n1');
      const first = await startNode({ dataDir });
      nodes.push(first);
      for (const key of ['a', 'b', 'c']) expect((await put(first.url, key)).status).toBe(200);
      const termBefore = (await call(first.url, 'GET', '/health')).body.term as number;
      expect(await first.stop()).toBe(0);

      const filler = join(mountPoint, 'filler');
      fillVolume(filler);
      const again = await startNode({ dataDir });
      nodes.push(again);
      const health = await waitFor('a leader on the full volume', 15_000, async () => {
        const answer = await call(again.url, 'GET', '/health');
        return answer.body?.role === 'leader' ? answer.body : undefined;
      });
      expect(health.term).toBeGreaterThan(termBefore);
      const found = await call(again.url, 'GET', '/api/v1/kv/disk/b');
      expect(found.status).toBe(200);
      expect(found.body).toMatchObject({ value: { key: 'b' } });
      const refused = await put(again.url, 'd');
      expect(refused.status).toBe(503);
      expect(refused.body).toMatchObject({ reason: 'storage_full' });
      expect(again.output()).not.toContain('fatal');

      rmSync(filler);
      await waitFor('writes accepted again', 20_000, async () =>
        (await put(again.url, 'd')).status === 200 ? true : undefined);
      expect(await again.stop()).toBe(0);
    }, 90_000);
});
