/**
 * The tenant of a call, from the `x-queen-tenant` header (WIRE.md, "Tenancy, auth, operator
 * switches"). Pure: no I/O, no clock. With the header switch off every call belongs to the
 * default tenant and the header is ignored, so a client cannot pick a tenant unless a trusted
 * proxy sets it. A malformed header is data (`{ok:false}`) that HTTP answers with 400.
 */

import { DEFAULT_TENANT } from '../machine/commands.js';
import type { TenantResolver, TenantResult } from './guards.js';

/** The header the tenant comes from (lowercase, as Node presents header names). */
export const TENANT_HEADER = 'x-queen-tenant';

/** A UUID in canonical text form, lowercase: 8-4-4-4-12 hex digits. */
const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** Characters of a canonical UUID; longer values are refused before the pattern runs. */
const UUID_CHARS = 36;

const DEFAULT_RESULT: TenantResult = Object.freeze({ ok: true, tenant: DEFAULT_TENANT });

export interface HeaderTenantResolverOptions {
  /** QUEEN_TENANCY_HEADER: take the tenant from `x-queen-tenant`. */
  readonly tenancyHeader: boolean;
}

/** Resolves the tenant of a call from the header value, or refuses a malformed one. */
export class HeaderTenantResolver implements TenantResolver {
  private readonly tenancyHeader: boolean;

  constructor(options: HeaderTenantResolverOptions) {
    this.tenancyHeader = options.tenancyHeader;
  }

  /** Missing or empty -> the default tenant; otherwise the lowercased UUID, or a refusal. */
  resolve(headerValue: string | undefined): TenantResult {
    if (!this.tenancyHeader || headerValue === undefined) return DEFAULT_RESULT;
    // Optional whitespace around a field value is not part of it (RFC 9110 §5.5).
    const value = headerValue.trim().toLowerCase();
    if (value === '') return DEFAULT_RESULT;
    if (value.length !== UUID_CHARS || !UUID_PATTERN.test(value)) {
      return {
        ok: false,
        detail: `${TENANT_HEADER} must be a UUID (8-4-4-4-12 hex digits)`,
      };
    }
    return { ok: true, tenant: value };
  }
}
