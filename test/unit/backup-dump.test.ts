/**
 * The dump format in-process: a state built through the machine (several tenants, quota rows,
 * lifetimes, counters, deletes, values whose exact spelling matters) is dumped from its
 * snapshot and restored from the dump into a fresh machine, which must hold the same digest
 * and give the same snapshot bytes back; a dump whose lines are damaged, reordered,
 * truncated or edited is refused naming the line.
 */
import { describe, expect, it } from 'vitest';
import { DumpError } from '../../host/backup/dump-format.js';
import { dumpText } from '../../host/backup/export.js';
import { DumpRestorer } from '../../host/backup/import.js';
import { DEFAULT_TENANT } from '../../host/machine/commands.js';
import { keyedCommand } from '../../host/machine/idempotency.js';
import { KvMachine } from '../../host/machine/kv-machine.js';
import { snapshotToBytes } from '../../host/machine/snapshot-bytes.js';
import { StateMachine } from '../../host/machine/state-machine.js';

const T0 = Date.parse('2026-03-01T00:00:00Z');
const TENANT_B = '22222222-2222-2222-2222-222222222222';

async function* once(bytes: Uint8Array): AsyncGenerator<Uint8Array> {
  // Small chunks, so rows straddle them.
  for (let at = 0; at < bytes.length; at += 7) yield bytes.subarray(at, at + 7);
}

async function dumpOf(m: KvMachine): Promise<string> {
  let text = '';
  for await (const part of dumpText(once(m.snapshot()), { term: 3, digest: m.digest(),
    source: 'data' })) text += part;
  return text;
}

function restore(text: string): StateMachine {
  const machine = StateMachine.create();
  const restorer = new DumpRestorer(machine);
  for (const line of text.split('\n').slice(0, -1)) restorer.take(line);
  restorer.finish();
  return machine;
}

function refusal(text: string): DumpError {
  try {
    restore(text);
  } catch (error) {
    expect(error).toBeInstanceOf(DumpError);
    return error as DumpError;
  }
  throw new Error('the dump was accepted');
}

function workload(): KvMachine {
  const m = KvMachine.create({ nowMs: T0 });
  m.setQuota('00000000-0000-0000-0000-000000000001', { enabled: true, maxRows: 1000,
    maxBytes: null, maxReadsPerSec: 50, maxWritesPerSec: null });
  m.kv([{ op: 'put', ns: 'a', key: 'spelled', value: { n: 1.50, e: 1E2, d: '\u0000é😀' },
    forever: true }]);
  m.kv([{ op: 'put', ns: 'a', key: 'short', value: 'x', ttlSeconds: 1 }]);
  m.kv([{ op: 'put', ns: 'u.ns', key: 'k/ä', value: [1, null, true], ttlSeconds: 600 }], TENANT_B);
  m.kv([{ op: 'incr', ns: 'rl', key: 'user-7', delta: 3, max: 10, ttlSeconds: 60 }]);
  m.kv([{ op: 'put', ns: 'a', key: 'gone', value: 1, forever: true }]);
  m.kv([{ op: 'delete', ns: 'a', key: 'gone' }]);
  m.setQuota(TENANT_B, { enabled: false, maxRows: null, maxBytes: 10, maxReadsPerSec: null,
    maxWritesPerSec: null });
  m.advance(5000);
  m.kv([{ op: 'incr', ns: 'rl', key: 'user-7', delta: 1, max: 10, ttlSeconds: 60 }]);
  keyed(m, 'retry-1', [{ op: 'put', ns: 'a', key: 'paid', value: true, forever: true }]);
  keyed(m, 'retry-2', [{ op: 'incr', ns: 'rl', key: 'user-7', delta: 1, max: 10,
    ttlSeconds: 60 }]);
  return m;
}

/** A write call with an Idempotency-Key, as a node logs it: its answer is recorded. */
function keyed(m: KvMachine, key: string, operations: unknown[]): void {
  const parsed = m.machine.parseRequest({ route: 'batch', tenant: DEFAULT_TENANT,
    body: new TextEncoder().encode(JSON.stringify({ operations })), requireGrant: false });
  if (parsed.kind === 'refused') throw new Error(parsed.detail);
  const out = m.machine.apply(m.appliedIndex + 1, m.now,
    keyedCommand(parsed.command, { key, ttlSeconds: 3600 }));
  expect(out.kind).toBe('call');
}

describe('the dump format', () => {
  it('restores the same digest and the same snapshot bytes', async () => {
    const m = workload();
    const text = await dumpOf(m);
    const lines = text.trim().split('\n').map((l) => JSON.parse(l));
    expect(lines[0]).toMatchObject({ kind: 'header', formatVersion: 1, term: 3,
      digest: m.digest(), tenantCount: 2, rowCount: 5, paused: false, idempotencyRecords: 2 });
    expect(lines.at(-1)).toEqual({ kind: 'end', tenants: 2, idempotencyRecords: 2, rows: 5 });
    const records = lines.filter((l) => l.kind === 'idempotency');
    expect(records.map((r) => r.key)).toEqual(['retry-1', 'retry-2']);
    expect(records[0].fingerprint).toMatch(/^[0-9a-f]{16}$/);
    expect(Buffer.from(records[0].answerBase64, 'base64').toString()).toContain('"paid"');
    const spelled = lines.find((l) => l.key === 'spelled');
    // The value is the machine's text, as a string (exact spellings: test/integration).
    expect(spelled.value).toBe('{"n":1.5,"e":100,"d":"\\u0000é😀"}');
    expect(spelled.expiresAt).toBeNull();
    // The 1 s row expired 4 s ago and was never swept: it is in the state and the digest.
    const short = lines.find((l) => l.key === 'short');
    expect(short.expiresAt).toBe(T0 + 1000);
    expect(lines.filter((l) => l.key === 'gone')).toEqual([]);
    const restored = restore(text);
    expect(restored.digest()).toBe(m.digest());
    expect(restored.recountDigest()).toBe(m.digest());
    expect(KvMachine.restore(m.snapshot()).digest()).toBe(m.digest());
    expect(Buffer.from(snapshotToBytes(restored)).equals(Buffer.from(m.snapshot()))).toBe(true);
  });

  it('carries bytes that are not UTF-8 as base64', async () => {
    const text = await dumpOf(workload());
    const lines = text.trim().split('\n').map((l) => JSON.parse(l));
    const row = lines.find((l) => l.key === 'k/ä');
    delete row.key;
    row.keyBase64 = Buffer.from([0x6b, 0xff, 0xfe]).toString('base64');
    lines.splice(lines.indexOf(row), 1, row);
    const edited = lines.map((l) => JSON.stringify(l)).join('\n') + '\n';
    // The key changed, so the digest the header names no longer holds.
    const error = refusal(edited);
    const actual = /state digest ([0-9a-f]{16})/.exec(error.message)![1]!;
    lines[0].digest = actual;
    const fixed = lines.map((l) => JSON.stringify(l)).join('\n') + '\n';
    const machine = restore(fixed);
    let redumped = '';
    const facts = { term: 3, digest: machine.digest(), source: 'data' as const };
    for await (const part of dumpText(once(snapshotToBytes(machine)), facts)) {
      redumped += part;
    }
    const back = redumped.trim().split('\n').map((l) => JSON.parse(l));
    expect(back.find((l) => l.keyBase64 !== undefined).keyBase64).toBe(row.keyBase64);
  });

  it('refuses damaged, reordered, truncated and edited dumps naming the line', async () => {
    const text = await dumpOf(workload());
    const lines = text.trim().split('\n');
    const join = (ls: string[]) => ls.join('\n') + '\n';
    expect(refusal(join(lines.slice(0, -1))).message).toMatch(/without its end line/);
    const cut = [...lines.slice(0, 4), lines[4]!.slice(0, 30)];
    expect(refusal(join(cut)).message).toMatch(/^line 5: not JSON/);
    const swapped = [...lines];
    // Lines: header, 2 tenants, 2 idempotency records, 5 rows (lines 6 to 10), end.
    [swapped[6], swapped[7]] = [swapped[7]!, swapped[6]!];
    expect(refusal(join(swapped)).message).toMatch(/^line 8: rows out of order/);
    const twice = [...lines.slice(0, 4), lines[3]!, ...lines.slice(5)];
    expect(refusal(join(twice)).message).toMatch(/^line 5: an idempotency record .* twice/);
    const badKey = lines.map((l, i) => i === 4 ? l.replace('"key":"retry-2"', '"key":"é"') : l);
    expect(refusal(join(badKey)).message).toMatch(/^line 5: "key" must be printable ASCII/);
    const edited = lines.map((l) => l.replace('"value":"\\"x\\""', '"value":"\\"y\\""'));
    expect(edited).not.toEqual(lines);
    expect(refusal(join(edited)).message).toMatch(/the dump was changed or damaged/);
    const notJsonValue = lines.map((l) => l.replace('"value":"\\"x\\""', '"value":"x"'));
    expect(refusal(join(notJsonValue)).message).toMatch(/"value" must be the JSON text/);
    const future = lines.map((l, i) => i === 5 ? l.replace(/"version":\d+/, '"version":999')
      : l);
    expect(refusal(join(future)).message).toMatch(/^line 6: "version" 999 is past/);
    const version2 = lines.map((l, i) => i === 0 ? l.replace('"formatVersion":1',
      '"formatVersion":2') : l);
    expect(refusal(join(version2)).message).toMatch(/^line 1: dump format version 2/);
    expect(refusal('').message).toMatch(/the dump is empty/);
    const extra = [...lines, lines[3]!];
    expect(refusal(join(extra)).message).toMatch(/a line follows the end line/);
  });
});
