/**
 * The simulator's own parts, tested before they are trusted to judge the production code:
 * the PRNG, the virtual clock, the faulty disk and network, and the safety checkers (each
 * must catch the violation it exists for).
 */
import { describe, expect, it } from 'vitest';
import type { Message } from '../../host/core/raft/messages.js';
import type { Entry } from '../../host/core/raft/types.js';
import { StorageCorruptionError } from '../../host/storage/storage.js';
import { Checkers } from './checkers.js';
import { Faults } from './faults.js';
import { SimNetwork } from './network.js';
import { SimRandom } from './random.js';
import { NodeClock, SimScheduler } from './scheduler.js';
import { SimDisk, SimStorage } from './storage.js';
import { Trace } from './trace.js';

const trace = new Trace(false, null, () => 0);

function entries(from: number, terms: readonly number[]): Entry[] {
  return terms.map((term, i) => ({ term, index: from + i, timeMs: 1000 + from + i,
    type: 'normal' as const, data: new Uint8Array([from + i, term]) }));
}

/** Runs the scheduler until `promise` settles (bounded). */
async function settle<T>(scheduler: SimScheduler, promise: Promise<T>): Promise<T> {
  let done = false;
  const watched = promise.finally(() => { done = true; });
  watched.catch(() => undefined);
  for (let i = 0; i < 10_000 && !done; i++) {
    if (!scheduler.runNext()) break;
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
  return watched;
}

function storageWith(rates: Parameters<typeof Faults.fixed>[1], seed = 1) {
  const rng = new SimRandom(seed);
  const scheduler = new SimScheduler();
  const disk = new SimDisk('n1', rng);
  const faults = Faults.fixed(rng, rates);
  const make = () =>
    new SimStorage(disk, scheduler, rng, faults, trace, { mayCorrupt: () => true });
  return { rng, scheduler, disk, faults, make };
}

describe('SimRandom', () => {
  it('replays the same sequence from the same seed, another from another', () => {
    const a = new SimRandom(42);
    const b = new SimRandom(42);
    const c = new SimRandom(43);
    const seqA = Array.from({ length: 8 }, () => a.nextU32());
    expect(Array.from({ length: 8 }, () => b.nextU32())).toEqual(seqA);
    expect(Array.from({ length: 8 }, () => c.nextU32())).not.toEqual(seqA);
  });

  it('keeps below() in range and roughly uniform', () => {
    const rng = new SimRandom(5);
    const counts = [0, 0, 0, 0, 0];
    for (let i = 0; i < 50_000; i++) counts[rng.below(5)]!++;
    for (const count of counts) expect(Math.abs(count - 10_000)).toBeLessThan(500);
  });
});

describe('SimScheduler', () => {
  it('runs events by time, then by scheduling order, and skips cancelled ones', () => {
    const scheduler = new SimScheduler();
    const seen: string[] = [];
    scheduler.atDelayUs(20, '', () => seen.push('b'));
    scheduler.atDelayUs(10, '', () => seen.push('a'));
    scheduler.atDelayUs(20, '', () => seen.push('c'));
    scheduler.atDelayUs(15, '', () => seen.push('x')).cancel();
    while (scheduler.runNext());
    expect(seen).toEqual(['a', 'b', 'c']);
    expect(scheduler.elapsedUs()).toBe(20);
  });

  it('a killed node clock never fires its timers', () => {
    const scheduler = new SimScheduler();
    const clock = new NodeClock(scheduler);
    let fired = 0;
    clock.after(5, () => fired++);
    clock.kill();
    clock.after(5, () => fired++);
    while (scheduler.runNext());
    expect(fired).toBe(0);
  });
});

describe('SimStorage', () => {
  it('keeps only synced data across a crash, and the overwrite rule', async () => {
    const { scheduler, make } = storageWith({});
    const first = make();
    await settle(scheduler, first.recover());
    first.append(entries(1, [1, 1, 1]));
    first.setHardState({ term: 1, votedFor: 'n1', commitIndex: 0 });
    await settle(scheduler, first.sync());
    first.append(entries(3, [2, 2])); // overwrites index 3
    await settle(scheduler, first.sync());
    first.append(entries(5, [2]));    // never synced
    first.crash();
    const second = make();
    const state = await settle(scheduler, second.recover());
    expect(state.entries.map((e) => [e.index, e.term])).toEqual([[1, 1], [2, 1], [3, 2], [4, 2]]);
    expect(state.hardState).toEqual({ term: 1, votedFor: 'n1', commitIndex: 0 });
  });

  it('cuts a torn last record at recovery', async () => {
    const { scheduler, make } = storageWith({ 'wal.torn-write': 1 });
    const first = make();
    await settle(scheduler, first.recover());
    first.append(entries(1, [1]));
    await settle(scheduler, first.sync());
    first.append(entries(2, [1, 1]));
    first.crash();
    const state = await settle(scheduler, make().recover());
    expect(state.entries.map((e) => e.index)).toEqual([1, 2].slice(0, state.entries.length));
    expect(state.entries.length).toBeLessThan(3);
  });

  it('rejects recovery with StorageCorruptionError after a bit flip', async () => {
    const { scheduler, make, disk } = storageWith({ 'disk.bit-flip': 1 });
    const first = make();
    await settle(scheduler, first.recover()).catch(() => undefined);
    disk.corrupted = false;
    first.append(entries(1, [1, 1, 1]));
    await settle(scheduler, first.sync());
    first.crash();
    await expect(settle(scheduler, make().recover())).rejects.toBeInstanceOf(
      StorageCorruptionError);
  });

  it('rejects sync when the fsync fails', async () => {
    const { scheduler, make } = storageWith({ 'disk.fsync-fail': 1 });
    const storage = make();
    storage.append(entries(1, [1]));
    await expect(settle(scheduler, storage.sync())).rejects.toThrow('simulated fsync failure');
  });

  it('a snapshot that conflicts with the log at its index drops the log, as on disk (§7)',
    async () => {
      const meta = (index: number, term: number) => ({ index, term, timeMs: 0,
        voters: ['n1'], learners: [], peers: [], removed: [] });
      const installs = async (
        log: number[], snapshot: { index: number; term: number }): Promise<number[][]> => {
        const { scheduler, make } = storageWith({});
        const first = make();
        await settle(scheduler, first.recover());
        first.append(entries(1, log));
        await settle(scheduler, first.sync());
        const sink = await first.createSnapshot(meta(snapshot.index, snapshot.term), 0);
        await settle(scheduler, sink.commit());
        const during = first.logView().entries.map((e) => [e.index, e.term]);
        first.crash();
        const after = (await settle(scheduler, make().recover())).entries;
        expect(after.map((e) => [e.index, e.term])).toEqual(during);
        return during;
      };
      // A leader cut off appended 3 and 4 in term 2; the snapshot at 3 comes from term 3.
      expect(await installs([1, 1, 2, 2], { index: 3, term: 3 })).toEqual([]);
      // The same index and term: what follows the snapshot stays.
      expect(await installs([1, 1, 2, 2], { index: 3, term: 2 })).toEqual([[4, 2]]);
    });

  it('refuses an append that leaves a hole', () => {
    const { make } = storageWith({});
    expect(() => make().append(entries(3, [1]))).toThrow(/hole/);
  });
});

describe('SimNetwork', () => {
  function network(rates: Parameters<typeof Faults.fixed>[1]) {
    const rng = new SimRandom(3);
    const scheduler = new SimScheduler();
    const net = new SimNetwork(['a', 'b', 'c'], rng, scheduler, Faults.fixed(rng, rates), trace);
    const got: string[] = [];
    for (const id of ['a', 'b', 'c']) {
      void net.transportFor(id).start((from, frame) => got.push(`${from}>${id}:${frame[0]}`));
    }
    return { net, scheduler, got };
  }

  it('drops across a partition and delivers within a side', () => {
    const { net, scheduler, got } = network({});
    net.partition(['a']);
    net.transportFor('a');
    net.send('b', 'a', new Uint8Array([1]));
    net.send('b', 'c', new Uint8Array([2]));
    while (scheduler.runNext());
    expect(got).toEqual(['b>c:2']);
  });

  it('holds frames on a clogged link and releases them when unclogged', () => {
    const { net, scheduler, got } = network({});
    net.clog('a', 'b');
    net.send('a', 'b', new Uint8Array([1]));
    while (scheduler.runNext());
    expect(got).toEqual([]);
    net.unclog('a', 'b');
    while (scheduler.runNext());
    expect(got).toEqual(['a>b:1']);
  });

  it('duplicates frames when told to', () => {
    const { net, scheduler, got } = network({ 'net.duplicate': 1 });
    net.send('a', 'b', new Uint8Array([9]));
    while (scheduler.runNext());
    expect(got).toEqual(['a>b:9', 'a>b:9']);
  });
});

describe('Checkers catch what they exist for', () => {
  const view = (list: Entry[], snapshotIndex = 0) =>
    ({ snapshotIndex, snapshotTerm: 0, entries: list });

  it('two leaders in one term', () => {
    const checkers = new Checkers(trace);
    checkers.observeLeader('a', 3, view([]));
    checkers.observeLeader('b', 3, view([]));
    expect(checkers.violation).toMatch(/two leaders in term 3/);
  });

  it('a committed entry that changes, and one applied before it is durable', () => {
    const disk = new SimDisk('a', new SimRandom(1));
    disk.applyOp({ kind: 'append', entries: entries(1, [1]) }, false);
    const checkers = new Checkers(trace);
    checkers.observeApply('a', 1, 1001, entries(1, [1])[0]!, disk);
    expect(checkers.violation).toBeNull();
    checkers.observeApply('b', 1, 1001, entries(1, [2])[0]!, disk);
    expect(checkers.violation).toMatch(/state machine safety/);
    const fresh = new Checkers(trace);
    fresh.observeApply('a', 2, 1002, entries(2, [1])[0]!, disk);
    expect(fresh.violation).toMatch(/before it is durable/);
  });

  it('a leader missing a committed entry of an earlier term', () => {
    const disk = new SimDisk('a', new SimRandom(1));
    disk.applyOp({ kind: 'append', entries: entries(1, [1, 1]) }, false);
    const checkers = new Checkers(trace);
    for (const e of entries(1, [1, 1])) checkers.observeApply('a', e.index, e.timeMs, e, disk);
    checkers.observeLeader('b', 2, view(entries(1, [1])));
    expect(checkers.violation).toMatch(/leader completeness/);
  });

  it('logs that agree on a later term but differ before it', () => {
    const checkers = new Checkers(trace);
    const a = entries(1, [1, 1, 2]);
    const b = [...entries(1, [1]), { ...entries(2, [1])[0]!, data: new Uint8Array([7]) },
      ...entries(3, [2])];
    checkers.checkLogMatching('a', view(a), 'b', view(b));
    expect(checkers.violation).toMatch(/log matching/);
  });

  it('different digests at one applied index', () => {
    const checkers = new Checkers(trace);
    checkers.observeDigest('a', 5, 'aa');
    checkers.observeDigest('b', 5, 'bb');
    expect(checkers.violation).toMatch(/digest/);
  });

  it('a vote granted before it is durable', () => {
    const disk = new SimDisk('a', new SimRandom(1));
    const checkers = new Checkers(trace);
    const vote: Message = { type: 'voteResponse', from: 'a', to: 'b', term: 1, granted: true };
    checkers.observeSend('a', vote, disk);
    expect(checkers.violation).toMatch(/persist before send/);
  });
});
