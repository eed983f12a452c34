/** What a run records about where it ran: the machine and every program's version. */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { cpus, freemem, loadavg, release, totalmem } from 'node:os';

import { commandVersion, ROOT, which } from './targets.js';

export interface MachineInfo {
  readonly cpuModel: string;
  readonly cores: number;
  readonly memoryGiB: number;
  readonly freeMemoryGiB: number;
  readonly kernel: string;
  readonly loadAverage: readonly number[];
}

export function machineInfo(): MachineInfo {
  let model = cpus()[0]?.model ?? 'unknown';
  try {
    model = /model name\s*:\s*(.*)/.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1] ?? model;
  } catch {
    // not Linux: os.cpus() it is
  }
  const gib = (bytes: number) => Math.round(bytes / 2 ** 30 * 10) / 10;
  return { cpuModel: model, cores: cpus().length, memoryGiB: gib(totalmem()),
    freeMemoryGiB: gib(freemem()), kernel: release(),
    loadAverage: loadavg().map((x) => Math.round(x * 100) / 100) };
}

function hivekvVersion(): string {
  try {
    const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT,
      encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--untracked-files=no'],
      { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim() !== '';
    return `commit ${commit}${dirty ? ' (with uncommitted changes)' : ''}`;
  } catch {
    const pkg = JSON.parse(readFileSync(`${ROOT}/package.json`, 'utf8')) as { version: string };
    return `package ${pkg.version}`;
  }
}

/** The version a program prints, cut to the number by `pattern` where it matches. */
function optional(program: string, args: string[], pattern: RegExp): string {
  if (which(program) === null) return 'not installed';
  const text = commandVersion(program, args);
  return pattern.exec(text)?.[1] ?? text;
}

export function toolVersions(): Record<string, string> {
  return { hivekv: hivekvVersion(), node: process.version,
    etcd: optional('etcd', ['--version'], /Version:\s*(\S+)/),
    redis: optional('redis-server', ['--version'], /v=(\S+)/),
    wrk: optional('wrk', ['-v'], /wrk\s+(?:debian\/)?(\S+)/) };
}
