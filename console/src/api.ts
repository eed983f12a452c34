/**
 * Every call the console makes goes through here, to the node that served it (same origin,
 * so the page's policy allows nothing else). A refusal keeps the envelope the node sent,
 * `{error, reason, detail}`, with its status, so every view can show it as it came; a node
 * that does not answer becomes a refusal too (`error: "unreachable"`), never an exception.
 */

/** A call the node (or the network) refused. */
export interface Refusal {
  readonly status: number;
  readonly error: string;
  readonly reason: string;
  readonly detail: string;
}

export type Outcome<T> =
  | { readonly ok: true; readonly value: T }
  | { readonly ok: false; readonly refusal: Refusal };

/** What the console learns from `/console/settings.json` before its first call. */
export interface Settings {
  readonly node: string;
  readonly jwt: boolean;
  readonly tenancy: boolean;
  readonly defaultTenant: string;
  readonly prefixLimit: number;
}

/** A call waits this long at most; the node answers 503 after its own 5 s. */
const CALL_TIMEOUT_MS = 8000;

export interface CallOptions {
  /** `x-queen-tenant`, when tenancy is on and a tenant is picked. */
  readonly tenant?: string;
}

function envelopeOf(status: number, body: unknown, text: string): Refusal {
  if (typeof body === 'object' && body !== null) {
    const b = body as Record<string, unknown>;
    if (typeof b['error'] === 'string') {
      return {
        status,
        error: b['error'],
        reason: typeof b['reason'] === 'string' ? b['reason'] : b['error'],
        detail: typeof b['detail'] === 'string' ? b['detail'] : '',
      };
    }
  }
  return { status, error: 'bad_answer', reason: 'bad_answer',
    detail: `HTTP ${status}: ${text.slice(0, 200)}` };
}

/** Calls the node. `onUnauthorized` hears every 401, so the shell can ask for a token. */
export class Api {
  constructor(
    private readonly token: string | null,
    private readonly onUnauthorized: (refusal: Refusal) => void,
  ) {}

  async call<T>(method: string, path: string, body?: unknown,
    options: CallOptions = {}): Promise<Outcome<T>> {
    const headers: Record<string, string> = { accept: 'application/json' };
    if (this.token !== null) headers['authorization'] = `Bearer ${this.token}`;
    if (options.tenant !== undefined && options.tenant !== '') {
      headers['x-queen-tenant'] = options.tenant;
    }
    if (body !== undefined) headers['content-type'] = 'application/json';
    let response: Response;
    let text: string;
    try {
      response = await fetch(path, {
        method, headers, cache: 'no-store', credentials: 'omit',
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(CALL_TIMEOUT_MS),
      });
      text = await response.text();
    } catch (error) {
      return { ok: false, refusal: { status: 0, error: 'unreachable', reason: 'unreachable',
        detail: `the node did not answer: ${error instanceof Error ? error.message : error}` } };
    }
    let parsed: unknown;
    try {
      parsed = text === '' ? undefined : JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    if (response.ok && parsed !== undefined) return { ok: true, value: parsed as T };
    const refusal = envelopeOf(response.status, parsed, text);
    if (response.status === 401) this.onUnauthorized(refusal);
    return { ok: false, refusal };
  }

  /** `/metrics` as text: it needs no token and is not JSON. */
  async metricsText(): Promise<Outcome<string>> {
    try {
      const response = await fetch('/metrics', { cache: 'no-store', credentials: 'omit',
        signal: AbortSignal.timeout(CALL_TIMEOUT_MS) });
      const text = await response.text();
      if (response.ok) return { ok: true, value: text };
      return { ok: false, refusal: envelopeOf(response.status, undefined, text) };
    } catch (error) {
      return { ok: false, refusal: { status: 0, error: 'unreachable', reason: 'unreachable',
        detail: `the node did not answer: ${error instanceof Error ? error.message : error}` } };
    }
  }

  /** One KV operation through `POST /api/v1/kv`; the value is its result element. */
  async kv<T>(operation: Record<string, unknown>, tenant?: string): Promise<Outcome<T>> {
    const answer = await this.call<{ results: T[] }>('POST', '/api/v1/kv',
      { operations: [operation] }, tenant === undefined ? {} : { tenant });
    if (!answer.ok) return answer;
    const result = answer.value.results?.[0];
    if (result === undefined) {
      return { ok: false, refusal: { status: 200, error: 'bad_answer', reason: 'bad_answer',
        detail: 'the node answered no result' } };
    }
    return { ok: true, value: result };
  }
}

/** The console's settings, or a refusal when the node does not serve them. */
export async function loadSettings(): Promise<Outcome<Settings>> {
  return new Api(null, () => undefined).call<Settings>('GET', '/console/settings.json');
}
