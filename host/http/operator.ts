/**
 * The operator's routes beside the KV surface: the console's files (`GET /console`,
 * `/console/...`), the cluster table (`GET /api/v1/system/cluster`), the tenants with their
 * usage and quota rows (`GET /api/v1/system/tenants`) and the pause switch's state
 * (`GET /api/v1/system/kv-timers`), and the state's dump at one applied index
 * (`GET /api/v1/system/export`, streamed). `server.ts` routes here after authorization; the
 * `/api/v1/system/*` routes need `admin` there, the console's files need nothing, since they
 * hold no data and every call the console makes is authorized on its own.
 *
 * Never throws for a request: a refusal is a `KvError` in the usual envelope.
 */
import type { QuotaSettings } from '../machine/commands.js';
import type { ClusterView } from '../node/cluster-status.js';
import type { ServiceResult } from '../node/service.js';
import type { ConsoleAssets, ConsoleFile } from './console-assets.js';
import { kvError, type KvError } from './errors.js';
import type { RouteMatch } from './routes.js';

/** Tenants one `GET /api/v1/system/tenants` lists at most; past it, `truncated: true`. */
export const TENANTS_LISTED_MAX = 1000;

/** One tenant the machine knows: live rows and bytes, and its quota row (null: none). */
export interface TenantRow {
  readonly tenant: string;
  readonly rows: number;
  readonly bytes: number;
  readonly quota: QuotaSettings | null;
}

export interface TenantsView {
  /** The applied index the list was read at. */
  readonly appliedIndex: number;
  /** In the order the machine first saw each tenant. */
  readonly tenants: readonly TenantRow[];
  readonly truncated: boolean;
}

/** What the console needs to know before its first call; public, so nothing secret. */
export interface ConsoleSettings {
  /** The id of the node serving the console. */
  readonly node: string;
  /** JWT_ENABLED: the console asks for a token. */
  readonly jwt: boolean;
  /** QUEEN_TENANCY_HEADER: the console offers a tenant field. */
  readonly tenancy: boolean;
  readonly defaultTenant: string;
  /** QUEEN_KV_PREFIX_LIMIT: the largest page of keys. */
  readonly prefixLimit: number;
}

export interface OperatorDeps {
  /** This node's table of every member. */
  cluster(): ClusterView;
  /** A linearizable list of at most `maxTenants` tenants. */
  tenants(maxTenants: number): Promise<ServiceResult<TenantsView>>;
  /** A linearizable read of the pause switch: true when KV runs. */
  kvEnabled(): Promise<ServiceResult<boolean>>;
  /**
   * The dump (docs/backup.md) of a state at one applied index, no older than the moment of
   * the call, as text chunks; absent on a server that cannot export.
   */
  exportDump?(): Promise<ServiceResult<{ readonly index: number;
    readonly text: AsyncIterable<string> }>>;
  readonly consoleAssets: ConsoleAssets;
  readonly consoleSettings: ConsoleSettings;
}

/** A successful answer; `server.ts` writes it like its own. */
export interface OperatorReply {
  readonly status: number;
  readonly body: string | Buffer;
  readonly contentType: string;
  readonly etag: string | null;
  readonly headers: Readonly<Record<string, string>> | null;
  /** A body streamed after the headers instead of `body` (an export). */
  readonly stream?: AsyncIterable<string>;
}

const JSON_TYPE = 'application/json';
/** Operator data changes from one second to the next: never cache it. */
const NO_STORE = Object.freeze({ 'cache-control': 'no-store' });
/**
 * The console loads only its own files and talks only to its own node: the policy makes the
 * browser refuse anything else, so a cluster without internet access loses nothing.
 */
const CONSOLE_POLICY = ["default-src 'self'", "script-src 'self'", "style-src 'self'",
  "img-src 'self' data:", "connect-src 'self'", "font-src 'self'", "object-src 'none'",
  "base-uri 'none'", "form-action 'self'", "frame-ancestors 'none'"].join('; ');
const CONSOLE_HEADERS = {
  'content-security-policy': CONSOLE_POLICY,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
};
const SETTINGS_FILE = 'settings.json';
const PAGE_FILE = 'index.html';

function jsonReply(value: unknown): OperatorReply {
  return { status: 200, body: JSON.stringify(value), contentType: JSON_TYPE, etag: null,
    headers: NO_STORE };
}

function unavailable(result: { reason: string; detail: string;
  retryAfterSeconds: number }): KvError {
  return kvError('kv_unavailable', result.reason, result.detail,
    { retryAfterSeconds: result.retryAfterSeconds });
}

/**
 * Answers one operator route. `deps` is undefined on a server built without them (tests of
 * the KV surface alone): every operator route is then 404.
 */
export async function answerOperator(deps: OperatorDeps | undefined, route: RouteMatch,
  ifNoneMatch: string | undefined): Promise<OperatorReply | KvError> {
  if (deps === undefined) {
    return kvError('not_found', 'not_found', 'this server has no operator routes');
  }
  switch (route.id) {
    case 'cluster':
      return jsonReply(deps.cluster());
    case 'tenants': {
      const result = await deps.tenants(TENANTS_LISTED_MAX);
      return result.kind === 'done' ? jsonReply(result.value) : unavailable(result);
    }
    case 'kvTimersRead': {
      const result = await deps.kvEnabled();
      return result.kind === 'done' ? jsonReply({ kv: result.value }) : unavailable(result);
    }
    case 'console':
      return consoleFile(deps, route.rest, ifNoneMatch);
    case 'export':
      return exportReply(deps);
    default:
      return kvError('not_found', 'not_found', 'no operator route serves this path');
  }
}

/** The dump streamed as `application/x-ndjson`; its header line names its index. */
async function exportReply(deps: OperatorDeps): Promise<OperatorReply | KvError> {
  if (deps.exportDump === undefined) {
    return kvError('not_found', 'not_found', 'this server cannot export');
  }
  const result = await deps.exportDump();
  if (result.kind !== 'done') return unavailable(result);
  return { status: 200, body: '', contentType: 'application/x-ndjson', etag: null,
    headers: { ...NO_STORE, 'x-hivekv-export-index': String(result.value.index) },
    stream: result.value.text };
}

function consoleFile(deps: OperatorDeps, rest: string,
  ifNoneMatch: string | undefined): OperatorReply | KvError {
  const { files, dir } = deps.consoleAssets;
  if (files.size === 0) {
    return kvError('not_found', 'console_not_built',
      `the console is not built (nothing in ${dir}): run npm run build`);
  }
  if (rest === SETTINGS_FILE) {
    return { status: 200, body: JSON.stringify(deps.consoleSettings), contentType: JSON_TYPE,
      etag: null, headers: { ...CONSOLE_HEADERS, 'cache-control': 'no-store' } };
  }
  const file = files.get(rest === '' ? PAGE_FILE : rest);
  if (file === undefined) {
    return kvError('not_found', 'not_found', 'the console has no such file');
  }
  const headers = { ...CONSOLE_HEADERS, 'cache-control': file.cacheControl };
  if (ifNoneMatch !== undefined && etagMatches(ifNoneMatch, file)) {
    return { status: 304, body: '', contentType: file.contentType, etag: file.etag, headers };
  }
  return { status: 200, body: file.body, contentType: file.contentType, etag: file.etag,
    headers };
}

/** `If-None-Match`: `*` or a list of tags, weak or strong (RFC 9110 §13.1.2, weak compare). */
function etagMatches(header: string, file: ConsoleFile): boolean {
  if (header.trim() === '*') return true;
  for (const part of header.split(',')) {
    const tag = part.trim().replace(/^W\//, '');
    if (tag === file.etag) return true;
  }
  return false;
}
