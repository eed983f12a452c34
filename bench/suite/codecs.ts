/**
 * How each target spells the benchmark's primitive operations, and how its answers read back.
 * Pure: builds request bytes and decodes replies; the generator's workers and the suite's
 * verification share it, so a workload means the same thing on every target.
 *
 * - hivekv (and anything speaking its HTTP surface): `POST /api/v1/kv`, namespace `bench`.
 * - etcd v3 through its JSON gateway (`/v3/kv/...`, keys and values base64): a CAS is a `txn`
 *   comparing `mod_revision` whose failure branch reads the key back; a batch is one `txn` of
 *   puts; etcd has no bounded increment, so `incr` returns null and the generator runs a
 *   compare-and-swap loop (see `worker.ts`).
 * - Redis over RESP: a batch is one `MSET`; a versioned key for CAS is a hash {v: version,
 *   d: value} behind a Lua script; the bounded increment is a Lua script (`REDIS_SCRIPTS`).
 */
import { RespError, httpPost, respCommand, type Reply, type RespValue } from './wire.js';

export type TargetKind = 'hivekv' | 'etcd' | 'redis';

/** A read's outcome. `value` is decoded only when asked for. */
export interface ReadOutcome {
  readonly ok: boolean;
  readonly found: boolean;
  readonly value: string | null;
  readonly version: number;
}

/** A write's outcome: for a lost CAS, `version` and `value` are the key's current ones. */
export interface WriteOutcome {
  readonly ok: boolean;
  readonly applied: boolean;
  readonly version: number;
  readonly value: string | null;
}

export interface Codec {
  readonly kind: TargetKind;
  get(key: string): Buffer;
  put(key: string, value: string): Buffer;
  putMany(keys: readonly string[], value: string): Buffer;
  /** Writes `value` only if the key is at `expectVersion` (0: the key must be absent). */
  cas(key: string, expectVersion: number, value: string): Buffer;
  /** A bounded increment in one request, or null when the target has none. */
  incr(key: string, delta: number, max: number, ttlSeconds: number): Buffer | null;
  readRead(reply: Reply, wantValue: boolean): ReadOutcome;
  /** Any write's answer; `wantValue` decodes value and version (CAS, incr). */
  readWrite(reply: Reply, wantValue: boolean): WriteOutcome;
}

const FAILED_READ: ReadOutcome = { ok: false, found: false, value: null, version: 0 };
const FAILED_WRITE: WriteOutcome = { ok: false, applied: false, version: 0, value: null };
const FOUND_TRUE = Buffer.from('"found":true');
const APPLIED_FALSE = Buffer.from('"applied":false');

const is2xx = (reply: Reply): boolean => reply.status >= 200 && reply.status < 300;
const bodyBytes = (reply: Reply): Buffer => reply.body as Buffer;

/** The namespace every hivekv workload writes in. */
export const HIVEKV_NS = 'bench';

function hivekvResult(reply: Reply): Record<string, unknown> | null {
  const parsed = JSON.parse(bodyBytes(reply).toString()) as { results?: unknown[] };
  const first = parsed.results?.[0];
  return typeof first === 'object' && first !== null ? first as Record<string, unknown> : null;
}

const valueText = (value: unknown): string | null =>
  value === null || value === undefined ? null : typeof value === 'string' ? value :
    String(value);

export function hivekvCodec(): Codec {
  const call = (ops: string): Buffer => httpPost('/api/v1/kv', `{"operations":[${ops}]}`);
  const putOp = (key: string, value: string, expect: string): string =>
    `{"op":"put","ns":"${HIVEKV_NS}","key":"${key}","value":"${value}","forever":true${expect}}`;
  return {
    kind: 'hivekv',
    get: (key) => call(`{"op":"get","ns":"${HIVEKV_NS}","key":"${key}"}`),
    put: (key, value) => call(putOp(key, value, '')),
    putMany: (keys, value) => call(keys.map((key) => putOp(key, value, '')).join(',')),
    cas: (key, expect, value) => call(putOp(key, value, `,"expect":${expect}`)),
    incr: (key, delta, max, ttl) => call(`{"op":"incr","ns":"${HIVEKV_NS}","key":"${key}",` +
      `"delta":${delta},"max":${max},"ttlSeconds":${ttl}}`),
    readRead(reply, wantValue) {
      if (!is2xx(reply)) return FAILED_READ;
      if (!wantValue) {
        const found = bodyBytes(reply).indexOf(FOUND_TRUE) >= 0;
        return { ok: true, found, value: null, version: 0 };
      }
      const r = hivekvResult(reply);
      if (r === null) return FAILED_READ;
      return { ok: true, found: r['found'] === true, value: valueText(r['value']),
        version: Number(r['version'] ?? 0) };
    },
    readWrite(reply, wantValue) {
      if (!is2xx(reply)) return FAILED_WRITE;
      if (!wantValue) {
        const applied = bodyBytes(reply).indexOf(APPLIED_FALSE) < 0;
        return { ok: true, applied, version: 0, value: null };
      }
      const r = hivekvResult(reply);
      if (r === null) return FAILED_WRITE;
      return { ok: true, applied: r['applied'] === true, version: Number(r['version'] ?? 0),
        value: valueText(r['value']) };
    },
  };
}

const b64 = (text: string): string => Buffer.from(text).toString('base64');
const unb64 = (text: unknown): string | null =>
  typeof text === 'string' ? Buffer.from(text, 'base64').toString() : null;

interface EtcdKv { mod_revision?: string; value?: string }

export function etcdCodec(): Codec {
  const putReq = (key: string, value: string): string =>
    `{"request_put":{"key":"${b64(key)}","value":"${b64(value)}"}}`;
  return {
    kind: 'etcd',
    get: (key) => httpPost('/v3/kv/range', `{"key":"${b64(key)}"}`),
    put: (key, value) => httpPost('/v3/kv/put', `{"key":"${b64(key)}","value":"${b64(value)}"}`),
    putMany: (keys, value) => httpPost('/v3/kv/txn',
      `{"success":[${keys.map((key) => putReq(key, value)).join(',')}]}`),
    cas: (key, expect, value) => httpPost('/v3/kv/txn', `{"compare":[{"key":"${b64(key)}",` +
      `"target":"MOD","result":"EQUAL","mod_revision":"${expect}"}],"success":[` +
      `${putReq(key, value)}],"failure":[{"request_range":{"key":"${b64(key)}"}}]}`),
    incr: () => null,
    readRead(reply, wantValue) {
      if (!is2xx(reply)) return FAILED_READ;
      const parsed = JSON.parse(bodyBytes(reply).toString()) as { kvs?: EtcdKv[] };
      const kv = parsed.kvs?.[0];
      if (kv === undefined) return { ok: true, found: false, value: null, version: 0 };
      return { ok: true, found: true, value: wantValue ? unb64(kv.value ?? '') : null,
        version: Number(kv.mod_revision ?? 0) };
    },
    readWrite(reply, wantValue) {
      if (!is2xx(reply)) return FAILED_WRITE;
      if (!wantValue) return { ok: true, applied: true, version: 0, value: null };
      const parsed = JSON.parse(bodyBytes(reply).toString()) as { succeeded?: boolean;
        header?: { revision?: string };
        responses?: Array<{ response_range?: { kvs?: EtcdKv[] } }> };
      if (parsed.succeeded === true || parsed.responses === undefined) {
        return { ok: true, applied: true, version: Number(parsed.header?.revision ?? 0),
          value: null };
      }
      const kv = parsed.responses[0]?.response_range?.kvs?.[0];
      return { ok: true, applied: false, version: Number(kv?.mod_revision ?? 0),
        value: kv === undefined ? null : unb64(kv.value ?? '') };
    },
  };
}

/**
 * The Lua scripts Redis runs. CAS: a hash holds the version `v` and the value `d`; absent is
 * version 0. Bounded increment: refuse when the result would pass `max`; set the TTL when
 * the counter is created (as hivekv's `incr` does).
 */
export const REDIS_SCRIPTS = {
  cas: `local v = tonumber(redis.call('HGET', KEYS[1], 'v') or '0')
if v ~= tonumber(ARGV[1]) then return {0, v, redis.call('HGET', KEYS[1], 'd')} end
redis.call('HSET', KEYS[1], 'v', v + 1, 'd', ARGV[2])
return {1, v + 1}`,
  incr: `local c = tonumber(redis.call('GET', KEYS[1]) or '0')
local d = tonumber(ARGV[1])
if c + d > tonumber(ARGV[2]) then return {0, c} end
local n = redis.call('INCRBY', KEYS[1], d)
if n == d then redis.call('EXPIRE', KEYS[1], ARGV[3]) end
return {1, n}`,
} as const;

const respText = (value: RespValue | undefined): string | null =>
  Buffer.isBuffer(value) ? value.toString() : typeof value === 'number' ? String(value) :
    typeof value === 'string' ? value : null;

/** `shas` are the SHA1 digests `SCRIPT LOAD` returned for `REDIS_SCRIPTS`. */
export function redisCodec(shas: { cas: string; incr: string }): Codec {
  return {
    kind: 'redis',
    get: (key) => respCommand(['GET', key]),
    put: (key, value) => respCommand(['SET', key, value]),
    putMany: (keys, value) => respCommand(['MSET', ...keys.flatMap((key) => [key, value])]),
    cas: (key, expect, value) => respCommand(['EVALSHA', shas.cas, '1', key, String(expect),
      value]),
    incr: (key, delta, max, ttl) => respCommand(['EVALSHA', shas.incr, '1', key,
      String(delta), String(max), String(ttl)]),
    readRead(reply, wantValue) {
      if (reply.status !== 200) return FAILED_READ;
      const found = reply.body !== null;
      return { ok: true, found, value: wantValue ? respText(reply.body) : null, version: 0 };
    },
    readWrite(reply) {
      const body = reply.body;
      if (reply.status !== 200 || body instanceof RespError) return FAILED_WRITE;
      if (!Array.isArray(body)) return { ok: true, applied: true, version: 0, value: null };
      const applied = body[0] === 1;
      const version = Number(body[1] ?? 0);
      // CAS answers {applied, version, value?}; incr answers {applied, counter}.
      const value = body.length >= 3 ? respText(body[2]) : String(version);
      return { ok: true, applied, version, value };
    },
  };
}
