/** The peer-link message codec: round trips for every type, and garbage never throws. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  decodeMessage, encodeMessage, MESSAGE_FORMAT_VERSION,
} from '../../host/core/raft/message-codec.js';
import { MESSAGE_TYPES, type Message } from '../../host/core/raft/messages.js';

const h = { from: 'n1', to: 'n2', term: 7 };
const meta = { index: 40, term: 6, timeMs: 1_700_000_000_000, voters: ['n1', 'n2', 'n3'],
  learners: ['n4'], peers: [{ id: 'n1', address: '10.0.0.1:7001' },
    { id: 'n2', address: '' }, { id: 'n3', address: 'h3:7003' }, { id: 'n4', address: 'h4:1' }],
  removed: ['n0'] };
const samples: Message[] = [
  { type: 'preVote', ...h, lastLogIndex: 9, lastLogTerm: 6 },
  { type: 'preVoteResponse', ...h, granted: true },
  { type: 'vote', ...h, lastLogIndex: 9, lastLogTerm: 6, transfer: true },
  { type: 'voteResponse', ...h, granted: false },
  { type: 'append', ...h, prevLogIndex: 3, prevLogTerm: 2, commitIndex: 3, entries: [
    { term: 7, index: 4, timeMs: 5, type: 'empty', data: new Uint8Array(0) },
    { term: 7, index: 5, timeMs: 6, type: 'normal', data: new Uint8Array([1, 2, 255]) },
    { term: 7, index: 6, timeMs: 6, type: 'config', data: new Uint8Array([123, 125]) }] },
  { type: 'appendResponse', ...h, success: false, matchIndex: 0, rejectedIndex: 9,
    hintIndex: 4, hintTerm: 2 },
  { type: 'heartbeat', ...h, commitIndex: 12, readContext: 3 },
  { type: 'heartbeatResponse', ...h, readContext: 3 },
  { type: 'propose', ...h, term: 0, data: new Uint8Array([9, 9]), nowMs: 1_700_000_000_123 },
  { type: 'readIndex', ...h, term: 0, requestId: 77 },
  { type: 'readIndexResponse', ...h, term: 0, requestId: 77, readIndex: -1 },
  { type: 'snapshotChunk', ...h, meta, offset: 8, totalBytes: 11, chunkBytes: 3,
    data: new Uint8Array([1, 2, 3]) },
  { type: 'snapshotChunkResponse', ...h, snapshotIndex: 40, nextOffset: 11 },
  { type: 'timeoutNow', ...h, from: 'nœud-é' },
  { type: 'membershipRequest', ...h, term: 0, requestId: 5,
    change: { kind: 'addLearner', id: 'n4', peer: '10.0.0.4:7001' } },
  { type: 'membershipResponse', ...h, term: 0, requestId: 5, index: 0, entryTerm: 0,
    refusal: 'not-caught-up', detail: 'n4 is 12 entries behind' },
];

describe('message codec', () => {
  it('copies a proposal\'s and a snapshot chunk\'s bytes out of a Buffer frame', () => {
    for (const sample of samples.filter((m) => m.type === 'propose' ||
      m.type === 'snapshotChunk')) {
      const frame = Buffer.from(encodeMessage(sample));
      const decoded = decodeMessage(frame) as { data: Uint8Array } | null;
      expect(decoded).not.toBeNull();
      frame.fill(0);
      expect([...decoded!.data]).toEqual([...(sample as { data: Uint8Array }).data]);
      expect(decoded!.data.buffer).not.toBe(frame.buffer);
    }
  });

  it('has one sample per message type', () => {
    expect(samples.map((m) => m.type)).toEqual(MESSAGE_TYPES);
  });

  it.each(samples.map((m) => [m.type, m]))('%s round-trips', (_type, message) => {
    expect(decodeMessage(encodeMessage(message))).toEqual(message);
  });

  it.each(samples.map((m) => [m.type, m]))('%s: every truncation decodes to null', (_t, m) => {
    const frame = encodeMessage(m);
    for (let cut = 0; cut < frame.length; cut++) {
      expect(decodeMessage(frame.subarray(0, cut))).toBeNull();
    }
  });

  it('a (pre)vote carries selfRemoved as one trailing byte, only when true', () => {
    for (const vote of [samples[0]!, samples[2]!]) {
      const plain = encodeMessage(vote);
      const flagged = encodeMessage({ ...vote, selfRemoved: true } as Message);
      expect(decodeMessage(flagged)).toEqual({ ...vote, selfRemoved: true });
      // false is written as nothing: the frame of the release before, read as before.
      expect(encodeMessage({ ...vote, selfRemoved: false } as Message)).toEqual(plain);
      expect(flagged.subarray(0, plain.length)).toEqual(plain);
      expect(flagged.length).toBe(plain.length + 1);
      const other = flagged.slice();
      other[other.length - 1] = 2;
      expect(decodeMessage(other)).toBeNull();
      expect(decodeMessage(new Uint8Array([...flagged, 1]))).toBeNull();
    }
  });

  it('rejects trailing bytes, an unknown version and an unknown type', () => {
    const frame = encodeMessage(samples[0]!);
    expect(decodeMessage(new Uint8Array([...frame, 0]))).toBeNull();
    expect(decodeMessage(new Uint8Array([MESSAGE_FORMAT_VERSION + 1, ...frame.subarray(1)])))
      .toBeNull();
    expect(decodeMessage(new Uint8Array([MESSAGE_FORMAT_VERSION, 200, ...frame.subarray(2)])))
      .toBeNull();
  });

  it('rejects a non-integer number and invalid UTF-8', () => {
    const frame = encodeMessage({ type: 'heartbeatResponse', ...h, readContext: 1 });
    const bad = frame.slice();
    new DataView(bad.buffer).setFloat64(bad.length - 8, 1.5, true);
    expect(decodeMessage(bad)).toBeNull();
    const badName = frame.slice();
    badName[4] = 0xff; // inside "n1"
    expect(decodeMessage(badName)).toBeNull();
  });

  it('never throws on random bytes or on random mutations of valid frames', () => {
    const seed = Number(process.env['SEED'] ?? 11);
    fc.assert(fc.property(fc.uint8Array({ maxLength: 200 }), (data) => {
      const decoded = decodeMessage(data);
      if (decoded !== null) expect(decodeMessage(encodeMessage(decoded))).toEqual(decoded);
    }), { seed, numRuns: 2000 });
    fc.assert(fc.property(fc.nat(samples.length - 1), fc.nat(400), fc.nat(255),
      (which, at, value) => {
        const frame = encodeMessage(samples[which]!).slice();
        frame[at % frame.length] = value;
        expect(() => decodeMessage(frame)).not.toThrow();
      }), { seed, numRuns: 2000 });
  });
});
