/**
 * TEST ONLY: the guards and sinks an HTTP server test does not look at: the default tenant
 * (or a refusal for any other header), no rate limit, metrics and a log that keep nothing.
 */
import type { RateLimiter, RequestLogger, TenantResolver } from '../../host/http/guards.js';
import { DEFAULT_TENANT } from '../../host/machine/commands.js';

export function quietHttpDeps() {
  const silent = () => undefined;
  const logger: RequestLogger = { debug: silent, info: silent, warn: silent, error: silent };
  const tenants: TenantResolver = { resolve: (h) => (h === undefined || h === ''
    || h === DEFAULT_TENANT ? { ok: true, tenant: DEFAULT_TENANT }
    : { ok: false, detail: 'bad tenant' }) };
  const rateLimiter: RateLimiter = { take: () => ({ ok: true }) };
  const metrics = { observeRequest: silent, refusal: silent, render: async () => 'up 1\n',
    contentType: 'text/plain' };
  return { tenants, rateLimiter, metrics, logger };
}
