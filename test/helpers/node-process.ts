/**
 * Real hivekv nodes as child processes, for tests that cross a process boundary. Each node
 * runs `bin/hivekv.js serve` (the built dist/), listens on 127.0.0.1, and is stopped by the
 * PID this helper started, never by name.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export { freePort } from '../jepsen/ports.js';

const ROOT = new URL('../../', import.meta.url).pathname;
const START_TIMEOUT_MS = 20_000;
const STOP_TIMEOUT_MS = 15_000;

/**
 * The cluster secret every test node gets unless its test sets one (or sets '' to test a
 * node without): a node with peers refuses to start without one.
 */
export const TEST_CLUSTER_SECRET = 'hivekv-test-cluster-secret-0123456789';

/** Settings that keep load tests from being rate limited unless a test wants limits. */
export const UNLIMITED_RATES = {
  QUEEN_KV_READ_RATE: '0',
  QUEEN_KV_WRITE_RATE: '0',
};

export interface NodeProcess {
  readonly pid: number;
  readonly port: number;
  readonly url: string;
  readonly output: () => string;
  readonly exited: Promise<number | null>;
  /** SIGTERM and wait for the exit code. */
  stop(): Promise<number | null>;
  /** SIGKILL and wait. */
  kill(): Promise<void>;
}

export interface StartOptions {
  readonly dataDir: string;
  readonly env?: Record<string, string>;
  readonly args?: readonly string[];
  readonly port?: number;
  /** The process's limit on open files (soft and hard), set by the shell that execs it. */
  readonly openFilesMax?: number;
  /** A cgroup's `cgroup.procs` the shell that execs the node joins first (memory-cgroup.ts). */
  readonly cgroupProcs?: string;
}

export function tempDir(prefix: string): string {
  return mkdtempSync(join(tmpdir(), `hivekv-${prefix}-`));
}

export function removeDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
}

function waitForServing(child: ChildProcess, getOutput: () => string): Promise<number> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      reject(new Error(`node did not start in ${START_TIMEOUT_MS} ms:\n${getOutput()}`));
    }, START_TIMEOUT_MS);
    const onData = () => {
      for (const line of getOutput().split('\n')) {
        if (!line.includes('"serving"')) continue;
        try {
          const record = JSON.parse(line) as { port?: number };
          if (typeof record.port === 'number') {
            clearTimeout(timer);
            child.stdout?.off('data', onData);
            resolve(record.port);
            return;
          }
        } catch {
          // not a JSON line
        }
      }
    };
    child.stdout?.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`node exited with ${code} before serving:\n${getOutput()}` +
        portHolders(getOutput())));
    });
  });
}

/**
 * For a node that could not take its port: who listens on it now (`ss`), with their command
 * lines, so a port another process took between the pick and the start names that process.
 */
function portHolders(output: string): string {
  const port = /127\.0\.0\.1:(\d+)(?: is already in use|$)/m.exec(output)?.[1] ??
    /EADDRINUSE: address already in use 127\.0\.0\.1:(\d+)/.exec(output)?.[1];
  if (port === undefined) return '';
  const listing = spawnSync('ss', ['-Htanp', `sport = :${port}`], { encoding: 'utf8' });
  const pids = [...(listing.stdout ?? '').matchAll(/pid=(\d+)/g)].map((m) => m[1]!);
  const commands = [...new Set(pids)].map((pid) => {
    let cmdline = '(gone)';
    try {
      cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim();
    } catch {
      // exited since
    }
    return `  pid ${pid}: ${cmdline}`;
  });
  return `\nport ${port} now: ${listing.stdout?.trim() || 'nothing'}\n${commands.join('\n')}`;
}

/**
 * Every node this test file started that has not exited yet. A test that fails while it
 * starts a cluster (one node of three refused to start, and `Promise.all` rejected) has no
 * handle on the others: they would outlive the file and hold its ports while the next file
 * picks them (`stopStartedNodes`, test/helpers/stop-started.ts).
 */
const running = new Set<ChildProcess>();

/** SIGKILLs every node this file started that is still running, and waits for each. */
export async function stopStartedNodes(): Promise<number> {
  const left = [...running];
  await Promise.all(left.map((child) => new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) {
      resolve();
      return;
    }
    child.once('exit', () => resolve());
    child.kill('SIGKILL');
  })));
  return left.length;
}

export async function startNode(options: StartOptions): Promise<NodeProcess> {
  const args = ['bin/hivekv.js', 'serve', '--host', '127.0.0.1',
    '--port', String(options.port ?? 0), '--data', options.dataDir, ...(options.args ?? [])];
  const steps: string[] = [];
  const max = options.openFilesMax;
  if (max !== undefined) steps.push(`ulimit -n ${Math.floor(max)}`);
  if (options.cgroupProcs !== undefined) steps.push(`echo $$ > '${options.cgroupProcs}'`);
  // `exec` keeps the pid: the node is the shell's process, as the tests kill it by pid.
  const [command, commandArgs] = steps.length === 0 ? [process.execPath, args]
    : ['/bin/sh', ['-c', `${steps.join(' && ')} && exec "$0" "$@"`, process.execPath, ...args]];
  const child = spawn(command, commandArgs, {
    cwd: ROOT,
    env: { ...process.env, HIVEKV_LOG_LEVEL: 'info', HIVEKV_CLUSTER_SECRET: TEST_CLUSTER_SECRET,
      ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.add(child);
  child.once('exit', () => running.delete(child));
  let output = '';
  const OUTPUT_CHARS_MAX = 1_000_000;
  const append = (chunk: Buffer) => {
    output += chunk.toString();
    if (output.length > OUTPUT_CHARS_MAX) output = output.slice(-OUTPUT_CHARS_MAX / 2);
  };
  child.stdout?.on('data', append);
  child.stderr?.on('data', append);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
  const port = await waitForServing(child, () => output);
  const pid = child.pid ?? -1;
  const waitExit = async (): Promise<number | null> => {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`pid ${pid} did not exit`)), STOP_TIMEOUT_MS);
    });
    try {
      return await Promise.race([exited, timeout]);
    } finally {
      clearTimeout(timer);
    }
  };
  return {
    pid,
    port,
    url: `http://127.0.0.1:${port}`,
    output: () => output,
    exited,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      return waitExit();
    },
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await waitExit();
    },
  };
}

export interface HttpAnswer {
  readonly status: number;
  readonly headers: Headers;
  readonly text: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  readonly body: any;
}

/** One HTTP call; `body` is sent as JSON unless it is already a string. */
export async function call(base: string, method: string, path: string, body?: unknown,
  headers: Record<string, string> = {}): Promise<HttpAnswer> {
  const init: RequestInit = { method, headers: { ...headers } };
  if (body !== undefined) {
    init.body = typeof body === 'string' ? body : JSON.stringify(body);
    (init.headers as Record<string, string>)['content-type'] = 'application/json';
  }
  const response = await fetch(base + path, init);
  const text = await response.text();
  let parsed: unknown = undefined;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  return { status: response.status, headers: response.headers, text, body: parsed };
}

/** POST /api/v1/kv with the given operations. */
export function kv(base: string, operations: unknown[], headers?: Record<string, string>) {
  return call(base, 'POST', '/api/v1/kv', { operations }, headers);
}
