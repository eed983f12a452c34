/**
 * The request ids a node makes for calls that bring none: `<8 hex digits>-<count in base 36>`,
 * the hex drawn once per process so two processes' ids do not collide in one log.
 *
 * An id is a number until something needs it: a log line wants its text, the response its
 * bytes. uWebSockets converts a string header value to UTF-8 on every call (its length, then
 * its bytes, into an allocation of its own), and an id made by concatenation is first
 * flattened; it takes an ArrayBuffer's bytes as they are. So the bytes are written into one
 * buffer per id length, kept and rewritten call after call, and only a call whose headers
 * are written at once may use them (`bytes`); the text is made only for a log line or a
 * response written later.
 *
 * Pure: no I/O.
 */
const DIGITS = '0123456789abcdefghijklmnopqrstuvwxyz';
/** Base-36 digits of the largest safe integer: no count ever needs more. */
const COUNT_DIGITS_MAX = 11;

export class RequestIds {
  private count = 0;
  private readonly prefixBytes: Uint8Array;
  /** `buffers[d]`: an id with a count of d digits, its prefix written once. */
  private readonly buffers: Uint8Array[] = [];

  constructor(readonly prefix: string) {
    if (!/^[0-9a-f]{8}-$/.test(prefix)) {
      throw new Error(`assertion failed: request id prefix ${JSON.stringify(prefix)}`);
    }
    this.prefixBytes = new TextEncoder().encode(prefix);
  }

  /** The next id's number (from 1). */
  next(): number {
    return ++this.count;
  }

  /** The id numbered n, as text. */
  text(n: number): string {
    return this.prefix + n.toString(36);
  }

  /**
   * The id numbered n as UTF-8, in an ArrayBuffer of exactly its length that the next call
   * rewrites: valid until then, so only for a header written before any other call's.
   */
  bytes(n: number): ArrayBuffer {
    if (!(Number.isSafeInteger(n) && n >= 1)) throw new Error(`assertion failed: request id ${n}`);
    let digits = 1;
    for (let rest = Math.floor(n / 36); rest > 0; rest = Math.floor(rest / 36)) digits++;
    const out = this.buffers[digits] ?? this.bufferOf(digits);
    let rest = n;
    for (let at = out.length - 1; digits > 0; digits--, at--) {
      const digit = rest % 36;
      out[at] = DIGITS.charCodeAt(digit);
      rest = (rest - digit) / 36;
    }
    return out.buffer as ArrayBuffer;
  }

  private bufferOf(digits: number): Uint8Array {
    if (digits > COUNT_DIGITS_MAX) throw new Error(`assertion failed: ${digits} digits`);
    const out = new Uint8Array(this.prefixBytes.length + digits);
    out.set(this.prefixBytes);
    this.buffers[digits] = out;
    return out;
  }
}
