/**
 * Setup and verification against a target, outside the timed window: writing the 100k keys
 * the workloads read, reading keys back, and the target's own count of what it wrote (hivekv:
 * the version counter, which moves once per applied write; etcd: the revision, once per
 * write request; Redis: calls per command from `INFO commandstats`).
 */
import { HIVEKV_NS, REDIS_SCRIPTS, type TargetKind } from './codecs.js';
import { Client } from './conn.js';
import type { Reply } from './wire.js';
import { httpPost, respCommand, RespError, type RespValue } from './wire.js';
import { makeValue } from './workloads.js';

/** Requests kept in flight while preloading or reading back (one per connection). */
const PIPELINE_DEPTH = 8;
const HIVEKV_PRELOAD_OPS = 256;
const HIVEKV_READ_KEYS = 1000;
/** etcd refuses a txn of more than 128 operations by default (`--max-txn-ops`). */
const ETCD_PRELOAD_OPS = 128;
const REDIS_PRELOAD_KEYS = 1000;
const PROBE_KEY = 'bench-probe';

export interface Store {
  readonly kind: TargetKind;
  preload(keyPrefix: string, keyCount: number, valueBytes: number): Promise<void>;
  /** Values of `keys`, null for absent; `hashes`: Redis keys written by the CAS script. */
  read(keys: readonly string[], hashes: boolean): Promise<Map<string, string | null>>;
  /** The target's own write counters (see the file comment). */
  counters(): Promise<Record<string, number>>;
  close(): void;
}

async function pipelined<T>(items: readonly T[], send: (item: T) => Promise<void>):
  Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: PIPELINE_DEPTH }, async () => {
    while (next < items.length) await send(items[next++]!);
  }));
}

function chunks<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

function ok(reply: Reply, what: string): Buffer {
  if (reply.status < 200 || reply.status >= 300) {
    throw new Error(`${what}: HTTP ${reply.status} ${String(reply.body).slice(0, 300)}`);
  }
  return reply.body as Buffer;
}

const range = (n: number): number[] => Array.from({ length: n }, (_, i) => i);

export async function openStore(kind: TargetKind, host: string, port: number):
  Promise<Store & { shas?: { cas: string; incr: string } }> {
  const width = PIPELINE_DEPTH;
  if (kind === 'hivekv') return hivekvStore(await Client.open(host, port, 'http', width));
  if (kind === 'etcd') return etcdStore(await Client.open(host, port, 'http', width));
  return redisStore(await Client.open(host, port, 'resp', width));
}

function hivekvStore(client: Client): Store {
  const call = async (ops: unknown[], what: string) => JSON.parse(ok(await client.request(
    httpPost('/api/v1/kv', JSON.stringify({ operations: ops }))), what).toString()) as
    { results: Array<Record<string, unknown>> };
  return {
    kind: 'hivekv',
    preload: (prefix, count, bytes) => pipelined(chunks(range(count), HIVEKV_PRELOAD_OPS),
      async (keys) => {
        await call(keys.map((k) => ({ op: 'put', ns: HIVEKV_NS, key: `${prefix}${k}`,
          value: makeValue('pre', k, bytes), forever: true })), 'preload');
      }),
    async read(keys) {
      const values = new Map<string, string | null>();
      await pipelined(chunks(keys, HIVEKV_READ_KEYS), async (part) => {
        const answer = await call([{ op: 'getMany', ns: HIVEKV_NS, keys: part }], 'read');
        const rows = answer.results[0]?.['rows'] as Array<{ key: string; value: unknown }>;
        for (const key of part) values.set(key, null);
        for (const row of rows) values.set(row.key, String(row.value));
      });
      return values;
    },
    async counters() {
      // A write hands out the next version: two probes bracket the writes between them.
      const answer = await call([{ op: 'put', ns: HIVEKV_NS, key: PROBE_KEY, value: 0,
        forever: true }], 'probe');
      return { version: Number(answer.results[0]?.['version']) };
    },
    close: () => client.close(),
  };
}

const b64 = (text: string): string => Buffer.from(text).toString('base64');

/** The smallest key greater than every key with this prefix (etcd's `range_end`). */
function prefixEnd(prefix: string): string {
  const bytes = Buffer.from(prefix);
  bytes[bytes.length - 1]!++;
  return bytes.toString('base64');
}

function etcdStore(client: Client): Store {
  const post = async (path: string, body: unknown, what: string) => JSON.parse(ok(
    await client.request(httpPost(path, JSON.stringify(body))), what).toString()) as
    Record<string, unknown>;
  return {
    kind: 'etcd',
    preload: (prefix, count, bytes) => pipelined(chunks(range(count), ETCD_PRELOAD_OPS),
      async (keys) => {
        await post('/v3/kv/txn', { success: keys.map((k) => ({ request_put: {
          key: b64(`${prefix}${k}`), value: b64(makeValue('pre', k, bytes)) } })) }, 'preload');
      }),
    async read(keys) {
      const values = new Map<string, string | null>(keys.map((k) => [k, null]));
      await pipelined(keys, async (key) => {
        const answer = await post('/v3/kv/range', { key: b64(key) }, 'read') as
          { kvs?: Array<{ value?: string }> };
        const kv = answer.kvs?.[0];
        if (kv !== undefined) values.set(key, Buffer.from(kv.value ?? '', 'base64').toString());
      });
      return values;
    },
    async counters() {
      const answer = await post('/v3/kv/range', { key: b64(PROBE_KEY) }, 'revision') as
        { header?: { revision?: string } };
      return { revision: Number(answer.header?.revision) };
    },
    close: () => client.close(),
  };
}

const text = (v: RespValue | undefined): string | null => Buffer.isBuffer(v) ? v.toString() :
  v === null || v === undefined ? null : String(v);

async function redisStore(client: Client):
  Promise<Store & { shas: { cas: string; incr: string } }> {
  const command = async (args: string[]): Promise<RespValue> => {
    const reply = await client.request(respCommand(args));
    if (reply.body instanceof RespError) throw new Error(`redis ${args[0]}: ${reply.body.message}`);
    return reply.body as RespValue;
  };
  const shas = { cas: text(await command(['SCRIPT', 'LOAD', REDIS_SCRIPTS.cas]))!,
    incr: text(await command(['SCRIPT', 'LOAD', REDIS_SCRIPTS.incr]))! };
  return {
    kind: 'redis', shas,
    preload: (prefix, count, bytes) => pipelined(chunks(range(count), REDIS_PRELOAD_KEYS),
      async (keys) => {
        await command(['MSET', ...keys.flatMap((k) => [`${prefix}${k}`,
          makeValue('pre', k, bytes)])]);
      }),
    async read(keys, hashes) {
      const values = new Map<string, string | null>();
      if (hashes) {
        await pipelined(keys, async (key) => {
          values.set(key, text(await command(['HGET', key, 'd'])));
        });
        return values;
      }
      await pipelined(chunks(keys, REDIS_PRELOAD_KEYS), async (part) => {
        const answer = await command(['MGET', ...part]) as RespValue[];
        part.forEach((key, i) => values.set(key, text(answer[i])));
      });
      return values;
    },
    async counters() {
      const info = text(await command(['INFO', 'commandstats'])) ?? '';
      const counts: Record<string, number> = {};
      for (const match of info.matchAll(/^cmdstat_(\w+):calls=(\d+)/gm)) {
        counts[match[1]!] = Number(match[2]);
      }
      return counts;
    },
    close: () => client.close(),
  };
}
