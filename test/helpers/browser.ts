/**
 * Headless Chromium for the console's end-to-end tests, driven by playwright-core. The
 * browser is Debian's `chromium` (`/usr/bin/chromium`, or HIVEKV_CHROMIUM), never one
 * Playwright downloads. Each launch gets a fresh profile directory, removed on close.
 *
 * When the browser is missing the tests skip with a message saying how to install it,
 * except under CI (`CI` set), where a missing browser is a failure: `.ci/run` installs it,
 * so a skip there would hide a broken setup.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';

export const CHROMIUM_PATH = process.env['HIVEKV_CHROMIUM'] ?? '/usr/bin/chromium';
/** Where the tests leave their screenshots (git-ignored). */
export const SCREENSHOT_DIR = new URL('../../test-results/console/', import.meta.url).pathname;

/** Flags for a sandboxless, offline headless run: no background connections of its own. */
const CHROMIUM_ARGS = [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
];

/** Null when the browser tests can run; else why they are skipped. */
export function browserSkipReason(): string | null {
  if (existsSync(CHROMIUM_PATH)) return null;
  const reason = `console browser tests skipped: ${CHROMIUM_PATH} is missing ` +
    '(install it with `apt-get install -y chromium`, or set HIVEKV_CHROMIUM)';
  if (process.env['CI'] !== undefined && process.env['CI'] !== '') {
    throw new Error(`${reason}; CI must run them (.ci/run installs chromium)`);
  }
  return reason;
}

export interface BrowserSession {
  readonly context: BrowserContext;
  readonly page: Page;
  /** Requests the page made to any origin but `origin`. */
  readonly foreignRequests: string[];
  /** Uncaught page errors and content-security-policy violations. */
  readonly pageErrors: string[];
  close(): Promise<void>;
}

/**
 * Launches Chromium on a fresh profile with one page, recording every request that leaves
 * `origin` and every page error, so a test can assert the console stayed on its node.
 */
export async function openBrowser(origin: string,
  viewport = { width: 1280, height: 860 }): Promise<BrowserSession> {
  const profile = mkdtempSync(join(tmpdir(), 'hivekv-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM_PATH,
    headless: true,
    args: CHROMIUM_ARGS,
    viewport,
  });
  const page = context.pages()[0] ?? await context.newPage();
  const foreignRequests: string[] = [];
  const pageErrors: string[] = [];
  page.on('request', (request) => {
    const url = request.url();
    if (!url.startsWith(origin + '/') && !url.startsWith('data:')) foreignRequests.push(url);
  });
  page.on('pageerror', (error) => pageErrors.push(error.message));
  page.on('console', (message) => {
    if (/Content Security Policy|Refused to (load|execute|apply|connect)/.test(message.text())) {
      pageErrors.push(message.text());
    }
  });
  return {
    context,
    page,
    foreignRequests,
    pageErrors,
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/** Saves a full-page screenshot as SCREENSHOT_DIR/name.png and returns its path. */
export async function screenshot(page: Page, name: string): Promise<string> {
  mkdirSync(SCREENSHOT_DIR, { recursive: true });
  const path = join(SCREENSHOT_DIR, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  return path;
}
