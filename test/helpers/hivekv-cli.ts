/**
 * Runs the `hivekv` command line (the built dist/) as a child process, bounded in time, and
 * collects its exit status, its output and its stdout read as JSON lines.
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
}

/**
 * Runs `hivekv ...args`; lines that are not JSON are kept as text. `stdinFile`: a file
 * whose bytes the command reads on stdin.
 */
export function hivekv(args: string[], stdinFile?: string): Promise<Run> {
  return new Promise((resolve, reject) => {
    const input: 'ignore' | number = stdinFile === undefined ? 'ignore'
      : openSync(stdinFile, 'r');
    const child = spawn(process.execPath, ['bin/hivekv.js', ...args], {
      cwd: ROOT, env: { ...process.env }, stdio: [input, 'pipe', 'pipe'],
    });
    if (typeof input === 'number') closeSync(input);
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (chunk: Buffer) => { stdout += chunk.toString(); });
    child.stderr!.on('data', (chunk: Buffer) => { stderr += chunk.toString(); });
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`hivekv ${args.join(' ')} ran over ${RUN_TIMEOUT_MS} ms`));
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
      resolve({ code, stdout, stderr, lines });
    });
  });
}

