/**
 * Structured logs: one JSON object per line on stdout, via pino. Privacy rule: a log line
 * never carries a key, a value, a prefix or a request body of a KV call (keys may carry
 * customer ids); it carries namespaces, op names, counts, status, request id and latency.
 * Callers keep to that rule, and the redaction list below censors the usual field names in
 * case one slips through, so a mistake shows as `[redacted]` instead of a leak.
 */

import { pino, type DestinationStream, type Logger as PinoLogger } from 'pino';
import type { RequestLogger } from '../http/guards.js';

/** Field names whose values never reach a log line, at the top level or one level down. */
const REDACTED_FIELDS: readonly string[] = [
  'key',
  'keys',
  'value',
  'values',
  'prefix',
  'after',
  'body',
  'operations',
  'kv',
  'authorization',
  'token',
];
const REDACTED_PATHS: readonly string[] = [
  ...REDACTED_FIELDS,
  ...REDACTED_FIELDS.map((field) => `*.${field}`),
  'headers.authorization',
  'req.headers.authorization',
];
export const REDACTED_CENSOR = '[redacted]';

/** Levels `createLogger` accepts (HIVEKV_LOG_LEVEL). */
export const LOG_LEVELS: readonly string[] = [
  'fatal',
  'error',
  'warn',
  'info',
  'debug',
  'trace',
  'silent',
];

/** The node's logger: the request-logger seam plus child loggers and a debug level. */
export interface Logger extends RequestLogger {
  debug(fields: Record<string, unknown>, message: string): void;
  /** A logger whose every line also carries `fields` (e.g. `{component: 'raft'}`). */
  child(fields: Record<string, unknown>): Logger;
  /** Writes out anything buffered; call before a deliberate exit. */
  flush(): void;
}

class PinoBackedLogger implements Logger {
  /**
   * Read once: a logger's level is set when it is made and never changed here, and the HTTP
   * layer asks on every call (pino's `isLevelEnabled` reads its level table through getters).
   */
  readonly debugEnabled: boolean;

  constructor(private readonly inner: PinoLogger) {
    this.debugEnabled = inner.isLevelEnabled('debug');
  }

  debug(fields: Record<string, unknown>, message: string): void {
    this.inner.debug(fields, message);
  }

  info(fields: Record<string, unknown>, message: string): void {
    this.inner.info(fields, message);
  }

  warn(fields: Record<string, unknown>, message: string): void {
    this.inner.warn(fields, message);
  }

  error(fields: Record<string, unknown>, message: string): void {
    this.inner.error(fields, message);
  }

  child(fields: Record<string, unknown>): Logger {
    return new PinoBackedLogger(this.inner.child(fields));
  }

  flush(): void {
    this.inner.flush();
  }
}

/**
 * A JSON-lines logger at `level` writing to stdout, or to `destination` when given (tests).
 * @throws Error when `level` is not one of LOG_LEVELS (a configuration mistake).
 */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  if (!LOG_LEVELS.includes(level)) {
    throw new Error(`log level "${level}": expected one of ${LOG_LEVELS.join(', ')}`);
  }
  const options = {
    level,
    base: { name: 'hivekv', pid: process.pid },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: { paths: [...REDACTED_PATHS], censor: REDACTED_CENSOR },
  };
  // Asynchronous writes: lines logged while a write is under way go out together, and a
  // slow stdout never blocks the event loop. pino flushes them synchronously at exit.
  const inner = pino(options, destination ?? pino.destination({ dest: 1, sync: false }));
  return new PinoBackedLogger(inner);
}
