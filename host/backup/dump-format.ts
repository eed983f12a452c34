/**
 * The dump format of `hivekv export` and `hivekv import` (docs/backup.md): newline-delimited
 * JSON, one object per line, in this order: one `header`, `tenantCount` `tenant` lines (the
 * machine's tenant table, in its order, each with its quota row or null),
 * `idempotencyRecords` `idempotency` lines (oldest first), `rowCount` `row` lines (in the
 * snapshot's key order) and one `end` line. Everything the state digest covers is there, so
 * the state a dump rebuilds has the digest its header names.
 *
 * Byte strings (tenant, namespace, key, value) are JSON strings of their UTF-8 text; a value
 * is the compact JSON text the machine stores, as a string, so its bytes round-trip exactly
 * (number spellings, escapes, duplicate members). A field whose bytes are not well-formed
 * UTF-8 is written as `<field>Base64` instead. Pure: encoding and checking lines only.
 */
import {
  IDEMPOTENCY_ANSWER_BYTES_MAX, IDEMPOTENCY_KEY_BYTES_MAX, KEY_BYTES_MAX, NS_BYTES_MAX,
  SAFE_INTEGER_MAX, TENANT_BYTES_MAX,
} from '../machine/abi.js';
import type { QuotaSettings } from '../machine/commands.js';
import type {
  IdempotencyRecord, SnapshotHead, SnapshotRow, SnapshotTenant,
} from './snapshot-items.js';

/** The `format` every dump's header names. */
export const DUMP_FORMAT = 'hivekv-dump';
/** Bumped when a line's layout changes; import reads this version only. */
export const DUMP_FORMAT_VERSION = 1;
/** Longest line import reads: a row's 4 MiB buffer, escaped, with room. */
export const DUMP_LINE_CHARS_MAX = 32 * 1024 * 1024;

export interface DumpHeader {
  readonly kind: 'header';
  readonly format: typeof DUMP_FORMAT;
  readonly formatVersion: number;
  /** The applied index the dump reflects, and the term of its entry. */
  readonly index: number;
  readonly term: number;
  readonly lastVersion: number;
  readonly lastTimeMs: number;
  readonly paused: boolean;
  readonly tenantCount: number;
  readonly rowCount: number;
  /** The state digest at `index` (docs/codec.md, "Digest"): 16 hex digits. */
  readonly digest: string;
  /** Idempotency records (recorded answers to keyed write calls) the dump carries. */
  readonly idempotencyRecords: number;
  /** Where it came from: a data directory replayed, or a live node's snapshot. */
  readonly source: 'data' | 'node';
  readonly exportedAt: string;
}

export interface RowLine {
  readonly tenant: Uint8Array;
  readonly ns: Uint8Array;
  readonly key: Uint8Array;
  readonly value: Uint8Array;
  readonly version: number;
  readonly expiresAt: number | null;
  readonly updatedAt: number;
}

export interface EndLine {
  readonly kind: 'end';
  readonly tenants: number;
  readonly idempotencyRecords: number;
  readonly rows: number;
}

const strictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
const utf8 = new TextEncoder();

/** The bytes as text when they are well-formed UTF-8, else null. */
export function textOf(bytes: Uint8Array): string | null {
  try {
    return strictUtf8.decode(bytes);
  } catch {
    return null;
  }
}

/** `name: text` or `nameBase64: base64`, into `out`. */
function putBytes(out: Record<string, unknown>, name: string, bytes: Uint8Array): void {
  const text = textOf(bytes);
  if (text !== null) out[name] = text;
  else out[`${name}Base64`] = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
    .toString('base64');
}

export function headerLine(head: SnapshotHead, facts: { term: number; digest: string;
  source: 'data' | 'node'; exportedAt: Date }): string {
  const header: DumpHeader = {
    kind: 'header', format: DUMP_FORMAT, formatVersion: DUMP_FORMAT_VERSION,
    index: head.index, term: facts.term, lastVersion: head.lastVersion,
    lastTimeMs: head.lastTimeMs, paused: head.paused, tenantCount: head.tenants.length,
    rowCount: head.rowCount, digest: facts.digest,
    idempotencyRecords: head.idempotency.length, source: facts.source,
    exportedAt: facts.exportedAt.toISOString(),
  };
  return JSON.stringify(header) + '\n';
}

export function tenantLine(tenant: SnapshotTenant): string {
  const out: Record<string, unknown> = { kind: 'tenant' };
  putBytes(out, 'tenant', tenant.name);
  out['quota'] = tenant.quota;
  return JSON.stringify(out) + '\n';
}

/** A row line; `tenantField` is the row's tenant as `tenantLine` wrote it. */
export function rowLine(tenantField: Record<string, unknown>, row: SnapshotRow): string {
  const out: Record<string, unknown> = { kind: 'row', ...tenantField };
  putBytes(out, 'ns', row.ns);
  putBytes(out, 'key', row.key);
  putBytes(out, 'value', row.value);
  out['version'] = row.version;
  out['expiresAt'] = row.expiresAt;
  out['updatedAt'] = row.updatedAt;
  return JSON.stringify(out) + '\n';
}

/** The tenant field of a row (`tenant` or `tenantBase64`), computed once per tenant. */
export function tenantField(name: Uint8Array): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  putBytes(out, 'tenant', name);
  return out;
}

export function idempotencyLine(record: IdempotencyRecord): string {
  const out: Record<string, unknown> = { kind: 'idempotency' };
  putBytes(out, 'tenant', record.tenant);
  putBytes(out, 'key', record.key);
  out['fingerprint'] = record.fingerprint;
  out['expiresAt'] = record.expiresAt;
  out['answerBase64'] = record.answer === null ? null
    : Buffer.from(record.answer.buffer, record.answer.byteOffset, record.answer.byteLength)
      .toString('base64');
  return JSON.stringify(out) + '\n';
}

export function endLine(tenants: number, idempotencyRecords: number, rows: number): string {
  const end: EndLine = { kind: 'end', tenants, idempotencyRecords, rows };
  return JSON.stringify(end) + '\n';
}

// ---- reading ------------------------------------------------------------------------------

/** A dump that cannot be imported; `line` is 1-based (0: the dump as a whole). */
export class DumpError extends Error {
  override readonly name = 'DumpError';
  constructor(readonly line: number, detail: string) {
    super(line > 0 ? `line ${line}: ${detail}` : detail);
  }
}

type Obj = Record<string, unknown>;

/** Parses one line into an object with a `kind`. */
export function parseLine(text: string, line: number): Obj {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new DumpError(line, `not JSON (${(error as Error).message}); is the dump truncated ` +
      'or edited?');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value) ||
    typeof (value as Obj)['kind'] !== 'string') {
    throw new DumpError(line, 'not a dump line: expected an object with a "kind"');
  }
  return value as Obj;
}

function wholeNumber(o: Obj, name: string, line: number, min = 0): number {
  const v = o[name];
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min || v > SAFE_INTEGER_MAX) {
    throw new DumpError(line, `"${name}" must be a whole number from ${min} to 2^53 - 1`);
  }
  return v;
}

function bool(o: Obj, name: string, line: number): boolean {
  const v = o[name];
  if (typeof v !== 'boolean') throw new DumpError(line, `"${name}" must be true or false`);
  return v;
}

function expectKind(o: Obj, kind: string, line: number, what: string): void {
  if (o['kind'] !== kind) {
    throw new DumpError(line, `expected ${what} (kind "${kind}"), found kind ` +
      `${JSON.stringify(o['kind'])}`);
  }
}

export function readHeader(o: Obj, line: number): DumpHeader {
  expectKind(o, 'header', line, 'the header');
  if (o['format'] !== DUMP_FORMAT) {
    throw new DumpError(line, `"format" must be "${DUMP_FORMAT}": is this a hivekv dump?`);
  }
  if (o['formatVersion'] !== DUMP_FORMAT_VERSION) {
    throw new DumpError(line, `dump format version ${JSON.stringify(o['formatVersion'])}; ` +
      `this hivekv reads version ${DUMP_FORMAT_VERSION}`);
  }
  const digest = o['digest'];
  if (typeof digest !== 'string' || !/^[0-9a-f]{16}$/.test(digest)) {
    throw new DumpError(line, '"digest" must be 16 lower-case hex digits');
  }
  const source = o['source'] === 'node' ? 'node' : 'data';
  return {
    kind: 'header', format: DUMP_FORMAT, formatVersion: DUMP_FORMAT_VERSION,
    index: wholeNumber(o, 'index', line, 1), term: wholeNumber(o, 'term', line, 1),
    lastVersion: wholeNumber(o, 'lastVersion', line),
    lastTimeMs: wholeNumber(o, 'lastTimeMs', line), paused: bool(o, 'paused', line),
    tenantCount: wholeNumber(o, 'tenantCount', line),
    rowCount: wholeNumber(o, 'rowCount', line), digest,
    idempotencyRecords: wholeNumber(o, 'idempotencyRecords', line), source,
    exportedAt: typeof o['exportedAt'] === 'string' ? o['exportedAt'] : '',
  };
}

/** A byte field: `name` (text) or `nameBase64`, exactly one, within [min, max] bytes. */
function bytesField(o: Obj, name: string, line: number, min: number, max: number): Uint8Array {
  const text = o[name];
  const b64 = o[`${name}Base64`];
  let bytes: Uint8Array;
  if (typeof text === 'string' && b64 === undefined) {
    bytes = utf8.encode(text);
  } else if (typeof b64 === 'string' && text === undefined &&
    /^[A-Za-z0-9+/]*={0,2}$/.test(b64) && b64.length % 4 === 0) {
    bytes = new Uint8Array(Buffer.from(b64, 'base64'));
  } else {
    throw new DumpError(line, `expected "${name}" as a string (or "${name}Base64")`);
  }
  if (bytes.length < min || bytes.length > max) {
    throw new DumpError(line, `"${name}" must be ${min} to ${max} bytes, is ${bytes.length}`);
  }
  return bytes;
}

function quotaLimit(q: Obj, name: string, line: number): number | null {
  if (q[name] === null) return null;
  return wholeNumber(q, name, line);
}

export function readTenant(o: Obj, line: number): { name: Uint8Array;
  quota: QuotaSettings | null } {
  expectKind(o, 'tenant', line, 'a tenant line');
  const name = bytesField(o, 'tenant', line, 1, TENANT_BYTES_MAX);
  const q = o['quota'];
  if (q === null) return { name, quota: null };
  if (typeof q !== 'object' || Array.isArray(q) || q === undefined) {
    throw new DumpError(line, '"quota" must be null or an object');
  }
  const quota = q as Obj;
  return { name, quota: {
    enabled: bool(quota, 'enabled', line),
    maxRows: quotaLimit(quota, 'maxRows', line),
    maxBytes: quotaLimit(quota, 'maxBytes', line),
    maxReadsPerSec: quotaLimit(quota, 'maxReadsPerSec', line),
    maxWritesPerSec: quotaLimit(quota, 'maxWritesPerSec', line),
  } };
}

/** An answer as recorded: the 19-byte answer header, then as many body bytes as it says. */
const ANSWER_HEADER_BYTES = 19;

/** An idempotency line, checked as the machine checks a record (assembly/idempotency.ts). */
export function readIdempotency(o: Obj, line: number): IdempotencyRecord {
  expectKind(o, 'idempotency', line, 'an idempotency record line');
  const tenant = bytesField(o, 'tenant', line, 1, TENANT_BYTES_MAX);
  const key = bytesField(o, 'key', line, 1, IDEMPOTENCY_KEY_BYTES_MAX);
  if (key.some((c) => c < 0x20 || c > 0x7e)) {
    throw new DumpError(line, '"key" must be printable ASCII (0x20..0x7E)');
  }
  const fingerprint = o['fingerprint'];
  if (typeof fingerprint !== 'string' || !/^[0-9a-f]{16}$/.test(fingerprint)) {
    throw new DumpError(line, '"fingerprint" must be 16 lower-case hex digits');
  }
  const expiresAt = wholeNumber(o, 'expiresAt', line);
  let answer: Uint8Array | null = null;
  if (o['answerBase64'] !== null) {
    answer = bytesField(o, 'answer', line, ANSWER_HEADER_BYTES, IDEMPOTENCY_ANSWER_BYTES_MAX);
    const bodyLength = new DataView(answer.buffer, answer.byteOffset).getUint32(15, true);
    if (bodyLength !== answer.length - ANSWER_HEADER_BYTES) {
      throw new DumpError(line, '"answerBase64" is not a recorded answer (its body length ' +
        'does not match)');
    }
  }
  return { tenant, key, fingerprint, expiresAt, answer };
}

/**
 * A row line, checked against what the machine promises of every row (assembly/snapshot.ts
 * `rowOk`): a version in 1..lastVersion, an update time no later than lastTimeMs, a
 * namespace without a zero byte, a value that is JSON.
 */
export function readRow(o: Obj, line: number, header: DumpHeader): RowLine {
  expectKind(o, 'row', line, 'a row line');
  const tenant = bytesField(o, 'tenant', line, 1, TENANT_BYTES_MAX);
  const ns = bytesField(o, 'ns', line, 1, NS_BYTES_MAX);
  if (ns.includes(0)) throw new DumpError(line, '"ns" must not hold a zero byte');
  const key = bytesField(o, 'key', line, 1, KEY_BYTES_MAX);
  const value = bytesField(o, 'value', line, 1, Number.MAX_SAFE_INTEGER);
  const valueText = textOf(value);
  try {
    if (valueText === null) throw new Error('not UTF-8');
    JSON.parse(valueText);
  } catch {
    throw new DumpError(line, '"value" must be the JSON text of the stored value');
  }
  const version = wholeNumber(o, 'version', line, 1);
  if (version > header.lastVersion) {
    throw new DumpError(line, `"version" ${version} is past the header's lastVersion ` +
      `${header.lastVersion}`);
  }
  const expiresAt = o['expiresAt'] === null ? null : wholeNumber(o, 'expiresAt', line);
  const updatedAt = wholeNumber(o, 'updatedAt', line);
  if (updatedAt > header.lastTimeMs) {
    throw new DumpError(line, `"updatedAt" ${updatedAt} is past the header's lastTimeMs ` +
      `${header.lastTimeMs}`);
  }
  return { tenant, ns, key, value, version, expiresAt, updatedAt };
}

export function readEnd(o: Obj, line: number, header: DumpHeader): void {
  expectKind(o, 'end', line, 'the end line');
  const tenants = wholeNumber(o, 'tenants', line);
  const records = wholeNumber(o, 'idempotencyRecords', line);
  const rows = wholeNumber(o, 'rows', line);
  if (tenants !== header.tenantCount || rows !== header.rowCount ||
    records !== header.idempotencyRecords) {
    throw new DumpError(line, `the end line counts ${tenants} tenants, ${records} ` +
      `idempotency records and ${rows} rows; the header announced ${header.tenantCount}, ` +
      `${header.idempotencyRecords} and ${header.rowCount}`);
  }
}
