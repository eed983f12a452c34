// The machine's `applyEntries` (docs/codec.md, "Entries"): many entries in one crossing, the
// envelope read inside the machine, a duplicated proposal applied once on every replica
// (the dedup table is replicated state and survives snapshots), and answers rendered only for
// this node's own proposals.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Entry } from '../../host/core/raft/types.js';
import {
  CHECKPOINT_RING_ENTRIES, DEDUP_ORIGINS_MAX, DEDUP_WINDOW,
} from '../../host/machine/abi.js';
import { encodeCommand, type AnswerHeader } from '../../host/machine/codec.js';
import {
  DEFAULT_TENANT, type CheckpointOutcome, type Command,
} from '../../host/machine/commands.js';
import { StateMachine, type AppliedEntrySink } from '../../host/machine/state-machine.js';
import { restoreFromBytes, snapshotToBytes } from '../../host/machine/snapshot-bytes.js';
import { encodeEnvelope, type Origin } from '../../host/node/envelope.js';

const SELF: Origin = { nodeId: 'n1', incarnation: 7 };
const OTHER: Origin = { nodeId: 'n2', incarnation: 9 };

const incr = (key: string): Command => ({ kind: 'call', flags: { requireGrant: false },
  call: { tenant: DEFAULT_TENANT, readBytesCeiling: 1 << 20, ops: [{ op: 'incr', ns: 'c', key,
    delta: '1', min: null, max: null, expiry: { kind: 'forever' }, required: false }] } });

/** Records what the sink hears, answers as text. */
class Recorder implements AppliedEntrySink {
  readonly heard: string[] = [];
  answer(seq: number, header: AnswerHeader, body: Uint8Array): void {
    this.heard.push(`answer ${seq} ${header.status} ${new TextDecoder().decode(body)}`);
  }
  done(seq: number): void { this.heard.push(`done ${seq}`); }
  admin(): void { this.heard.push('admin'); }
  swept(removedKeys: number): void { this.heard.push(`swept ${removedKeys}`); }
  checkpoint(entryIndex: number, outcome: CheckpointOutcome): void {
    this.heard.push(`checkpoint ${entryIndex} ${outcome.verdict} ${outcome.index} ` +
      `${outcome.expected} ${outcome.own ?? '-'}`);
  }
  invalid(entryIndex: number, detail: string): void {
    this.heard.push(`invalid ${entryIndex} ${detail}`);
  }
}

/** A log builder: entries at consecutive indexes, one per proposal. */
class Log {
  readonly entries: Entry[] = [];
  add(origin: Origin, seq: number, command: Command): this {
    const index = this.entries.length + 1;
    this.entries.push({ term: 1, index, timeMs: 1_000 + index, type: 'normal',
      data: encodeEnvelope(origin, seq, encodeCommand(command)) });
    return this;
  }
  empty(): this {
    const index = this.entries.length + 1;
    this.entries.push({ term: 1, index, timeMs: 1_000 + index, type: 'empty',
      data: new Uint8Array() });
    return this;
  }
}

function machine(origin: Origin = SELF): StateMachine {
  const m = StateMachine.create();
  m.setOrigin(origin.nodeId, origin.incarnation);
  return m;
}

function counter(m: StateMachine, key: string): string {
  const got = m.read({ tenant: DEFAULT_TENANT, readBytesCeiling: 1 << 20,
    ops: [{ op: 'get', ns: 'c', key }] }, 0);
  if ('invalid' in got) throw new Error(got.invalid);
  return (JSON.parse(new TextDecoder().decode(got.body)) as
    { results: Array<{ value?: unknown }> }).results[0]?.value as string;
}

describe('applyEntries', () => {
  it('answers its own proposals, applies everyone\'s, and counts empty entries', () => {
    const m = machine();
    const rec = new Recorder();
    const log = new Log().empty().add(SELF, 1, incr('a')).add(OTHER, 1, incr('a'))
      .add(SELF, 2, incr('a'));
    m.applyEntries(log.entries, rec);
    expect(m.appliedIndex).toBe(4);
    expect(rec.heard).toEqual([
      'answer 1 200 {"results":[{"index":0,"op":"incr","applied":true,"key":"a","value":1,' +
        '"version":1}]}',
      'answer 2 200 {"results":[{"index":0,"op":"incr","applied":true,"key":"a","value":3,' +
        '"version":3}]}',
    ]);
  });

  it('answers right while its memory grows, in a crossing and between crossings', () => {
    // The host reads and writes through views of all of wasm memory, made once; growing
    // memory detaches them, so every crossing after a growth must see fresh ones.
    const m = machine();
    const rec = new Recorder();
    const log = new Log();
    const valueJson = JSON.stringify('v'.repeat(60_000));
    const bigPut = (key: string): Command => ({ kind: 'call', flags: { requireGrant: false },
      call: { tenant: DEFAULT_TENANT, readBytesCeiling: 1 << 20, ops: Array.from({ length: 16 },
        (_, i) => ({ op: 'put' as const, sentAs: 'put' as const, ns: 'big', key: `${key}-${i}`,
          valueJson,
          expect: null, expiry: { kind: 'forever' as const }, required: false })) } });
    log.add(SELF, 1, incr('a'));
    m.applyEntries(log.entries, rec);
    const startBytes = m.memoryBytes();
    let seq = 2;
    let growths = 0;
    for (let round = 0; round < 40 && growths < 3; round++) {
      const before = m.memoryBytes();
      const from = log.entries.length;
      // Two entries of about 1 MB and a counter in one crossing: memory may grow between
      // the first entry's answer and the last's.
      log.add(SELF, seq++, bigPut(`r${round}a`)).add(SELF, seq++, bigPut(`r${round}b`))
        .add(SELF, seq++, incr('a'));
      m.applyEntries(log.entries.slice(from), rec);
      if (m.memoryBytes() > before) growths++;
      const answers = rec.heard.slice(-3);
      expect(answers[0]).toMatch(new RegExp(`^answer ${seq - 3} 200 \\{"results":\\[\\{"index":0,` +
        `"op":"put","applied":true,"key":"r${round}a-0"`));
      // Versions are the store's own counter: each big entry takes 16 of them.
      expect(answers[2]).toBe(`answer ${seq - 1} 200 {"results":[{"index":0,"op":"incr",` +
        `"applied":true,"key":"a","value":${round + 2},"version":${33 * round + 34}}]}`);
      // A read through the node's own path (the parser's command, answered from memory).
      const parsed = m.parseRequest({ route: 'batch', tenant: DEFAULT_TENANT, requireGrant: false,
        body: new TextEncoder().encode(`[{"op":"get","ns":"big","key":"r${round}b-15"}]`) });
      if (parsed.kind !== 'command') throw new Error(parsed.detail);
      let body = '';
      m.readCommandInto(parsed.command, 5_000, { answered: (_h, bytes) => {
        body = new TextDecoder().decode(bytes);
      }, refused: (detail) => { throw new Error(detail); } });
      expect(body.length).toBeGreaterThan(60_000);
      expect(body.startsWith('{"results":[{"index":0,"op":"get","found":true,"key":' +
        `"r${round}b-15","value":"vvv`)).toBe(true);
    }
    expect(growths).toBe(3);
    expect(m.memoryBytes()).toBeGreaterThan(startBytes);
  });

  it('applies a duplicated proposal once, on every replica alike (the counter moves once)',
    () => {
      const log = new Log().add(OTHER, 5, incr('x')).add(OTHER, 5, incr('x'))
        .add(OTHER, 4, incr('x')).add(OTHER, 4, incr('x'));
      const a = machine(SELF);
      const b = machine(OTHER);
      a.applyEntries(log.entries, new Recorder());
      const rec = new Recorder();
      b.applyEntries(log.entries, rec);
      expect(counter(a, 'x')).toBe(2);
      expect(a.digest()).toBe(b.digest());
      expect(rec.heard.filter((h) => h.startsWith('answer'))).toHaveLength(2);
    });

  it('refuses a sequence number too old to tell apart, and keeps incarnations apart', () => {
    const m = machine();
    m.applyEntries(new Log().add(OTHER, DEDUP_WINDOW + 10, incr('x')).add(OTHER, 10, incr('x'))
      .add({ nodeId: 'n2', incarnation: 10 }, 10, incr('x')).entries, new Recorder());
    expect(counter(m, 'x')).toBe(2);
  });

  it('admits exactly what a set of the window\'s numbers would, across restores (property)',
    () => {
      // The reference: a proposal applies unless its number is at or below the highest less
      // the window, or was applied already; the highest moves up to every applied number.
      type Step = { readonly kind: 'next' } | { readonly kind: 'jump'; readonly by: number } |
        { readonly kind: 'back'; readonly by: number } | { readonly kind: 'other' };
      const step: fc.Arbitrary<Step> = fc.oneof(
        { weight: 6, arbitrary: fc.constant<Step>({ kind: 'next' }) },
        { weight: 2, arbitrary: fc.integer({ min: 1, max: 2 * DEDUP_WINDOW + 3 })
          .map((by): Step => ({ kind: 'jump', by })) },
        // Jumps of about a window, then small steps back: numbers that share a slot with
        // numbers applied before the window moved.
        { weight: 2, arbitrary: fc.integer({ min: DEDUP_WINDOW - 6, max: DEDUP_WINDOW + 6 })
          .map((by): Step => ({ kind: 'jump', by })) },
        { weight: 3, arbitrary: fc.integer({ min: 0, max: 12 })
          .map((by): Step => ({ kind: 'back', by })) },
        { weight: 1, arbitrary: fc.integer({ min: 0, max: DEDUP_WINDOW + 2 })
          .map((by): Step => ({ kind: 'back', by })) },
        { weight: 1, arbitrary: fc.constant<Step>({ kind: 'other' }) },
      );
      fc.assert(fc.property(fc.array(step, { minLength: 1, maxLength: 120 }),
        fc.integer({ min: 0, max: 120 }), (steps, restoreAt) => {
          const seen = new Set<number>();
          let highest = 0;
          const expected: number[] = [];
          const log = new Log();
          for (const s of steps) {
            if (s.kind === 'other') {
              log.add(OTHER, 1 + log.entries.length, incr('y'));
              continue;
            }
            const seq = s.kind === 'next' ? highest + 1 : s.kind === 'jump' ? highest + s.by
              : Math.max(1, highest - s.by);
            log.add(SELF, seq, incr('x'));
            if (seq <= highest - DEDUP_WINDOW || seen.has(seq)) continue;
            seen.add(seq);
            highest = Math.max(highest, seq);
            expected.push(seq);
          }
          let m = machine(SELF);
          const rec = new Recorder();
          const cut = Math.min(restoreAt, log.entries.length);
          m.applyEntries(log.entries.slice(0, cut), rec);
          const restored = machine(SELF);
          restoreFromBytes(restored, snapshotToBytes(m));
          expect(snapshotToBytes(restored)).toEqual(snapshotToBytes(m));
          m = restored;
          for (const entry of log.entries.slice(cut)) m.applyEntries([entry], rec);
          const admitted = rec.heard.filter((h) => h.startsWith('answer'))
            .map((h) => Number(h.split(' ')[1]));
          expect(admitted).toEqual(expected);
        }), { numRuns: 80 });
    });

  it('forgets the least recently applied origin past DEDUP_ORIGINS_MAX', () => {
    const m = machine();
    const log = new Log();
    for (let i = 0; i <= DEDUP_ORIGINS_MAX; i++) {
      log.add({ nodeId: `n${i}`, incarnation: 1 }, 1, incr('x'));
    }
    log.add({ nodeId: 'n0', incarnation: 1 }, 1, incr('x'));
    m.applyEntries(log.entries, new Recorder());
    // n0 was evicted when the 65th origin arrived, so its repeat applies again.
    expect(counter(m, 'x')).toBe(DEDUP_ORIGINS_MAX + 2);
  });

  it('keeps the table across a snapshot: a duplicate after it still applies once', () => {
    const m = machine();
    const log = new Log().add(OTHER, 3, incr('x')).add(OTHER, 3, incr('x'));
    m.applyEntries(log.entries.slice(0, 1), new Recorder());
    const restored = machine();
    restoreFromBytes(restored, snapshotToBytes(m));
    restored.applyEntries(log.entries.slice(1), new Recorder());
    expect(counter(restored, 'x')).toBe(1);
  });

  it('treats an entry without a valid envelope as a no-op everywhere', () => {
    const m = machine();
    const rec = new Recorder();
    m.applyEntries([{ term: 1, index: 1, timeMs: 5, type: 'normal',
      data: new Uint8Array([9, 9, 9]) }], rec);
    expect(m.appliedIndex).toBe(1);
    expect(rec.heard).toEqual([]);
  });

  it('reports sweeps, admin entries and its own non-call proposals', () => {
    const m = machine();
    const rec = new Recorder();
    m.applyEntries(new Log().add(SELF, 1, { kind: 'setPaused', paused: true })
      .add(OTHER, 1, { kind: 'sweep', maxKeys: 10 }).entries, rec);
    expect(rec.heard).toEqual(['admin', 'done 1']);
    expect(m.isPaused()).toBe(true);
  });

  it('refuses entries that do not follow the applied index', () => {
    const m = machine();
    const log = new Log().add(SELF, 1, incr('a')).add(SELF, 2, incr('a'));
    expect(() => m.applyEntries(log.entries.slice(1), new Recorder())).toThrow(/expected/);
  });
});

describe('checkpoint entries', () => {
  /** Applies `n` incr entries from OTHER (seq from `seq0`), one crossing. */
  function incrs(m: StateMachine, n: number, seq0: number): void {
    const log = new Log();
    for (let i = 0; i < m.appliedIndex; i++) log.empty();
    for (let i = 0; i < n; i++) log.add(OTHER, seq0 + i, incr(`k${i % 7}`));
    m.applyEntries(log.entries.slice(m.appliedIndex), new Recorder());
  }

  function checkpoint(m: StateMachine, index: number, digest: string): string[] {
    const log = new Log();
    for (let i = 0; i < m.appliedIndex; i++) log.empty();
    log.add(OTHER, 1_000_000 + m.appliedIndex, { kind: 'checkpoint', index, digest });
    const rec = new Recorder();
    m.applyEntries(log.entries.slice(m.appliedIndex), rec);
    return rec.heard;
  }

  it('passes on an equal digest at a past index, diverges on another, on every replica', () => {
    const m = machine();
    incrs(m, 10, 1);
    const at10 = m.digest();
    incrs(m, 5, 100);
    const wrong = at10 === 'f'.repeat(16) ? '0'.repeat(16) : 'f'.repeat(16);
    expect(checkpoint(m, 10, at10)).toEqual([`checkpoint 16 passed 10 ${at10} ${at10}`]);
    expect(checkpoint(m, 10, wrong)).toEqual([`checkpoint 17 diverged 10 ${wrong} ${at10}`]);
    // A checkpoint applies nothing but its index: it is in the digest like any entry's.
    expect(m.appliedIndex).toBe(17);
  });

  it('refuses an index this replica has not applied, and index 0', () => {
    const m = machine();
    incrs(m, 3, 1);
    expect(checkpoint(m, 4, '0'.repeat(16))[0]).toMatch(/^invalid 4 checkpoint index not applied/);
    expect(checkpoint(m, 0, '0'.repeat(16))[0]).toMatch(/^invalid 5 checkpoint index not applied/);
  });

  it('is unverifiable past the ring of recent indexes and before a restore', () => {
    const m = machine();
    incrs(m, 2, 1);
    const at2 = m.digest();
    incrs(m, CHECKPOINT_RING_ENTRIES - 1, 10);
    // Index 2 is exactly CHECKPOINT_RING_ENTRIES - 1 back: still kept.
    expect(checkpoint(m, 2, at2)[0]).toMatch(/ passed 2 /);
    // One more entry (the checkpoint itself) pushed index 2 out of the ring.
    expect(checkpoint(m, 2, at2)[0]).toBe(`checkpoint ${m.appliedIndex} unverifiable 2 ${at2} -`);
    const restored = machine();
    restoreFromBytes(restored, snapshotToBytes(m));
    const at = m.appliedIndex;
    const digest = m.digest();
    expect(checkpoint(restored, at - 1, digest)[0]).toMatch(/ unverifiable /);
    // The restored index itself is known: its digest is the snapshot's.
    expect(checkpoint(restored, at, digest)[0]).toMatch(/ passed /);
  });
});
