/**
 * A `hivekv serve` under callgrind with its instrumentation off, for the benchmarks that
 * count a node's instructions (call-instructions.ts, digest-node-instructions.ts): started,
 * called over one keep-alive connection, waited for, and stopped.
 *
 * Needs valgrind (Debian: `apt-get install valgrind`).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { Agent, request } from 'node:http';

const START_TIMEOUT_MS = 300_000;
const CALL_TIMEOUT_MS = 60_000;

/**
 * `hivekv serve` of the checkout at `root` on `port`, its data in `dir`/data and its
 * callgrind files `dir`/cg.<pid>[.<dump>]; the rates that would refuse a benchmark's calls
 * are off, and so is the idle poll: its turns follow the wall clock, which callgrind
 * stretches, so they would count as much as the calls they wait between.
 */
export function serveUnderCallgrind(root: string, port: number, dir: string,
  env: Record<string, string> = {}): ChildProcess {
  return spawn('valgrind', ['--tool=callgrind', '--instr-atstart=no',
    `--callgrind-out-file=${join(dir, 'cg.%p')}`, '--smc-check=all-non-file',
    process.execPath, '--no-liftoff', join(root, 'bin', 'hivekv.js'), 'serve',
    '--port', String(port), '--data', join(dir, 'data')], {
    env: { ...process.env, QUEEN_KV_READ_RATE: '0', QUEEN_KV_WRITE_RATE: '0',
      HIVEKV_IDLE_POLL_US: '0', ...env },
    stdio: ['ignore', 'ignore', 'ignore'] });
}

/** One call; resolves on a 200, rejects with the status and body otherwise. */
export function callNode(agent: Agent, port: number, method: string, path: string,
  body?: string): Promise<void> {
  return new Promise((done, fail) => {
    const req = request({ host: '127.0.0.1', port, path, method, agent,
      timeout: CALL_TIMEOUT_MS,
      headers: body === undefined ? {} : { 'content-type': 'application/json' } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => { text += chunk; });
      res.on('end', () => {
        if (res.statusCode === 200) done();
        else fail(new Error(`${method} ${path}: HTTP ${res.statusCode ?? '?'}: ${text}`));
      });
    });
    req.on('timeout', () => req.destroy(new Error('call timed out')));
    req.on('error', fail);
    req.end(body);
  });
}

/** Until the node answers `/health` (valgrind makes its start slow), or it exits. */
export async function waitUntilServing(agent: Agent, port: number,
  child: ChildProcess): Promise<void> {
  const deadline = Date.now() + START_TIMEOUT_MS;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`the node exited with ${child.exitCode}`);
    try {
      await callNode(agent, port, 'GET', '/health');
      return;
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((r) => setTimeout(r, 1000));
    }
  }
}

/** SIGTERM, and the exit awaited. */
export async function stopNode(child: ChildProcess): Promise<void> {
  child.kill('SIGTERM');
  if (child.exitCode === null) await new Promise((r) => child.once('exit', r));
}
