/**
 * The load generator's framing and key choice: HTTP answers with a length, chunked and split
 * across reads; RESP values nested and incomplete; YCSB's Zipfian skew.
 */
import { describe, expect, it } from 'vitest';

import { parseHttp, parseResp, respCommand, RespError } from '../../bench/suite/wire.js';
import { makeValue, valueNumber, valueTag, zipfianChooser } from '../../bench/suite/workloads.js';
import { createUnitRandom } from '../../host/core/prng.js';

const http = (text: string) => Buffer.from(text.replace(/\n/g, '\r\n'));

describe('HTTP framing', () => {
  it('reads a body by its Content-Length, in any letter case, and says where it ends', () => {
    const bytes = Buffer.concat([http('HTTP/1.1 200 OK\nContent-Length: 5\n\nhello'),
      http('HTTP/1.1 503 Service Unavailable\ncontent-length: 2\n\nno')]);
    const first = parseHttp(bytes, 0)!;
    expect(first.reply.status).toBe(200);
    expect((first.reply.body as Buffer).toString()).toBe('hello');
    const second = parseHttp(bytes, first.end)!;
    expect(second.reply.status).toBe(503);
    expect((second.reply.body as Buffer).toString()).toBe('no');
    expect(second.end).toBe(bytes.length);
  });

  it('waits for the rest of a split answer', () => {
    const whole = http('HTTP/1.1 200 OK\nContent-Length: 10\n\n0123456789');
    for (const cut of [5, 30, whole.length - 1]) {
      expect(parseHttp(whole.subarray(0, cut), 0)).toBeNull();
    }
    expect(parseHttp(whole, 0)).not.toBeNull();
  });

  it('joins a chunked body', () => {
    const bytes = http('HTTP/1.1 200 OK\nTransfer-Encoding: chunked\n\n3\nabc\n2\nde\n0\n\n');
    const parsed = parseHttp(bytes, 0)!;
    expect((parsed.reply.body as Buffer).toString()).toBe('abcde');
    expect(parsed.end).toBe(bytes.length);
    expect(parseHttp(bytes.subarray(0, bytes.length - 3), 0)).toBeNull();
  });
});

describe('RESP framing', () => {
  it('encodes a command as an array of bulk strings', () => {
    expect(respCommand(['SET', 'k', 'vv']).toString())
      .toBe('*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2\r\nvv\r\n');
  });

  it('reads nested arrays, nulls, integers and errors, and waits for the rest', () => {
    const bytes = Buffer.from('*3\r\n:1\r\n$-1\r\n*1\r\n$2\r\nab\r\n-ERR nope\r\n');
    const first = parseResp(bytes, 0)!;
    expect(first.value).toEqual([1, null, [Buffer.from('ab')]]);
    const second = parseResp(bytes, first.end)!;
    expect(second.value).toBeInstanceOf(RespError);
    expect(parseResp(bytes.subarray(0, 20), 0)).toBeNull();
  });
});

describe('workload values and keys', () => {
  it('a value carries its tag and number, at the size asked for', () => {
    const value = makeValue('r7', 42, 100);
    expect(value).toHaveLength(100);
    expect(valueTag(value)).toBe('r7');
    expect(valueNumber(value)).toBe(42);
    expect(valueNumber('17')).toBe(17);
  });

  it('the Zipfian choice is skewed and stays in range', () => {
    const choose = zipfianChooser(100_000, createUnitRandom(1));
    const counts = new Map<number, number>();
    const draws = 100_000;
    let outside = 0;
    for (let i = 0; i < draws; i++) {
      const key = choose();
      if (!Number.isInteger(key) || key < 0 || key >= 100_000) outside++;
      counts.set(key, (counts.get(key) ?? 0) + 1);
    }
    expect(outside).toBe(0);
    const top = [...counts.values()].sort((a, b) => b - a);
    // With theta 0.99 over 100k items the hottest key takes several percent of all draws;
    // a uniform choice would give it about 0.001%.
    expect(top[0]! / draws).toBeGreaterThan(0.03);
    expect(top.slice(0, 100).reduce((a, b) => a + b, 0) / draws).toBeGreaterThan(0.3);
  });
});
