/**
 * The build's transforms of the compiled module (scripts/stack-frame-stores.mjs,
 * scripts/unread-frames.mjs, scripts/short-copies.mjs): a small program compiled with them as
 * the machine is. Copies of every size up to 40 bytes, overlapping either way, give the bytes
 * `memmove` gives; no shadow-stack frame is zeroed by `memory.fill`; a function the collector
 * can never see running has no frame, and every function it can see keeps one that holds what
 * a collection must see.
 */
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import asc from 'assemblyscript/asc';
import { describe, expect, it } from 'vitest';

import { Wasm } from '../../host/machine/state-machine.js';

const ROOT = new URL('../../', import.meta.url).pathname;
const { StackFrameStores } = (await import(
  pathToFileURL(join(ROOT, 'scripts', 'stack-frame-stores.mjs')).href)) as {
  StackFrameStores: new () => object };
const { UnreadFrames } = (await import(
  pathToFileURL(join(ROOT, 'scripts', 'unread-frames.mjs')).href)) as {
  UnreadFrames: new () => object };
const { ShortCopies } = (await import(
  pathToFileURL(join(ROOT, 'scripts', 'short-copies.mjs')).href)) as {
  ShortCopies: new () => object };

const SOURCE = `
export function copy(d: usize, s: usize, n: usize): void { memory.copy(d, s, n); }
export function scratch(): usize { return heap.alloc(256); }
// Five managed locals live across allocations: a frame of 20 bytes, zeroed on entry.
export function frames(rounds: i32): i32 {
  let total = 0;
  for (let i = 0; i < rounds; i++) {
    let a = 'a' + i.toString(), b = 'b' + i.toString(), c = a + b, d = c + a, e = d + b;
    __collect();
    total += a.length + b.length + c.length + d.length + e.length;
  }
  return total;
}
// The same frame, but the collection runs before any of its slots is written: it scans
// whatever zeroing on entry left there.
export function late(n: i32): i32 {
  __collect();
  let a = 'a' + n.toString(), b = 'b' + n.toString(), c = a + b, d = c + a, e = d + b;
  __collect();
  return a.length + b.length + c.length + d.length + e.length;
}
class Box { text: string = ''; next: Box | null = null; }
const kept = new Box();
// Holds managed references but calls nothing that allocates: no collection can run while it
// does, so nothing ever reads a frame of it.
export function leaf(): i32 {
  let box = kept;
  let text = box.text;
  return text.length + (box.next == null ? 0 : 1);
}
// Allocates, so it may collect; a function that only calls it may collect too.
function shout(s: string): string { return s + '!'; }
function twice(s: string): string { return shout(shout(s)); }
// Holds strings across a leaf, an allocation two calls down and collections.
export function across(n: i32): i32 {
  let a = 'y' + n.toString();
  let before = leaf();
  let b = twice(a);
  __collect();
  let c = twice(b);
  __collect();
  return before + a.length + b.length + c.length;
}
`;

async function compile(): Promise<{ exports: Record<string, unknown>; text: string }> {
  const out: Record<string, string | Uint8Array> = {};
  const { error } = await asc.main(['input.ts', '--outFile', 'out.wasm', '--textFile',
    'out.wat', '--runtime', 'incremental', '--optimizeLevel', '3', '--enable', 'simd',
    '--exportRuntime'], {
    readFile: (name: string) => (name === 'input.ts' ? SOURCE : null),
    writeFile: (name: string, contents: string | Uint8Array) => { out[name] = contents; },
    listFiles: () => [],
    transforms: [StackFrameStores, UnreadFrames, ShortCopies],
  } as unknown as Parameters<typeof asc.main>[1]);
  if (error) throw error;
  const instance = new Wasm.Instance(new Wasm.Module(out['out.wasm'] as Uint8Array), {
    env: { abort: () => { throw new Error('abort'); }, seed: () => 1 } });
  return { exports: instance.exports as Record<string, unknown>,
    text: out['out.wat'] as string };
}

describe('the build transforms', async () => {
  const { exports, text } = await compile();
  const copy = exports['copy'] as (d: number, s: number, n: number) => void;
  const memory = exports['memory'] as { buffer: ArrayBuffer };

  it('leave no memory.copy but the helper\'s, and no frame zeroed by memory.fill', () => {
    expect(text.match(/memory\.copy/g)).toHaveLength(1);
    expect(text).toContain('call $~hivekv/copy');
    const frameFill = new RegExp('global\\.get \\$~lib/memory/__stack_pointer\\s+' +
      'i32\\.const 0\\s+i32\\.const \\d+\\s+memory\\.fill');
    expect(text).not.toMatch(frameFill);
  });

  it('copy every size up to 40 bytes as memmove does, overlapping either way', () => {
    const base = (exports['scratch'] as () => number)();
    const bytes = (): Uint8Array => new Uint8Array(memory.buffer, base, 256);
    let checked = 0;
    for (let n = 0; n <= 40; n++) {
      for (const [from, to] of [[0, 100], [100, 0], [40, 43], [43, 40], [60, 60 + n], [7, 9],
        [9, 7], [33, 32], [32, 33]] as const) {
        const view = bytes();
        for (let i = 0; i < view.length; i++) view[i] = (i * 37 + n) & 0xff;
        const expected = Uint8Array.from(view);
        expected.copyWithin(to, from, from + n);
        copy(base + to, base + from, n);
        expect(Array.from(bytes()), `n=${n} from=${from} to=${to}`).toEqual(Array.from(expected));
        checked++;
      }
    }
    expect(checked).toBe(41 * 9);
  });

  it('zero every byte of a frame before a collection scans it', () => {
    // Frames grow down from the stack pointer's start; fill the bytes they will take with
    // what no pointer is, so a slot left unzeroed sends the collector out of bounds.
    const top = Number(/__stack_pointer \(mut i32\) \(i32\.const (\d+)\)/.exec(text)?.[1]);
    expect(top).toBeGreaterThan(1024);
    new Uint8Array(memory.buffer, top - 1024, 1024).fill(0xff);
    expect((exports['late'] as (n: number) => number)(7)).toBe(2 + 2 + 4 + 6 + 8);
  });

  it('give no frame to a function the collector cannot see running, and keep the others\'', () => {
    const bodyOf = (name: string): string => {
      const at = text.indexOf(`(func $input/${name} `);
      expect(at, name).toBeGreaterThanOrEqual(0);
      const end = text.indexOf('\n (func ', at + 1);
      return text.slice(at, end < 0 ? undefined : end);
    };
    const framed = (name: string): boolean => bodyOf(name).includes('__stack_pointer');
    expect(framed('leaf')).toBe(false);
    expect(framed('across')).toBe(true);
    expect(framed('frames')).toBe(true);
    expect(framed('late')).toBe(true);
    expect((exports['leaf'] as () => number)()).toBe(0);
  });

  it('keep what a collection must see when the allocation is calls away', () => {
    const across = exports['across'] as (n: number) => number;
    // 'y7' (2), 'y7!!' (4), 'y7!!!!' (6); a string collected under it would read as garbage.
    for (let round = 0; round < 20; round++) expect(across(7)).toBe(2 + 4 + 6);
  });

  it('keep what a collection must see in zeroed frames', () => {
    const frames = exports['frames'] as (rounds: number) => number;
    let expected = 0;
    for (let i = 0; i < 50; i++) {
      const a = `a${i}`, b = `b${i}`, c = a + b, d = c + a, e = d + b;
      expected += a.length + b.length + c.length + d.length + e.length;
    }
    expect(frames(50)).toBe(expected);
  });
});
