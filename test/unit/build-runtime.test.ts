/**
 * The build's corrections to the runtime (scripts/runtime-corrections.mjs): applied to the
 * compiler's own copies of the collector and the allocator they replace every statement they
 * name; a runtime that no longer has one stops the build with a message instead of
 * compiling unchanged; and the build uses them. What they do to a machine past 2 GiB is
 * machine-large-memory.test.ts.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import asc from 'assemblyscript/asc';
import { describe, expect, it } from 'vitest';

const ROOT = new URL('../../', import.meta.url).pathname;
const { correctRuntime } = (await import(
  pathToFileURL(join(ROOT, 'scripts', 'runtime-corrections.mjs')).href)) as {
  correctRuntime: (files: Record<string, string>, version: string) => Record<string, string> };

describe('the runtime corrections', () => {
  const files = asc.libraryFiles as Record<string, string>;

  it('replace the wrapping idle thresholds, grow memory in steps, bound the steps', () => {
    expect(files['rt/itcms']!.match(/threshold = .*total \* .*IDLEFACTOR/g)).toHaveLength(3);
    const corrected = correctRuntime(files, asc.version);
    expect(corrected['rt/itcms']!.match(/threshold = .*total \* .*IDLEFACTOR/g)).toBeNull();
    expect(corrected['rt/itcms']!.match(/threshold = idleThreshold\(\);/g)).toHaveLength(3);
    expect(corrected['rt/itcms']).toContain('function idleThreshold(): usize');
    expect(corrected['rt/tlsf']).toContain('memory.grow(max(pagesNeeded, 1024))');
    // A marking step's walk past marked objects yields after a bounded run.
    expect(files['rt/itcms']).not.toContain('skipped');
    expect(corrected['rt/itcms']).toContain('if (++skipped >= 256) return skipped * MARKCOST;');
    // A scan counts the object scanned, so steps that mark nothing new are paced too.
    expect(corrected['rt/itcms']).toContain('return (visitCount + 1) * MARKCOST;');
    // And an allocation runs at most 64 steps of the collector, whatever they cost.
    expect(corrected['rt/itcms']).toContain('} while (budget > 0 && ++steps < 64);');
    // Cycles begun and ended are counted, for the machine's count of garbage reclaimed.
    expect(files['rt/itcms']).not.toContain('__gc_cycles');
    expect(corrected['rt/itcms']).toContain('export function __gc_cycles(): u64');
    expect(corrected['rt/itcms']).toMatch(/state = STATE_MARK;\n.*\n\s*cyclesBegun\+\+;/);
    expect(corrected['rt/itcms']).toMatch(/state = STATE_IDLE;\n.*\n\s*cyclesEnded\+\+;/);
    // The compiler's own table is left as it was: the build script installs the result.
    expect(files['rt/tlsf']).not.toContain('memory.grow(max(pagesNeeded, 1024))');
  });

  it('stop the build when the runtime is not the one they know', () => {
    const changed = { ...files, 'rt/tlsf': files['rt/tlsf']!.replace(
      'if (memory.grow(pagesNeeded) < 0) unreachable();', 'memory.grow(pagesNeeded);') };
    expect(() => correctRuntime(changed, '9.9.9'))
      .toThrow(/assemblyscript 9\.9\.9: rt\/tlsf has not one/);
    const collector = { ...files, 'rt/itcms': files['rt/itcms']!.replace(
      'threshold = total * (IDLEFACTOR / 100) + GRANULARITY;', 'threshold = total * 2;') };
    expect(() => correctRuntime(collector, '9.9.9')).toThrow(/rt\/itcms has not one/);
  });

  it('pace marking at a tenth of the default, and sweeping at the default', () => {
    // itcms names its marking pace STEPFACTOR but reads it from ASC_GC_SWEEPFACTOR; a runtime
    // that renamed the define would silently go back to the default pace (and its pauses).
    expect(files['rt/itcms']).toContain(
      'const STEPFACTOR: usize = isDefined(ASC_GC_SWEEPFACTOR) ? ASC_GC_SWEEPFACTOR : 200;');
    const config = JSON.parse(readFileSync(join(ROOT, 'asconfig.json'), 'utf8')) as {
      options: { use?: string[] } };
    expect(config.options.use).toContain('ASC_GC_SWEEPFACTOR=20');
    // The sweep keeps the default's pace (a tenth of its cost against a tenth of the budget):
    // garbage goes back to the allocator as fast as before, so the heap peaks no higher.
    expect(files['rt/itcms']).toContain(
      'const SWEEPCOST = isDefined(ASC_GC_SWEEPCOST) ? ASC_GC_SWEEPCOST : 10;');
    expect(config.options.use).toContain('ASC_GC_SWEEPCOST=1');
  });

  it('are what the build runs', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
      scripts: Record<string, string> };
    expect(pkg.scripts['build:wasm']).toMatch(/^node scripts\/build-wasm\.mjs /);
  });
});
