/**
 * A script written for Queen MQ's `queen.kv` (test/fixtures/queen-kv-script.mjs, plain
 * JavaScript from Queen's KV examples) runs against `createClient`, imported by the package
 * name a user would write (`hivekv/client`, through package.json's `exports`), unchanged.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createClient } from 'hivekv/client';
import { run } from '../fixtures/queen-kv-script.mjs';
import {
  removeDir, startNode, tempDir, UNLIMITED_RATES, type NodeProcess,
} from '../helpers/node-process.js';

let node: NodeProcess;
let dir: string;

beforeAll(async () => {
  dir = tempDir('queen-script');
  node = await startNode({ dataDir: dir, env: UNLIMITED_RATES });
});

afterAll(async () => {
  expect(await node.stop()).toBe(0);
  removeDir(dir);
});

it('runs a queen.kv script unchanged, with the outcomes Queen documents', async () => {
  const queen = createClient({ urls: [node.url] });
  const seen = await run(queen, { orderId: '9137', customerId: 'acme', minute: '202608171400' });
  expect(seen.row).toMatchObject({ found: true, value: { status: 'paid' } });
  expect(Date.parse(seen.row.expiresAt ?? '') - Date.parse(seen.row.updatedAt))
    .toBe(30 * 86_400_000);
  expect(seen.cas).toMatchObject({ applied: true, value: { status: 'shipped' } });
  expect(seen.someoneWroteFirst).toEqual({ reason: 'version', value: { status: 'shipped' } });
  expect(seen.admitted).toEqual([true, true, true, false]);
  expect(seen.once).toEqual([true, false]);
  expect(seen.marker).toBe(true);
  expect(seen.many).toEqual({ rows: ['9137', 'ord_9137'], missing: ['nobody'] });
  expect(seen.page).toEqual(['ord_9137']);
  expect(seen.listed).toEqual(['ord_9137']);
  expect(seen.deleted).toBe(true);
  expect(seen.writesAreTruthy).toBe(true);
  expect(seen.transaction).toEqual([true, false, 'kv_precondition']);
  expect(seen.charges).toBe(1);
});
