// host/machine/command-decode.ts: every command encodeCommand writes decodes back to itself
// (both call layouts), and no byte string makes it throw.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { decodeCommand } from '../../host/machine/command-decode.js';
import { encodeCommand } from '../../host/machine/codec.js';
import type { Command } from '../../host/machine/commands.js';
import { commandArb } from '../model/arbitraries.js';
import { testSeed } from '../helpers/seed.js';

const SEED = testSeed();

/** Calls with every shape, a transaction with its id. */
const shapedCommand: fc.Arbitrary<Command> = fc.tuple(commandArb,
  fc.constantFrom('batch', 'single', 'transaction', undefined), fc.uuid())
  .map(([command, shape, id]) => {
    if (command.kind !== 'call' || shape === undefined) return command;
    const call = shape === 'transaction' ? { ...command.call, shape, transactionId: id }
      : { ...command.call, shape };
    return { ...command, call };
  });

/** What decoding gives back: a CMD_CALL always names its shape. */
function expected(command: Command): Command {
  if (command.kind !== 'call') return command;
  return { ...command, call: { ...command.call, shape: command.call.shape ?? 'batch' } };
}

describe(`command decoder (seed ${SEED})`, () => {
  it('decodes every command encodeCommand writes', () => {
    fc.assert(fc.property(shapedCommand, (command) => {
      expect(decodeCommand(encodeCommand(command))).toEqual({ ok: true,
        command: expected(command) });
    }), { seed: SEED, numRuns: 2000 });
  });

  it('decodes the layout before shapes (CMD_CALL_V1)', () => {
    fc.assert(fc.property(commandArb, (command) => {
      if (command.kind !== 'call') return;
      const bytes = encodeCommand(command);
      // CMD_CALL, shape, empty transaction id (4 bytes), then the V1 body unchanged.
      const v1 = Uint8Array.from([1, ...bytes.subarray(6)]);
      expect(decodeCommand(v1)).toEqual({ ok: true, command });
    }), { seed: SEED + 1, numRuns: 500 });
  });

  it('names what is wrong with garbage, and never throws', () => {
    expect(decodeCommand(new Uint8Array())).toEqual({ ok: false, reason: 'truncated at kind' });
    expect(decodeCommand(Uint8Array.from([99]))).toEqual({ ok: false,
      reason: 'unknown command kind 99' });
    expect(decodeCommand(Uint8Array.from([5, 0]))).toEqual({ ok: false,
      reason: 'trailing bytes' });
    expect(decodeCommand(Uint8Array.from([2, 0, 0, 0, 0, 0, 0, 0, 0x40]))).toEqual({
      ok: false, reason: 'maxKeys is beyond 2^53' });
    fc.assert(fc.property(fc.uint8Array({ maxLength: 64 }), (bytes) => {
      expect(typeof decodeCommand(bytes).ok).toBe('boolean');
    }), { seed: SEED + 2, numRuns: 3000 });
    fc.assert(fc.property(shapedCommand, fc.nat(), fc.nat(255), (command, at, byte) => {
      const bytes = Uint8Array.from(encodeCommand(command));
      const cut = bytes.subarray(0, at % bytes.length);
      expect(decodeCommand(cut).ok).toBe(false);
      bytes[at % bytes.length] = byte;
      expect(typeof decodeCommand(bytes).ok).toBe('boolean');
    }), { seed: SEED + 3, numRuns: 2000 });
  });
});
