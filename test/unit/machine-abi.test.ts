/**
 * The WebAssembly boundary: the module imports nothing but env.abort (no clock, randomness
 * or console can reach the machine), and the layout constants of assembly/abi.ts and
 * host/machine/abi.ts are the same names with the same values.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { Wasm, machineModule } from '../../host/machine/state-machine.js';
import * as hostAbi from '../../host/machine/abi.js';

function wasmConstants(): Map<string, number> {
  const src = readFileSync(new URL('../../assembly/abi.ts', import.meta.url), 'utf8');
  const out = new Map<string, number>();
  const re = /^export const ([A-Z0-9_]+): (?:i32|i64) = (-?(?:0x[0-9a-fA-F]+|\d+));/gm;
  for (const m of src.matchAll(re)) out.set(m[1]!, Number(m[2]));
  return out;
}

describe('wasm boundary', () => {
  it('imports only env.abort (no seed, Date, trace, console)', () => {
    expect(Wasm.Module.imports(machineModule())).toEqual([
      { module: 'env', name: 'abort', kind: 'function' },
    ]);
  });

  it('host/machine/abi.ts mirrors assembly/abi.ts exactly', () => {
    const wasm = wasmConstants();
    const host = new Map(Object.entries(hostAbi));
    expect(wasm.size).toBeGreaterThan(40);
    expect([...host.keys()].sort()).toEqual([...wasm.keys()].sort());
    for (const [name, value] of wasm) expect(host.get(name), name).toBe(value);
  });
});
