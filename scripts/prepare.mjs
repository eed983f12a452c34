#!/usr/bin/env node
// `npm ci` and `npm install` run this: it builds the WebAssembly machine and the TypeScript
// host unless both outputs are newer than every source. `npx hivekv` installs this checkout
// into npm's cache and runs `prepare` there too; skipping an up-to-date build is what makes
// it start in a second instead of rebuilding. `npm run build` always rebuilds.
import { execSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
const SOURCES = ['assembly', 'host', 'bench', 'test/model', 'test/sim', 'console', 'package.json',
  'scripts/build-wasm.mjs', 'scripts/runtime-corrections.mjs',
  'tsconfig.json', 'tsconfig.client.json', 'asconfig.json'];
const OUTPUTS = ['build/hivekv.wasm', 'dist/host/cli/program.js', 'dist/host/client/index.d.ts',
  'build/console/index.html'];

function newestMtimeMs(path) {
  let stat;
  try {
    stat = statSync(path);
  } catch {
    return 0;
  }
  if (!stat.isDirectory()) return stat.mtimeMs;
  let newest = 0;
  for (const name of readdirSync(path)) newest = Math.max(newest, newestMtimeMs(join(path, name)));
  return newest;
}

function oldestOutputMtimeMs() {
  let oldest = Infinity;
  for (const output of OUTPUTS) {
    try {
      oldest = Math.min(oldest, statSync(join(root, output)).mtimeMs);
    } catch {
      return 0;
    }
  }
  return oldest;
}

const sourcesMs = Math.max(...SOURCES.map((source) => newestMtimeMs(join(root, source))));
if (oldestOutputMtimeMs() > sourcesMs) {
  console.log('hivekv: build is up to date');
} else {
  execSync('npm run build', { cwd: root, stdio: 'inherit' });
}
