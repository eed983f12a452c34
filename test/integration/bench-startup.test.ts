/**
 * The tooling of `npm run bench:startup` and `npm run bench:digest` at a tiny size, so it
 * cannot rot: the data directory the startup benchmark builds (a snapshot, a log after it, a
 * hard state whose commit index covers the log) is one a real node starts from, applying
 * every entry before it serves, and it logs the phases of its start; the digest benchmark's
 * stub still finds the hashes it replaces. Figures are never asserted.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

import { stubDigestSource } from '../../bench/digest-module.js';
import { buildStartupDir, STARTUP_NAMESPACE } from '../../bench/startup-dir.js';
import { removeDir, startNode, tempDir, type NodeProcess } from '../helpers/node-process.js';

const ROOT = new URL('../../', import.meta.url).pathname;

describe('bench:startup data directory', () => {
  const dirs: string[] = [];
  let node: NodeProcess | null = null;
  afterAll(async () => {
    await node?.kill();
    for (const dir of dirs) removeDir(dir);
  });

  it('starts a node that has applied every entry of its log before it serves', async () => {
    const dir = tempDir('bench-startup');
    dirs.push(dir);
    const built = await buildStartupDir(join(dir, 'data'), { keys: 3000, tailEntries: 700 });
    expect(built.lastIndex).toBe(built.snapshotIndex + 700);
    node = await startNode({ dataDir: join(dir, 'data') });
    const health = await (await fetch(`${node.url}/health`)).json() as Record<string, unknown>;
    // The node may have elected itself already: its new term's empty entry changes no state.
    expect(health['appliedIndex']).toBeGreaterThanOrEqual(built.lastIndex);
    expect(health['appliedIndex']).toBeLessThanOrEqual(built.lastIndex + 1);
    expect(health['digest']).toBe(built.digest);
    const answer = await (await fetch(`${node.url}/api/v1/kv`, { method: 'POST',
      headers: { 'content-type': 'application/json' }, body: JSON.stringify({
        operations: [{ op: 'get', ns: STARTUP_NAMESPACE, key: built.lastKey }] }) })).json() as
      { results: Array<{ value: unknown }> };
    expect(answer.results[0]?.value).toBe(built.lastValue);
    const serving = node.output().split('\n').find((l) => l.includes('"msg":"serving"')) ?? '{}';
    const startup = (JSON.parse(serving) as { startup?: Record<string, number> }).startup ?? {};
    expect(Object.keys(startup)).toEqual(['process started', 'wasm instantiated',
      'snapshot verified', 'log read', 'snapshot restored', 'raft log loaded', 'log applied',
      'listening']);
    const times = Object.values(startup);
    expect([...times].sort((a, b) => a - b)).toEqual(times);
  });
});

describe('bench:digest module stub', () => {
  it('replaces both digest hashes with functions returning 0 and keeps the rest', () => {
    const source = readFileSync(join(ROOT, 'assembly', 'digest.ts'), 'utf8');
    const stubbed = stubDigestSource(source);
    for (const name of ['rowHash', 'quotaHash']) {
      expect(stubbed).toContain(`function ${name}Measured(`);
      expect(stubbed).toMatch(new RegExp(`export function ${name}\\([^)]*\\): u64 \\{\\n` +
        '  return 0;\\n\\}'));
    }
    expect(stubbed.startsWith(source.slice(0, source.indexOf('export function rowHash')))).toBe(
      true);
    expect(() => stubDigestSource('export function other(): u64 { return 1; }')).toThrow(
      /rowHash/);
  });
});
