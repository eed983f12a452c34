/**
 * Structured JSON logs, captured through the destination option: one JSON object per line,
 * levels honoured, child fields carried, and KV keys and values never written.
 */

import { describe, expect, it } from 'vitest';
import { createLogger, LOG_LEVELS, REDACTED_CENSOR, type Logger } from '../../host/node/log.js';

type Line = Record<string, unknown>;

function capture(level: string): { lines: () => Line[]; log: Logger } {
  const chunks: string[] = [];
  const log = createLogger(level, { write: (chunk: string) => void chunks.push(chunk) });
  const lines = (): Line[] =>
    chunks
      .join('')
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line) as Line);
  return { lines, log };
}

describe('createLogger', () => {
  it('writes one JSON object per line with level, time, message and fields', () => {
    const { lines, log } = capture('info');
    const fields = { requestId: 'r1', ns: 'orders', ops: ['get', 'put'], status: 200, ms: 1.5 };
    log.info(fields, 'kv call');
    log.warn({ requestId: 'r2', status: 429 }, 'refused');
    log.error({ requestId: 'r3', status: 503 }, 'unavailable');
    const [info, warn, error] = lines();
    expect(info).toMatchObject({ level: 30, msg: 'kv call', ...fields });
    expect(typeof info?.['time']).toBe('string');
    expect(info).toMatchObject({ name: 'hivekv', pid: process.pid });
    expect(warn).toMatchObject({ level: 40, msg: 'refused' });
    expect(error).toMatchObject({ level: 50, msg: 'unavailable' });
  });

  it('honours the level', () => {
    const { lines, log } = capture('warn');
    log.debug({}, 'debug');
    log.info({}, 'info');
    log.warn({}, 'warn');
    expect(lines().map((line) => line['msg'])).toEqual(['warn']);
    const silent = capture('silent');
    silent.log.error({}, 'nothing');
    expect(silent.lines()).toEqual([]);
  });

  it('says whether debug lines are written, for itself and its children', () => {
    // The HTTP layer skips building a call's log line when they are not.
    for (const level of LOG_LEVELS) {
      const { log } = capture(level);
      const expected = level === 'debug' || level === 'trace';
      expect(log.debugEnabled, level).toBe(expected);
      expect(log.child({ component: 'raft' }).debugEnabled, level).toBe(expected);
    }
  });

  it('child loggers carry their fields on every line', () => {
    const { lines, log } = capture('debug');
    const raft = log.child({ component: 'raft', node: 'n1' });
    raft.child({ term: 3 }).debug({ index: 9 }, 'appended');
    expect(lines()[0]).toMatchObject({ component: 'raft', node: 'n1', term: 3, index: 9 });
  });

  it('censors KV keys, values, prefixes and bodies, at the top level and one down', () => {
    const { lines, log } = capture('info');
    const secret = 'customer-4711';
    log.info(
      {
        ns: 'orders',
        key: secret,
        value: { card: secret },
        keys: [secret],
        prefix: secret,
        body: secret,
        op: { op: 'put', key: secret, value: secret },
        headers: { authorization: `Bearer ${secret}` },
      },
      'oops',
    );
    const line = lines()[0];
    expect(JSON.stringify(line)).not.toContain(secret);
    expect(line).toMatchObject({ ns: 'orders', key: REDACTED_CENSOR, op: { op: 'put' } });
  });

  it('refuses an unknown level, naming the choices', () => {
    expect(() => createLogger('verbose')).toThrow(/verbose.*info/);
    for (const level of LOG_LEVELS) expect(() => capture(level)).not.toThrow();
  });
});
