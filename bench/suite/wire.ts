/**
 * The load generator's framing: HTTP/1.1 keep-alive requests and answers, and RESP (Redis)
 * commands and replies, on raw bytes. Only what the benchmark needs, and cheap: a request is
 * one Buffer written at once, and a reply is found in the received bytes without copying
 * them when it arrived whole.
 *
 * Parsers return `null` while a reply is incomplete; malformed input throws (a bug in the
 * peer or here, never a figure to report).
 */

/** One answer: `status` is the HTTP status, or 200 for a RESP reply (`-ERR` gives 500). */
export interface Reply {
  readonly status: number;
  /** The HTTP body, or the decoded RESP value. */
  readonly body: Buffer | RespValue;
}

export type RespValue = string | number | null | Buffer | RespError | RespValue[];

export class RespError {
  constructor(readonly message: string) {}
}

/** Bytes of one reply's header block (status line and headers) we accept at most. */
const HTTP_HEADER_BYTES_MAX = 16 * 1024;
/** Bytes of one reply's body we accept at most: verification reads pages of this order. */
export const REPLY_BYTES_MAX = 64 * 1024 * 1024;

const HEADER_END = Buffer.from('\r\n\r\n');
const CONTENT_LENGTH = Buffer.from('\ncontent-length:');
const CHUNKED = Buffer.from('chunked');

/** A POST with a JSON body, keep-alive (HTTP/1.1 default). */
export function httpPost(path: string, body: string, host = '127.0.0.1'): Buffer {
  const bodyBytes = Buffer.byteLength(body);
  return Buffer.from(`POST ${path} HTTP/1.1\r\nhost: ${host}\r\ncontent-type: ` +
    `application/json\r\ncontent-length: ${bodyBytes}\r\n\r\n${body}`);
}

/** A GET without a body. */
export function httpGet(path: string, host = '127.0.0.1'): Buffer {
  return Buffer.from(`GET ${path} HTTP/1.1\r\nhost: ${host}\r\n\r\n`);
}

/** Finds `needle` in `haystack` ignoring ASCII case of the haystack's letters. */
function indexOfLower(haystack: Buffer, needle: Buffer, from: number, to: number): number {
  outer: for (let i = from; i <= to - needle.length; i++) {
    for (let j = 0; j < needle.length; j++) {
      const c = haystack[i + j]!;
      if ((c >= 0x41 && c <= 0x5a ? c + 32 : c) !== needle[j]) continue outer;
    }
    return i;
  }
  return -1;
}

function decimalAt(buffer: Buffer, start: number, end: number): number {
  let value = 0;
  let digits = 0;
  for (let i = start; i < end; i++) {
    const c = buffer[i]!;
    if (c === 0x20 || c === 0x09) continue;
    if (c < 0x30 || c > 0x39) break;
    value = value * 10 + (c - 0x30);
    digits++;
  }
  if (digits === 0) throw new Error('http: a number was expected');
  return value;
}

/** One parsed HTTP reply and the bytes it took, or null if more bytes are needed. */
export function parseHttp(buffer: Buffer, offset: number): { reply: Reply; end: number } | null {
  const headerEnd = buffer.indexOf(HEADER_END, offset);
  if (headerEnd < 0) {
    if (buffer.length - offset > HTTP_HEADER_BYTES_MAX) throw new Error('http: header too large');
    return null;
  }
  const status = decimalAt(buffer, offset + 9, offset + 12);
  const bodyStart = headerEnd + 4;
  const lengthAt = indexOfLower(buffer, CONTENT_LENGTH, offset, headerEnd);
  if (lengthAt >= 0) {
    const length = decimalAt(buffer, lengthAt + CONTENT_LENGTH.length, headerEnd);
    if (length > REPLY_BYTES_MAX) throw new Error('http: body too large');
    if (buffer.length < bodyStart + length) return null;
    return { reply: { status, body: buffer.subarray(bodyStart, bodyStart + length) },
      end: bodyStart + length };
  }
  if (indexOfLower(buffer, CHUNKED, offset, headerEnd) >= 0) {
    return parseChunked(buffer, status, bodyStart);
  }
  // No length and not chunked: a body-less answer (204, 304) on a keep-alive connection.
  return { reply: { status, body: Buffer.alloc(0) }, end: bodyStart };
}

function parseChunked(buffer: Buffer, status: number, bodyStart: number):
  { reply: Reply; end: number } | null {
  const parts: Buffer[] = [];
  let at = bodyStart;
  for (;;) {
    const lineEnd = buffer.indexOf('\r\n', at);
    if (lineEnd < 0) return null;
    const size = Number.parseInt(buffer.toString('latin1', at, lineEnd), 16);
    if (!Number.isFinite(size) || size < 0) throw new Error('http: bad chunk size');
    if (buffer.length < lineEnd + 2 + size + 2) return null;
    if (size === 0) {
      return { reply: { status, body: Buffer.concat(parts) }, end: lineEnd + 4 };
    }
    parts.push(buffer.subarray(lineEnd + 2, lineEnd + 2 + size));
    at = lineEnd + 2 + size + 2;
  }
}

/** A RESP command: an array of bulk strings. */
export function respCommand(args: readonly (string | Buffer)[]): Buffer {
  let text = `*${args.length}\r\n`;
  const parts: Buffer[] = [];
  for (const arg of args) {
    const bytes = typeof arg === 'string' ? Buffer.from(arg) : arg;
    parts.push(Buffer.from(`${text}$${bytes.length}\r\n`), bytes);
    text = '\r\n';
  }
  parts.push(Buffer.from('\r\n'));
  return Buffer.concat(parts);
}

/** One RESP value starting at `offset`, or null if incomplete. */
export function parseResp(buffer: Buffer, offset: number):
  { value: RespValue; end: number } | null {
  if (offset >= buffer.length) return null;
  const lineEnd = buffer.indexOf(0x0d, offset + 1);
  if (lineEnd < 0 || lineEnd + 1 >= buffer.length) return null;
  const type = buffer[offset]!;
  const line = buffer.toString('latin1', offset + 1, lineEnd);
  const next = lineEnd + 2;
  switch (type) {
    case 0x2b: return { value: line, end: next }; // +
    case 0x2d: return { value: new RespError(line), end: next }; // -
    case 0x3a: return { value: Number(line), end: next }; // :
    case 0x24: { // $
      const length = Number(line);
      if (length < 0) return { value: null, end: next };
      if (length > REPLY_BYTES_MAX) throw new Error('resp: bulk string too large');
      if (buffer.length < next + length + 2) return null;
      return { value: buffer.subarray(next, next + length), end: next + length + 2 };
    }
    case 0x2a: { // *
      const count = Number(line);
      if (count < 0) return { value: null, end: next };
      const items: RespValue[] = [];
      let at = next;
      for (let i = 0; i < count; i++) {
        const item = parseResp(buffer, at);
        if (item === null) return null;
        items.push(item.value);
        at = item.end;
      }
      return { value: items, end: at };
    }
    default: throw new Error(`resp: unexpected type byte ${type}`);
  }
}

/** RESP as a Reply: an error reply becomes status 500. */
export function parseRespReply(buffer: Buffer, offset: number):
  { reply: Reply; end: number } | null {
  const parsed = parseResp(buffer, offset);
  if (parsed === null) return null;
  const status = parsed.value instanceof RespError ? 500 : 200;
  return { reply: { status, body: parsed.value }, end: parsed.end };
}
