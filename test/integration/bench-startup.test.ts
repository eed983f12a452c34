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

import { DIGEST_STUBS, stubSource } from '../../bench/digest-module.js';
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
    // The node may have elected itself already and applied its new term's empty entry
    // (which moves the digest: it covers the applied index and time).
    expect(health['appliedIndex']).toBeGreaterThanOrEqual(built.lastIndex);
    expect(health['appliedIndex']).toBeLessThanOrEqual(built.lastIndex + 1);
    if (health['appliedIndex'] === built.lastIndex) expect(health['digest']).toBe(built.digest);
    const answer = await (await fetch(`${node.url}/api/v1/kv`, { method: 'POST',
      headers: { 'content-type': 'application/json' }, body: JSON.stringify({
        operations: [{ op: 'get', ns: STARTUP_NAMESPACE, key: built.lastKey }] }) })).json() as
      { results: Array<{ value: unknown }> };
    expect(answer.results[0]?.value).toBe(built.lastValue);
    const serving = node.output().split('\n').find((l) => l.includes('"msg":"serving"')) ?? '{}';
    const startup = (JSON.parse(serving) as { startup?: Record<string, number> }).startup ?? {};
    // The snapshot is restored while the log is read, so it ends first.
    expect(Object.keys(startup)).toEqual(['process started', 'wasm instantiated',
      'snapshot verified', 'snapshot restored', 'log read', 'raft log loaded', 'log applied',
      'serving']);
    const times = Object.values(startup);
    expect([...times].sort((a, b) => a - b)).toEqual(times);
  });
});

describe('bench:digest module stub', () => {
  it('replaces every function of the digest upkeep with a stub and keeps the rest', () => {
    for (const file of new Set(DIGEST_STUBS.map((s) => s.file))) {
      const source = readFileSync(join(ROOT, 'assembly', file), 'utf8');
      const stubbed = stubSource(file, source);
      for (const stub of DIGEST_STUBS.filter((s) => s.file === file)) {
        expect(stubbed).toContain(`function ${stub.name}Measured(`);
        expect(stubbed).toMatch(new RegExp(`export function ${stub.name}\\([^)]*\\): ` +
          `${stub.returns} \\{\\n  ${stub.body}\\n\\}`));
      }
      const firstStubbed = Math.min(...DIGEST_STUBS.filter((s) => s.file === file)
        .map((s) => source.indexOf(`export function ${s.name}(`)));
      expect(stubbed.startsWith(source.slice(0, firstStubbed))).toBe(true);
    }
    expect(() => stubSource('digest.ts', 'export function other(): u64 { return 1; }')).toThrow(
      /rowHash/);
  });
});
