/**
 * Runs the `hivekv` command line (the built dist/), or any node script, as a child process,
 * bounded in time, and collects its exit status, its output, and its stdout read as JSON
 * lines and as one value.
 */
import { spawn } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';

const ROOT = new URL('../../', import.meta.url).pathname;
const RUN_TIMEOUT_MS = 60_000;

export interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
  /** stdout as JSON lines. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  readonly lines: any[];
  /** stdout as one JSON value (an indented answer), or undefined when it is not one. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  readonly json: any;
}

export interface RunOptions {
  /** A file whose bytes the command reads on stdin. */
  readonly stdinFile?: string;
  /** Text the command reads on stdin (instead of a file). */
  readonly stdin?: string;
  /** Added to this process's environment. */
  readonly env?: Record<string, string>;
}

/** Runs `hivekv ...args`; lines that are not JSON are kept as text. */
export function hivekv(args: string[], options: RunOptions = {}): Promise<Run> {
  return runNode(['bin/hivekv.js', ...args], options);
}

/**
 * Runs `node ...nodeArgs` from the project's root (a script on stdin with
 * `--input-type=module`, say), bounded in time like `hivekv`.
 */
export function runNode(nodeArgs: string[], options: RunOptions = {}): Promise<Run> {
  return new Promise((resolve, reject) => {
    const input: 'ignore' | 'pipe' | number = options.stdinFile !== undefined
      ? openSync(options.stdinFile, 'r') : options.stdin !== undefined ? 'pipe' : 'ignore';
    const child = spawn(process.execPath, nodeArgs, {
      cwd: ROOT, env: { ...process.env, ...options.env }, stdio: [input, 'pipe', 'pipe'],
    });
    if (typeof input === 'number') closeSync(input);
    if (input === 'pipe') child.stdin!.end(options.stdin);
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (chunk: Buffer) => { stdout += chunk.toString(); });
    child.stderr!.on('data', (chunk: Buffer) => { stderr += chunk.toString(); });
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`node ${nodeArgs.join(' ')} ran over ${RUN_TIMEOUT_MS} ms`));
    }, RUN_TIMEOUT_MS);
    child.on('error', reject);
    child.on('exit', (code) => {
      clearTimeout(timer);
      const lines = stdout.split('\n').filter((l) => l.trim() !== '').map((l) => {
        try {
          return JSON.parse(l) as unknown;
        } catch {
          return l;
        }
      });
      resolve({ code, stdout, stderr, lines, json: parsedWhole(stdout) });
    });
  });
}

function parsedWhole(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
