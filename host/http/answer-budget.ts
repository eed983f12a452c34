/**
 * Answers that wait for their clients to read them, bounded.
 *
 * uWebSockets' `end` copies an answer the socket cannot take into the connection's own
 * buffer, marks the response done, and reads the next request the client pipelined. A client
 * that sends requests and never reads their answers made a node buffer every answer: twenty
 * connections pipelining reads of 4 MB took a node from 0.1 GB to 4.8 GB of memory, and more
 * would have had it killed. So answers are written with `tryEnd` (uws-call.ts), which writes
 * what the socket takes and leaves the response open: uWebSockets then closes a connection
 * that sends another request before its answer is read ("async pipelining"), and the rest of
 * the answer waits here, in one copy, until the socket is writable.
 *
 * That leaves one answer per connection; the budget bounds the sum. When an answer would take
 * the bytes waiting past `maxBytes`, the connections whose answers have made no progress for
 * STALLED_MS or more are closed, stalest first, until it fits: a client that stopped reading
 * loses its answer to one that reads. If it still does not fit, its own connection is closed
 * (the client may retry). The first answer to wait is always kept, whatever its size, so one
 * large read still works on a quiet node.
 */
import { performance } from 'node:perf_hooks';
import { Readable } from 'node:stream';
import type { Response } from 'hyper-express';

/** The default bound on answer bytes waiting for clients, over every connection. */
export const ANSWER_BYTES_WAITING_MAX = 256 * 1024 * 1024;

/** An answer admitted to wait: its unsent bytes, when they last moved, how to drop it. */
export interface WaitingAnswer {
  bytes: number;
  progressAtMs: number;
  /** Closes the answer's connection; its abort handler then calls `release`. */
  readonly close: () => void;
}

/** An answer that has not moved for this long is a client that stopped reading. */
export const STALLED_MS = 1000;

export class AnswerBudget {
  /** Bytes of answers written in part, waiting for their clients. */
  waitingBytes = 0;
  /** Connections closed because an answer would have taken the bytes past the bound. */
  closedConnections = 0;
  private readonly waiting = new Set<WaitingAnswer>();

  constructor(readonly maxBytes = ANSWER_BYTES_WAITING_MAX,
    private readonly nowMs: () => number = () => performance.now()) {}

  /** `bytes` of an answer are to wait: a WaitingAnswer to report on, or null: close it. */
  admit(bytes: number, close: () => void): WaitingAnswer | null {
    this.makeRoom(bytes);
    if (this.waitingBytes > 0 && this.waitingBytes + bytes > this.maxBytes) {
      this.closedConnections += 1;
      return null;
    }
    const answer: WaitingAnswer = { bytes, progressAtMs: this.nowMs(), close };
    this.waiting.add(answer);
    this.waitingBytes += bytes;
    return answer;
  }

  /** The socket took part of `answer`: `bytesLeft` remain. */
  progressed(answer: WaitingAnswer, bytesLeft: number): void {
    if (!this.waiting.has(answer)) return;
    this.waitingBytes += bytesLeft - answer.bytes;
    answer.bytes = bytesLeft;
    answer.progressAtMs = this.nowMs();
  }

  /** The answer was written whole, or its client went away. Safe to call twice. */
  release(answer: WaitingAnswer): void {
    if (!this.waiting.delete(answer)) return;
    this.waitingBytes -= answer.bytes;
    if (this.waitingBytes < 0) {
      throw new Error(`assertion failed: answer bytes waiting went below zero`);
    }
  }

  /** Closes stalled answers, stalest first, until `bytes` more fit or none is left. */
  private makeRoom(bytes: number): void {
    if (this.waitingBytes + bytes <= this.maxBytes) return;
    const now = this.nowMs();
    const stalled = [...this.waiting].filter((a) => now - a.progressAtMs >= STALLED_MS)
      .sort((a, b) => a.progressAtMs - b.progressAtMs);
    for (const answer of stalled) {
      if (this.waitingBytes + bytes <= this.maxBytes) return;
      this.closedConnections += 1;
      this.release(answer);
      answer.close();
    }
  }
}

/**
 * Sends an answer through hyper-express with `tryEnd`, as the direct path does: its `send`
 * uses `end`. The body is copied (it may be the machine's memory, rewritten by the next call)
 * and counted against the budget while it is written.
 */
export function sendWithinBudget(res: Response, body: string | Uint8Array,
  budget: AnswerBudget): void {
  const bytes = typeof body === 'string' ? Buffer.from(body) : Buffer.from(body);
  if (bytes.byteLength === 0 || !bodyReceived(res)) {
    // An answer before the body has all come (a refusal) must wait for it: hyper-express's
    // `send` stops reading the body and writes once it has. Streamed now, the answer would
    // end the response while hyper-express still reads chunks into it, and the next chunk
    // would throw out of its callback and stop the node.
    res.send(bytes.byteLength === 0 ? '' : bytes);
    return;
  }
  const waiting = budget.admit(bytes.byteLength, () => res.close());
  if (waiting === null) {
    res.close();
    return;
  }
  const release = (): void => budget.release(waiting);
  // A client that goes away mid-answer leaves hyper-express's stream waiting for a drain that
  // never comes: the response's 'close' releases the bytes then.
  res.once('close', release);
  res.stream(Readable.from([bytes]), bytes.byteLength).catch(() => undefined).finally(release);
}

/** hyper-express 6.17.3: the request's body has all come (true when it had none). */
function bodyReceived(res: Response): boolean {
  const request = (res as unknown as { _wrapped_request?: { received?: boolean } })
    ._wrapped_request;
  return request?.received !== false;
}
