/**
 * docs/configuration.md names every setting the node and the command line read: a variable
 * read in the code and missing from the page is a setting a user cannot find. And the node
 * takes every numeric setting's documented default and both ends of its documented range,
 * and refuses one past either end (a bound written `1 << 40` once allowed 256).
 */
import { readFileSync, readdirSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { serveCommand, serveFlags } from '../../host/cli/serve.js';
import { loadConfig } from '../../host/node/config.js';

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

const UNITS: Record<string, number> = { KiB: 2 ** 10, MiB: 2 ** 20, GiB: 2 ** 30, TiB: 2 ** 40 };

/** "1,000", "16 MiB" or "4096" as a number; null for anything else. */
function documentedNumber(text: string): number | null {
  const match = /^(\d[\d,]*)(?: (KiB|MiB|GiB|TiB))?$/.exec(text.trim());
  if (match === null) return null;
  return Number(match[1]!.replaceAll(',', '')) * (match[2] === undefined ? 1 : UNITS[match[2]]!);
}

interface NumericSetting {
  readonly name: string;
  readonly defaultValue: number;
  readonly low: number;
  readonly high: number;
  /** "0, or 1 MiB to 64 GiB": 0 is taken apart from the range. */
  readonly zeroToo: boolean;
}

/** Every row of the page's tables whose default is a number and whose range is "A to B". */
function numericSettings(page: string): NumericSetting[] {
  const settings: NumericSetting[] = [];
  for (const line of page.split('\n')) {
    const cells = line.split('|').map((cell) => cell.trim());
    const name = /^`((?:HIVEKV|QUEEN)_[A-Z0-9_]+)`$/.exec(cells[1] ?? '')?.[1];
    if (name === undefined || cells.length < 5) continue;
    const defaultValue = documentedNumber(cells[2]!.replace(/ \(.*\)$/, ''));
    const range = /^(0, or )?(.+) to (.+)$/.exec(cells[3]!);
    if (defaultValue === null || range === null) continue;
    const low = documentedNumber(range[2]!);
    const high = documentedNumber(range[3]!);
    if (low === null || high === null) continue;
    settings.push({ name, defaultValue, low, high, zeroToo: range[1] !== undefined });
  }
  return settings;
}

describe('the numeric settings of docs/configuration.md', () => {
  const flags = () => serveFlags(serveCommand().configureOutput({ writeErr: () => {} })
    .parse([], { from: 'user' }));
  const takes = (name: string, value: number): boolean => {
    try {
      loadConfig(flags(), { [name]: String(value) });
      return true;
    } catch {
      return false;
    }
  };

  it('are taken at their default and both ends of their range, and refused past them', () => {
    const settings = numericSettings(read('docs/configuration.md'));
    expect(settings.length).toBeGreaterThan(20);
    const wrong: string[] = [];
    for (const { name, defaultValue, low, high, zeroToo } of settings) {
      const cases: Array<[number, boolean]> = [[defaultValue, true], [low, true], [high, true],
        [high + 1, false]];
      if (low > 0 && !(zeroToo && low - 1 === 0)) cases.push([low - 1, false]);
      if (zeroToo) cases.push([0, true]);
      for (const [value, taken] of cases) {
        if (takes(name, value) !== taken) {
          wrong.push(`${name}=${value} ${taken ? 'refused' : 'taken'}`);
        }
      }
    }
    expect(wrong).toEqual([]);
  });
});
