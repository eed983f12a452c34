/**
 * The operator console in Chromium against one real node with JWT on: a put from the form
 * shows up in the prefix list with its version, a write without a lifetime shows the
 * node's `kv_expiry_not_specified` refusal, a read-only token sees no write control (and the
 * node still refuses its writes), and the pause switch refuses writes until it resumes
 * them. Every answer the console shows is checked against the node's HTTP answer.
 */
import { SignJWT } from 'jose';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  browserSkipReason, openBrowser, screenshot, type BrowserSession,
} from '../helpers/browser.js';
import {
  call, removeDir, startNode, tempDir, UNLIMITED_RATES, type NodeProcess,
} from '../helpers/node-process.js';

const skipReason = browserSkipReason();
if (skipReason !== null) console.warn(skipReason);

const SECRET = 'console-test-secret-0123456789abcdef';
const NS = 'orders';
const UI_WAIT_MS = 10_000;

async function token(role: string): Promise<string> {
  return new SignJWT({ role }).setProtectedHeader({ alg: 'HS256' }).setIssuedAt()
    .setExpirationTime('1h').sign(new TextEncoder().encode(SECRET));
}

let node: NodeProcess;
let dir: string;
let browser: BrowserSession;
let page: Page;
let adminToken: string;
let readerToken: string;

function auth(bearer: string): Record<string, string> {
  return { authorization: `Bearer ${bearer}` };
}

async function signIn(bearer: string): Promise<void> {
  await page.goto(`${node.url}/console#/keys`);
  await page.getByLabel('Token', { exact: true }).fill(bearer);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('navigation', { name: 'Views' }).waitFor();
}

async function signOut(): Promise<void> {
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByRole('button', { name: 'Sign in' }).waitFor();
}

async function openKeys(): Promise<void> {
  await page.getByRole('link', { name: 'Keys' }).click();
  await page.getByLabel('Namespace', { exact: true }).fill(NS);
}

async function listPrefix(prefix: string): Promise<void> {
  await page.getByLabel('Prefix', { exact: true }).fill(prefix);
  await page.getByRole('button', { name: 'List keys' }).click();
  await page.locator('[data-test="key-list"]').waitFor();
}

/** Fills and sends the Put form; `ttl` '' sends no lifetime at all. */
async function putFromForm(key: string, value: string, ttl: string): Promise<void> {
  const form = page.locator('form[aria-label="Put a key"]');
  await form.getByLabel('Key', { exact: true }).fill(key);
  await form.getByLabel('Value (JSON)').fill(value);
  await form.getByLabel('TTL seconds').fill(ttl);
  await form.getByRole('button', { name: 'Put', exact: true }).click();
}

async function getKey(key: string): Promise<{ found: boolean; version?: number }> {
  const answer = await call(node.url, 'GET', `/api/v1/kv/${NS}/${encodeURIComponent(key)}`,
    undefined, auth(adminToken));
  expect(answer.status).toBe(200);
  return answer.body;
}

describe.skipIf(skipReason !== null)('console on one node with JWT on', () => {
  beforeAll(async () => {
    dir = tempDir('console-node');
    node = await startNode({ dataDir: dir, env: { ...UNLIMITED_RATES, JWT_ENABLED: 'true',
      JWT_SECRET: SECRET } });
    adminToken = await token('admin');
    readerToken = await token('read-only');
    browser = await openBrowser(node.url);
    page = browser.page;
    page.setDefaultTimeout(UI_WAIT_MS);
  });

  afterAll(async () => {
    await browser?.close();
    await node?.stop();
    removeDir(dir);
  });

  it('a put from the form appears in the prefix list with its version', async () => {
    await signIn(adminToken);
    await openKeys();
    await listPrefix('ord:');
    await putFromForm('ord:9137', '{"status":"paid"}', '3600');
    const outcome = page.locator('[data-test="write-outcome"]');
    await expect.poll(() => outcome.textContent()).toContain('put applied');
    const stored = await getKey('ord:9137');
    expect(stored.found).toBe(true);
    const row = page.locator('[data-key="ord:9137"]');
    await row.waitFor();
    expect(await row.locator('[data-test="key-version"]').textContent())
      .toBe(String(stored.version));
    expect(await outcome.locator('[data-test="outcome-version"]').textContent())
      .toBe(String(stored.version));
    await row.getByRole('button', { name: 'ord:9137' }).click();
    await expect.poll(() => page.locator('[data-test="detail-version"]').textContent())
      .toBe(String(stored.version));
    await screenshot(page, 'keys-put');
  });

  it('a write without a lifetime is refused with kv_expiry_not_specified shown', async () => {
    await putFromForm('ord:9138', '{"status":"new"}', '');
    const refusal = page.locator('form[aria-label="Put a key"] [data-test="refusal"]');
    await refusal.waitFor();
    expect(await refusal.locator('[data-test="refusal-error"]').textContent())
      .toBe('kv_bad_request');
    expect(await refusal.locator('[data-test="refusal-reason"]').textContent())
      .toBe('kv_expiry_not_specified');
    expect(await refusal.locator('[data-test="refusal-detail"]').textContent()).not.toBe('');
    expect((await getKey('ord:9138')).found).toBe(false);
    await screenshot(page, 'keys-refusal');
  });

  it('a read-only token hides the write forms; the node still refuses its writes', async () => {
    await signOut();
    await signIn(readerToken);
    const stored = await page.evaluate(() => {
      const g = globalThis as unknown as Record<'sessionStorage' | 'localStorage',
        { length: number }>;
      return [g.sessionStorage.length, g.localStorage.length];
    });
    expect(stored).toEqual([1, 0]);
    await openKeys();
    // A prefix walk is a POST /api/v1/kv, which needs read-write: the node refuses it.
    await page.getByLabel('Prefix', { exact: true }).fill('ord:');
    await page.getByRole('button', { name: 'List keys' }).click();
    await expect.poll(() => page.locator('[data-test="refusal-error"]').textContent())
      .toBe('forbidden');
    await page.getByLabel('Key name').fill('ord:9137');
    await page.getByRole('button', { name: 'Open key' }).click();
    await page.locator('[data-test="key-detail"]').waitFor();
    expect(await page.locator('[data-test="detail-version"]').textContent())
      .toBe(String((await getKey('ord:9137')).version));
    expect(await page.locator('form[aria-label="Put a key"]').count()).toBe(0);
    expect(await page.locator('form[aria-label="Increment a counter"]').count()).toBe(0);
    expect(await page.locator('form[aria-label="Compare and swap"]').count()).toBe(0);
    expect(await page.getByRole('button', { name: /Delete/ }).count()).toBe(0);
    await page.getByRole('link', { name: 'Tenants' }).click();
    await page.locator('[data-test="refusal-reason"]').waitFor();
    expect(await page.getByRole('button', { name: /Pause KV/ }).count()).toBe(0);
    const status = await page.evaluate(async (bearer) => (await fetch('/api/v1/kv', {
      method: 'POST', headers: { authorization: `Bearer ${bearer}`,
        'content-type': 'application/json' },
      body: JSON.stringify({ operations: [{ op: 'put', ns: 'orders', key: 'x', value: 1,
        ttlSeconds: 60 }] }),
    })).status, readerToken);
    expect(status).toBe(403);
    await screenshot(page, 'read-only-tenants');
    await signOut();
  });

  it('the pause switch refuses writes and resumes them', async () => {
    await signIn(adminToken);
    await page.getByRole('link', { name: 'Tenants' }).click();
    const state = page.locator('[data-test="kv-state"]');
    await expect.poll(() => state.textContent()).toBe('running');
    await page.getByRole('button', { name: 'Pause KV…' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Pause KV' }).click();
    await expect.poll(() => state.textContent()).toBe('paused');
    const timers = await call(node.url, 'GET', '/api/v1/system/kv-timers', undefined,
      auth(adminToken));
    expect(timers.body).toEqual({ kv: false });
    await screenshot(page, 'tenants-paused');
    await openKeys();
    await putFromForm('ord:9139', '{"status":"paused"}', '60');
    const refusal = page.locator('form[aria-label="Put a key"] [data-test="refusal"]');
    await expect.poll(() => refusal.locator('[data-test="refusal-error"]').textContent())
      .toBe('kv_disabled');
    expect(await refusal.textContent()).toContain('HTTP 503');
    await page.getByRole('link', { name: 'Tenants' }).click();
    await page.getByRole('button', { name: 'Resume KV' }).click();
    await expect.poll(() => state.textContent()).toBe('running');
    await openKeys();
    await putFromForm('ord:9139', '{"status":"resumed"}', '60');
    await expect.poll(() => page.locator('[data-test="write-outcome"]').textContent())
      .toContain('put applied');
    expect((await getKey('ord:9139')).found).toBe(true);
  });

  it('loaded nothing from another host and raised no page error', () => {
    expect(browser.foreignRequests).toEqual([]);
    expect(browser.pageErrors).toEqual([]);
  });
});
