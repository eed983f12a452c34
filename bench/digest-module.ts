/**
 * Builds the two modules `npm run bench:digest` measures side by side, from copies of
 * `assembly/` compiled the same way (asc, the release target of asconfig.json) into a
 * temporary directory: `full`, the machine as it is, and `nodigest`, the same source with the
 * per-row and per-quota hashes of the state digest (assembly/digest.ts) returning 0, so the
 * digest upkeep on every write compiles away and nothing else changes. The stubbed source
 * lives only in the temporary directory; nothing here touches the checkout.
 */
import { execFileSync } from 'node:child_process';
import { cpSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** The hash functions whose results the digest sums (assembly/digest.ts). */
const HASHES = ['rowHash', 'quotaHash'] as const;
const COMPILE_TIMEOUT_MS = 300_000;

export interface DigestModules {
  readonly full: string;
  readonly nodigest: string;
}

/**
 * `digest.ts` with each hash renamed away (unused, so not compiled) and a function of the
 * same signature returning 0 in its place. Throws when a hash is not found: the file changed
 * and this benchmark must follow it.
 */
export function stubDigestSource(source: string): string {
  let out = source;
  for (const name of HASHES) {
    const pattern = new RegExp(`export function ${name}\\(([^)]*)\\): u64 \\{`);
    const match = pattern.exec(out);
    if (match === null) throw new Error(`assembly/digest.ts: no "export function ${name}(...)"`);
    out = out.replace(pattern, `function ${name}Measured(${match[1]}): u64 {`);
    out += '\n/** Benchmark stub: no digest upkeep. */\n' +
      `export function ${name}(${match[1]}): u64 {\n  return 0;\n}\n`;
  }
  return out;
}

function compile(root: string, dir: string, name: string): string {
  const out = join(dir, `${name}.wasm`);
  execFileSync(join(root, 'node_modules', '.bin', 'asc'), ['assembly/index.ts', '--config',
    'asconfig.json', '--target', 'release', '--outFile', out, '--textFile',
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
      const digest = join(copy, 'assembly', 'digest.ts');
      writeFileSync(digest, stubDigestSource(readFileSync(digest, 'utf8')));
    }
    paths[name] = compile(root, dir, name);
  }
  return paths;
}
