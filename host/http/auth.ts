/**
 * JWT authentication and role checks (WIRE.md, "Tenancy, auth, operator switches").
 *
 * With auth off every caller holds `admin`. With auth on, a caller presents
 * `Authorization: Bearer <jwt>`, signed HS256 with the configured secret and verified by
 * `jose`; its roles come from the claim `role` (a string) or `roles` (an array of strings).
 * A refusal is data (`{ok:false, detail}`), never an exception: the HTTP layer turns it into
 * `401 unauthorized`. This file never logs or returns a token.
 */

import { webcrypto } from 'node:crypto';
import { decodeProtectedHeader, errors as joseErrors, jwtVerify, type JWTPayload } from 'jose';
import type { Access, AuthResult, Authenticator, Role } from './guards.js';

/** Verified tokens remembered at once; the least recently used is dropped beyond this. */
export const TOKEN_CACHE_ENTRIES_MAX = 4096;
/** A verified token is re-verified at least this often, even when its `exp` is later. */
export const TOKEN_CACHE_TTL_MS = 60_000;
/** Longer tokens are refused unread; bounds the cache to ~16 MiB of keys at worst. */
export const TOKEN_BYTES_MAX = 4096;

const KNOWN_ROLES: ReadonlySet<string> = new Set<Role>([
  'read-only',
  'write-only',
  'read-write',
  'admin',
]);

/** Which roles may use a route that needs each access (WIRE.md: KV writes need
 * `read-write`, so `write-only` cannot use the KV routes; `admin` may call every route). */
const ROLES_FOR_ACCESS: Readonly<Record<Access, ReadonlySet<Role>>> = {
  read: new Set<Role>(['read-only', 'read-write', 'admin']),
  write: new Set<Role>(['read-write', 'admin']),
  admin: new Set<Role>(['admin']),
};

const ADMIN_ONLY: ReadonlySet<Role> = Object.freeze(new Set<Role>(['admin']));

interface CachedToken {
  readonly roles: ReadonlySet<Role>;
  /** Clock time (ms) from which this entry must not be used: min(exp, verified + TTL). */
  readonly expiresAtMs: number;
}

export interface JwtAuthenticatorOptions {
  /** JWT_ENABLED: when false every caller is `admin`. */
  readonly enabled: boolean;
  /** JWT_SECRET: the HS256 key, as UTF-8 text. Must be non-empty when enabled. */
  readonly secret: string;
  /** Wall clock in milliseconds since the epoch; `Date.now` unless a test injects one. */
  readonly now?: () => number;
}

/** Authenticator for `Authorization: Bearer <jwt>` with HS256 only. */
/** Every caller's verdict while auth is off. */
const AUTH_OFF: AuthResult = { ok: true, roles: ADMIN_ONLY };

export class JwtAuthenticator implements Authenticator {
  private readonly enabled: boolean;
  private readonly secretBytes: Uint8Array;
  /** The secret imported once: jose would import raw bytes again on every verification. */
  private verifyKey: Promise<webcrypto.CryptoKey> | null = null;
  private readonly now: () => number;
  /** Insertion order is recency order: the first key is the least recently used. */
  private readonly cache = new Map<string, CachedToken>();
  /** Signature verifications performed (cache misses); shows the cache working. */
  private verifications = 0;

  /** @throws Error when auth is enabled with an empty secret (a startup bug). */
  constructor(options: JwtAuthenticatorOptions) {
    if (options.enabled && options.secret === '') {
      throw new Error('JwtAuthenticator: auth is enabled but the secret is empty');
    }
    this.enabled = options.enabled;
    this.secretBytes = new TextEncoder().encode(options.secret);
    this.now = options.now ?? Date.now;
  }

  /**
   * Resolves the header to roles, or a refusal saying why. Never throws. Answers at once
   * (no Promise) when auth is off, the header is malformed or the verdict is cached: only a
   * token not seen before costs an asynchronous verification.
   */
  authenticate(authorizationHeader: string | undefined): AuthResult | Promise<AuthResult> {
    if (!this.enabled) return AUTH_OFF;
    const token = bearerToken(authorizationHeader);
    if (typeof token !== 'string') return token;
    const nowMs = this.now();
    // A hot client presents the same token on every call; remembering the verdict until the
    // token's `exp` (and never longer than TOKEN_CACHE_TTL_MS) saves an HMAC per call.
    const cached = this.cacheGet(token, nowMs);
    if (cached !== undefined) return { ok: true, roles: cached };
    return this.verify(token, nowMs);
  }

  private async verify(token: string, nowMs: number): Promise<AuthResult> {
    let payload: JWTPayload;
    this.verifications++;
    try {
      const verified = await jwtVerify(token, await this.key(), {
        algorithms: ['HS256'],
        clockTolerance: 0,
        currentDate: new Date(nowMs),
      });
      payload = verified.payload;
    } catch (error) {
      return { ok: false, detail: refusalDetail(error, token) };
    }
    const roles = rolesOf(payload);
    this.cachePut(token, roles, cacheExpiryMs(payload, nowMs));
    return { ok: true, roles };
  }

  private key(): Promise<webcrypto.CryptoKey> {
    this.verifyKey ??= webcrypto.subtle.importKey(
      'raw',
      this.secretBytes,
      { name: 'HMAC', hash: 'SHA-256' },
      false,
      ['verify'],
    );
    return this.verifyKey;
  }

  /** True when any of `roles` grants `access`. */
  allows(roles: ReadonlySet<Role>, access: Access): boolean {
    // Every call carries these roles while auth is off; walking a Set makes an iterator.
    if (roles === ADMIN_ONLY) return true;
    const granting = ROLES_FOR_ACCESS[access];
    for (const role of roles) {
      if (granting.has(role)) return true;
    }
    return false;
  }

  /** Cached roles for a token still inside its cache lifetime; refreshes its recency. */
  private cacheGet(token: string, nowMs: number): ReadonlySet<Role> | undefined {
    const entry = this.cache.get(token);
    if (entry === undefined) return undefined;
    this.cache.delete(token);
    if (nowMs >= entry.expiresAtMs) return undefined;
    this.cache.set(token, entry);
    return entry.roles;
  }

  private cachePut(token: string, roles: ReadonlySet<Role>, expiresAtMs: number): void {
    this.cache.delete(token);
    this.cache.set(token, { roles, expiresAtMs });
    while (this.cache.size > TOKEN_CACHE_ENTRIES_MAX) {
      const oldest = this.cache.keys().next();
      if (oldest.done === true) break;
      this.cache.delete(oldest.value);
    }
    if (this.cache.size > TOKEN_CACHE_ENTRIES_MAX) {
      throw new Error('JwtAuthenticator: token cache over its bound');
    }
  }

  /** Signature verifications performed so far (cache misses). */
  get verificationCount(): number {
    return this.verifications;
  }

  /** Tokens currently remembered (for tests and metrics). */
  get cachedTokenCount(): number {
    return this.cache.size;
  }
}

/** The token of `Bearer <token>` (scheme case-insensitive), or the refusal. */
function bearerToken(header: string | undefined): string | { ok: false; detail: string } {
  if (header === undefined || header.trim() === '') {
    return { ok: false, detail: 'missing Authorization header (expected: Bearer <jwt>)' };
  }
  const match = /^\s*bearer\s+(\S+)\s*$/i.exec(header);
  const token = match?.[1];
  if (token === undefined) {
    return { ok: false, detail: 'Authorization header is not of the form: Bearer <jwt>' };
  }
  if (token.length > TOKEN_BYTES_MAX) {
    return { ok: false, detail: `token longer than ${TOKEN_BYTES_MAX} bytes` };
  }
  return token;
}

/** `exp` is in whole seconds and jose refuses a token once now >= exp; the cache agrees. */
function cacheExpiryMs(payload: JWTPayload, nowMs: number): number {
  const ttlEnd = nowMs + TOKEN_CACHE_TTL_MS;
  const exp = payload.exp;
  if (typeof exp !== 'number' || !Number.isFinite(exp)) return ttlEnd;
  return Math.min(ttlEnd, exp * 1000);
}

/** Known roles from `role` and `roles`; anything else is ignored (no role -> 403 later). */
function rolesOf(payload: JWTPayload): ReadonlySet<Role> {
  const found = new Set<Role>();
  const add = (value: unknown): void => {
    if (typeof value === 'string' && KNOWN_ROLES.has(value)) found.add(value as Role);
  };
  add(payload['role']);
  const many = payload['roles'];
  if (Array.isArray(many)) {
    for (const value of many) add(value);
  }
  return found;
}

/** A human reason for a failed verification; never includes the token itself. */
function refusalDetail(error: unknown, token: string): string {
  if (error instanceof joseErrors.JWTExpired) return 'token expired (exp)';
  if (error instanceof joseErrors.JWTClaimValidationFailed) {
    if (error.claim === 'nbf') return 'token not yet valid (nbf)';
    if (error.claim === 'iat') return 'token issued in the future (iat)';
    return `token claim "${error.claim}" invalid`;
  }
  if (error instanceof joseErrors.JWSSignatureVerificationFailed) {
    return 'token signature does not verify with the configured secret';
  }
  if (error instanceof joseErrors.JOSEAlgNotAllowed) {
    return `token algorithm ${headerAlg(token)} not allowed (HS256 only)`;
  }
  if (error instanceof joseErrors.JOSEError) return `malformed token (${error.code})`;
  return 'malformed token';
}

function headerAlg(token: string): string {
  try {
    const alg = decodeProtectedHeader(token).alg;
    return typeof alg === 'string' ? JSON.stringify(alg.slice(0, 32)) : '(none given)';
  } catch {
    return '(unreadable)';
  }
}
