/**
 * Turns a JSON number, as JavaScript parsed it, into canonical `DecimalText`: an optional
 * `-`, digits, an optional fraction, no exponent, no leading zeros, no trailing fraction
 * zeros, and `"0"` for both zeros. `incr` arithmetic is exact decimal in the machine, so the
 * host hands it the shortest decimal that round-trips to the client's number
 * (`String(number)`), never a binary expansion.
 *
 * Pure: no I/O.
 */
import type { DecimalText } from '../machine/commands.js';

/**
 * Returns the canonical decimal text of `value`, or null when it is not a finite number
 * (JSON.parse turns `1e400` into Infinity).
 */
export function toDecimalText(value: number): DecimalText | null {
  if (!Number.isFinite(value)) return null;
  // String() writes the shortest round-tripping form, with an exponent outside 1e-7..1e21.
  const text = String(value);
  const negative = text.charCodeAt(0) === 45; // '-'
  const unsigned = negative ? text.slice(1) : text;
  const ePos = unsigned.indexOf('e');
  const mantissa = ePos < 0 ? unsigned : unsigned.slice(0, ePos);
  const exponent = ePos < 0 ? 0 : Number(unsigned.slice(ePos + 1));
  const dot = mantissa.indexOf('.');
  const intDigits = dot < 0 ? mantissa : mantissa.slice(0, dot);
  const fracDigits = dot < 0 ? '' : mantissa.slice(dot + 1);
  const digits = intDigits + fracDigits;
  // Position of the decimal point within `digits` once the exponent is applied.
  const point = intDigits.length + exponent;
  let whole: string;
  let fraction: string;
  if (point <= 0) {
    whole = '0';
    fraction = '0'.repeat(-point) + digits;
  } else if (point >= digits.length) {
    whole = digits + '0'.repeat(point - digits.length);
    fraction = '';
  } else {
    whole = digits.slice(0, point);
    fraction = digits.slice(point);
  }
  whole = stripLeadingZeros(whole);
  fraction = stripTrailingZeros(fraction);
  const body = fraction.length > 0 ? whole + '.' + fraction : whole;
  return negative && body !== '0' ? '-' + body : body;
}

function stripLeadingZeros(text: string): string {
  let start = 0;
  while (start < text.length - 1 && text.charCodeAt(start) === 48) start++;
  return text.slice(start);
}

function stripTrailingZeros(text: string): string {
  let end = text.length;
  while (end > 0 && text.charCodeAt(end - 1) === 48) end--;
  return text.slice(0, end);
}
