/**
 * Model test of the machine's request parser against the reference it replaces: for
 * generated requests on all three routes, Node's decoding + JSON.parse + validate.ts /
 * transaction.ts + encodeCommand on one side, StateMachine.parseRequest on the other. Both
 * must refuse with the same status, reason and detail, or produce commands that decode to
 * the same call, a value compared by what JSON.parse reads from it (the machine keeps the
 * client's spelling, the reference re-serialised it).
 *
 * Under the default limits bodies are spelled freely (whitespace, escapes, number forms);
 * under small limits, where random values reach the value-size bound, they are spelled as
 * JSON.stringify spells them, since the bound is measured on the client's compact text.
 * Mutated bodies skip numbers a double does not carry exactly (tested in
 * request-parser.test.ts). Prints its seed; replay with SEED=<n>.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { StateMachine } from '../../host/machine/state-machine.js';
import { decodeCommand } from '../../host/machine/command-decode.js';
import type { Command, KvOp } from '../../host/machine/commands.js';
import type { ParseOutcome, RequestFrame } from '../../host/machine/request.js';
import { loadConfig, type KvLimits } from '../../host/node/config.js';
import { referenceParse } from '../helpers/request-reference.js';
import { mutate, mutation, requestFrame } from './request-arbitraries.js';

const SEED = process.env.SEED !== undefined ? Number(process.env.SEED) : Date.now() % 2 ** 31;
const RUNS = Number(process.env.RUNS ?? 1500);

const TENANT = '00000000-0000-0000-0000-000000000001';
const DEFAULT_LIMITS = loadConfig({}, {}).limits;
const SMALL_LIMITS: KvLimits = {
  maxValueBytes: 64, maxKeyBytes: 16, maxOpsPerCall: 4, maxKeysPerCall: 3, prefixLimit: 5,
  maxReadBytes: 1000, maxBodyBytes: 1 << 20,
};

function machineWith(limits: KvLimits): StateMachine {
  const m = StateMachine.create();
  m.setRequestLimits(limits);
  return m;
}

/** A value as JSON.parse reads it, re-serialised: independent of how it was spelled. */
function reread(op: KvOp): KvOp {
  return op.op === 'put' ? { ...op, valueJson: JSON.stringify(JSON.parse(op.valueJson)) } : op;
}

type Comparable =
  | { kind: 'refused'; status: number; reason: string; detail: string }
  | { kind: 'command'; hasWrites: boolean; opCount: number; command: Command };

function comparable(outcome: ParseOutcome): Comparable {
  if (outcome.kind === 'refused') return outcome;
  const decoded = decodeCommand(outcome.command);
  if (!decoded.ok) throw new Error(`command does not decode: ${decoded.reason}`);
  let command = decoded.command;
  if (command.kind === 'call') {
    command = { ...command, call: { ...command.call, ops: command.call.ops.map(reread) } };
  }
  return { kind: 'command', hasWrites: outcome.hasWrites, opCount: outcome.opCount, command };
}

function describeFrame(frame: RequestFrame): string {
  const body = frame.body === null ? '(no body)'
    : Buffer.from(frame.body).toString('utf8').slice(0, 300);
  return `${frame.route} ${frame.method ?? ''} ns=${frame.rawNs ?? ''} key=${
    (frame.rawKey ?? '').slice(0, 40)} query=${frame.hasQuery === true} body=${body}`;
}

/** Applies every command the parser writes: the machine must take each one as a call. */
const applier = StateMachine.create();
let appliedIndex = 0;

function agree(m: StateMachine, limits: KvLimits, frame: RequestFrame): void {
  const want = comparable(referenceParse(frame, limits));
  const outcome = m.parseRequest(frame);
  expect(comparable(outcome), describeFrame(frame)).toEqual(want);
  if (outcome.kind === 'command' && outcome.opCount > 0) {
    appliedIndex++;
    const applied = applier.apply(appliedIndex, 1000 * appliedIndex, outcome.command);
    expect(applied.kind, describeFrame(frame)).toBe('call');
  }
}

/** The decimal value of a number literal as `sign|digits|exponent` (0.digits x 10^exp). */
function decimalKey(literal: string): string {
  const m = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(literal);
  if (m === null) return literal;
  const all = m[2]! + (m[3] ?? '');
  const lead = all.length - all.replace(/^0+/, '').length;
  const digits = all.slice(lead).replace(/0+$/, '');
  if (digits === '') return '0';
  return `${m[1]}|${digits}|${m[2]!.length - lead + Number(m[4] ?? '0')}`;
}

/**
 * True when the text holds a number literal whose value a double does not carry exactly
 * (or that overflows one): where the exact reading may differ from the reference's.
 */
export function holdsInexactNumber(text: string): boolean {
  const outside = text.replace(/"(?:[^"\\]|\\.)*"/g, '""');
  for (const literal of outside.match(/-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/g) ?? []) {
    const v = Number(literal);
    if (!Number.isFinite(v) || decimalKey(String(v)) !== decimalKey(literal)) return true;
  }
  return false;
}

describe(`request parser parity with validate.ts (seed ${SEED})`, () => {
  it('generated requests, default limits, any spelling', () => {
    console.log(`request-parity seed: ${SEED} (replay with SEED=${SEED})`);
    const m = machineWith(DEFAULT_LIMITS);
    fc.assert(fc.property(requestFrame(false), (frame) => agree(m, DEFAULT_LIMITS, frame)),
      { seed: SEED, numRuns: RUNS });
  });

  it('generated requests, small limits, canonical spelling', () => {
    const m = machineWith(SMALL_LIMITS);
    fc.assert(fc.property(requestFrame(true), (frame) => agree(m, SMALL_LIMITS, frame)),
      { seed: SEED + 1, numRuns: RUNS });
  });

  it('path keys of random percent-escapes (decodeURIComponent semantics)', () => {
    const m = machineWith(DEFAULT_LIMITS);
    const piece = fc.constantFrom('%', '%C3', '%A9', '%E0', '%80', '%zz', '%2F', 'a', 'é', '%00',
      '%F0', '%9F', '%98', '%ED', '%A0', '%BF', '%C0', '%F4', '%8F', '%2', '%41', '%e2%82%ac');
    fc.assert(fc.property(fc.array(piece, { minLength: 1, maxLength: 8 }),
      fc.array(piece, { maxLength: 3 }), (key, ns) => agree(m, DEFAULT_LIMITS, {
        route: 'path', method: 'GET', body: null, tenant: TENANT, requireGrant: false,
        rawNs: 'a' + ns.join(''), rawKey: key.join(''),
      })), { seed: SEED + 3, numRuns: RUNS });
  });

  it('strings of random bytes (Node replaces invalid UTF-8 with U+FFFD)', () => {
    const m = machineWith(DEFAULT_LIMITS);
    // Any byte but a quote, a backslash or a control byte: all of them stay inside the string.
    const inside = fc.uint8Array({ minLength: 1, maxLength: 12 })
      .map((b) => b.map((x) => (x < 0x20 || x === 0x22 || x === 0x5c ? x | 0x80 : x)));
    fc.assert(fc.property(inside, inside, (key, value) => {
      const body = Buffer.concat([Buffer.from('[{"op":"put","ns":"a","forever":true,"key":"'),
        key, Buffer.from('","value":["'), value, Buffer.from('"]}]')]);
      agree(m, DEFAULT_LIMITS, { route: 'batch', body, tenant: TENANT, requireGrant: false });
    }), { seed: SEED + 4, numRuns: RUNS });
  });

  it('mutated bodies: truncated, flipped, inserted bytes', () => {
    const m = machineWith(DEFAULT_LIMITS);
    fc.assert(fc.property(requestFrame(false), fc.array(mutation, { minLength: 1, maxLength: 3 }),
      (frame, ms) => {
        if (frame.body === null || frame.body.length > 4096) return;
        const body = mutate(frame.body, ms);
        if (holdsInexactNumber(Buffer.from(body).toString('utf8'))) return;
        agree(m, DEFAULT_LIMITS, { ...frame, body });
      }), { seed: SEED + 2, numRuns: RUNS });
  });
});
