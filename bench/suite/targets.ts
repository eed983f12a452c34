/**
 * The servers the suite measures: started here on 127.0.0.1 in temporary directories, stopped
 * by the PID this process started (also on Ctrl-C), their directories removed. A target whose
 * program is not installed is skipped with the line that installs it.
 *
 * - `hivekv-1`: one durable node (fsync before every answer); `hivekv-3`: three nodes, load on
 *   the leader (and, with `viaFollower`, on a follower too).
 * - `etcd-1`, `etcd-3`: etcd with its defaults, load through the JSON gateway of the leader.
 * - `redis`: redis-server with its defaults; `redis-aof`: `appendonly yes`,
 *   `appendfsync always`, the setting that answers a write only once it is on disk.
 * - `url`: any server speaking hivekv's HTTP surface, already running (`--target URL`).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { accessSync, constants, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';

import type { TargetKind } from './codecs.js';
import { ServerLog } from './server-log.js';

export const ROOT = new URL('../../../', import.meta.url).pathname;

export const TARGET_NAMES = ['hivekv-1', 'hivekv-3', 'etcd-1', 'etcd-3', 'redis', 'redis-aof'
] as const;
/**
 * One node measured again after the cluster (`bench --cluster`): this machine's speed moves
 * from minute to minute, so the cluster is compared with the mean of a one-node turn on
 * either side of it, not with one taken a minute before.
 */
export const ONE_NODE_AGAIN = 'hivekv-1 again';
export type TargetName = (typeof TARGET_NAMES)[number] | typeof ONE_NODE_AGAIN | 'url';

/** Where load goes: a name for the report and the ports its connections use. */
export interface Entry {
  readonly name: string;
  readonly ports: readonly number[];
}

export interface Target {
  readonly name: TargetName;
  readonly kind: TargetKind;
  /** How it was configured, for the report. */
  readonly label: string;
  readonly host: string;
  readonly entries: readonly Entry[];
  /** Every server process, for CPU accounting; empty for `url`. */
  readonly pids: readonly number[];
  readonly version: string;
  stop(): Promise<void>;
}

const START_TIMEOUT_MS = 30_000;
const STOP_TIMEOUT_MS = 15_000;
const HOST = '127.0.0.1';

/** Every child this process started, so an interrupt can stop them all. */
const children = new Set<ChildProcess>();
const tempDirs = new Set<string>();
/** Where each server's output is kept (server-log.ts), or null to keep none. */
let serverLogDir: string | null = null;

/** Keeps the output of every server started from now on in `dir`. */
export function keepServerLogs(dir: string | null): void {
  serverLogDir = dir;
}

/** Stops every server still running and removes their directories (Ctrl-C, errors). */
export function stopEverything(): void {
  for (const child of children) {
    if (child.pid !== undefined && child.exitCode === null) child.kill('SIGKILL');
  }
  children.clear();
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
  tempDirs.clear();
}

/** The program's path on PATH, or null. */
export function which(program: string): string | null {
  for (const dir of (process.env['PATH'] ?? '').split(delimiter)) {
    const path = join(dir, program);
    try {
      accessSync(path, constants.X_OK);
      return path;
    } catch {
      // not here
    }
  }
  return null;
}

/** The install line for a missing program, or null when everything `name` needs is here. */
export function missingFor(name: TargetName): string | null {
  const need: Record<string, [string, string][]> = {
    etcd: [['etcd', 'etcd-server etcd-client']],
    redis: [['redis-server', 'redis-server redis-tools']],
  };
  const family = name.startsWith('etcd') ? 'etcd' : name.startsWith('redis') ? 'redis' : '';
  for (const [program, packages] of need[family] ?? []) {
    if (which(program) === null) {
      return `${program} is not installed (Debian: apt-get install -y ${packages})`;
    }
  }
  return null;
}

export function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), `hivekv-bench-${prefix}-`));
  tempDirs.add(dir);
  return dir;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.on('error', reject);
    server.listen(0, HOST, () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

interface Started {
  readonly child: ChildProcess;
  output(): string;
}

/**
 * Starts a program; resolves once `ready(output)` is true, rejects if it exits first. Its
 * output is kept under `server`'s name while `keepServerLogs` has a directory.
 */
function startProcess(server: string, command: string, args: readonly string[],
  env: Record<string, string>, ready: (output: string) => boolean): Promise<Started> {
  const child = spawn(command, [...args], { cwd: ROOT, env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  const log = serverLogDir === null ? null : new ServerLog(serverLogDir, server);
  child.once('close', () => log?.close());
  let output = '';
  const OUTPUT_CHARS_MAX = 200_000;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${command} did not start in ` +
      `${START_TIMEOUT_MS} ms:\n${output.slice(-2000)}`)), START_TIMEOUT_MS);
    const onData = (chunk: Buffer) => {
      log?.write(chunk);
      output += chunk.toString();
      if (output.length > OUTPUT_CHARS_MAX) output = output.slice(-OUTPUT_CHARS_MAX / 2);
      if (ready(output)) {
        clearTimeout(timer);
        resolve({ child, output: () => output });
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    // A program that says nothing when ready (etcd at error level) is polled by the caller.
    if (ready('')) setImmediate(() => {
      clearTimeout(timer);
      resolve({ child, output: () => output });
    });
    child.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.once('exit', (code) => {
      children.delete(child);
      clearTimeout(timer);
      reject(new Error(`${command} exited with ${code}:\n${output.slice(-2000)}`));
    });
  });
}

/** SIGTERM, then SIGKILL after a bounded wait. */
async function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) {
    children.delete(child);
    return;
  }
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS);
  await exited;
  clearTimeout(timer);
  children.delete(child);
}

async function getJson(url: string, init?: RequestInit): Promise<unknown> {
  const response = await fetch(url, { ...init, signal: AbortSignal.timeout(5_000) });
  return response.json();
}

/** Polls `probe` until it answers a value (not null), for at most `START_TIMEOUT_MS`. */
async function until<T>(what: string, probe: () => Promise<T | null>): Promise<T> {
  const deadline = Date.now() + START_TIMEOUT_MS;
  let lastError: unknown = null;
  while (Date.now() < deadline) {
    try {
      const value = await probe();
      if (value !== null) return value;
    } catch (error) {
      lastError = error;
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${what}: not ready in ${START_TIMEOUT_MS} ms (${String(lastError)})`);
}

export function commandVersion(command: string, args: readonly string[]): string {
  const result = spawnSync(command, [...args], { encoding: 'utf8', timeout: 10_000 });
  const text = `${result.stdout ?? ''}${result.stderr ?? ''}`.trim();
  return text.split('\n')[0] ?? 'unknown';
}

const stopAll = (started: readonly Started[], dirs: readonly string[]) => async () => {
  await Promise.all(started.map((s) => stopProcess(s.child)));
  for (const dir of dirs) {
    rmSync(dir, { recursive: true, force: true });
    tempDirs.delete(dir);
  }
};

function hivekvNode(server: string, args: string[], env: Record<string, string>):
  Promise<Started> {
  return startProcess(server, process.execPath, ['bin/hivekv.js', 'serve', '--host', HOST,
    '--port', '0', ...args], { QUEEN_KV_READ_RATE: '0', QUEEN_KV_WRITE_RATE: '0',
    HIVEKV_LOG_LEVEL: 'info', ...env }, (out) => /"msg":"serving"/.test(out));
}

const servingPort = (s: Started): number => {
  const match = /"port":(\d+)[^\n]*"msg":"serving"|"msg":"serving"[^\n]*"port":(\d+)/
    .exec(s.output());
  return Number(match?.[1] ?? match?.[2]);
};

export async function startHivekv(nodes: 1 | 3, viaFollower: boolean, version: string,
  name: TargetName = nodes === 1 ? 'hivekv-1' : 'hivekv-3'): Promise<Target> {
  const dirs = Array.from({ length: nodes }, (_, i) => tempDir(`hivekv-n${i + 1}`));
  const started: Started[] = [];
  const stop = stopAll(started, dirs);
  try {
    if (nodes === 1) {
      started.push(await hivekvNode(name, ['--data', dirs[0]!], {}));
    } else {
      const peerPorts = [await freePort(), await freePort(), await freePort()];
      const peers = peerPorts.map((p, i) => `n${i + 1}=${HOST}:${p}`).join(',');
      // Peers prove a shared secret before any Raft frame (where the build requires one).
      const secret = randomBytes(32).toString('hex');
      started.push(...await Promise.all(dirs.map((dir, i) => hivekvNode(`${name}-n${i + 1}`,
        ['--data', dir, '--id', `n${i + 1}`, '--peers', peers],
        { HIVEKV_CLUSTER_SECRET: secret }))));
    }
    const ports = started.map(servingPort);
    const roles = await until('hivekv leader', async () => {
      const healths = await Promise.all(ports.map((p) => getJson(`http://${HOST}:${p}/health`)
        .then((h) => (h as { role?: string }).role ?? '')));
      return healths.includes('leader') ? healths : null;
    });
    const leader = ports[roles.indexOf('leader')]!;
    const follower = ports.find((_, i) => roles[i] !== 'leader');
    const entries: Entry[] = [{ name, ports: [leader] }];
    if (viaFollower && follower !== undefined) {
      entries.push({ name: `${name} via follower`, ports: [follower] });
    }
    return { name, kind: 'hivekv', host: HOST, entries, version, stop,
      pids: started.map((s) => s.child.pid ?? -1),
      label: nodes === 1 ? 'one node, fsync before every answer'
        : 'three nodes on this machine, load on the leader; a write is on two disks' };
  } catch (error) {
    await stop();
    throw error;
  }
}

export async function startEtcd(nodes: 1 | 3, viaFollower: boolean): Promise<Target> {
  const dirs = Array.from({ length: nodes }, (_, i) => tempDir(`etcd-n${i + 1}`));
  const clientPorts: number[] = [];
  const peerPorts: number[] = [];
  for (let i = 0; i < nodes; i++) clientPorts.push(await freePort());
  for (let i = 0; i < nodes; i++) peerPorts.push(await freePort());
  const cluster = peerPorts.map((p, i) => `e${i + 1}=http://${HOST}:${p}`).join(',');
  const started: Started[] = [];
  const stop = stopAll(started, dirs);
  try {
    started.push(...await Promise.all(dirs.map((dir, i) => startProcess(
      `etcd-${nodes}-e${i + 1}`, 'etcd', [
      '--name', `e${i + 1}`, '--data-dir', dir,
      '--listen-client-urls', `http://${HOST}:${clientPorts[i]}`,
      '--advertise-client-urls', `http://${HOST}:${clientPorts[i]}`,
      '--listen-peer-urls', `http://${HOST}:${peerPorts[i]}`,
      '--initial-advertise-peer-urls', `http://${HOST}:${peerPorts[i]}`,
      '--initial-cluster', cluster, '--initial-cluster-state', 'new',
      '--initial-cluster-token', `bench-${process.pid}`, '--logger', 'zap',
      '--log-level', 'error'], {}, () => true))));
    const statuses = await until('etcd leader', async () => {
      const all = await Promise.all(clientPorts.map((p) => getJson(
        `http://${HOST}:${p}/v3/maintenance/status`, { method: 'POST', body: '{}' }) as
        Promise<{ header?: { member_id?: string }; leader?: string }>));
      const leader = all[0]?.leader;
      return leader !== undefined && leader !== '0' ? all : null;
    });
    const isLeader = statuses.map((s) => s.header?.member_id === s.leader);
    const leaderPort = clientPorts[isLeader.indexOf(true)]!;
    const followerPort = clientPorts.find((_, i) => !isLeader[i]);
    const name = nodes === 1 ? 'etcd-1' : 'etcd-3';
    const entries: Entry[] = [{ name, ports: [leaderPort] }];
    if (viaFollower && followerPort !== undefined) {
      entries.push({ name: `${name} via follower`, ports: [followerPort] });
    }
    return { name, kind: 'etcd', host: HOST, entries, stop,
      pids: started.map((s) => s.child.pid ?? -1), version: `etcd ${/Version:\s*(\S+)/
        .exec(commandVersion('etcd', ['--version']))?.[1] ?? '?'}`,
      label: nodes === 1 ? 'one member, defaults, JSON gateway'
        : 'three members on this machine, defaults, load on the leader' };
  } catch (error) {
    await stop();
    throw error;
  }
}

export async function startRedis(aof: boolean): Promise<Target> {
  const dir = tempDir(aof ? 'redis-aof' : 'redis');
  const port = await freePort();
  const args = ['--port', String(port), '--bind', HOST, '--dir', dir, '--daemonize', 'no',
    ...(aof ? ['--appendonly', 'yes', '--appendfsync', 'always'] : [])];
  const started = [await startProcess(aof ? 'redis-aof' : 'redis', 'redis-server', args, {},
    (out) => /Ready to accept connections/.test(out))];
  return { name: aof ? 'redis-aof' : 'redis', kind: 'redis', host: HOST,
    entries: [{ name: aof ? 'redis-aof' : 'redis', ports: [port] }],
    pids: started.map((s) => s.child.pid ?? -1), stop: stopAll(started, [dir]),
    version: `redis ${/v=(\S+)/.exec(commandVersion('redis-server', ['--version']))?.[1] ?? '?'}`,
    label: aof ? 'appendonly yes, appendfsync always (fsync before every answer)'
      : 'defaults (RDB snapshots now and then; an answered write may be lost)' };
}

/** A running server that speaks hivekv's HTTP surface. */
export async function urlTarget(url: string): Promise<Target> {
  const parsed = new URL(url);
  if (parsed.protocol !== 'http:') throw new Error(`--target: only http:// URLs (${url})`);
  const port = Number(parsed.port || 80);
  return { name: 'url', kind: 'hivekv', host: parsed.hostname, label: url,
    entries: [{ name: `target ${parsed.host}`, ports: [port] }], pids: [],
    version: 'as deployed', stop: async () => undefined };
}
