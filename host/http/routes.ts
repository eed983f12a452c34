/**
 * The route table of the HTTP surface: method and raw path -> which handler, which access
 * level it needs, and the label metrics and logs use (a route template, never a raw path,
 * so label cardinality stays bounded).
 *
 * Pure: no I/O. The router sees the raw, still percent-encoded path, which is how the path
 * routes' catch-all key keeps `%2F` as a literal slash (kv-routes.md, "The routes"); the
 * key is decoded once, later, by validation.
 */
import type { Access } from './guards.js';

export type RouteId =
  | 'kvBatch'
  | 'kvPath'
  | 'transaction'
  | 'kvTimers'
  | 'kvTimersRead'
  | 'kvQuota'
  | 'cluster'
  | 'tenants'
  | 'export'
  | 'console'
  | 'members'
  | 'member'
  | 'health'
  | 'metrics';

export interface RouteMatch {
  readonly id: RouteId;
  /** The route template, for metrics and logs. */
  readonly label: string;
  /** What the caller's roles must allow; null for the unauthenticated probes. */
  readonly access: Access | null;
  /** False when the path exists but not for this method (405). */
  readonly methodAllowed: boolean;
  /** The methods the path takes, for the `Allow` header of a 405. */
  readonly allow: string;
  /** The raw path segment after the route's fixed prefix (`:ns/*key`, `:tenant`), or ''. */
  readonly rest: string;
}

const KV_BATCH_PATH = '/api/v1/kv';
const KV_PATH_PREFIX = '/api/v1/kv/';
const TRANSACTION_PATH = '/api/v1/transaction';
const KV_TIMERS_PATH = '/api/v1/system/kv-timers';
const KV_QUOTA_PREFIX = '/api/v1/system/kv-quota/';
const CLUSTER_PATH = '/api/v1/system/cluster';
const TENANTS_PATH = '/api/v1/system/tenants';
/** A dump of the whole state at one applied index (docs/backup.md). */
const EXPORT_PATH = '/api/v1/system/export';
/** The operator console: `/console` and the files under `/console/` (never under /api). */
const CONSOLE_PATH = '/console';
const MEMBERS_PATH = '/api/v1/system/members';
const MEMBER_PREFIX = '/api/v1/system/members/';

function match(id: RouteId, label: string, access: Access | null, methodAllowed: boolean,
  allow: string, rest: string): RouteMatch {
  return { id, label, access, methodAllowed, allow, rest };
}

// The static routes answer with one shared, frozen match each: no allocation per request.
const STATIC = {
  kvBatch: Object.freeze(match('kvBatch', '/api/v1/kv', 'write', true, 'POST', '')),
  transaction: Object.freeze(match('transaction', '/api/v1/transaction', 'write', true, 'POST',
    '')),
  kvTimers: Object.freeze(match('kvTimers', '/api/v1/system/kv-timers', 'admin', true,
    'GET, POST', '')),
  kvTimersRead: Object.freeze(match('kvTimersRead', '/api/v1/system/kv-timers', 'admin', true,
    'GET, POST', '')),
  cluster: Object.freeze(match('cluster', CLUSTER_PATH, 'admin', true, 'GET', '')),
  tenants: Object.freeze(match('tenants', TENANTS_PATH, 'admin', true, 'GET', '')),
  export: Object.freeze(match('export', EXPORT_PATH, 'admin', true, 'GET', '')),
  members: Object.freeze(match('members', '/api/v1/system/members', 'admin', true, 'GET, POST',
    '')),
  health: Object.freeze(match('health', '/health', null, true, 'GET', '')),
  metrics: Object.freeze(match('metrics', '/metrics', null, true, 'GET', '')),
};

function staticRoute(base: RouteMatch, method: string): RouteMatch {
  if (method === base.allow) return base;
  return match(base.id, base.label, base.access, false, base.allow, '');
}

/**
 * Resolves a request. Returns null for a path no route serves (404). `method` is upper
 * case; `path` is the raw path without the query string.
 */
export function matchRoute(method: string, path: string): RouteMatch | null {
  if (path.startsWith(KV_PATH_PREFIX)) {
    const rest = path.slice(KV_PATH_PREFIX.length);
    // `:ns/*key` needs the slash after the namespace; the key may be empty (refused later).
    if (rest.indexOf('/') <= 0) return null;
    const allowed = method === 'GET' || method === 'PUT' || method === 'DELETE';
    const access: Access = method === 'GET' ? 'read' : 'write';
    return match('kvPath', '/api/v1/kv/:ns/*key', access, allowed, 'GET, PUT, DELETE', rest);
  }
  if (path === KV_BATCH_PATH) return staticRoute(STATIC.kvBatch, method);
  if (path === TRANSACTION_PATH) return staticRoute(STATIC.transaction, method);
  if (path === KV_TIMERS_PATH) {
    if (method === 'GET') return STATIC.kvTimersRead;
    if (method === 'POST') return STATIC.kvTimers;
    return match('kvTimers', STATIC.kvTimers.label, 'admin', false, 'GET, POST', '');
  }
  if (path.startsWith(KV_QUOTA_PREFIX)) {
    const rest = path.slice(KV_QUOTA_PREFIX.length);
    if (rest.length === 0 || rest.includes('/')) return null;
    const allowed = method === 'GET' || method === 'PUT';
    return match('kvQuota', '/api/v1/system/kv-quota/:tenant', 'admin', allowed, 'GET, PUT',
      rest);
  }
  if (path === MEMBERS_PATH) {
    if (method === 'GET' || method === 'POST') return STATIC.members;
    return match('members', STATIC.members.label, 'admin', false, STATIC.members.allow, '');
  }
  if (path.startsWith(MEMBER_PREFIX)) {
    const rest = path.slice(MEMBER_PREFIX.length);
    if (rest.length === 0 || rest.includes('/')) return null;
    return match('member', '/api/v1/system/members/:id', 'admin', method === 'DELETE', 'DELETE',
      rest);
  }
  if (path === '/health') return staticRoute(STATIC.health, method);
  if (path === '/metrics') return staticRoute(STATIC.metrics, method);
  if (path === CLUSTER_PATH) return staticRoute(STATIC.cluster, method);
  if (path === TENANTS_PATH) return staticRoute(STATIC.tenants, method);
  if (path === EXPORT_PATH) return staticRoute(STATIC.export, method);
  if (path === CONSOLE_PATH || path.startsWith(CONSOLE_PATH + '/')) {
    // The console's files are public: they hold no data, and every call they make is
    // authorized on its own. `rest` is the file path under /console/ ('' for the page).
    const allowed = method === 'GET' || method === 'HEAD';
    return match('console', '/console', null, allowed, 'GET, HEAD',
      path.slice(CONSOLE_PATH.length + 1));
  }
  return null;
}
