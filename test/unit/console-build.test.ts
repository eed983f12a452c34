/**
 * The console as `npm run build` leaves it in build/console: under 250 KB before
 * compression, every file of a type the node serves, and a page that loads only its own
 * files from /console/, nothing from another host.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { consoleDir, loadConsoleAssets } from '../../host/http/console-assets.js';

/** The bound on the whole console, before compression. */
const CONSOLE_BYTES_BUDGET = 250 * 1024;

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? files(path) : [path];
  });
}

describe('the built console', () => {
  const dir = consoleDir();

  it('is built (npm run build) and under 250 KB in all', () => {
    const all = files(dir);
    expect(all.map((f) => relative(dir, f))).toContain('index.html');
    const totalBytes = all.reduce((sum, f) => sum + statSync(f).size, 0);
    console.log(`console build: ${all.length} files, ${totalBytes} bytes`);
    expect(totalBytes).toBeLessThan(CONSOLE_BYTES_BUDGET);
  });

  it('holds only files the node serves, and the node loads them all', () => {
    expect(loadConsoleAssets(dir).files.size).toBe(files(dir).length);
  });

  it('loads only its own files, from /console/', () => {
    const page = readFileSync(join(dir, 'index.html'), 'utf8');
    const references = [...page.matchAll(/\b(?:src|href)="([^"]*)"/g)].map((m) => m[1]!);
    expect(references.length).toBeGreaterThanOrEqual(2);
    for (const reference of references) {
      expect(reference, reference).toMatch(/^(\/console\/|data:)/);
    }
    const assets = loadConsoleAssets(dir);
    for (const reference of references.filter((r) => r.startsWith('/console/'))) {
      expect(assets.files.has(reference.slice('/console/'.length)), reference).toBe(true);
    }
  });
});
