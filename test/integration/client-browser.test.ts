/**
 * The client runs where only web platform globals exist. host/client/ is bundled for the
 * browser with Vite (as an application would bundle it) and evaluated in a fresh V8 context
 * that holds `fetch`, `Headers`, `AbortController`, timers, `URL` and a `crypto` with
 * `getRandomValues` only (as on a plain-http page, where `randomUUID` is missing), and no
 * `process`, `Buffer` or `require`; then it talks to a real node from there.
 */
import { createContext, runInContext } from 'node:vm';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { build } from 'vite';
import {
  removeDir, startNode, tempDir, UNLIMITED_RATES, type NodeProcess,
} from '../helpers/node-process.js';

const ROOT = new URL('../../', import.meta.url).pathname;

let node: NodeProcess;
let dir: string;

beforeAll(async () => {
  dir = tempDir('client-browser');
  node = await startNode({ dataDir: dir, env: UNLIMITED_RATES });
});

afterAll(async () => {
  expect(await node.stop()).toBe(0);
  removeDir(dir);
});

/** host/client/index.ts as one browser script that defines the global `hivekv`. */
async function browserBundle(): Promise<string> {
  const output = await build({
    configFile: false,
    logLevel: 'silent',
    root: ROOT,
    build: {
      write: false,
      minify: false,
      lib: { entry: 'host/client/index.ts', formats: ['iife'], name: 'hivekv' },
    },
  });
  const first = Array.isArray(output) ? output[0] : output;
  if (!first || !('output' in first)) throw new Error('vite returned no bundle');
  const chunk = first.output.find((item) => item.type === 'chunk');
  if (!chunk || chunk.type !== 'chunk') throw new Error('vite returned no chunk');
  return chunk.code;
}

it('runs in a context with web platform globals only', async () => {
  const code = await browserBundle();
  expect(code).not.toMatch(/\brequire\(|from ['"]node:|process\.env/);
  const context = createContext({
    fetch, Headers, Request, Response, AbortController, URL, TextEncoder, TextDecoder,
    setTimeout, clearTimeout, console,
    crypto: { getRandomValues: (array: Uint8Array) => globalThis.crypto.getRandomValues(array) },
  });
  runInContext(code, context);
  const seen = await runInContext(`(async () => {
    if (typeof process !== 'undefined' || typeof Buffer !== 'undefined' ||
        typeof require !== 'undefined') throw new Error('not a browser-like context');
    const client = hivekv.createClient({ urls: [${JSON.stringify(node.url)}] });
    const put = await client.kv.put('web', 'k', { from: 'browser' },
      { until: new Date(Date.now() + 60000) });
    const get = await client.kv.get('web', 'k');
    const incr = await client.kv.incr('web', 'n', 1, { ttl: '1h' });
    let refused = null;
    try { await client.kv.put('web', 'k', 1); } catch (error) {
      refused = [error instanceof hivekv.HivekvError, error.status, error.reason,
        error.idempotencyKey.length];
    }
    return JSON.stringify({ put: put.applied, get: get.value, incr: incr.value, refused });
  })()`, context) as string;
  expect(JSON.parse(seen)).toEqual({ put: true, get: { from: 'browser' }, incr: 1,
    refused: [true, 400, 'kv_expiry_not_specified', 36] });
});
