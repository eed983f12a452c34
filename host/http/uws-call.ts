/**
 * A KV call read and answered on uWebSockets.js itself, beneath hyper-express.
 *
 * hyper-express wraps every request in a `Request` and a `Response` (two objects of twenty
 * fields, a header object filled from every header, three closures, the answer's headers in
 * a table walked again to write them): about 4,500 instructions of a put's 98,000 and 3,900
 * of a get's 56,000 (docs/performance.md, "A call beneath hyper-express"). The KV routes are
 * the hot path, so they are registered on the server's own uWebSockets app (`uws_instance`),
 * where a call is one `UwsCall`: the request's fields, the few headers the HTTP layer reads,
 * the body read where uWebSockets delivered it when it came in one piece (else copied once
 * into a buffer of its declared length), and the answer written in one
 * cork.
 *
 * Only calls this path serves exactly as hyper-express would are taken: a body of a declared
 * length within the limit, or none. Anything else (a chunked body, a length over the limit
 * or not a plain number) is handed back to uWebSockets' router (`setYield`), which passes it
 * to the hyper-express route behind, with its own readers and refusals.
 *
 * The I/O edge: no decision is made here; `server.ts` decides, through the same `serve` for
 * both paths.
 */
import { STATUS_CODES } from 'node:http';
import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import { Slabs } from '../core/slabs.js';
import type { AnswerBudget, WaitingAnswer } from './answer-budget.js';
import type { BodyBudget, Upload } from './body-budget.js';

/** The request headers the HTTP layer reads: only these are kept from a direct call. */
export type CallHeaderName = keyof CollectedHeaders;
export type CallHeaders = { readonly [name in CallHeaderName]?: string | undefined };

/** What the HTTP layer reads of a request, on either path (hyper-express's `Request` too). */
export interface CallRequest {
  /** Upper case, `DELETE` spelled out. */
  readonly method: string;
  /** The raw path, still percent-encoded, without the query. */
  readonly path: string;
  /** The text after `?`, or undefined when the URL has none. */
  readonly path_query: string | undefined;
  readonly headers: CallHeaders;
}

/** What the HTTP layer does to a response, on either path (hyper-express's `Response` too). */
export interface CallResponse {
  /** True once answered, or once the client went away. */
  readonly completed: boolean;
  status(code: number): unknown;
  header(name: string, value: string): unknown;
  /** Any typed array's bytes are sent (hyper-express's type names only Buffer). */
  send(body: string | Buffer): unknown;
  close(): unknown;
}

/**
 * What a body reader hands on: the body, a refusal, or undefined when none was sent. The
 * bytes are valid only during the call (on the direct path they may be uWebSockets' own
 * memory): a reader copies what it keeps.
 */
export type BodyDone<Refusal> = (body: Uint8Array | Refusal | undefined) => void;

/**
 * Bodies of a declared length live for one call: cut from slabs of their own (slabs.ts), a
 * body of 8 KiB or more its own allocation. Both paths' readers take from it.
 */
export const bodySlabs = new Slabs();

/**
 * The methods the direct path takes, each on a route of its own (server.ts), so a call's
 * method is known from its route: uWebSockets would make a new string of it for every call.
 * Any other method goes on to hyper-express's catch-all.
 */
export type DirectMethod = 'GET' | 'PUT' | 'POST' | 'DELETE';

/** `"404 Not Found"` for each status, built once: uWebSockets writes the line as given. */
const statusLines = new Map<number, string>();

function statusLine(code: number): string {
  let line = statusLines.get(code);
  if (line === undefined) {
    line = `${code} ${STATUS_CODES[code] ?? 'Unknown'}`;
    statusLines.set(code, line);
  }
  return line;
}

/** Digits in a declared length this path takes: more could not be a safe integer. */
const PLAIN_LENGTH_DIGITS_MAX = 15;

/**
 * A declared length uWebSockets and this path agree on (digits only, no sign or space), or
 * NaN. A loop, not a regular expression: it runs for every call with a body.
 */
function plainLength(text: string): number {
  if (text.length === 0 || text.length > PLAIN_LENGTH_DIGITS_MAX) return Number.NaN;
  let value = 0;
  for (let i = 0; i < text.length; i++) {
    const digit = text.charCodeAt(i) - 48;
    if (digit < 0 || digit > 9) return Number.NaN;
    value = value * 10 + digit;
  }
  return value;
}

/**
 * The headers a direct call keeps of those `forEach` shows it: one object shape for every
 * call, a field for each header the HTTP layer reads (its type names them, so a read of any
 * other does not compile).
 */
class CollectedHeaders {
  authorization: string | undefined = undefined;
  'content-length': string | undefined = undefined;
  'idempotency-key': string | undefined = undefined;
  'if-none-match': string | undefined = undefined;
  'transfer-encoding': string | undefined = undefined;
  'x-queen-tenant': string | undefined = undefined;
  'x-request-id': string | undefined = undefined;
}

/** Where `collectHeader` writes: `forEach` runs it at once, so one slot serves every call. */
let collecting = new CollectedHeaders();

/** Keeps the headers `CollectedHeaders` names, found by comparing names (no hash of each). */
function collectHeader(name: string, value: string): void {
  switch (name) {
    case 'authorization': collecting.authorization = value; break;
    case 'content-length': collecting['content-length'] = value; break;
    case 'idempotency-key': collecting['idempotency-key'] = value; break;
    case 'if-none-match': collecting['if-none-match'] = value; break;
    case 'transfer-encoding': collecting['transfer-encoding'] = value; break;
    case 'x-queen-tenant': collecting['x-queen-tenant'] = value; break;
    case 'x-request-id': collecting['x-request-id'] = value; break;
    default: break;
  }
}

/** `text` as UTF-8, in an ArrayBuffer of its own. */
function utf8Bytes(text: string): ArrayBuffer {
  const bytes = Buffer.from(text, 'utf8');
  return bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length);
}

/**
 * The header names the HTTP layer writes on every answer, and the value it writes on nearly
 * every one, as UTF-8 made once. uWebSockets converts a string argument to UTF-8 on every
 * call (its length, then its bytes, into an allocation of its own: about 520 instructions a
 * string) and takes an ArrayBuffer's bytes as they are (about 180). Picked by a `switch` on
 * the names the callers pass as literals, and one comparison for the value: a `Map` lookup
 * hashes each fresh string (a request id, an ETag) and cost what the bytes saved.
 */
const X_REQUEST_ID = utf8Bytes('x-request-id');
const CONTENT_TYPE = utf8Bytes('content-type');
const ETAG = utf8Bytes('etag');
export const JSON_TYPE = 'application/json';
const JSON_TYPE_BYTES = utf8Bytes(JSON_TYPE);

function headerName(name: string): string | ArrayBuffer {
  switch (name) {
    case 'x-request-id': return X_REQUEST_ID;
    case 'content-type': return CONTENT_TYPE;
    case 'etag': return ETAG;
    default: return name;
  }
}

/** The call `writeCorked` answers: cork runs it at once, so one slot serves every call. */
let writing: UwsCall | null = null;

function writeCorked(): void {
  const call = writing!;
  const res = call.res;
  if (call.statusCode !== 200) res.writeStatus(statusLine(call.statusCode));
  const headers = call.responseHeaders;
  for (let i = 0; i < headers.length; i += 2) {
    const value = headers[i + 1]!;
    res.writeHeader(headerName(headers[i] as string), value === JSON_TYPE ? JSON_TYPE_BYTES
      : value);
  }
  // tryEnd, not end: an answer the socket cannot take waits in this call, within the budget,
  // rather than in a buffer of uWebSockets' that grows with every request pipelined after it
  // (answer-budget.ts).
  const body = call.answerBody ?? '';
  const total = typeof body === 'string' ? Buffer.byteLength(body) : body.byteLength;
  const [, done] = res.tryEnd(body, total);
  if (!done) call.waitForReader(body, total);
}

export class UwsCall implements CallRequest, CallResponse, Upload {
  readonly method: string;
  readonly path: string;
  readonly path_query: string | undefined;
  readonly headers: CallHeaders;

  completed = false;
  statusCode = 200;
  /** Name, value, name, value: written in the order they were set. */
  readonly responseHeaders: Array<string | ArrayBuffer> = [];
  /** The answer, kept while the body still arrives (written once it has). */
  answerBody: string | Uint8Array | null = null;

  /**
   * The body's buffer while it arrives in more than one chunk (made at the first); null
   * before, and when the call has none.
   */
  private body: Uint8Array | null = null;
  /** The body's declared length. */
  private readonly declared: number;
  private received = 0;
  private bodyWhole: boolean;
  private bodyDone: BodyDone<never> | null = null;
  /** An answer waits for the body's last bytes (hyper-express waits as well). */
  private answerWaits = false;
  /** The part of the answer the socket has not taken yet, and where it starts. */
  private unsent: Buffer | null = null;
  private unsentFrom = 0;
  private answerBytes = 0;
  private waiting: WaitingAnswer | null = null;
  /** Bytes of the body-budget this call holds (its declared length), until answered or gone. */
  bodyBytesHeld = 0;
  /** When the body's last bytes came (body-budget.ts, `Upload`), while it is arriving. */
  progressAtMs = 0;

  private constructor(readonly res: HttpResponse, req: HttpRequest, method: DirectMethod,
    headers: CallHeaders, declared: number, private readonly budget: AnswerBudget,
    private readonly bodies: BodyBudget) {
    this.method = method;
    this.path = req.getUrl();
    this.path_query = req.getQuery() as string | undefined;
    this.headers = headers;
    this.declared = declared;
    this.bodyWhole = declared === 0;
    if (declared !== 0) res.onData((chunk, isLast) => this.onChunk(chunk, isLast));
  }

  /**
   * The call if this path serves it, else null once the router was told to look further
   * (`setYield`): nothing of the response was touched, so the route behind gets it whole.
   */
  static accept(res: HttpResponse, req: HttpRequest, method: DirectMethod,
    maxBodyBytes: number, budget: AnswerBudget, bodies: BodyBudget): UwsCall | null {
    const headers = new CollectedHeaders();
    collecting = headers;
    req.forEach(collectHeader);
    let declared = 0;
    if (headers['transfer-encoding'] !== undefined) {
      req.setYield(true);
      return null;
    }
    const length = headers['content-length'];
    if (length !== undefined) {
      declared = plainLength(length);
      if (!(declared <= maxBodyBytes)) {
        req.setYield(true);
        return null;
      }
    }
    return new UwsCall(res, req, method, headers, declared, budget, bodies);
  }

  /**
   * Called as the route's handler returns. uWebSockets must be told how to report a client
   * that goes away before its answer: a call still open gets an abort handler now. A call
   * answered within the handler (a read on a leader that needs no round, a refusal) needs
   * none, and takes no closure and no pair of V8 handles for it.
   */
  watchAbortIfOpen(): void {
    if (this.completed) return;
    this.res.onAborted(() => {
      this.completed = true;
      this.body = null;
      this.releaseBody();
    });
  }

  /**
   * Counts the body's declared length against the budget (body-budget.ts): true when it may
   * be read, false when the call must be refused. Called as the call arrives, before a byte
   * of the body is kept.
   */
  holdBody(): boolean {
    if (this.declared === 0) return true;
    if (!this.bodies.hold(this.declared, this.bodyWhole ? undefined : this)) return false;
    this.bodyBytesHeld = this.declared;
    return true;
  }

  /** Gives the body's bytes back to the budget; once answered, or once the client is gone. */
  releaseBody(): void {
    const held = this.bodyBytesHeld;
    if (held === 0) return;
    this.bodyBytesHeld = 0;
    this.bodies.release(held, this);
  }

  /** The body budget closes this call: its upload stalled while another body needed room. */
  evict(): void {
    this.releaseBody();
    this.close();
  }

  /**
   * The body to `done`: in this call if it has arrived (or there is none), else in the data
   * callback that brings its last bytes. Its length was checked against the limit before the
   * call was taken; once the client has gone, `done` is never called.
   */
  readBody(done: BodyDone<never>): void {
    if (this.bodyWhole) {
      done(this.body ?? undefined);
      return;
    }
    this.bodyDone = done;
  }

  status(code: number): this {
    this.statusCode = code;
    return this;
  }

  header(name: string, value: string): this {
    this.responseHeaders.push(name, value);
    return this;
  }

  /**
   * A header whose value is bytes the caller rewrites after this call's answer is written
   * (request-ids.ts): kept as they are when the answer is written before the next call's,
   * copied when it waits for the rest of the body.
   */
  headerNow(name: string, value: ArrayBuffer): this {
    this.responseHeaders.push(name, this.bodyWhole ? value : value.slice(0));
    return this;
  }

  send(body: string | Uint8Array): this {
    if (this.completed) return this;
    if (!this.bodyWhole) {
      // Answered before the body arrived whole (a refusal by its headers): written once it
      // has, so the connection reads the next request where it starts. A body held by the
      // machine's memory is copied, since the answer outlives this call.
      this.answerBody = typeof body === 'string' ? body : Buffer.from(body);
      this.answerWaits = true;
      this.body = null;
      this.bodyDone = null;
      return this;
    }
    this.completed = true;
    this.answerBody = body;
    writing = this;
    try {
      this.res.cork(writeCorked);
    } finally {
      writing = null;
      this.answerBody = null;
    }
    return this;
  }

  /**
   * The socket took part of the answer: the rest is copied (the answer may be the machine's
   * memory) and written as the socket drains, or the connection is closed when the budget
   * has no room for it. Runs in the cork that wrote the first part.
   */
  waitForReader(body: string | Uint8Array, total: number): void {
    const offset = this.res.getWriteOffset();
    const bytes = typeof body === 'string' ? Buffer.from(body) : body;
    const unsent = Buffer.from(bytes.subarray(offset));
    const waiting = this.budget.admit(unsent.byteLength, () => this.res.close());
    if (waiting === null) {
      this.res.close();
      return;
    }
    this.waiting = waiting;
    this.unsent = unsent;
    this.unsentFrom = offset;
    this.answerBytes = total;
    this.res.onWritable((at) => this.writeUnsent(at));
    this.res.onAborted(() => this.releaseUnsent());
  }

  private writeUnsent(offset: number): boolean {
    const unsent = this.unsent;
    if (unsent === null) return true;
    const [ok, done] = this.res.tryEnd(unsent.subarray(offset - this.unsentFrom),
      this.answerBytes);
    if (done) {
      this.releaseUnsent();
    } else {
      this.budget.progressed(this.waiting!, this.answerBytes - this.res.getWriteOffset());
    }
    return ok;
  }

  private releaseUnsent(): void {
    const waiting = this.waiting;
    this.unsent = null;
    this.waiting = null;
    if (waiting !== null) this.budget.release(waiting);
  }

  close(): this {
    if (!this.completed) {
      this.completed = true;
      this.res.close();
    }
    return this;
  }

  private onChunk(chunk: ArrayBuffer, isLast: boolean): void {
    if (this.completed) return;
    if (this.received + chunk.byteLength > this.declared) {
      // uWebSockets ends a body at its content-length; more would be a bug beneath us, and
      // a connection whose framing is in doubt is closed rather than read further.
      this.close();
      return;
    }
    const done = this.bodyDone;
    if (isLast && this.received === 0 && done !== null) {
      // The whole body in one chunk, its reader waiting: the reader takes what it needs of
      // the bytes before it returns (server.ts parses them into the machine's memory), so
      // it reads uWebSockets' own memory, valid for this call, and nothing is copied.
      this.received = chunk.byteLength;
      this.bodyWhole = true;
      this.bodyDone = null;
      this.bodies.arrived(this);
      done(new Uint8Array(chunk));
      return;
    }
    if (isLast) this.bodies.arrived(this);
    else this.progressAtMs = this.bodies.nowMs();
    // An answer that went out before the body has no use for its bytes.
    if (!this.answerWaits) {
      const body = this.body ?? (this.body = bodySlabs.take(this.declared));
      // The chunk is uWebSockets' own memory, valid only during this call: copied now.
      body.set(new Uint8Array(chunk), this.received);
    }
    this.received += chunk.byteLength;
    if (!isLast) return;
    this.bodyWhole = true;
    if (this.answerWaits) {
      this.answerWaits = false;
      const answer = this.answerBody!;
      this.answerBody = null;
      this.send(answer);
      return;
    }
    const body = this.body;
    if (done !== null) {
      this.bodyDone = null;
      done(body === null ? new Uint8Array(0)
        : this.received === body.length ? body : body.subarray(0, this.received));
    }
  }
}
