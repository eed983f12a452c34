/**
 * docs/configuration.md names every setting the node and the command line read: a variable
 * read in the code and missing from the page is a setting a user cannot find.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const ROOT = new URL('../../', import.meta.url);
const read = (path: string): string => readFileSync(new URL(path, ROOT), 'utf8');

/** Every quoted `HIVEKV_*`, `QUEEN_*` or `JWT_*` name in a source file. */
function settingsNamed(source: string): string[] {
  return [...source.matchAll(/'((?:HIVEKV|QUEEN|JWT)_[A-Z0-9_]+)'/g)].map((m) => m[1]!);
}

describe('docs/configuration.md', () => {
  it('names every setting the node and the command line read', () => {
    const sources = ['host/node/config.ts',
      ...readdirSync(new URL('host/cli/', ROOT)).map((f) => `host/cli/${f}`)];
    const settings = new Set(sources.flatMap((path) => settingsNamed(read(path))));
    expect(settings.size).toBeGreaterThan(30);
    const page = read('docs/configuration.md');
    expect([...settings].filter((name) => !page.includes(`\`${name}\``))).toEqual([]);
  });
});
