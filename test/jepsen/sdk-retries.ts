/**
 * Clients retrying through the SDK (`hivekv/client`) during the fault run: each call is an
 * `incr` of one of a few shared counters with its own `Idempotency-Key`, which the client
 * keeps across its retries (timeouts, 503s, connection errors, on the next node). A call the
 * client gave up on has an unknown outcome; after the cluster heals, each of those is sent
 * again with the same key, until it is answered (applied now, or replayed from its record).
 * Then every call was counted exactly once or the cluster applied one twice: each counter
 * must equal the number of calls made on it, no more and no less.
 */
import { createClient, isHivekvError, type HivekvClient } from '../../host/client/index.js';
import type { Verdict } from './checkers.js';

const NAMESPACE = 'jepsen-sdk';
const COUNTERS = 4;
/** Bound on the settling rounds after the heal (each resends every call still unknown). */
const SETTLE_ROUNDS_MAX = 20;
/**
 * Bound on the settling in time. A call that stays unknown through the client's retries
 * (about 20 s) ends its round: a cluster that does not serve after the heal would otherwise
 * be asked once per call, hundreds of calls, before the run could report it.
 */
const SETTLE_MS_MAX = 120_000;

interface SdkCall {
  readonly counter: string;
  readonly idempotencyKey: string;
  outcome: 'ok' | 'unknown';
}

export class SdkRetryClients {
  private readonly calls: SdkCall[] = [];
  private readonly refused: string[] = [];
  private sequence = 0;

  constructor(private readonly urls: readonly string[], private readonly random: () => number,
    private readonly runTag: string) {}

  private client(): HivekvClient {
    return createClient({ urls: [...this.urls], retries: 6, timeoutMs: 3_000, retryBaseMs: 100,
      retryCapMs: 1_000 });
  }

  /** `workers` loops of calls until `untilMs`. */
  async run(untilMs: number, workers: number): Promise<void> {
    await Promise.all(Array.from({ length: workers }, async () => {
      const client = this.client();
      while (Date.now() < untilMs) {
        const counter = `${this.runTag}-${Math.floor(this.random() * COUNTERS)}`;
        const call: SdkCall = { counter, outcome: 'unknown',
          idempotencyKey: `${this.runTag}-call-${++this.sequence}` };
        this.calls.push(call);
        await this.send(client, call);
      }
    }));
  }

  private async send(client: HivekvClient, call: SdkCall): Promise<void> {
    try {
      await client.kv.incr(NAMESPACE, call.counter, 1,
        { forever: true, idempotencyKey: call.idempotencyKey });
      call.outcome = 'ok';
    } catch (error) {
      // A refusal the node decided (4xx) is definite and must not happen here.
      if (isHivekvError(error) && error.status >= 400 && error.status < 500 &&
        error.status !== 429) {
        this.refused.push(`${call.idempotencyKey}: ${error.status} ${error.reason}`);
        call.outcome = 'ok';
      }
    }
  }

  /** After the heal: resolves every unknown call, then checks each counter exactly. */
  async check(): Promise<Verdict> {
    const client = this.client();
    const unknownAtHeal = this.calls.filter((call) => call.outcome === 'unknown').length;
    const settleUntil = Date.now() + SETTLE_MS_MAX;
    for (let round = 0; round < SETTLE_ROUNDS_MAX && Date.now() < settleUntil; round++) {
      const unknown = this.calls.filter((call) => call.outcome === 'unknown');
      if (unknown.length === 0) break;
      for (const call of unknown) {
        await this.send(client, call);
        if (call.outcome === 'unknown' || Date.now() >= settleUntil) break;
      }
    }
    const stillUnknown = this.calls.filter((call) => call.outcome === 'unknown').length;
    const made = new Map<string, number>();
    for (const call of this.calls) made.set(call.counter, (made.get(call.counter) ?? 0) + 1);
    const wrong: string[] = [];
    for (const [counter, calls] of made) {
      try {
        const row = await client.kv.get(NAMESPACE, counter);
        const value = row.found ? Number(row.value) : 0;
        if (value !== calls) wrong.push(`${counter} holds ${value} after ${calls} calls`);
      } catch (error) {
        wrong.push(`${counter} could not be read after the heal: ${String(error)}`);
      }
    }
    const problems = [...this.refused.map((r) => `refused ${r}`), ...wrong,
      ...(stillUnknown > 0 ? [`${stillUnknown} calls still unanswered after the heal`] : [])];
    if (this.calls.length === 0) problems.push('no call was made');
    return { name: 'sdk retries', valid: problems.length === 0,
      summary: problems.length > 0 ? `${problems.length} problem(s): ${problems[0]}`
        : `${this.calls.length} incr calls on ${made.size} counters through the client ` +
          `(${unknownAtHeal} unknown until resent after the heal), each counted exactly once`,
      evidence: problems.slice(0, 40) };
  }
}
