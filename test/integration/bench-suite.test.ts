/**
 * The benchmark suite runs: its smallest mode (`hivekv bench --quick`, micro benchmarks
 * included) against one real hivekv node with a tiny duration, through the built command
 * line. The report's files appear, every point measured something, and every honesty check
 * held. Figures are never asserted (bench/README.md: CI checks that benchmarks run).
 */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

import { removeDir, tempDir } from '../helpers/node-process.js';

const ROOT = new URL('../../', import.meta.url).pathname;
const RUN_TIMEOUT_MS = 120_000;

interface Result {
  points: Array<{ target: string; workload: string; mode: string;
    figures: { opsPerSecond: number; generatorCores: number; latency: { p99Ms: number } };
    checks: Array<{ name: string; ok: boolean; detail: string }> }>;
  micro: Array<{ name: string; rows: unknown[]; error: string | null }>;
  targets: Array<{ name: string; skipped: string | null }>;
  versions: Record<string, string>;
  machine: { cores: number };
}

function bench(args: string[]): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['bin/hivekv.js', 'bench', ...args], { cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (c: Buffer) => { output += c.toString(); });
    child.stderr.on('data', (c: Buffer) => { output += c.toString(); });
    const timer = setTimeout(() => child.kill('SIGKILL'), RUN_TIMEOUT_MS);
    child.once('error', reject);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

describe('benchmark suite smoke run', () => {
  const out = tempDir('bench-smoke');
  afterAll(() => removeDir(out));

  it('writes the report, and every check holds', async () => {
    const { code, output } = await bench(['--quick', '--only', 'hivekv-1', '--duration', '0.3',
      '--keys', '2000', '--micro-time', '20', '--out', out]);
    expect(code, output).toBe(0);
    for (const file of ['results.json', 'results.md', 'report.html',
      'charts/throughput-64.svg', 'charts/latency-vs-rate.svg']) {
      expect(existsSync(join(out, file)), file).toBe(true);
    }
    const result = JSON.parse(readFileSync(join(out, 'results.json'), 'utf8')) as Result;
    expect(result.targets).toEqual([{ name: 'hivekv-1', label: expect.any(String),
      version: expect.any(String), skipped: null }]);
    expect(result.versions['node']).toBe(process.version);
    expect(result.machine.cores).toBeGreaterThan(0);
    expect(result.micro.map((m) => [m.name, m.error])).toEqual([['machine', null],
      ['codec', null], ['wal', null], ['raft', null]]);
    expect(result.micro.every((m) => m.rows.length > 0)).toBe(true);
    expect(result.points.map((p) => `${p.workload} ${p.mode}`)).toEqual(['put closed',
      'get closed', 'cas closed', 'incr closed', 'batch16 closed', 'ycsb-a-zipfian closed',
      'put open']);
    for (const point of result.points) {
      expect(point.figures.opsPerSecond, point.workload).toBeGreaterThan(0);
      expect(point.figures.generatorCores, point.workload).toBeGreaterThan(0);
      expect(point.checks.length, point.workload).toBeGreaterThanOrEqual(2);
      for (const check of point.checks) {
        expect(check.ok, `${point.workload} ${check.name}: ${check.detail}`).toBe(true);
      }
    }
    const svg = readFileSync(join(out, 'charts', 'throughput-64.svg'), 'utf8');
    expect(svg).toMatch(/^<svg/);
    expect(readFileSync(join(out, 'report.html'), 'utf8')).toContain('<svg');
    // The node's own lines are kept beside the report.
    expect(readFileSync(join(out, 'logs', 'hivekv-1.log'), 'utf8')).toContain('"msg":"serving"');
  }, RUN_TIMEOUT_MS + 10_000);

  it('refuses an unknown target with a usage error', async () => {
    const { code, output } = await bench(['--only', 'mysql']);
    expect(code).toBe(2);
    expect(output).toContain('unknown target "mysql"');
  });
});
