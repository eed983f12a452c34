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
import {
  closeSync, mkdirSync, openSync, readdirSync, rmSync, statfsSync, writeSync,
} from 'node:fs';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

import { agreedLeader, memberPorts, peersFlag, waitFor } from '../helpers/cluster.js';
import {
  call, kv, startNode, tempDir, UNLIMITED_RATES, type NodeProcess,
} from '../helpers/node-process.js';
import { FileStorage } from '../../host/storage/file-storage.js';
import { saveSnapshotBytes, SnapshotNoRoomError } from '../../host/storage/storage.js';

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
      // 16 MiB kept free, not 64: the log's segment and its spare take 128 of the 200 MiB.
      const env = { HIVEKV_MIN_FREE_BYTES: String(16 * 1024 * 1024) };
      const first = await startNode({ dataDir, env });
      nodes.push(first);
      for (const key of ['a', 'b', 'c']) expect((await put(first.url, key)).status).toBe(200);
      const termBefore = (await call(first.url, 'GET', '/health')).body.term as number;
      expect(await first.stop()).toBe(0);

      const filler = join(mountPoint, 'filler');
      fillVolume(filler);
      const again = await startNode({ dataDir, env });
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

/** Mounts a fresh ext4 image of `bytes` at `dir`; the unmount goes to `unmounts`. */
function mountVolume(dir: string, bytes: number, unmounts: string[]): void {
  const image = `${dir}.img`;
  run('truncate', ['-s', String(bytes), image]);
  run('mkfs.ext4', ['-q', '-F', '-m', '0', image]);
  mkdirSync(dir);
  run('mount', ['-o', 'loop', image, dir]);
  unmounts.push(dir);
}

/** Writes a file that leaves `leaveBytes` free on the volume of `dir`. */
function leaveFree(path: string, leaveBytes: number): void {
  const { bavail, bsize } = statfsSync(dirname(path));
  const fd = openSync(path, 'w');
  try {
    const chunk = Buffer.alloc(1024 * 1024);
    let left = bavail * bsize - leaveBytes;
    while (left > 0) left -= writeSync(fd, chunk, 0, Math.min(chunk.byteLength, left));
  } finally {
    closeSync(fd);
  }
}

describe('a volume with no room', () => {
  const unmounts: string[] = [];
  afterAll(async () => {
    for (const node of nodes) await node.kill().catch(() => undefined);
    for (const dir of unmounts) spawnSync('umount', [dir]);
  });

  it.runIf(CAN_MOUNT_LOOP)('is not taken: the node warns, and serves reads and writes',
    async () => {
      const volume = join(root, 'snapshots');
      mountVolume(volume, IMAGE_BYTES, unmounts);
      const dataDir = join(volume, 'n1');
      // About 15 MB of state, with no snapshot yet (and so no spare snapshot file).
      const keepFree = { HIVEKV_MIN_FREE_BYTES: String(4 * 1024 * 1024) };
      const first = await startNode({ dataDir, env: { ...UNLIMITED_RATES, ...keepFree,
        HIVEKV_SNAPSHOT_EVERY_ENTRIES: '100000' } });
      nodes.push(first);
      const value = 'v'.repeat(60_000);
      for (let call = 0; call < 16; call++) {
        const ops = Array.from({ length: 16 }, (_, i) => ({ op: 'put', ns: 'big',
          key: `k${call * 16 + i}`, value, forever: true }));
        expect((await kv(first.url, ops)).status).toBe(200);
      }
      expect(await first.stop()).toBe(0);
      // 8 MiB free: above the 4 MiB the node keeps, below any snapshot of it.
      leaveFree(join(volume, 'filler'), 8 * 1024 * 1024);
      const again = await startNode({ dataDir, env: { ...UNLIMITED_RATES,
        ...keepFree, HIVEKV_SNAPSHOT_EVERY_ENTRIES: '10' } });
      nodes.push(again);
      // Small writes make a snapshot due. Written anyway, it stopped the node on ENOSPC.
      const outcome = await waitFor('a snapshot due', 30_000, async () => {
        if (again.output().includes('fatal')) return again.output();
        if (again.output().includes('snapshot not taken for want of free space')) return 'no room';
        await put(again.url, 'small');
        return undefined;
      });
      expect(outcome).toBe('no room');
      const metrics = (await call(again.url, 'GET', '/metrics')).text;
      expect(metrics).toMatch(/hivekv_snapshots_total\{event="no_room"\} [1-9]/);
      expect((await call(again.url, 'GET', '/api/v1/kv/big/k7')).status).toBe(200);
      expect((await put(again.url, 'after')).status).toBe(200);
      expect(again.output()).not.toContain('fatal');
      expect(await again.stop()).toBe(0);
    }, 120_000);

  it.runIf(CAN_MOUNT_LOOP)('a follower with no room for its leader\'s snapshot stays up ' +
    'behind it, and takes the snapshot once it has room', async () => {
    const volume = join(root, 'follower');
    mountVolume(volume, IMAGE_BYTES, unmounts);
    const members = await memberPorts(3);
    const env = { ...UNLIMITED_RATES, HIVEKV_MIN_FREE_BYTES: String(1024 * 1024),
      HIVEKV_SNAPSHOT_EVERY_ENTRIES: '10' };
    const dirs = new Map([['n1', tempDir('full-disk-n1')], ['n2', tempDir('full-disk-n2')],
      ['n3', join(volume, 'n3')]]);
    const start = async (id: string) => {
      const node = await startNode({ dataDir: dirs.get(id)!, env,
        args: ['--id', id, '--peers', peersFlag(members)] });
      nodes.push(node);
      return node;
    };
    const [n1, n2, n3] = [await start('n1'), await start('n2'), await start('n3')];
    const first = await agreedLeader([n1!, n2!, n3!]);
    expect((await put(n1!.url, 'first')).status).toBe(200);
    await waitFor('n3 to hold the first write', 15_000, async () =>
      (await call(n3!.url, 'GET', '/api/v1/kv/disk/first')).status === 200 || undefined);
    expect(await n3!.stop()).toBe(0);
    // About 23 MB of state while n3 is away: n1 and n2 snapshot it and drop their logs.
    const leader = first === 'n2' ? n2! : n1!;
    const value = 'v'.repeat(60_000);
    await waitFor('a leader of two', 15_000, async () =>
      (await put(leader.url, 'probe')).status === 200 || undefined);
    for (let batch = 0; batch < 24; batch++) {
      const ops = Array.from({ length: 16 }, (_, i) => ({ op: 'put', ns: 'big',
        key: `k${batch * 16 + i}`, value, forever: true }));
      expect((await kv(leader.url, ops)).status).toBe(200);
    }
    // 8 MiB free on n3's volume: above the 1 MiB it keeps, below any snapshot of it.
    const filler = join(volume, 'filler');
    leaveFree(filler, 8 * 1024 * 1024);
    const again = await start('n3');
    // Written anyway, the snapshot stopped n3 with ENOSPC, and again at every restart.
    const outcome = await waitFor('the snapshot to n3', 30_000, async () => {
      if (again.output().includes('fatal')) return again.output();
      return again.output().includes('snapshot from the leader refused') ? 'refused' : undefined;
    });
    expect(outcome).toBe('refused');
    const metrics = (await call(again.url, 'GET', '/metrics')).text;
    expect(metrics).toMatch(/hivekv_snapshots_total\{event="refused"\} [1-9]/);
    expect((await call(again.url, 'GET', '/health')).status).toBe(200);
    rmSync(filler);
    await waitFor('n3 to install the snapshot', 30_000, async () =>
      again.output().includes('snapshot installed') || undefined);
    const read = await call(again.url, 'GET', '/api/v1/kv/big/k200');
    expect(read.status).toBe(200);
    expect(read.body.value).toBe(value);
    expect(again.output()).not.toContain('fatal');
  }, 150_000);

  it.runIf(CAN_MOUNT_LOOP)('a log restarted on a full volume rolls into the spare it kept',
    async () => {
      // Segments of 1 MiB here: a roll is needed soon after the restart. A new segment file
      // on a full volume stopped the node with ENOSPC; the spare kept at rest has the room.
      const volume = join(root, 'roll');
      mountVolume(volume, 64 * 1024 * 1024, unmounts);
      const dir = join(volume, 'n1');
      const segmentBytesMax = 1024 * 1024;
      const entry = (index: number) => ({ term: 1, index, timeMs: index, type: 'normal' as const,
        data: new Uint8Array(16 * 1024) });
      const first = new FileStorage(dir, { segmentBytesMax, minFreeBytes: 0 });
      await first.recover();
      first.append(Array.from({ length: 40 }, (_, i) => entry(i + 1)));
      await first.sync();
      await first.close();
      expect(readdirSync(join(dir, 'wal')).filter((n) => n.endsWith('.prealloc')))
        .toHaveLength(1);
      fillVolume(join(volume, 'filler'));
      const again = new FileStorage(dir, { segmentBytesMax, minFreeBytes: 0 });
      const state = await again.recover();
      expect(state.entries).toHaveLength(40);
      // 40 more entries of 16 KiB: past the first segment's 1 MiB.
      again.append(Array.from({ length: 40 }, (_, i) => entry(i + 41)));
      await again.sync();
      await again.close();
      const last = new FileStorage(dir, { segmentBytesMax, minFreeBytes: 0 });
      expect((await last.recover()).entries).toHaveLength(80);
      await last.close();
    }, 60_000);

  it.runIf(CAN_MOUNT_LOOP)('refused midway by the volume, leaves no file and a usable storage',
    async () => {
      const volume = join(root, 'midway');
      mountVolume(volume, 64 * 1024 * 1024, unmounts);
      // Told of room it does not have (a volume shared with another writer): the snapshot
      // starts, and the volume refuses its bytes.
      const storage = new FileStorage(join(volume, 'n1'), { preallocate: false,
        readFreeBytes: () => 1024 ** 4 });
      await storage.recover();
      storage.append([{ term: 1, index: 1, timeMs: 1, type: 'normal', data: new Uint8Array(8) }]);
      await storage.sync();
      const meta = { index: 1, term: 1, timeMs: 1, voters: ['n1'], learners: [], peers: [],
        removed: [] };
      const failure = await saveSnapshotBytes(storage, meta, new Uint8Array(128 * 1024 * 1024))
        .then(() => null, (error: unknown) => error);
      expect(failure).toBeInstanceOf(SnapshotNoRoomError);
      expect(String(failure)).toContain('ENOSPC');
      expect(readdirSync(join(volume, 'n1', 'snap'))).toEqual([]);
      // Still usable: the log takes and syncs another entry, and a snapshot that fits lands.
      storage.append([{ term: 1, index: 2, timeMs: 2, type: 'normal', data: new Uint8Array(8) }]);
      await storage.sync();
      expect(await saveSnapshotBytes(storage, { ...meta, index: 2 }, new Uint8Array(1024)))
        .toBe(true);
      await storage.close();
    }, 60_000);
});
