/**
 * JWT authentication and role checks (WIRE.md, "Tenancy, auth, operator switches"). Tokens
 * are signed here with jose; the clock is injected, so expiry and the cache are exact.
 */

import { SignJWT, base64url, type JWTPayload } from 'jose';
import { describe, expect, it } from 'vitest';
import {
  JwtAuthenticator,
  TOKEN_BYTES_MAX,
  TOKEN_CACHE_ENTRIES_MAX,
  TOKEN_CACHE_TTL_MS,
} from '../../host/http/auth.js';
import type { Access, AuthResult, Role } from '../../host/http/guards.js';

const SECRET = 'test-secret-with-enough-bytes-for-hs256';
const NOW_MS = Date.UTC(2026, 0, 15, 12, 0, 0);
const NOW_S = NOW_MS / 1000;
const HOUR_S = 3600;
const ADMIN: JWTPayload = { role: 'admin' };

function sign(payload: JWTPayload, opts: { secret?: string; alg?: string } = {}): Promise<string> {
  return new SignJWT(payload)
    .setProtectedHeader({ alg: opts.alg ?? 'HS256', typ: 'JWT' })
    .sign(new TextEncoder().encode(opts.secret ?? SECRET));
}

function clock(startMs = NOW_MS): { now: () => number; set: (ms: number) => void } {
  let t = startMs;
  return { now: () => t, set: (ms) => (t = ms) };
}

function rolesOf(result: AuthResult): Role[] {
  if (!result.ok) throw new Error(`refused: ${result.detail}`);
  return [...result.roles].sort();
}

function detailOf(result: AuthResult): string {
  if (result.ok) throw new Error('expected a refusal');
  return result.detail;
}

describe('JwtAuthenticator with auth off', () => {
  it('gives every caller admin, header or not (WIRE.md: auth off unless JWT_ENABLED)', async () => {
    const auth = new JwtAuthenticator({ enabled: false, secret: '' });
    expect(rolesOf(await auth.authenticate(undefined))).toEqual(['admin']);
    expect(rolesOf(await auth.authenticate('Bearer garbage'))).toEqual(['admin']);
  });

  it('lets the verdict it gives every caller use every access level', async () => {
    const auth = new JwtAuthenticator({ enabled: false, secret: '' });
    const verdict = await auth.authenticate(undefined);
    if (!verdict.ok) throw new Error('auth off refused a caller');
    for (const access of ['read', 'write', 'admin'] as const) {
      expect(auth.allows(verdict.roles, access)).toBe(true);
    }
  });
});

describe('JwtAuthenticator with auth on', () => {
  const make = (now = clock().now): JwtAuthenticator =>
    new JwtAuthenticator({ enabled: true, secret: SECRET, now });
  const bearer = (token: string): string => `Bearer ${token}`;

  it('refuses an empty secret at construction', () => {
    expect(() => new JwtAuthenticator({ enabled: true, secret: '' })).toThrow(/secret/);
  });

  it('accepts a valid HS256 token and reads `role`', async () => {
    const token = await sign({ role: 'read-write', exp: NOW_S + HOUR_S });
    expect(rolesOf(await make().authenticate(bearer(token)))).toEqual(['read-write']);
  });

  it('reads `roles` as an array and ignores unknown role strings', async () => {
    const token = await sign({ roles: ['read-only', 'superuser', 7, 'admin'] });
    expect(rolesOf(await make().authenticate(bearer(token)))).toEqual(['admin', 'read-only']);
  });

  it('unions `role` and `roles`', async () => {
    const token = await sign({ role: 'write-only', roles: ['read-only'] });
    expect(rolesOf(await make().authenticate(bearer(token)))).toEqual(['read-only', 'write-only']);
  });

  it('authenticates a token with no known role, holding no roles (403 later)', async () => {
    for (const payload of [{}, { role: 'root' }, { roles: 'admin' }, { role: ['admin'] }]) {
      const result = await make().authenticate(bearer(await sign(payload)));
      expect(rolesOf(result)).toEqual([]);
    }
  });

  it('accepts the scheme in any case', async () => {
    const token = await sign({ role: 'admin' });
    expect(rolesOf(await make().authenticate(`bEaReR ${token}`))).toEqual(['admin']);
  });

  const refusals: ReadonlyArray<[string, () => Promise<string | undefined>, RegExp]> = [
    ['missing header', async () => undefined, /missing Authorization/],
    ['empty header', async () => '', /missing Authorization/],
    ['another scheme', async () => 'Basic dXNlcjpwYXNz', /Bearer <jwt>/],
    ['bearer without token', async () => 'Bearer', /Bearer <jwt>/],
    ['expired', async () => bearer(await sign({ role: 'admin', exp: NOW_S - 1 })), /expired/],
    ['expiring now', async () => bearer(await sign({ role: 'admin', exp: NOW_S })), /expired/],
    ['nbf ahead', async () => bearer(await sign({ nbf: NOW_S + 1 })), /not yet valid/],
    ['wrong secret', async () => bearer(await sign(ADMIN, { secret: 'other' })), /signature/],
    ['HS512', async () => bearer(await sign(ADMIN, { alg: 'HS512' })), /"HS512" not allowed/],
    ['alg none', async () => bearer(unsignedToken({ role: 'admin' })), /"none" not allowed/],
    ['not a JWT', async () => bearer('abc'), /malformed/],
    ['three junk parts', async () => bearer('a.b.c'), /malformed/],
    ['tampered payload', async () => bearer(await tamperedPayload()), /signature/],
    ['too long', async () => bearer('x'.repeat(TOKEN_BYTES_MAX + 1)), /longer than/],
  ];
  for (const [name, header, detail] of refusals) {
    it(`refuses: ${name}`, async () => {
      const result = await make().authenticate(await header());
      expect(detailOf(result)).toMatch(detail);
      expect(detailOf(result)).not.toContain(SECRET);
    });
  }

  it('caches a verified token: one HMAC for repeated calls', async () => {
    const auth = make();
    const token = await sign({ role: 'read-only', exp: NOW_S + HOUR_S });
    for (let i = 0; i < 5; i++) await auth.authenticate(bearer(token));
    expect(auth.verificationCount).toBe(1);
    expect(auth.cachedTokenCount).toBe(1);
  });

  it('re-verifies a cached token after TOKEN_CACHE_TTL_MS', async () => {
    const c = clock();
    const auth = make(c.now);
    const token = await sign({ role: 'read-only', exp: NOW_S + HOUR_S });
    await auth.authenticate(bearer(token));
    c.set(NOW_MS + TOKEN_CACHE_TTL_MS - 1);
    await auth.authenticate(bearer(token));
    expect(auth.verificationCount).toBe(1);
    c.set(NOW_MS + TOKEN_CACHE_TTL_MS);
    expect(rolesOf(await auth.authenticate(bearer(token)))).toEqual(['read-only']);
    expect(auth.verificationCount).toBe(2);
  });

  it('never serves a cached token past its exp', async () => {
    const c = clock();
    const auth = make(c.now);
    const token = await sign({ role: 'admin', exp: NOW_S + 10 });
    expect(rolesOf(await auth.authenticate(bearer(token)))).toEqual(['admin']);
    c.set(NOW_MS + 9_999);
    expect(rolesOf(await auth.authenticate(bearer(token)))).toEqual(['admin']);
    c.set(NOW_MS + 10_000);
    expect(detailOf(await auth.authenticate(bearer(token)))).toMatch(/expired/);
    expect(auth.cachedTokenCount).toBe(0);
  });

  it('does not cache refusals', async () => {
    const auth = make();
    const token = await sign({ role: 'admin' }, { secret: 'wrong' });
    await auth.authenticate(bearer(token));
    await auth.authenticate(bearer(token));
    expect(auth.cachedTokenCount).toBe(0);
    expect(auth.verificationCount).toBe(2);
  });

  it(`keeps at most ${TOKEN_CACHE_ENTRIES_MAX} tokens, dropping the least recent`, async () => {
    const auth = make();
    const first = await sign({ role: 'admin', jti: 'first' });
    const second = await sign({ role: 'admin', jti: 'second' });
    await auth.authenticate(bearer(first));
    await auth.authenticate(bearer(second));
    for (let i = 0; i < TOKEN_CACHE_ENTRIES_MAX - 1; i++) {
      if (i === 100) await auth.authenticate(bearer(first)); // first is now recent
      await auth.authenticate(bearer(await sign({ role: 'admin', jti: String(i) })));
    }
    expect(auth.cachedTokenCount).toBe(TOKEN_CACHE_ENTRIES_MAX);
    const before = auth.verificationCount;
    await auth.authenticate(bearer(first));
    expect(auth.verificationCount).toBe(before);
    await auth.authenticate(bearer(second));
    expect(auth.verificationCount).toBe(before + 1);
  });
});

describe('JwtAuthenticator.allows (WIRE.md: GET needs a read role, KV writes read-write)', () => {
  const auth = new JwtAuthenticator({ enabled: false, secret: '' });
  const table: ReadonlyArray<[Role[], Access, boolean]> = [
    [['read-only'], 'read', true],
    [['read-only'], 'write', false],
    [['read-only'], 'admin', false],
    [['write-only'], 'read', false],
    [['write-only'], 'write', false],
    [['write-only'], 'admin', false],
    [['read-write'], 'read', true],
    [['read-write'], 'write', true],
    [['read-write'], 'admin', false],
    [['admin'], 'read', true],
    [['admin'], 'write', true],
    [['admin'], 'admin', true],
    [[], 'read', false],
    [[], 'write', false],
    [[], 'admin', false],
    [['read-only', 'write-only'], 'write', false],
    [['write-only', 'read-write'], 'write', true],
  ];
  for (const [roles, access, allowed] of table) {
    it(`[${roles.join(',')}] ${allowed ? 'may' : 'may not'} ${access}`, () => {
      expect(auth.allows(new Set(roles), access)).toBe(allowed);
    });
  }
});

/** `alg: none` with an empty signature, as an attacker would send it. */
function unsignedToken(payload: JWTPayload): string {
  const part = (value: object): string => base64url.encode(JSON.stringify(value));
  return `${part({ alg: 'none', typ: 'JWT' })}.${part(payload)}.`;
}

/** A validly signed token whose payload segment is replaced by non-JSON bytes. */
async function tamperedPayload(): Promise<string> {
  const [header, , signature] = (await sign({ role: 'admin' })).split('.');
  return `${header}.${base64url.encode('not json')}.${signature}`;
}
