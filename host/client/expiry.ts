/**
 * The client's expiry sugar: `ttl: '30d'` and `until: date` become the wire's `ttlSeconds`.
 *
 * Pure apart from the clock reading that `until` needs, which the caller passes in (`nowMs`)
 * at send time: a batch or transaction built now and sent later must not ship a TTL that
 * went stale while it was being assembled. Browser-safe: no `node:` import.
 *
 * Rounding is always up: a lifetime rounded down could expire a marker before the window it
 * was written to cover; rounding up keeps it at most a second longer.
 */
import type { ExpiryOptions } from './types.js';

/** The longest TTL the node takes (its `kv_bad_ttl` bound), in seconds. */
export const TTL_SECONDS_MAX = 220_898_620_800;

const SECONDS_PER_UNIT: Readonly<Record<string, number>> = {
  s: 1,
  m: 60,
  h: 3600,
  d: 86_400,
};

/** A whole number without leading zeros, then exactly one unit. Anchored: no partial parse. */
const TTL_PATTERN = /^([1-9][0-9]{0,14})([smhd])$/;

const TTL_HINT = "write a whole number and one unit: s, m, h or d ('90s', '2m', '1h', '30d'); " +
  'for anything else pass ttlSeconds or until';

/**
 * Parses a TTL string into whole seconds.
 * @throws RangeError for anything but `<whole number above 0><s|m|h|d>`, naming the fix.
 */
export function parseTtl(text: unknown): number {
  if (typeof text !== 'string') {
    throw new RangeError(`ttl must be a string such as '30d', got ${describe(text)}; ${TTL_HINT}`);
  }
  const match = TTL_PATTERN.exec(text);
  if (match === null) {
    throw new RangeError(`ttl ${JSON.stringify(text)} is not a duration: ${TTL_HINT}`);
  }
  const seconds = Number(match[1]) * (SECONDS_PER_UNIT[match[2] as string] as number);
  if (seconds > TTL_SECONDS_MAX) {
    throw new RangeError(`ttl ${JSON.stringify(text)} is over the longest lifetime ` +
      `(${TTL_SECONDS_MAX} seconds); use forever: true`);
  }
  return seconds;
}

/** Milliseconds since the epoch of an `until` value. */
function instantMs(until: unknown): number {
  let ms = Number.NaN;
  if (until instanceof Date) ms = until.getTime();
  else if (typeof until === 'number') ms = until;
  else if (typeof until === 'string') ms = Date.parse(until);
  else {
    throw new TypeError(`until must be a Date, an ISO-8601 string or epoch milliseconds, ` +
      `got ${describe(until)}`);
  }
  if (!Number.isFinite(ms)) throw new RangeError(`until ${describe(until)} is not a valid instant`);
  return ms;
}

/**
 * Seconds from `nowMs` to `until`, rounded up.
 * @throws RangeError when `until` is not in the future.
 */
export function secondsUntil(until: unknown, nowMs: number): number {
  const deltaMs = instantMs(until) - nowMs;
  const seconds = Math.ceil(deltaMs / 1000);
  if (!(deltaMs > 0) || seconds <= 0) {
    throw new RangeError(`until is not in the future (${Math.round(-deltaMs)} ms ago): a key ` +
      'cannot be written already expired');
  }
  return seconds;
}

/** The wire fields of an expiry: `{ttlSeconds}`, `{forever: true}`, both, or neither. */
export interface WireExpiry {
  ttlSeconds?: number;
  forever?: true;
}

/**
 * Resolves the expiry options of one write into wire fields. Checks only what the node
 * cannot see (two spellings of a duration, a `forever` that is not `true`, an `until` in
 * the past); a write naming no lifetime, or both a duration and `forever`, is sent as is so
 * that the node gives its own `kv_expiry_not_specified` refusal: one rule, in one place.
 */
export function resolveExpiry(options: ExpiryOptions, nowMs: number): WireExpiry {
  const spelled = (['ttl', 'ttlSeconds', 'until'] as const)
    .filter((name) => options[name] !== undefined);
  if (spelled.length > 1) {
    throw new TypeError(`expiry given twice (${spelled.join(' and ')}): name one of ttl, ` +
      'ttlSeconds or until');
  }
  const wire: WireExpiry = {};
  if (options.forever !== undefined) {
    if (options.forever !== true) {
      throw new TypeError('forever must be exactly true; to give the key a lifetime, leave ' +
        'forever out and name ttl, ttlSeconds or until');
    }
    wire.forever = true;
  }
  if (options.ttl !== undefined) wire.ttlSeconds = parseTtl(options.ttl);
  else if (options.ttlSeconds !== undefined) wire.ttlSeconds = options.ttlSeconds;
  else if (options.until !== undefined) wire.ttlSeconds = secondsUntil(options.until, nowMs);
  return wire;
}

function describe(value: unknown): string {
  if (value instanceof Date) return Number.isNaN(value.getTime()) ? 'Invalid Date' : 'a Date';
  if (typeof value === 'string') return JSON.stringify(value);
  return value === null ? 'null' : typeof value;
}
