/**
 * The micro benchmarks as part of the suite: each runs as its own process (so its heap and
 * JIT state are its own), with a budget per task, and hands its figures back as JSON.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import type { MicroRow } from '../micro-json.js';
import type { Progress } from './progress.js';
import { ROOT } from './targets.js';

export interface MicroResult {
  readonly name: string;
  readonly title: string;
  readonly command: string;
  readonly rows: readonly MicroRow[];
  readonly notes: readonly string[];
  readonly error: string | null;
}

const MICRO_TIMEOUT_MS = 600_000;

const MICRO = [
  { name: 'machine', title: 'WebAssembly state machine: applied writes/s and reads/s',
    script: 'machine.bench.js' },
  { name: 'codec', title: 'Machine command and Raft message encoding',
    script: 'codec.bench.js' },
  { name: 'wal', title: 'WAL append + fdatasync', script: 'wal.bench.js' },
  { name: 'raft', title: 'Raft core step(): one full commit round in memory',
    script: 'raft-step.bench.js' },
] as const;

function runOne(script: string, env: Record<string, string>): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(ROOT, 'dist', 'bench', script)], { cwd: ROOT,
      env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (c: Buffer) => { output += c.toString(); });
    child.stderr.on('data', (c: Buffer) => { output += c.toString(); });
    const timer = setTimeout(() => child.kill('SIGKILL'), MICRO_TIMEOUT_MS);
    child.once('error', reject);
    child.once('exit', (code) => {
      clearTimeout(timer);
      if (code === 0) resolve(output);
      else reject(new Error(`${script} exited with ${code}: ${output.slice(-500)}`));
    });
  });
}

/** Runs every micro benchmark with `timeMs` per task (and smaller stores when `small`). */
export async function runMicro(timeMs: number, small: boolean, progress: Progress):
  Promise<MicroResult[]> {
  const dir = mkdtempSync(join(tmpdir(), 'hivekv-bench-micro-'));
  const results: MicroResult[] = [];
  try {
    for (const micro of MICRO) {
      progress.line(`micro: ${micro.title}`);
      const json = join(dir, `${micro.name}.json`);
      const env = { BENCH_TIME_MS: String(timeMs), BENCH_JSON: json,
        BENCH_KEYS: small ? '100000' : '1000000', BENCH_MODEL_KEYS: small ? '1000' : '10000' };
      const command = `node dist/bench/${micro.script}`;
      try {
        await runOne(micro.script, env);
        const parsed = JSON.parse(readFileSync(json, 'utf8')) as { rows: MicroRow[];
          notes: string[] };
        results.push({ ...micro, command, rows: parsed.rows, notes: parsed.notes, error: null });
      } catch (error) {
        const message = error instanceof Error ? error.message : String(error);
        progress.line(`micro ${micro.name} failed: ${message}`);
        results.push({ ...micro, command, rows: [], notes: [], error: message });
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return results;
}
