/**
 * The host's half of idempotent retries (docs/http.md, "Idempotent retries"): the
 * `Idempotency-Key` header checked, and a call's command wrapped into the CMD_KEYED_CALL
 * that carries the key and the record lifetime in the same log entry as the call
 * (docs/codec.md, "Idempotency records"). The machine does the rest (assembly/idempotency.ts).
 * Pure: no I/O, no clock.
 */
import {
  CMD_KEYED_CALL, IDEMPOTENCY_KEY_BYTES_MAX, IDEMPOTENCY_TTL_SECONDS_MAX,
} from './abi.js';

/** 1..255 characters, each printable ASCII (space to tilde). */
const KEY_PATTERN = /^[\x20-\x7e]{1,255}$/;

/** Why a header value is not an Idempotency-Key, or null when it is one. */
export function idempotencyKeyProblem(value: string): string | null {
  if (KEY_PATTERN.test(value)) return null;
  return `Idempotency-Key must be 1 to ${IDEMPOTENCY_KEY_BYTES_MAX} printable ASCII ` +
    'characters (space to tilde)';
}

import type { Idempotency } from './commands.js';
import type { IdempotencyStats } from './state-machine.js';

const TWO_POW_32 = 4294967296;

/** Bytes of the CMD_KEYED_CALL head before a key of `keyLength` bytes and the call. */
export function keyedHeadBytes(keyLength: number): number {
  return 1 + 4 + keyLength + 8;
}

/**
 * Writes the CMD_KEYED_CALL head (kind, key, ttlSeconds) at `at` of `out`; returns where the
 * CMD_CALL goes. The key must have passed `idempotencyKeyProblem` (ASCII: one byte a char).
 */
export function writeKeyedHead(out: Uint8Array, at: number, id: Idempotency): number {
  if (idempotencyKeyProblem(id.key) !== null) throw new RangeError('bad Idempotency-Key');
  if (!Number.isSafeInteger(id.ttlSeconds) || id.ttlSeconds < 1 ||
    id.ttlSeconds > IDEMPOTENCY_TTL_SECONDS_MAX) {
    throw new RangeError(`idempotency ttlSeconds ${id.ttlSeconds} out of range`);
  }
  const view = new DataView(out.buffer, out.byteOffset, out.byteLength);
  const n = id.key.length;
  out[at] = CMD_KEYED_CALL;
  view.setUint32(at + 1, n, true);
  for (let i = 0; i < n; i++) out[at + 5 + i] = id.key.charCodeAt(i);
  const ttlAt = at + 5 + n;
  view.setUint32(ttlAt, id.ttlSeconds % TWO_POW_32, true);
  view.setUint32(ttlAt + 4, Math.floor(id.ttlSeconds / TWO_POW_32), true);
  return ttlAt + 8;
}

/** The CMD_CALL `command` (from the parser) as the CMD_KEYED_CALL a keyed write logs. */
export function keyedCommand(command: Uint8Array, id: Idempotency): Uint8Array {
  const out = new Uint8Array(keyedHeadBytes(id.key.length) + command.length);
  out.set(command, writeKeyedHead(out, 0, id));
  return out;
}

/** The machine's idempotency figures as the node's metrics name them. */
export function idempotencyGauges(machine: { idempotencyStats(): IdempotencyStats }): {
  idempotencyRecords: number; idempotencyBytes: number; idempotencyEvictions: number;
  idempotencyReplays: number;
} {
  const s = machine.idempotencyStats();
  return { idempotencyRecords: s.records, idempotencyBytes: s.bytes,
    idempotencyEvictions: s.evictions, idempotencyReplays: s.replays };
}
