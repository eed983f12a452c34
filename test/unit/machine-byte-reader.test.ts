/**
 * The reader of the machine's output: over a buffer of its own, or over a span of views shared
 * with other readers (the node reads every answer this way, from views of all of wasm memory),
 * where the bytes past the span are someone else's and must never be read.
 */
import { expect, it } from 'vitest';

import { ByteReader, byteViewsOf } from '../../host/machine/codec.js';

function sample(): Uint8Array {
  // 3 bytes of someone else's, then: u8 7, u16 0x0102, u32 5, i64 2^40 + 3, str "héllo", 2 bytes.
  const bytes = new Uint8Array(64).fill(0xee);
  const view = new DataView(bytes.buffer);
  let at = 3;
  bytes[at++] = 7;
  view.setUint16(at, 0x0102, true); at += 2;
  view.setUint32(at, 5, true); at += 4;
  view.setUint32(at, 3, true); view.setUint32(at + 4, 256, true); at += 8;
  const text = Buffer.from('héllo', 'utf8');
  view.setUint32(at, text.length, true); at += 4;
  bytes.set(text, at); at += text.length;
  bytes[at++] = 1; bytes[at++] = 2;
  return bytes;
}

const SPAN_START = 3;
const SPAN_BYTES = 1 + 2 + 4 + 8 + 4 + 6 + 2;

it('a span reader reads its span in order, and only its span', () => {
  const views = byteViewsOf(sample());
  const r = ByteReader.span(views, SPAN_START, SPAN_BYTES);
  expect(r.pos).toBe(SPAN_START);
  expect(r.u8()).toBe(7);
  expect(r.u16()).toBe(0x0102);
  expect(r.u32()).toBe(5);
  expect(r.i64()).toBe(2 ** 40 + 3);
  expect(r.str()).toBe('héllo');
  expect(r.done).toBe(false);
  expect(Array.from(r.bytesView(2))).toEqual([1, 2]);
  expect(r.done).toBe(true);
  // The buffer goes on (0xee), the span does not: every read refuses, whatever its width.
  for (const read of [() => r.u8(), () => r.u16(), () => r.u32(), () => r.i64(),
    () => r.str(), () => r.bytesView(1), () => r.bytesCopy(1)]) {
    expect(read).toThrow(/past the end/);
  }
});

it('a read that starts inside the span and ends past it is refused', () => {
  const views = byteViewsOf(sample());
  const r = ByteReader.span(views, SPAN_START, 3);
  expect(r.u8()).toBe(7);
  expect(() => r.u32()).toThrow(/past the end/);
  // The string's length is in the span, its last byte is not.
  const short = ByteReader.span(views, SPAN_START + 15, 4 + 5);
  expect(() => short.str()).toThrow(/past the end/);
});

it('readers of spans share their views, and a copy outlives the bytes it came from', () => {
  const bytes = sample();
  const views = byteViewsOf(bytes);
  const first = ByteReader.span(views, SPAN_START + 19, 6);
  const copy = first.bytesCopy(6);
  const second = ByteReader.span(views, SPAN_START + 19, 6);
  const view = second.bytesView(6);
  bytes.fill(0, SPAN_START + 19, SPAN_START + 25);
  expect(Buffer.from(copy).toString('utf8')).toBe('héllo');
  expect(Array.from(view)).toEqual([0, 0, 0, 0, 0, 0]);
});

it('a reader of a whole buffer reads to its end, as it always did', () => {
  const bytes = sample().subarray(SPAN_START, SPAN_START + SPAN_BYTES);
  const r = new ByteReader(bytes);
  expect(r.pos).toBe(0);
  expect(r.u8()).toBe(7);
  r.pos = SPAN_BYTES - 2;
  expect(Array.from(r.bytesCopy(2))).toEqual([1, 2]);
  expect(r.done).toBe(true);
  expect(() => r.u8()).toThrow(/past the end/);
});

it('a span outside its buffer, or views of another buffer, are refused when made', () => {
  const views = byteViewsOf(sample());
  expect(() => ByteReader.span(views, 60, 5)).toThrow(/assertion failed/);
  expect(() => ByteReader.span(views, -1, 2)).toThrow(/assertion failed/);
  expect(() => new ByteReader(new Uint8Array(8), views)).toThrow(/assertion failed/);
});
