/**
 * The checks that stand between a request and the node, as interfaces the HTTP server calls
 * in a fixed order. Implementations: `auth.ts` (JWT roles), `tenancy.ts` (the tenant header),
 * `rate-limit.ts` (per-tenant token buckets), `host/node/metrics.ts` and `host/node/log.ts`.
 *
 * Order on every KV call (WIRE.md, "Refusals"): authenticate (401), authorize (403
 * `forbidden`), tenant (400), then pause (503/403), grant (403), rate (429), quota (403).
 */

export type Role = 'read-only' | 'write-only' | 'read-write' | 'admin';

/** What a route needs: `read` for GET routes, `write` for KV writes and the transaction,
 * `admin` for /api/v1/system/*. */
export type Access = 'read' | 'write' | 'admin';

export type AuthResult =
  | { readonly ok: true; readonly roles: ReadonlySet<Role> }
  | { readonly ok: false; readonly detail: string };

export interface Authenticator {
  /**
   * Resolves the `Authorization` header. When auth is off, every caller holds `admin`. May
   * answer at once (auth off, a cached verdict) so the common call waits for no Promise.
   */
  authenticate(authorizationHeader: string | undefined): AuthResult | Promise<AuthResult>;
  /** True when `roles` may use a route that needs `access`. */
  allows(roles: ReadonlySet<Role>, access: Access): boolean;
}

export type TenantResult =
  | { readonly ok: true; readonly tenant: string }
  | { readonly ok: false; readonly detail: string };

export interface TenantResolver {
  /** From the `x-queen-tenant` header value (or undefined). */
  resolve(headerValue: string | undefined): TenantResult;
}

export interface RateOverride {
  readonly readsPerSec: number | null;
  readonly writesPerSec: number | null;
}

export type RateDecision =
  | { readonly ok: true }
  | { readonly ok: false; readonly retryAfterSeconds: number };

export interface RateLimiter {
  /** Spends one token of `kind` for `tenant`; `override` comes from the tenant's quota row. */
  take(tenant: string, kind: 'read' | 'write', override: RateOverride | null): RateDecision;
}

export interface RequestMetrics {
  observeRequest(route: string, method: string, status: number, seconds: number): void;
  refusal(reason: string): void;
}

export interface RequestLogger {
  /** Per-request lines: off at the default level, on with HIVEKV_LOG_LEVEL=debug. */
  debug(fields: Record<string, unknown>, message: string): void;
  /**
   * False when `debug` lines go nowhere, so a caller can skip building them (a per-request
   * object is measurable at full load). Absent: treated as true.
   */
  readonly debugEnabled?: boolean;
  info(fields: Record<string, unknown>, message: string): void;
  warn(fields: Record<string, unknown>, message: string): void;
  error(fields: Record<string, unknown>, message: string): void;
}
