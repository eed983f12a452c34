/**
 * The fault run's cluster: real `hivekv serve` processes on loopback, with a cluster secret,
 * and a TCP proxy (`proxy.ts`) on every directed peer link, so that node i reaches node j
 * only through proxy (i, j). Each node's `--peers` names the proxies it dials; the cluster
 * id is set, since the member lists differ by their proxy ports. Processes are stopped by
 * the PID this module started, never by name; `stopAll` leaves none behind.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import {
  closeSync, existsSync, mkdirSync, openSync, readFileSync, rmSync, statSync,
} from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from './ports.js';
import { LinkProxy } from './proxy.js';

/** How long a node may take to answer /health after a (re)start. */
const START_TIMEOUT_MS = 30_000;
/**
 * How long a node may take to stop on SIGTERM: it hands leadership over (up to 2 s), drains
 * the calls in flight (up to 5 s), then flushes and closes.
 */
const TERMINATE_WAIT_MS = 20_000;
/**
 * Starts of one node that may meet a port taken in the meantime. A port is chosen free, then
 * handed to the node; on a loaded machine another process's outgoing connection can take it
 * in between, and the node refuses to start ("already in use"): that is the harness's race,
 * not a finding, so the start is tried again.
 */
const PORT_CLASH_ATTEMPTS = 5;
/** Node settings of the fault run: no rate limits, quick 503s for unknown outcomes. */
const NODE_ENV: Readonly<Record<string, string>> = {
  QUEEN_KV_READ_RATE: '0',
  QUEEN_KV_WRITE_RATE: '0',
  HIVEKV_REQUEST_TIMEOUT_MS: '2000',
  HIVEKV_LOG_LEVEL: 'info',
  // Checkpoints often: a replica whose state parts from the leader's exits with status 3,
  // which the node verdict reports like any exit the nemesis did not cause.
  HIVEKV_DIGEST_EVERY: '100',
};

/** The directory holding package.json (the harness runs from test/ or from dist/test/). */
export function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 8; i++) {
    if (existsSync(join(dir, 'package.json'))) return dir;
    dir = dirname(dir);
  }
  throw new Error('package.json not found above the fault run harness');
}

export interface NodeExit {
  readonly id: string;
  readonly code: number | null;
  readonly signal: string | null;
  /** False when the node died without the nemesis killing it: always a finding. */
  readonly expected: boolean;
  /** Stopped by SIGTERM: a graceful stop, which must exit 0. */
  readonly graceful: boolean;
  readonly atMs: number;
}

interface Member {
  /** The id the node runs under now: a replaced node joins under a new one. */
  id: string;
  /** Every id this slot has run under, the first one first. */
  readonly ids: string[];
  readonly index: number;
  readonly clientPort: number;
  readonly peerPort: number;
  readonly dataDir: string;
  readonly logFile: string;
  /** The arguments after `serve`; membership changes may replace them. */
  args: string[];
  child: ChildProcess | null;
  paused: boolean;
  killing: boolean;
  /** The nemesis sent SIGTERM: the exit must be a clean one. */
  terminating: boolean;
}

export class JepsenCluster {
  readonly members: Member[] = [];
  /** proxies[i][j]: node i's link to node j (null on the diagonal). */
  readonly proxies: Array<Array<LinkProxy | null>> = [];
  readonly exits: NodeExit[] = [];
  readonly clusterId: string;

  constructor(private readonly dir: string, readonly nodeCount: number,
    private readonly secret: string, seed: number, private readonly random: () => number) {
    this.clusterId = `jepsen-${seed}`;
  }

  ids(): string[] {
    return this.members.map((m) => m.id);
  }

  url(id: string): string {
    return `http://127.0.0.1:${this.member(id).clientPort}`;
  }

  /** The member running under `id`, or that ran under it before it was replaced. */
  member(id: string): Member {
    const found = this.members.find((m) => m.id === id) ??
      this.members.find((m) => m.ids.includes(id));
    if (found === undefined) throw new Error(`no member ${id}`);
    return found;
  }

  /** The real peer address of a node (what an outsider reaches, bypassing the proxies). */
  peerAddress(id: string): { host: string; port: number } {
    return { host: '127.0.0.1', port: this.member(id).peerPort };
  }

  async start(): Promise<void> {
    const ports = await Promise.all(Array.from({ length: this.nodeCount * 2 }, () => freePort()));
    for (let i = 0; i < this.nodeCount; i++) {
      const id = `n${i + 1}`;
      const dataDir = join(this.dir, 'data', id);
      mkdirSync(dataDir, { recursive: true });
      this.members.push({ id, ids: [id], index: i, clientPort: ports[2 * i] ?? 0,
        peerPort: ports[2 * i + 1] ?? 0, dataDir, logFile: join(this.dir, `${id}.log`), args: [],
        child: null, paused: false, killing: false, terminating: false });
    }
    for (const from of this.members) {
      const row: Array<LinkProxy | null> = [];
      for (const to of this.members) {
        if (from === to) {
          row.push(null);
          continue;
        }
        // The n2 -> n1 link records its handshakes, for the probes to replay.
        const record = from.index === 1 && to.index === 0;
        const proxy = new LinkProxy({ host: '127.0.0.1', port: to.peerPort }, this.random, record);
        await proxy.start();
        row.push(proxy);
      }
      this.proxies.push(row);
    }
    for (const member of this.members) member.args = this.clusterArgs(member);
    await Promise.all(this.members.map((m) => this.launch(m)));
  }

  private clusterArgs(member: Member): string[] {
    const peers = this.members.map((other) => {
      const port = other === member ? other.peerPort
        : this.proxies[member.index]?.[other.index]?.currentPort ?? 0;
      return `${other.id}=127.0.0.1:${port}`;
    }).join(',');
    return ['--id', member.id, '--peers', peers];
  }

  /**
   * Starts the node's process and waits until /health answers; a start that found one of
   * its ports taken is tried again (PORT_CLASH_ATTEMPTS).
   */
  async launch(member: Member, wait = true): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      const logOffset = existsSync(member.logFile) ? statSync(member.logFile).size : 0;
      this.spawnNode(member);
      if (!wait) return;
      try {
        await this.waitServing(member.id);
        return;
      } catch (error) {
        const clash = member.child === null &&
          readFileSync(member.logFile).subarray(logOffset).includes('already in use');
        if (!clash || attempt >= PORT_CLASH_ATTEMPTS) throw error;
        // Not a node dying on its own: it never started.
        const last = this.exits.findLastIndex((exit) => exit.id === member.id);
        if (last >= 0) this.exits.splice(last, 1);
        await new Promise((resolve) => setTimeout(resolve, 300));
      }
    }
  }

  private spawnNode(member: Member): void {
    const logFd = openSync(member.logFile, 'a');
    const child = spawn(process.execPath, [join(packageRoot(), 'bin', 'hivekv.js'), 'serve',
      '--host', '127.0.0.1', '--port', String(member.clientPort), '--data', member.dataDir,
      ...member.args], {
      env: { ...process.env, ...NODE_ENV, HIVEKV_CLUSTER_SECRET: this.secret,
        HIVEKV_CLUSTER_ID: this.clusterId },
      stdio: ['ignore', logFd, logFd],
    });
    closeSync(logFd);
    member.child = child;
    member.paused = false;
    const startedMs = Date.now();
    child.once('exit', (code, signal) => {
      this.exits.push({ id: member.id, code, signal, expected: member.killing,
        graceful: member.terminating, atMs: Date.now() - startedMs });
      if (member.child === child) member.child = null;
      member.killing = false;
      member.terminating = false;
    });
  }

  async waitServing(id: string, timeoutMs = START_TIMEOUT_MS): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if (this.member(id).child === null) throw new Error(`${id} exited while starting`);
      try {
        const response = await fetch(`${this.url(id)}/health`,
          { signal: AbortSignal.timeout(1000) });
        await response.text();
        if (response.status === 200) return;
      } catch {
        // not listening yet
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    throw new Error(`${id} did not serve within ${timeoutMs} ms (log: ${this.member(id).logFile})`);
  }

  isUp(id: string): boolean {
    return this.member(id).child !== null;
  }

  /** SIGKILL, waiting for the exit. */
  async kill(id: string): Promise<void> {
    const member = this.member(id);
    const child = member.child;
    if (child === null) return;
    member.killing = true;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGKILL');
    await exited;
  }

  /**
   * SIGTERM, waiting for the exit: the node hands leadership over, answers what it can and
   * exits 0. One that has not exited within TERMINATE_WAIT_MS is killed (its exit then
   * says SIGKILL, a finding).
   */
  async terminate(id: string): Promise<void> {
    const member = this.member(id);
    const child = member.child;
    if (child === null) return;
    this.resume(id);
    member.killing = true;
    member.terminating = true;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGTERM');
    const late = setTimeout(() => child.kill('SIGKILL'), TERMINATE_WAIT_MS);
    await exited;
    clearTimeout(late);
  }

  async restart(id: string): Promise<void> {
    const member = this.member(id);
    if (member.child !== null) return;
    await this.launch(member);
  }

  pause(id: string): void {
    const member = this.member(id);
    if (member.child?.pid === undefined || member.paused) return;
    process.kill(member.child.pid, 'SIGSTOP');
    member.paused = true;
  }

  resume(id: string): void {
    const member = this.member(id);
    if (member.child?.pid === undefined || !member.paused) return;
    process.kill(member.child.pid, 'SIGCONT');
    member.paused = false;
  }

  /** Every directed link proxy, with its ends. */
  links(): Array<{ from: string; to: string; proxy: LinkProxy }> {
    const out: Array<{ from: string; to: string; proxy: LinkProxy }> = [];
    this.proxies.forEach((row, i) => row.forEach((proxy, j) => {
      const from = this.members[i]?.id;
      const to = this.members[j]?.id;
      if (proxy !== null && from !== undefined && to !== undefined) out.push({ from, to, proxy });
    }));
    return out;
  }

  /** Heals everything: links pass, paused nodes continue, stopped nodes start. */
  async healAll(): Promise<void> {
    for (const { proxy } of this.links()) proxy.setMode({ kind: 'pass' });
    for (const member of this.members) this.resume(member.id);
    await Promise.all(this.members.filter((m) => m.child === null).map((m) => this.launch(m)));
  }

  /** Stops every process this cluster started (SIGCONT first, then SIGKILL) and the proxies. */
  async stopAll(): Promise<void> {
    for (const member of this.members) {
      this.resume(member.id);
      await this.kill(member.id);
    }
    for (const { proxy } of this.links()) await proxy.close();
  }

  /** The kill-everything path for a harness that is itself being stopped. */
  killNow(): void {
    for (const member of this.members) {
      const pid = member.child?.pid;
      if (pid === undefined) continue;
      try {
        process.kill(pid, 'SIGCONT');
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  }

  /**
   * Gives the slot of `id` its next id (`n2` -> `n2-r1` -> `n2-r2`): a cluster never takes a
   * removed id back, since messages to or from the old node may still be in flight.
   */
  renameForReplacement(id: string): string {
    const member = this.member(id);
    const next = `${member.ids[0]}-r${member.ids.length}`;
    member.ids.push(next);
    member.id = next;
    return next;
  }

  /** Wipes a node's data directory (membership: a replaced node starts empty). */
  wipe(id: string): void {
    const member = this.member(id);
    rmSync(member.dataDir, { recursive: true, force: true });
    mkdirSync(member.dataDir, { recursive: true });
  }
}
