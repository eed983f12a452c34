/**
 * An import stopped half-way (SIGKILL while it writes the directory) leaves no directory a
 * node would start from as an empty store: it builds beside the target and renames it into
 * place once whole (host/backup/import.ts). A real node's export of about 40 MB, and real
 * `hivekv import` processes.
 */
import { spawn } from 'node:child_process';
import { createReadStream, existsSync, readdirSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  kv, removeDir, startNode, tempDir, UNLIMITED_RATES,
} from '../helpers/node-process.js';

const ROOT = new URL('../../', import.meta.url).pathname;
const CALLS = 40;
const OPS = 256;
const VALUE = 'v'.repeat(4000);
const dirs: string[] = [];

afterAll(() => {
  for (const dir of dirs) removeDir(dir);
});

/** Runs `hivekv import --data target` on the dump, killed once it has begun writing. */
function runImport(dump: string, target: string, killOnStaging: boolean):
  Promise<{ code: number | null; signal: string | null }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['bin/hivekv.js', 'import', '--data', target],
      { cwd: ROOT, stdio: ['pipe', 'ignore', 'ignore'] });
    createReadStream(dump).pipe(child.stdin!);
    child.stdin!.on('error', () => undefined);
    const watch: NodeJS.Timeout | undefined = killOnStaging ? setInterval(() => {
      // Begun writing: its building directory, or (were it to build in place) the target's.
      const begun = existsSync(join(target, 'snap')) || readdirSync(dirname(target))
        .some((name) => name.startsWith(`${basename(target)}.importing-`));
      if (begun) {
        child.kill('SIGKILL');
        clearInterval(watch);
      }
    }, 2) : undefined;
    child.once('exit', (code, signal) => {
      clearInterval(watch);
      resolve({ code, signal });
    });
  });
}

describe('an import stopped half-way', () => {
  it('leaves no target directory, and a whole import after it serves the dump', async () => {
    const source = tempDir('import-source');
    const work = tempDir('import-work');
    dirs.push(source, work);
    const node = await startNode({ dataDir: source, env: UNLIMITED_RATES });
    for (let call = 0; call < CALLS; call++) {
      const ops = Array.from({ length: OPS }, (_, i) => ({ op: 'put', ns: 'big',
        key: `k${call}-${i}`, value: VALUE, forever: true }));
      expect((await kv(node.url, ops)).status).toBe(200);
    }
    const dump = join(work, 'dump.ndjson');
    writeFileSync(dump, await (await fetch(`${node.url}/api/v1/system/export`)).text());
    expect(await node.stop()).toBe(0);

    const target = join(work, 'imported');
    const killed = await runImport(dump, target, true);
    expect(killed.signal).toBe('SIGKILL');
    expect(existsSync(target)).toBe(false);

    const whole = await runImport(dump, target, false);
    expect(whole.code).toBe(0);
    const served = await startNode({ dataDir: target, env: UNLIMITED_RATES });
    const read = await kv(served.url, [{ op: 'get', ns: 'big', key: `k${CALLS - 1}-${OPS - 1}` }]);
    expect(read.body.results[0]).toMatchObject({ found: true, value: VALUE });
    expect(await served.stop()).toBe(0);
  }, 120_000);
});
