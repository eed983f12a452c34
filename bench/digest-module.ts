/**
 * Builds the two modules `npm run bench:digest` measures side by side, from copies of
 * `assembly/` compiled the same way (asc, the release target of asconfig.json) into a
 * temporary directory: `full`, the machine as it is, and `nodigest`, the same source with the
 * digest upkeep of every write taken out: the per-row and per-quota hashes whose wrapping
 * sums the state keeps (assembly/digest.ts) return 0, and the digest inputs recorded for
 * checkpoints after every entry (assembly/checkpoints.ts) are not recorded. Nothing else
 * changes. The stubbed source lives only in the temporary directory; the checkout is never
 * touched.
 */
import { execFileSync } from 'node:child_process';
import { cpSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

interface Stub {
  readonly file: string;
  readonly name: string;
  /** The return type, and the body the stub has instead. */
  readonly returns: string;
  readonly body: string;
}

/** What the digest costs on every write; each must be found, or the benchmark is stale. */
export const DIGEST_STUBS: readonly Stub[] = [
  { file: 'digest.ts', name: 'rowHash', returns: 'u64', body: 'return 0;' },
  { file: 'digest.ts', name: 'quotaHash', returns: 'u64', body: 'return 0;' },
  { file: 'checkpoints.ts', name: 'recordApplied', returns: 'void', body: 'return;' },
];
const COMPILE_TIMEOUT_MS = 300_000;

export interface DigestModules {
  readonly full: string;
  readonly nodigest: string;
}

/**
 * `source` (the text of `file`) with each of its stubs' functions renamed away (unused, so
 * not compiled) and a function of the same signature with the stub's body in its place.
 * Throws when one is not found: the source changed and this benchmark must follow it.
 */
export function stubSource(file: string, source: string): string {
  let out = source;
  for (const stub of DIGEST_STUBS.filter((s) => s.file === file)) {
    const pattern = new RegExp(`export function ${stub.name}\\(([^)]*)\\): ${stub.returns} \\{`);
    const match = pattern.exec(out);
    if (match === null) {
      throw new Error(`assembly/${file}: no "export function ${stub.name}(...)"`);
    }
    out = out.replace(pattern, `function ${stub.name}Measured(${match[1]}): ${stub.returns} {`);
    out += '\n/** Benchmark stub: no digest upkeep. */\n' +
      `export function ${stub.name}(${match[1]}): ${stub.returns} {\n  ${stub.body}\n}\n`;
  }
  return out;
}

function compile(root: string, dir: string, name: string): string {
  const out = join(dir, `${name}.wasm`);
  // The build script, so that both modules get the runtime correction the shipped one has.
  execFileSync(process.execPath, [join(root, 'scripts', 'build-wasm.mjs'), 'assembly/index.ts',
    '--config', 'asconfig.json', '--target', 'release', '--outFile', out, '--textFile',
    join(dir, `${name}.wat`)], { cwd: join(dir, name), stdio: ['ignore', 'pipe', 'pipe'],
    timeout: COMPILE_TIMEOUT_MS });
  return out;
}

/** Compiles both modules into `dir` (which the caller removes); returns their paths. */
export function buildDigestModules(root: string, dir: string): DigestModules {
  const paths = { full: '', nodigest: '' };
  for (const name of ['full', 'nodigest'] as const) {
    const copy = join(dir, name);
    cpSync(join(root, 'assembly'), join(copy, 'assembly'), { recursive: true });
    cpSync(join(root, 'asconfig.json'), join(copy, 'asconfig.json'));
    if (name === 'nodigest') {
      for (const file of new Set(DIGEST_STUBS.map((s) => s.file))) {
        const path = join(copy, 'assembly', file);
        writeFileSync(path, stubSource(file, readFileSync(path, 'utf8')));
      }
    }
    paths[name] = compile(root, dir, name);
  }
  return paths;
}
