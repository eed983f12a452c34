/**
 * The tenant of a call from `x-queen-tenant` (WIRE.md, "Tenancy, auth, operator switches" and
 * "Finer points": missing or empty means the default tenant; the header is lowercased).
 */

import { describe, expect, it } from 'vitest';
import { DEFAULT_TENANT } from '../../host/machine/commands.js';
import type { TenantResult } from '../../host/http/guards.js';
import { HeaderTenantResolver } from '../../host/http/tenancy.js';

const UUID = '3f2504e0-4f89-11d3-9a0c-0305e82c3301';

const ok = (tenant: string): TenantResult => ({ ok: true, tenant });
const REFUSED = { ok: false, detail: expect.stringMatching(/x-queen-tenant must be a UUID/) };

describe('HeaderTenantResolver with the header switch off', () => {
  const resolver = new HeaderTenantResolver({ tenancyHeader: false });
  for (const value of [undefined, '', UUID, 'not-a-uuid']) {
    it(`ignores ${JSON.stringify(value)} and answers the default tenant`, () => {
      expect(resolver.resolve(value)).toEqual(ok(DEFAULT_TENANT));
    });
  }
});

describe('HeaderTenantResolver with the header switch on', () => {
  const resolver = new HeaderTenantResolver({ tenancyHeader: true });
  const table: ReadonlyArray<[string | undefined, unknown]> = [
    [undefined, ok(DEFAULT_TENANT)],
    ['', ok(DEFAULT_TENANT)],
    ['   ', ok(DEFAULT_TENANT)],
    [UUID, ok(UUID)],
    [UUID.toUpperCase(), ok(UUID)],
    [` ${UUID}\t`, ok(UUID)],
    [DEFAULT_TENANT, ok(DEFAULT_TENANT)],
    ['00000000-0000-0000-0000-000000000000', ok('00000000-0000-0000-0000-000000000000')],
    ['not-a-uuid', REFUSED],
    [UUID.replace(/-/g, ''), REFUSED],
    [`{${UUID}}`, REFUSED],
    [`${UUID}0`, REFUSED],
    [UUID.slice(0, -1), REFUSED],
    [UUID.replace('f', 'g'), REFUSED],
    ['3f2504e04-f89-11d3-9a0c-0305e82c3301', REFUSED],
    [`${UUID},${UUID}`, REFUSED],
    ['x'.repeat(10_000), REFUSED],
  ];
  for (const [value, expected] of table) {
    it(`${JSON.stringify(value)?.slice(0, 50)} -> ${JSON.stringify(expected).slice(0, 60)}`, () => {
      expect(resolver.resolve(value)).toEqual(expected);
    });
  }

  it('never echoes the header value in the detail', () => {
    const result = resolver.resolve('customer-42@example.com');
    expect(result.ok).toBe(false);
    expect(JSON.stringify(result)).not.toContain('customer-42');
  });
});
