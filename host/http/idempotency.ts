/**
 * The `Idempotency-Key` header of a write call (docs/http.md, "Idempotent retries"): checked
 * (a bad value is a 400 `kv_bad_idempotency_key`), then carried with the call's command into
 * its log entry, where the machine records the call's answer or replays a recorded one.
 * Read-only calls never get here: they ignore the header. Pure: no I/O.
 */
import { idempotencyKeyProblem, keyedCommand } from '../machine/idempotency.js';
import { badRequest, type KvError } from './errors.js';

/** The request header, as hyper-express names it (lowercase). */
export const IDEMPOTENCY_HEADER = 'idempotency-key';
/** The response header of a replayed answer. */
export const REPLAYED_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  'idempotent-replayed': 'true',
});

/** The command a write call with `key` logs, or the 400 for a key that is not one. */
export function keyedOrRefused(command: Uint8Array, key: string,
  ttlSeconds: number): Uint8Array | KvError {
  const problem = idempotencyKeyProblem(key);
  if (problem !== null) return badRequest('kv_bad_idempotency_key', problem);
  return keyedCommand(command, { key, ttlSeconds });
}
