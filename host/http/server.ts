/**
 * The HTTP server (hyper-express): reads a request, runs the guards in the refusal order of
 * the HTTP reference (docs/http.md), has the node parse a KV call's body into the command
 * its log entry carries (the machine's parser, one pass over the bytes), submits it with the
 * request's exchange as the sink, and sends the answer the machine rendered; one log line.
 *
 * The I/O edge of the HTTP layer: everything it decides comes from the pure modules beside
 * it (routes, validate, errors) or from the machine. It never lets a bad request crash the
 * process: an unexpected exception is a logged 500.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import HyperExpress from 'hyper-express';
import type { Request, Response } from 'hyper-express';
import uWS from 'uWebSockets.js';
import type { HttpRequest, HttpResponse, us_listen_socket } from 'uWebSockets.js';
import type { AnswerHeader } from '../machine/codec.js';
import type { NodeConfig } from '../node/config.js';
import type {
  CallSink, KvService, MembersService, SubmittedCall, Unavailable,
} from '../node/service.js';
import type { PathMethod, RequestFrame } from '../machine/request.js';
import {
  badRequest, errorBody, isKvError, KvError, kvError, tooLarge, type Wire,
} from './errors.js';
import { answerOperator, type OperatorDeps } from './operator.js';
import type {
  Access, Authenticator, AuthResult, RateLimiter, RequestLogger, RequestMetrics, TenantResolver,
} from './guards.js';
import { answerMembers, MEMBERS_BODY_BYTES_MAX } from './members.js';
import { matchRoute, type RouteMatch } from './routes.js';
import { IdlePoll } from './idle-poll.js';
import { AnswerBudget, sendWithinBudget } from './answer-budget.js';
import { BodyBudget } from './body-budget.js';
import { streamBody } from './stream-body.js';
import { RequestIds } from './request-ids.js';
import {
  bodySlabs, type BodyDone as BodyDoneOf, type CallRequest, type CallResponse,
  type DirectMethod, JSON_TYPE, UwsCall,
} from './uws-call.js';
import { IDEMPOTENCY_HEADER, keyedOrRefused, REPLAYED_HEADERS } from './idempotency.js';
import { renderEmptyTransaction } from './transaction.js';
import {
  parseJsonBody, validateQuotaSettings, validateTenantSegment, validateTimersBody,
} from './validate.js';

export interface HttpDeps {
  readonly service: KvService;
  /** The membership routes; without it they answer 404. */
  readonly members?: MembersService;
  readonly config: NodeConfig;
  readonly authenticator: Authenticator;
  readonly tenants: TenantResolver;
  readonly rateLimiter: RateLimiter;
  readonly metrics: RequestMetrics & { render(): Promise<string>; readonly contentType: string };
  readonly logger: RequestLogger;
  /** The console and the operator's read routes (`operator.ts`); without them, 404. */
  readonly operator?: OperatorDeps;
  /**
   * False serves the KV routes through hyper-express's request and response like every
   * other route; by default they are served on uWebSockets directly (`uws-call.ts`).
   */
  readonly kvDirect?: boolean;
}

export interface HttpServerHandle {
  /** The port the server listens on (the real one when asked for port 0). */
  readonly port: number;
  /** From now on every new request answers 503 `kv_unavailable`, reason `shutting_down`. */
  stopAccepting(): void;
  /** Resolves once no call is in flight, or after `timeoutMs`, whichever comes first. */
  drain(timeoutMs: number): Promise<void>;
  /** Closes the listening socket and every open connection. */
  close(): Promise<void>;
  /** Seconds the loop spent polling for a next call once idle (`HIVEKV_IDLE_POLL_US`). */
  idlePollSeconds(): number;
  /**
   * Closes the listening socket and keeps every open connection (accept-gate.ts): new
   * clients are refused until `listenAgain`.
   */
  closeListener(): void;
  /** Listens again on the same host and port; false if it could not (the port was taken). */
  listenAgain(): Promise<boolean>;
  /** What the answer and body budgets hold now, and whom they turned away. */
  budgets(): HttpBudgetFigures;
}

/** What the answer and body budgets hold, and whom they turned away (for /metrics). */
export interface HttpBudgetFigures {
  /** Bytes of answers waiting for clients to read them. */
  readonly answerBytesWaiting: number;
  /** Connections closed to keep those within HIVEKV_MAX_WAITING_ANSWER_BYTES. */
  readonly slowReadersClosed: number;
  /** Bytes of request bodies held now. */
  readonly bodyBytesHeld: number;
  /** Calls refused to keep those within HIVEKV_MAX_HELD_BODY_BYTES. */
  readonly bodiesRefused: number;
  /** Connections closed because their upload had stalled and another body needed room. */
  readonly slowUploadsClosed: number;
}

/** A client's `x-request-id` is echoed only if it is this short and plain (log safety). */
const REQUEST_ID_PATTERN = /^[A-Za-z0-9._:/+=-]{1,128}$/;
/** `drain` never waits longer than this, whatever it is asked. */
const DRAIN_TIMEOUT_MS_MAX = 60_000;
const EMPTY_RESULTS = '{"results":[]}';
const TENANT_HEADER = 'x-queen-tenant';
/** The uWebSockets patterns of the KV routes (routes.ts): the batch, the paths, a transaction. */
const KV_DIRECT_PATTERNS = ['/api/v1/kv', '/api/v1/kv/*', '/api/v1/transaction'];

/**
 * An answer to send as it is: the host's own, or one the machine rendered (a machine answer
 * may be a refusal decided when the entry applied, with its `reason` for metrics and logs);
 * refusals the host decides travel as `KvError`.
 */
interface Reply {
  readonly status: number;
  readonly body: string | Uint8Array;
  readonly contentType: string;
  /** `ETag` value, quotes included, or null. */
  readonly etag: string | null;
  readonly retryAfterSeconds?: number | null;
  /** The `reason` of a refusal the machine rendered, for metrics and the log line. */
  readonly refusalReason?: string | null;
  /** More headers (the console's caching and security policy). */
  readonly headers?: Readonly<Record<string, string>> | null;
  /** A body streamed after the headers instead of `body` (export.ts). */
  readonly stream?: AsyncIterable<string>;
}

type Answer = Reply | KvError;

function reply(body: string, status = 200, contentType = JSON_TYPE,
  etag: string | null = null): Reply {
  return { status, body, contentType, etag };
}

/** What one request carries through its handler, for the log line. */
/**
 * One request from arrival to response. A KV call is handed to the node with its exchange as
 * the sink, so the node's answer is written straight to the socket when it comes: from the
 * machine's memory, with no Promise, closure or copy of its own.
 */
class Exchange implements CallSink {
  tenant: string | null = null;
  /** The call went to the node; the response is written when it answers. */
  submitted = false;
  /** Gives a body held through hyper-express back to the budget (body-budget.ts). */
  releaseBody: (() => void) | null = null;

  constructor(
    private readonly app: HttpApp,
    readonly res: CallResponse,
    /** The client's `x-request-id` when it may be echoed, else null: the node numbers it. */
    readonly clientRequestId: string | null,
    /** The node's number for the call, when the client sent no id it may echo. */
    readonly requestNumber: number,
    readonly method: string,
    readonly route: RouteMatch | null,
    readonly startedMs: number,
  ) {}

  /** The call's id, for log lines and a response written through hyper-express. */
  get requestId(): string {
    return this.clientRequestId ?? this.app.requestIds.text(this.requestNumber);
  }

  answered(header: AnswerHeader, body: Uint8Array): void {
    this.app.finish(this, machineReply(header, body));
  }

  unavailable(result: Unavailable): void {
    this.app.finish(this, kvError('kv_unavailable', result.reason, result.detail,
      { retryAfterSeconds: result.retryAfterSeconds }));
  }

  refused(detail: string): void {
    this.app.finish(this, kvError('internal_error', 'kv_invalid_command',
      'the state machine refused a command the host validated: ' + detail));
  }
}

const NOT_FOUND = kvError('not_found', 'not_found', 'no route serves this path');
const BODIES_OVER_BUDGET = kvError('kv_unavailable', 'overloaded', 'the request bodies this ' +
  'node is receiving fill its budget (HIVEKV_MAX_HELD_BODY_BYTES); retry shortly',
{ retryAfterSeconds: 1 });
const SHUTTING_DOWN = kvError('kv_unavailable', 'shutting_down',
  'this node is shutting down; retry on another node or later', { retryAfterSeconds: 1 });

/**
 * Starts the server on `host:port` (port 0 picks a free port). Resolves once it listens.
 */
export async function startHttpServer(deps: HttpDeps, host: string,
  port: number): Promise<HttpServerHandle> {
  const server = new HyperExpress.Server({
    // Body limits are enforced here, so that a refusal is the 413 envelope of WIRE.md rather
    // than hyper-express's empty 413.
    max_body_length: Number.MAX_SAFE_INTEGER,
    auto_close: false,
    fast_buffers: true,
    ...(deps.config.tls === null ? {} : {
      cert_file_name: deps.config.tls.certFile, key_file_name: deps.config.tls.keyFile }),
  });
  assertChunkedSeam();
  const app = new HttpApp(deps);
  const handler = (req: Request, res: Response): void => {
    void app.serve(req, res);
  };
  server.any('/*', handler);
  if (deps.kvDirect !== false) {
    // Beside hyper-express's catch-all, on its own uWebSockets app: a static path outranks a
    // wildcard, and a call this path does not take goes on to the catch-all (uws-call.ts).
    const maxBodyBytes = deps.config.limits.maxBodyBytes;
    const directFor = (method: DirectMethod) => (res: HttpResponse, req: HttpRequest): void => {
      const call = UwsCall.accept(res, req, method, maxBodyBytes, app.answers, app.bodies);
      if (call === null) return;
      try {
        app.serve(call, call);
      } finally {
        call.watchAbortIfOpen();
      }
    };
    type Handler = ReturnType<typeof directFor>;
    const uws = server.uws_instance as unknown as Record<'get' | 'put' | 'post' | 'del',
      (pattern: string, handler: Handler) => unknown>;
    // A route per method: the call's method comes from its route. Other methods (HEAD, say)
    // find no route here and go on to the catch-all, which answers them as before.
    for (const pattern of KV_DIRECT_PATTERNS) {
      uws.get(pattern, directFor('GET'));
      uws.put(pattern, directFor('PUT'));
      uws.post(pattern, directFor('POST'));
      uws.del(pattern, directFor('DELETE'));
    }
  }
  await server.listen(port, host);
  const listener = new Listener(server, host, server.port);
  return {
    port: listener.port,
    closeListener: () => listener.close(),
    listenAgain: () => listener.listenAgain(),
    stopAccepting: () => {
      app.stopping = true;
    },
    drain: (timeoutMs) => app.drain(timeoutMs),
    budgets: () => ({ answerBytesWaiting: app.answers.waitingBytes,
      slowReadersClosed: app.answers.closedConnections, bodyBytesHeld: app.bodies.heldBytes,
      bodiesRefused: app.bodies.refusedCalls, slowUploadsClosed: app.bodies.closedUploads }),
    close: async () => {
      listener.close();
      // Also ends open keep-alive connections, which closing the listen socket leaves open.
      listener.closeConnections();
    },
    idlePollSeconds: () => app.idlePoll.polledMs / 1000,
  };
}

/**
 * The listening socket: hyper-express's, until it is closed (`server.close()`), and then one
 * the node opens again itself (accept-gate.ts).
 */
class Listener {
  private readonly uwsApp: {
    listen(host: string, port: number, done: (token: us_listen_socket | false) => void): void;
    close(): void;
  };
  private own: us_listen_socket | null = null;

  constructor(private readonly server: HyperExpress.Server, private readonly host: string,
    readonly port: number) {
    this.uwsApp = server.uws_instance as unknown as Listener['uwsApp'];
  }

  close(): void {
    this.server.close();
    if (this.own !== null) uWS.us_listen_socket_close(this.own);
    this.own = null;
  }

  listenAgain(): Promise<boolean> {
    return new Promise<boolean>((resolve) => {
      if (this.own !== null) {
        resolve(true);
        return;
      }
      this.uwsApp.listen(this.host, this.port, (token) => {
        if (token !== false && token !== null && token !== undefined) this.own = token;
        resolve(this.own !== null);
      });
    });
  }

  closeConnections(): void {
    this.uwsApp.close();
  }
}

/** Request handling; one instance per server, no closure per request. */
class HttpApp {
  stopping = false;
  /** Calls between body received and response written. */
  private inFlight = 0;
  private drainWaiters: Array<() => void> = [];
  readonly requestIds = new RequestIds(randomBytes(4).toString('hex') + '-');
  /** Answers waiting for slow clients, over every connection (answer-budget.ts). */
  readonly answers: AnswerBudget;
  /** Request bodies held in memory, over every connection (body-budget.ts). */
  readonly bodies: BodyBudget;
  /** Keeps the loop turning for a moment once no call is in flight (idle-poll.ts). */
  readonly idlePoll: IdlePoll;

  constructor(private readonly deps: HttpDeps) {
    this.answers = new AnswerBudget(deps.config.maxWaitingAnswerBytes);
    this.bodies = new BodyBudget(deps.config.maxHeldBodyBytes);
    this.idlePoll = new IdlePoll(deps.config.idlePollUs / 1000, () => performance.now(),
      setImmediate);
  }

  /**
   * A KV call runs without a Promise of its own: its route, guards and body reading are
   * plain calls and callbacks, so the call is parsed and submitted in the callback that
   * delivers its body's last bytes. Other routes, and a token's first verification, are
   * asynchronous and answer through a Promise.
   */
  serve(req: CallRequest, res: CallResponse): void {
    this.idlePoll.arrived();
    const startedMs = performance.now();
    const method = req.method;
    const sent = req.headers['x-request-id'];
    const clientId = sent !== undefined && REQUEST_ID_PATTERN.test(sent) ? sent : null;
    const exchange = new Exchange(this, res, clientId,
      clientId === null ? this.requestIds.next() : 0, method, matchRoute(method, req.path),
      startedMs);
    let answer: Answer | null | Promise<Answer | null>;
    try {
      answer = this.holdBody(exchange, req) ? this.answer(exchange, req) : BODIES_OVER_BUDGET;
    } catch (error) {
      // A call submitted before the failure still counts as in flight: `finish` settles it.
      answer = this.internalError(exchange, error);
    }
    if (answer instanceof Promise) {
      answer.then((settled) => {
        if (settled !== null) this.finish(exchange, settled);
      }, (error: unknown) => this.finish(exchange, this.internalError(exchange, error)));
    } else if (answer !== null) {
      this.finish(exchange, answer);
    }
  }

  /**
   * Writes the answer and records the call. Never throws: it runs inside the node's apply
   * loop for submitted calls, and nothing a request does may stop that loop.
   */
  finish(exchange: Exchange, answer: Answer): void {
    const res = exchange.res;
    if (res instanceof UwsCall) res.releaseBody();
    exchange.releaseBody?.();
    if (exchange.submitted) {
      exchange.submitted = false;
      this.inFlight--;
      if (this.inFlight === 0) this.wakeDrainers();
    }
    try {
      const status = this.write(res, exchange, answer);
      this.record(exchange, answer, status, (performance.now() - exchange.startedMs) / 1000);
    } catch (error) {
      try {
        this.internalError(exchange, error);
        if (!res.completed) res.close();
      } catch {
        // The logger itself failed; there is nowhere left to report to.
      }
    }
    if (this.inFlight === 0) this.idlePoll.idle();
  }

  /**
   * Counts the call's body against the budget (body-budget.ts) until it is answered or its
   * client goes away; false when the call must be refused. A chunked body, of no declared
   * length, counts as the largest allowed.
   */
  private holdBody(exchange: Exchange, req: CallRequest): boolean {
    const res = exchange.res;
    if (res instanceof UwsCall) return res.holdBody();
    const chunked = (req.headers['transfer-encoding'] ?? '').includes('chunked');
    const declared = chunked ? this.deps.config.limits.maxBodyBytes
      : Math.min(Number(req.headers['content-length'] ?? 0) || 0,
        this.deps.config.limits.maxBodyBytes);
    if (declared <= 0) return true;
    if (!this.bodies.hold(declared)) return false;
    let held = true;
    const release = (): void => {
      if (!held) return;
      held = false;
      this.bodies.release(declared);
    };
    // hyper-express emits 'close' when the client goes away (and once an answer is written).
    (res as Response).once('close', release);
    exchange.releaseBody = release;
    return true;
  }

  private internalError(exchange: Exchange, error: unknown): KvError {
    const err = error instanceof Error ? error : new Error(String(error));
    this.deps.logger.error({ requestId: exchange.requestId, err: err.message, stack: err.stack },
      'request failed');
    return kvError('internal_error', 'internal_error',
      `an internal error; the node logged it under request id ${exchange.requestId}`);
  }

  /**
   * The answer to send now, or a Promise of it, or null once a KV route took the exchange
   * over (it finishes it itself, when the body is read and the node answered).
   */
  private answer(exchange: Exchange, req: CallRequest): Answer | null | Promise<Answer | null> {
    const route = exchange.route;
    if (this.stopping) return SHUTTING_DOWN;
    if (route === null) return NOT_FOUND;
    if (!route.methodAllowed) {
      return kvError('method_not_allowed', 'method_not_allowed',
        `${exchange.method} is not allowed here; allowed: ${route.allow}`);
    }
    const access = route.access;
    if (access !== null) {
      const verdict = this.deps.authenticator.authenticate(req.headers['authorization']);
      if (verdict instanceof Promise) {
        return verdict.then((auth) => this.denial(access, auth) ?? this.routed(exchange, route,
          req));
      }
      const denied = this.denial(access, verdict);
      if (denied !== null) return denied;
    }
    return this.routed(exchange, route, req);
  }

  /** The route's answer once the guards let the call through. */
  private routed(exchange: Exchange, route: RouteMatch,
    req: CallRequest): Answer | null | Promise<Answer | null> {
    switch (route.id) {
      case 'kvBatch':
      case 'kvPath':
      case 'transaction':
        this.kvRoute(exchange, route, req);
        return null;
      default:
        return this.otherRoute(exchange, route, req);
    }
  }

  private async otherRoute(exchange: Exchange, route: RouteMatch,
    req: CallRequest): Promise<Answer | null> {
    switch (route.id) {
      case 'kvBatch':
      case 'kvPath':
      case 'transaction':
        throw new Error(`assertion failed: ${route.id} is a KV route`);
      case 'kvTimers':
        return this.kvTimers(req);
      case 'kvQuota':
        return this.kvQuota(exchange.method, route.rest, req);
      case 'members':
      case 'member': {
        const body = exchange.method === 'POST' ? await readBody(req, MEMBERS_BODY_BYTES_MAX)
          : undefined;
        const answer = await answerMembers(this.deps.members, exchange.method, route.rest, body);
        return isKvError(answer) ? answer : reply(answer.body, answer.status);
      }
      case 'health': {
        const health = this.deps.service.health();
        return reply(JSON.stringify(health), health.status === 'ok' ? 200 : 503);
      }
      case 'metrics':
        return reply(await this.deps.metrics.render(), 200, this.deps.metrics.contentType);
      case 'kvTimersRead':
      case 'cluster':
      case 'tenants':
      case 'export':
      case 'console':
        return answerOperator(this.deps.operator, route, req.headers['if-none-match']);
    }
  }

  /** Authenticate (401), then authorize by the route's access level (403). */
  private denial(access: Access, auth: AuthResult): KvError | null {
    if (!auth.ok) return kvError('unauthorized', 'unauthorized', auth.detail);
    if (!this.deps.authenticator.allows(auth.roles, access)) {
      return kvError('forbidden', 'forbidden', `this route needs the ${access} access level`);
    }
    return null;
  }

  /**
   * The KV routes: tenant (400), body, validation (400/413), then the node. Takes the
   * exchange over: it is finished here, at once or once the body is read (most path-route
   * reads have none, and finish in this call).
   */
  private kvRoute(exchange: Exchange, route: RouteMatch, req: CallRequest): void {
    const resolved = this.deps.tenants.resolve(req.headers[TENANT_HEADER]);
    if (!resolved.ok) {
      this.finish(exchange, kvError('kv_bad_request', 'kv_bad_tenant', resolved.detail));
      return;
    }
    const tenant = resolved.tenant;
    exchange.tenant = tenant;
    readBodyBytes(req, this.deps.config.limits.maxBodyBytes, (body) => {
      let answer: Answer | null;
      try {
        answer = this.kvCall(exchange, route, req, tenant, body);
      } catch (error) {
        // This may run in the socket's data callback, which must never see it.
        answer = this.internalError(exchange, error);
      }
      if (answer !== null) this.finish(exchange, answer);
    });
  }

  /** A KV call with its body: parsed, refused, answered at once, or submitted (null). */
  private kvCall(exchange: Exchange, route: RouteMatch, req: CallRequest, tenant: string,
    body: Uint8Array | KvError | undefined): Answer | null {
    if (isKvError(body)) return body;
    const frame = this.frameOf(exchange, route, req, tenant, body ?? null);
    // Parsed and validated once, by the machine, into the bytes the log entry carries.
    const parsed = this.deps.service.parse(frame);
    if (parsed.kind === 'refused') {
      return parsed.status === 413 ? tooLarge(parsed.reason, parsed.detail)
        : badRequest(parsed.reason, parsed.detail);
    }
    const wire: Wire = route.id === 'transaction' ? 'transaction' : 'kv';
    if (parsed.opCount === 0 && wire === 'kv') return reply(EMPTY_RESULTS);
    let command = parsed.command;
    // Only a write call is keyed; a read-only call ignores the header.
    const key = parsed.hasWrites ? req.headers[IDEMPOTENCY_HEADER] : undefined;
    if (key !== undefined) {
      const keyed = keyedOrRefused(command, key, this.deps.config.idempotencyTtlSeconds);
      if (isKvError(keyed)) return keyed;
      command = keyed;
    }
    return this.submit(exchange, { tenant, hasWrites: parsed.hasWrites, command,
      growthBytes: parsed.growthBytes, empty: parsed.opCount === 0,
      transactionId: frame.transactionId ?? null }, wire);
  }

  private frameOf(exchange: Exchange, route: RouteMatch, req: CallRequest, tenant: string,
    body: Uint8Array | null): RequestFrame {
    const requireGrant = this.deps.config.requireGrant;
    if (route.id === 'kvBatch') return { route: 'batch', body, tenant, requireGrant };
    if (route.id === 'kvPath') {
      const slash = route.rest.indexOf('/');
      return { route: 'path', method: exchange.method as PathMethod,
        hasQuery: req.path_query !== undefined, body, tenant, requireGrant,
        rawNs: route.rest.slice(0, slash), rawKey: route.rest.slice(slash + 1) };
    }
    return { route: 'transaction', body, tenant, requireGrant, transactionId: randomUUID() };
  }

  /**
   * Refusals decided here (pause, grant, rate), else hands the call to the node with the
   * exchange as its sink; in flight (for drain) until the node answers.
   */
  private submit(exchange: Exchange, call: SubmittedCall & { readonly empty: boolean;
    readonly transactionId: string | null }, wire: Wire): Answer | null {
    const refused = this.refuseBeforeLog(call, wire);
    if (refused !== null) return refused;
    if (call.empty) return reply(renderEmptyTransaction(call.transactionId ?? randomUUID()));
    this.inFlight++;
    exchange.submitted = true;
    this.deps.service.submit(call, exchange);
    return null;
  }

  /**
   * Pause (503, 403 in the transaction wire), grant (403), rate (429), on this node's local
   * view; the log decides again at apply time (WIRE.md, "Refusals").
   */
  private refuseBeforeLog(call: SubmittedCall, wire: Wire): KvError | null {
    const service = this.deps.service;
    if (service.isPausedLocally()) {
      return kvError('kv_disabled', 'kv_disabled', 'KV is paused by the operator',
        { wire, retryAfterSeconds: 1 });
    }
    const hasWrite = call.hasWrites;
    const quota = service.quotaLocally(call.tenant);
    if (hasWrite && this.deps.config.requireGrant && (quota === null || !quota.enabled)) {
      return kvError('feature_gated', 'feature_gated',
        'this tenant has no enabled KV grant; writes need one');
    }
    if (wire === 'transaction') return null;
    const override = quota === null ? null
      : { readsPerSec: quota.maxReadsPerSec, writesPerSec: quota.maxWritesPerSec };
    const decision = this.deps.rateLimiter.take(call.tenant, hasWrite ? 'write' : 'read',
      override);
    if (!decision.ok) {
      return kvError('rate_limited', 'rate_limited',
        `the tenant's ${hasWrite ? 'write' : 'read'} rate on this node is spent`,
        { retryAfterSeconds: decision.retryAfterSeconds });
    }
    return null;
  }

  private async kvTimers(req: CallRequest): Promise<Answer> {
    const text = await readBody(req, this.deps.config.limits.maxBodyBytes);
    if (isKvError(text)) return text;
    const run = validateTimersBody(parseJsonBody(text ?? ''));
    if (isKvError(run)) return run;
    const result = await this.deps.service.setPaused(!run);
    if (result.kind === 'unavailable') return unavailable(result);
    return reply('{"kv":' + run + '}');
  }

  private async kvQuota(method: string, rawTenant: string, req: CallRequest): Promise<Answer> {
    const tenant = validateTenantSegment(rawTenant);
    if (isKvError(tenant)) return tenant;
    if (method === 'GET') {
      const view = await this.deps.service.getQuota(tenant);
      if (view.kind === 'unavailable') return unavailable(view);
      return reply(JSON.stringify(view.value));
    }
    const text = await readBody(req, this.deps.config.limits.maxBodyBytes);
    if (isKvError(text)) return text;
    const quota = validateQuotaSettings(parseJsonBody(text ?? ''));
    if (isKvError(quota)) return quota;
    const result = await this.deps.service.setQuota(tenant, quota);
    if (result.kind === 'unavailable') return unavailable(result);
    return reply(JSON.stringify({ tenant, quota }));
  }

  private write(res: CallResponse, exchange: Exchange, answer: Answer): number {
    if (res.completed) return answer.status;
    // A HEAD answer must carry no body: bytes after it would corrupt a keep-alive stream.
    const bodyless = exchange.method === 'HEAD';
    // uWebSockets answers 200 OK unless told otherwise; a status set through hyper-express is
    // a string built per call ("200 OK") and converted to UTF-8 by uWebSockets.
    if (answer.status !== 200) res.status(answer.status);
    if (exchange.clientRequestId === null && res instanceof UwsCall) {
      res.headerNow('x-request-id', this.requestIds.bytes(exchange.requestNumber));
    } else {
      res.header('x-request-id', exchange.requestId);
    }
    if (answer instanceof KvError) {
      res.header('content-type', JSON_TYPE);
      if (answer.retryAfterSeconds !== null) {
        res.header('retry-after', String(answer.retryAfterSeconds));
      }
      if (answer.status === 405 && exchange.route !== null) {
        res.header('allow', exchange.route.allow);
      }
      this.sendBody(res, bodyless ? '' : errorBody(answer));
    } else {
      res.header('content-type', answer.contentType);
      if (answer.etag !== null) res.header('etag', answer.etag);
      const retryAfter = answer.retryAfterSeconds ?? null;
      if (retryAfter !== null) res.header('retry-after', String(retryAfter));
      const headers = answer.headers ?? null;
      if (headers !== null) for (const name in headers) res.header(name, headers[name]!);
      if (answer.stream !== undefined && !bodyless) {
        if (res instanceof UwsCall) {
          throw new Error('assertion failed: a streamed answer on the KV routes\' direct path');
        }
        streamBody(res as Response, answer.stream,
          (error) => this.internalError(exchange, error));
      } else {
        // uWebSockets sends any typed array's bytes; hyper-express's type names only Buffer,
        // and a Buffer over the machine's answer would cost a call into C++ to make.
        this.sendBody(res, bodyless ? '' : answer.body as Buffer);
      }
    }
    return answer.status;
  }

  /** Every answer goes out with `tryEnd`, its unsent part within the budget (answer-budget.ts). */
  private sendBody(res: CallResponse, body: string | Uint8Array): void {
    if (res instanceof UwsCall) {
      res.send(body);
    } else {
      sendWithinBudget(res as Response, body, this.answers);
    }
  }

  private record(exchange: Exchange, answer: Answer, status: number, seconds: number): void {
    const label = exchange.route === null ? 'unmatched' : exchange.route.label;
    // Only the methods a route takes become labels: any other spelling would be unbounded.
    const method = exchange.route?.methodAllowed === true ? exchange.method : 'OTHER';
    this.deps.metrics.observeRequest(label, method, status, seconds);
    const reason = answer instanceof KvError ? answer.reason : answer.refusalReason ?? null;
    if (reason !== null) this.deps.metrics.refusal(reason);
    const logger = this.deps.logger;
    if (status < 500 && logger.debugEnabled === false) return;
    const fields = {
      requestId: exchange.requestId,
      method: exchange.method,
      route: label,
      status,
      ms: Math.round(seconds * 1e6) / 1e3,
      tenant: exchange.tenant,
      reason,
    };
    if (answer instanceof KvError && answer.error === 'internal_error') {
      // A machine-refused command is a host bug: its detail belongs in the log.
      this.deps.logger.error({ ...fields, detail: answer.detail }, 'request');
    } else if (status >= 500) {
      this.deps.logger.warn(fields, 'request');
    } else {
      // One JSON line per call costs about as much as the call itself at full load, so
      // answered calls are logged at debug; 5xx answers always reach the log.
      this.deps.logger.debug(fields, 'request');
    }
  }

  drain(timeoutMs: number): Promise<void> {
    if (this.inFlight === 0) return Promise.resolve();
    const waitMs = Math.max(0, Math.min(timeoutMs, DRAIN_TIMEOUT_MS_MAX));
    return new Promise((resolve) => {
      const timer = setTimeout(done, waitMs);
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
      this.drainWaiters.push(done);
    });
  }

  private wakeDrainers(): void {
    if (this.drainWaiters.length === 0) return;
    const waiters = this.drainWaiters;
    this.drainWaiters = [];
    for (const wake of waiters) wake();
  }
}

/**
 * The machine's answer as a reply, its body a view of the machine's memory (sent at once,
 * so never copied). A refusal decided when the entry applied (paused, no grant, over quota)
 * names its reason in its body, read back for metrics.
 */
function machineReply(header: AnswerHeader, body: Uint8Array): Reply {
  const etag = header.etagVersion === null ? null : '"' + header.etagVersion + '"';
  return { status: header.status, body, contentType: JSON_TYPE, etag,
    retryAfterSeconds: header.retryAfterSeconds,
    refusalReason: header.status === 200 ? null : reasonIn(body),
    headers: header.replayed === true ? REPLAYED_HEADERS : null };
}

function reasonIn(body: Uint8Array): string {
  try {
    const parsed = JSON.parse(Buffer.from(body.buffer, body.byteOffset, body.byteLength)
      .toString('utf8')) as { reason?: unknown };
    return typeof parsed.reason === 'string' ? parsed.reason : 'unknown';
  } catch {
    return 'unknown';
  }
}

function unavailable(result: { reason: string; detail: string;
  retryAfterSeconds: number }): KvError {
  return kvError('kv_unavailable', result.reason, result.detail,
    { retryAfterSeconds: result.retryAfterSeconds });
}

/**
 * The request body as text, undefined when there is none, or 413 `kv_body_too_large` over
 * `maxBytes`: a declared length is refused before a byte is read, a chunked body as soon as
 * it crosses the limit; the rest of it is then drained, not buffered.
 */
function readBody(req: CallRequest,
  maxBytes: number): Promise<string | KvError | undefined> {
  return new Promise((resolve) => {
    readBodyBytes(req, maxBytes, (bytes) => resolve(bytes === undefined ? bytes : utf8(bytes)));
  });
}

type BodyDone = BodyDoneOf<KvError>;

/**
 * `readBody`'s bytes, as they came (the KV routes hand them to the machine's parser), to
 * `done`: in this call when there is no body to wait for, else in the callback that
 * delivers its last bytes.
 */
function readBodyBytes(req: CallRequest, maxBytes: number, done: BodyDone): void {
  if (req instanceof UwsCall) {
    // Taken only with a declared length within the limit (uws-call.ts).
    req.readBody(done);
    return;
  }
  const hyperRequest = req as Request;
  const chunked = (req.headers['transfer-encoding'] ?? '').includes('chunked');
  if (!chunked) {
    const length = req.headers['content-length'];
    if (length === undefined || length === '0') {
      done(undefined);
      return;
    }
    const declared = Number(length);
    if (!(declared <= maxBytes)) {
      done(bodyTooLarge(maxBytes));
      return;
    }
    readSized(hyperRequest, declared, done);
    return;
  }
  readChunked(hyperRequest, maxBytes, done);
}

function utf8(bytes: Uint8Array | KvError): string | KvError {
  return isKvError(bytes) ? bytes
    : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8');
}

function bodyTooLarge(maxBytes: number): KvError {
  return tooLarge('kv_body_too_large', `the body is over ${maxBytes} bytes`);
}

/**
 * hyper-express 6.17.3 internals used for chunked bodies: its public streaming mode never
 * delivers a chunked body here, and its own limit answers an empty 413. These are the same
 * members its `buffer()` uses; `assertChunkedSeam` checks at startup that they exist.
 */
interface BodyParserInternals {
  /** Chunks received before a mode was chosen; undefined when no body is being read. */
  _body_parser_buffered: Uint8Array[] | undefined;
  _body_parser_mode: number;
  _body_parser_passthrough: (chunk: Uint8Array, isLast: boolean) => void;
  _body_parser_flush_buffered(): void;
}

/** Fails fast at startup if a hyper-express upgrade moved the seam `readChunked` uses. */
function assertChunkedSeam(): void {
  const proto = (HyperExpress.Request as unknown as { prototype: Partial<BodyParserInternals> })
    .prototype;
  if (typeof proto._body_parser_flush_buffered !== 'function') {
    throw new Error('hyper-express changed: Request._body_parser_flush_buffered is missing');
  }
}

/**
 * A body of a declared length, copied once from the socket's chunks into a buffer of that
 * length. hyper-express's own `buffer()` made a fresh `Uint8Array` for every body, then
 * copied it into a Buffer, through two Promises: 2 to 3 µs a call on this path.
 */
function readSized(req: Request, declared: number, done: BodyDone): void {
  const parser = req as unknown as BodyParserInternals;
  if (parser._body_parser_buffered === undefined) {
    // hyper-express reads every body of a content-length above 0; this one it did not.
    done(kvError('internal_error', 'internal_error', `a body of ${declared} bytes was not read`));
    return;
  }
  const body = bodySlabs.take(declared);
  let received = 0;
  let settled = false;
  parser._body_parser_mode = 1;
  parser._body_parser_passthrough = (chunk, isLast) => {
    if (settled) return;
    if (received + chunk.length > declared) {
      // uWebSockets ends a body at its content-length; more would be a bug beneath us.
      settled = true;
      done(kvError('internal_error', 'internal_error',
        `the body ran past its content-length of ${declared} bytes`));
      return;
    }
    // The chunk is uWebSockets' own memory, valid only during this call: copied now.
    body.set(chunk, received);
    received += chunk.length;
    if (isLast) {
      settled = true;
      markReceived(req);
      done(received === declared ? body : body.subarray(0, received));
    }
  };
  parser._body_parser_flush_buffered();
}

/**
 * hyper-express marks a request received only after its last chunk's callback returns, and
 * a response sent before that waits for an event it emits only to streams: an answer sent
 * from the callback (a read, a refusal) would never leave. The body is whole here.
 */
function markReceived(req: Request): void {
  (req as unknown as { received: boolean }).received = true;
}

function readChunked(req: Request, maxBytes: number, done: BodyDone): void {
  const parser = req as unknown as BodyParserInternals;
  // hyper-express reads a chunked body only when `transfer-encoding` is exactly `chunked`;
  // any other spelling leaves it unread, and it answers as an empty body. A body it did read
  // may have arrived whole while the call waited (for a token's first verification): its
  // chunks wait in the buffer, which the flush below hands over, the last one marked last.
  if (parser._body_parser_buffered === undefined) {
    done(Buffer.alloc(0));
    return;
  }
  const chunks: Buffer[] = [];
  let receivedBytes = 0;
  let settled = false;
  parser._body_parser_mode = 1;
  parser._body_parser_passthrough = (chunk, isLast) => {
    if (settled) return;
    receivedBytes += chunk.byteLength;
    if (receivedBytes > maxBytes) {
      // Answered once the rest has arrived (hyper-express holds the answer until then).
      settled = true;
      done(bodyTooLarge(maxBytes));
      return;
    }
    // hyper-express copies chunks of a chunked transfer, so they outlive this callback.
    chunks.push(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength));
    if (isLast) {
      settled = true;
      markReceived(req);
      done(Buffer.concat(chunks, receivedBytes));
    }
  };
  parser._body_parser_flush_buffered();
}
