/**
 * The build's correction to the runtime's collector (scripts/build-wasm.mjs): applied to the
 * compiler's own copy of the collector it replaces every wrapping idle threshold; a collector
 * that no longer has them stops the build with a message instead of compiling unchanged; and
 * the build uses the script.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import asc from 'assemblyscript/asc';
import { describe, expect, it } from 'vitest';

const ROOT = new URL('../../', import.meta.url).pathname;
const { COLLECTOR, correctCollector } = (await import(
  pathToFileURL(join(ROOT, 'scripts', 'collector-threshold.mjs')).href)) as {
  COLLECTOR: string; correctCollector: (source: string, version: string) => string };

describe('the collector correction', () => {
  const source = asc.libraryFiles[COLLECTOR]!;

  it('replaces each statement that sets the idle threshold', () => {
    expect(source.match(/threshold = .*total \* .*IDLEFACTOR/g)).toHaveLength(3);
    const corrected = correctCollector(source, asc.version);
    expect(corrected.match(/threshold = .*total \* .*IDLEFACTOR/g)).toBeNull();
    expect(corrected.match(/threshold = idleThreshold\(\);/g)).toHaveLength(3);
    expect(corrected).toContain('function idleThreshold(): usize');
  });

  it('stops the build when the collector is not the one it knows', () => {
    const changed = source.replace('threshold = total * (IDLEFACTOR / 100) + GRANULARITY;',
      'threshold = total * 2;');
    expect(() => correctCollector(changed, '9.9.9')).toThrow(/assemblyscript 9\.9\.9: .*wraps/);
  });

  it('is what the build runs', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
      scripts: Record<string, string> };
    expect(pkg.scripts['build:wasm']).toMatch(/^node scripts\/build-wasm\.mjs /);
  });
});
