/**
 * The console's session: the JWT the operator pasted, kept in `sessionStorage` only (it
 * lives as long as the tab and never reaches disk or another tab), and what its roles let
 * the console show. The roles are read from the token's payload without checking its
 * signature: that only decides which controls appear. The node checks every call.
 */

const TOKEN_KEY = 'hivekv.console.token';
/** Longer pasted tokens are refused here; the node refuses them too (4096 bytes). */
const TOKEN_CHARS_MAX = 4096;

export type Role = 'read-only' | 'write-only' | 'read-write' | 'admin';

/** What the console offers; with auth off, everything. */
export interface Access {
  readonly read: boolean;
  readonly write: boolean;
  readonly admin: boolean;
}

export const FULL_ACCESS: Access = Object.freeze({ read: true, write: true, admin: true });
export const NO_ACCESS: Access = Object.freeze({ read: false, write: false, admin: false });

export function storedToken(): string | null {
  try {
    return sessionStorage.getItem(TOKEN_KEY);
  } catch {
    return null;
  }
}

export function storeToken(token: string | null): void {
  try {
    if (token === null) sessionStorage.removeItem(TOKEN_KEY);
    else sessionStorage.setItem(TOKEN_KEY, token);
  } catch {
    // Storage refused (a privacy mode): the token lives in memory for this page only.
  }
}

function base64UrlDecode(text: string): string {
  const base64 = text.replace(/-/g, '+').replace(/_/g, '/');
  const padded = base64 + '='.repeat((4 - (base64.length % 4)) % 4);
  const bytes = Uint8Array.from(atob(padded), (c) => c.charCodeAt(0));
  return new TextDecoder().decode(bytes);
}

/** The roles a token's payload claims (`role` or `roles`), or null if it is no JWT. */
export function tokenRoles(token: string): Set<Role> | null {
  if (token.length === 0 || token.length > TOKEN_CHARS_MAX) return null;
  const parts = token.split('.');
  if (parts.length !== 3 || parts[1] === undefined) return null;
  let payload: unknown;
  try {
    payload = JSON.parse(base64UrlDecode(parts[1]));
  } catch {
    return null;
  }
  if (typeof payload !== 'object' || payload === null) return null;
  const claims = payload as { role?: unknown; roles?: unknown };
  const named: unknown[] = typeof claims.role === 'string' ? [claims.role]
    : Array.isArray(claims.roles) ? claims.roles : [];
  const roles = new Set<Role>();
  for (const role of named) {
    if (role === 'read-only' || role === 'write-only' || role === 'read-write' ||
      role === 'admin') {
      roles.add(role);
    }
  }
  return roles;
}

/** The node's rule (WIRE.md): reads need read-only, read-write or admin; writes need
 * read-write or admin; `/api/v1/system/*` needs admin. */
export function accessOf(roles: ReadonlySet<Role>): Access {
  const admin = roles.has('admin');
  return {
    read: admin || roles.has('read-only') || roles.has('read-write'),
    write: admin || roles.has('read-write'),
    admin,
  };
}
