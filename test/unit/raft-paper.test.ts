/**
 * One test per claim of the Raft paper (and of the thesis for pre-vote, check-quorum, read
 * index and leadership transfer), each named after the claim and its section.
 */
import { describe, expect, it } from 'vitest';
import { takeMark } from '../../host/core/marks.js';
import { bootstrapConfiguration } from '../../host/core/raft/configuration.js';
import { RaftLog } from '../../host/core/raft/log.js';
import {
  createRaft, type RaftConfig, type RaftCore, type Ready,
} from '../../host/core/raft/raft.js';
import type { AppendMessage, Message } from '../../host/core/raft/messages.js';
import type { Entry } from '../../host/core/raft/types.js';
import { bytes, Cluster, defaultConfig, text } from '../interaction/cluster.js';

const THREE = ['n1', 'n2', 'n3'];

/** Builds entries: `entries({ from: 3, terms: [1, 1, 2] })` gives indexes 3, 4, 5. */
function entries(spec: { from: number; terms: readonly number[] }): Entry[] {
  return spec.terms.map((term, i) => ({ term, index: spec.from + i, timeMs: 0,
    type: 'normal' as const, data: bytes(`e${spec.from + i}`) }));
}

function follower(id: string, term: number, log: Entry[], voters = THREE,
  tweak?: (c: RaftConfig) => RaftConfig) {
  const base = defaultConfig(id, voters, 7);
  return createRaft(tweak === undefined ? base : tweak(base), {
    hardState: { term, votedFor: null, commitIndex: 0 }, snapshot: null, snapshotDataBytes: null,
    entries: log,
  });
}

function drain(raft: ReturnType<typeof follower>): Message[] {
  const out: Message[] = [];
  for (let i = 0; i < 10 && raft.hasReady(); i++) {
    const rd = raft.ready();
    out.push(...rd.earlyMessages, ...rd.messages);
    raft.advance(rd);
    persistAll(raft, rd);
  }
  return out;
}

/** Says the Ready's entries are durable, as a driver does once its fsync returns. */
function persistAll(raft: RaftCore, rd: Ready): void {
  const last = rd.entries[rd.entries.length - 1];
  if (last !== undefined) raft.persisted(last.index, last.term);
}

function append(over: Partial<AppendMessage>): AppendMessage {
  return { type: 'append', from: 'n1', to: 'n2', term: 2, prevLogIndex: 0, prevLogTerm: 0,
    entries: [], commitIndex: 0, ...over };
}

function appliedTexts(c: Cluster, id: string): string[] {
  return c.node(id).applied.filter((e) => e.type === 'normal').map((e) => text(e.data));
}

/**
 * A seeded run of five nodes under partitions, drops and uneven ticking, checking one
 * leader per term at every step. Prints its seed; replays with SEED=...
 */
function chaos(what: string) {
  const seed = Number(process.env['SEED'] ?? 1 + Math.floor(Math.random() * 1e6));
  console.log(`${what} seed=${seed} (replay with SEED=${seed})`);
  const c = new Cluster(['n1', 'n2', 'n3', 'n4', 'n5'], undefined, seed);
  const leaderOfTerm = new Map<number, string>();
  const violations: string[] = [];
  let rng = seed >>> 0;
  const next = (n: number): number => {
    rng = (Math.imul(rng, 1103515245) + 12345) >>> 0;
    return (rng >>> 8) % n;
  };
  const ids = [...c.nodes.keys()];
  for (let step = 0; step < 600; step++) {
    if (step % 40 === 0) {
      // Heal, split at random, or cut the current leader off with at most one peer.
      const cut = 1 + next(4);
      const leader = c.leaders()[0];
      const choice = next(3);
      if (choice === 0) c.groups = null;
      else if (choice === 1 || leader === undefined) c.groups = [ids.slice(0, cut), ids.slice(cut)];
      else {
        const minority = next(2) === 0 ? [leader] : [leader, ids[next(ids.length)]!];
        c.groups = [minority, ids.filter((id) => !minority.includes(id))];
      }
    }
    for (const id of ids) if (next(3) > 0) c.tick(id);
    c.processAll();
    c.queue = c.queue.filter(() => next(10) > 0);
    c.deliverOnce();
    const leader = c.leaders()[0];
    if (leader !== undefined && next(3) === 0) c.raft(leader).propose(bytes(`p${step}`), step);
    crashAndCompact(c, ids, step, next);
    for (const id of c.leaders()) {
      const term = c.raft(id).status().term;
      const known = leaderOfTerm.get(term);
      if (known !== undefined && known !== id) violations.push(`term ${term}: ${known}, ${id}`);
      leaderOfTerm.set(term, id);
    }
  }
  c.groups = null;
  for (const id of ids) if (!c.node(id).up) c.restart(id);
  c.tickAll(40);
  return { c, leaderOfTerm, violations };
}

/** Now and then a node crashes (restarting from its disk later) or compacts its log. */
function crashAndCompact(c: Cluster, ids: string[], step: number, next: (n: number) => number) {
  if (step % 50 === 25) {
    for (const id of ids) if (!c.node(id).up) c.restart(id);
    if (next(2) === 0) c.crash(ids[next(ids.length)]!);
  }
  if (next(20) === 0) {
    const node = c.node(ids[next(ids.length)]!);
    const last = node.applied[node.applied.length - 1];
    // Between Readies only, as the node driver does: a delivered snapshot the driver has not
    // taken yet has already replaced the core's log up to an index past `last`.
    if (node.up && last !== undefined && !node.raft.hasReady()) {
      c.compact(node.id, { index: last.index, term: last.term, timeMs: last.timeMs,
        ...node.raft.configurationAt(last.index) }, bytes(`state@${last.index}`));
    }
  }
}

describe('§5.1 terms', () => {
  it('follower rejects append with stale term (§5.1)', () => {
    const n2 = follower('n2', 3, entries({ from: 1, terms: [1] }));
    drain(n2);
    n2.step(append({ term: 2, prevLogIndex: 1, prevLogTerm: 1, entries: entries({ from: 2,
      terms: [2] }) }));
    const out = drain(n2);
    expect(n2.status().lastIndex).toBe(1);
    expect(out).toMatchObject([{ type: 'appendResponse', term: 3, success: false }]);
  });

  it('a server that sees a higher term adopts it and becomes follower (§5.1)', () => {
    const c = new Cluster(THREE);
    c.campaign('n1');
    c.raft('n1').step({ type: 'heartbeatResponse', from: 'n2', to: 'n1', term: 9,
      readContext: 0 });
    expect(c.raft('n1').status()).toMatchObject({ role: 'follower', term: 9, leader: null });
  });
});

describe('§5.2 leader election', () => {
  it('follower campaigns after a randomized election timeout in [T, 2T) (§5.2)', () => {
    const seen = new Set<number>();
    for (let seed = 1; seed <= 20; seed++) {
      const c = new Cluster(THREE, undefined, seed);
      const ticks = c.campaign('n2');
      expect(ticks).toBeGreaterThanOrEqual(10);
      expect(ticks).toBeLessThan(20);
      seen.add(ticks);
    }
    expect(seen.size).toBeGreaterThan(1);
  });

  it('the election timeout replays from the seed (§5.2)', () => {
    const a = new Cluster(THREE, undefined, 42).campaign('n3');
    const b = new Cluster(THREE, undefined, 42).campaign('n3');
    expect(a).toBe(b);
  });

  it('voter grants at most one vote per term, first come first served (§5.2)', () => {
    const n3 = follower('n3', 1, [], THREE, (c) => ({ ...c, checkQuorum: false }));
    const vote = (from: string): Message => ({ type: 'vote', from, to: 'n3', term: 2,
      lastLogIndex: 0, lastLogTerm: 0, transfer: false });
    n3.step(vote('n1'));
    n3.step(vote('n2'));
    n3.step(vote('n1'));
    const answers = drain(n3).map((m) => (m.type === 'voteResponse' ? `${m.to}:${m.granted}` : ''));
    expect(answers).toEqual(['n1:true', 'n2:false', 'n1:true']);
  });

  it('candidate with a majority of votes becomes leader (§5.2)', () => {
    const c = new Cluster(THREE, (cfg) => ({ ...cfg, preVote: false }));
    c.campaign('n1');
    expect(c.raft('n1').status()).toMatchObject({ role: 'leader', term: 1 });
    expect(c.raft('n2').status().leader).toBe('n1');
  });

  it('candidate returns to follower when it hears from a leader of its term (§5.2)', () => {
    const n2 = follower('n2', 1, [], THREE, (c) => ({ ...c, preVote: false }));
    for (let i = 0; i < 20 && n2.status().role === 'follower'; i++) n2.tick();
    expect(n2.status()).toMatchObject({ role: 'candidate', term: 2 });
    n2.step({ type: 'heartbeat', from: 'n3', to: 'n2', term: 2, commitIndex: 0, readContext: 0 });
    expect(n2.status()).toMatchObject({ role: 'follower', term: 2, leader: 'n3' });
  });

  it('candidate that is denied by a majority returns to follower (§5.2)', () => {
    const n2 = follower('n2', 1, [], THREE, (c) => ({ ...c, preVote: false }));
    for (let i = 0; i < 20 && n2.status().role === 'follower'; i++) n2.tick();
    for (const from of ['n1', 'n3']) {
      n2.step({ type: 'voteResponse', from, to: 'n2', term: 2, granted: false });
    }
    expect(n2.status().role).toBe('follower');
  });

  it('election safety: at most one leader per term (§5.2)', () => {
    const run = chaos('election safety');
    expect(run.violations).toEqual([]);
    // The partitions force several elections, so the check covers many terms.
    expect(run.leaderOfTerm.size).toBeGreaterThan(1);
  });
});

describe('§5.3 log replication', () => {
  it('log matching: same index and term means identical prefixes (§5.3)', () => {
    const { c } = chaos('log matching');
    // Each log as index -> "term/data"; a snapshot covers (and hides) a committed prefix.
    const logs = [...c.nodes.values()].map((n) => new Map(n.disk.entries.map((e) =>
      [e.index, `${e.term}/${text(e.data)}`])));
    let compared = 0;
    for (const a of logs) {
      for (const b of logs) {
        const shared = [...a.keys()].filter((i) => b.has(i)).sort((x, y) => y - x);
        const top = shared.find((i) => a.get(i)!.split('/')[0] === b.get(i)!.split('/')[0]);
        if (top === undefined) continue;
        for (const i of shared) if (i <= top) expect(a.get(i)).toBe(b.get(i));
        compared++;
      }
    }
    expect(compared).toBeGreaterThan(0);
  });

  it('state machine safety: replicas apply the same entry at each index (§5.4.3)', () => {
    // The cluster harness throws as soon as two nodes apply different terms at one index.
    const { c } = chaos('state machine safety');
    const applied = [...c.nodes.values()].map((n) => n.appliedIndex);
    // After healing and restarting everyone, all converge on the whole committed log.
    expect(new Set(applied).size).toBe(1);
    expect(applied[0]).toBeGreaterThan(1);
  });

  it('follower rejects append whose previous entry does not match (§5.3)', () => {
    const n2 = follower('n2', 2, entries({ from: 1, terms: [1, 1] }));
    drain(n2);
    n2.step(append({ prevLogIndex: 2, prevLogTerm: 2, entries: entries({ from: 3, terms: [2] }) }));
    expect(n2.status().lastIndex).toBe(2);
    expect(drain(n2)).toMatchObject([{ type: 'appendResponse', success: false,
      rejectedIndex: 2, hintIndex: 2, hintTerm: 1 }]);
  });

  it('follower deletes conflicting entries and appends the leader\'s (§5.3)', () => {
    const n2 = follower('n2', 3, entries({ from: 1, terms: [1, 2, 2, 2] }));
    drain(n2);
    n2.step(append({ term: 3, prevLogIndex: 1, prevLogTerm: 1,
      entries: entries({ from: 2, terms: [3] }), commitIndex: 2 }));
    const rd = n2.ready();
    expect(rd.entries.map((e) => `${e.index}/${e.term}`)).toEqual(['2/3']);
    // Entry 2 is committed but not yet durable here: it is applied only once persisted.
    expect(rd.committedEntries.map((e) => e.index)).toEqual([1]);
    n2.advance(rd);
    persistAll(n2, rd);
    expect(n2.status()).toMatchObject({ lastIndex: 2, commitIndex: 2 });
    expect(n2.ready().committedEntries.map((e) => e.index)).toEqual([2]);
  });

  it('fast backtracking skips a whole conflicting term per round trip (§5.3)', () => {
    // n1 (leader, term 5) has 1/1 then 4/4..; n2 holds 1/1 then many entries of term 2.
    const c = new Cluster(['n1', 'n2', 'n3'], (cfg) => cfg);
    const n2log = entries({ from: 1, terms: [1, 2, 2, 2, 2, 2, 2, 2, 2, 2] });
    const n1log = entries({ from: 1, terms: [1, 3, 3, 3] });
    for (const [id, log] of [['n1', n1log], ['n2', n2log], ['n3', n1log]] as const) {
      const node = c.node(id);
      node.disk.entries = [...log];
      node.disk.hardState = { term: 3, votedFor: null, commitIndex: 1 };
      c.restart(id);
    }
    c.campaign('n1');
    const rejects: Message[] = [];
    c.onDeliver = (m) => { if (m.type === 'appendResponse' && !m.success) rejects.push(m); };
    c.tickAll(3);
    expect(rejects.length).toBeLessThanOrEqual(2);
    const logOf = (id: string) => c.node(id).disk.entries.map((e) => `${e.index}/${e.term}`);
    expect(logOf('n2')).toEqual(logOf('n1'));
  });

  it('leader pipelines appends with a bounded number in flight (§5.3)', () => {
    const c = new Cluster(THREE, (cfg) => ({ ...cfg, maxInflightAppends: 3,
      maxEntriesBytesPerAppend: 40 }));
    c.campaign('n1');
    c.tickAll(1);
    for (let i = 0; i < 10; i++) c.raft('n1').propose(bytes(`v${i}`), 1);
    c.processReady('n1');
    const toN2 = c.queue.filter((m) => m.type === 'append' && m.to === 'n2') as AppendMessage[];
    // 40 bytes per message hold one entry each; only 3 may be unacknowledged.
    expect(toN2.map((m) => m.entries.length)).toEqual([1, 1, 1]);
    c.deliverAll();
    c.tickAll(2);
    expect(appliedTexts(c, 'n2')).toHaveLength(10);
  });

  it('entries are batched per append up to the byte bound (§5.3)', () => {
    const c = new Cluster(THREE, (cfg) => ({ ...cfg, maxEntriesBytesPerAppend: 4 * 40 }));
    c.campaign('n1');
    c.tickAll(1);
    for (let i = 0; i < 10; i++) c.raft('n1').propose(bytes(`v${i}`), 1);
    c.processReady('n1');
    const toN2 = c.queue.filter((m) => m.type === 'append' && m.to === 'n2') as AppendMessage[];
    expect(toN2.map((m) => m.entries.length)).toEqual([4, 4, 2]);
  });

  it('a crashed follower catches up when it comes back: appends are retried (§5.5)', () => {
    const c = new Cluster(THREE);
    c.campaign('n1');
    c.crash('n3');
    for (let i = 0; i < 5; i++) c.raft('n1').propose(bytes(`w${i}`), i);
    c.tickAll(2);
    expect(appliedTexts(c, 'n1')).toHaveLength(5);
    c.restart('n3');
    c.tickAll(3);
    expect(appliedTexts(c, 'n3')).toEqual(appliedTexts(c, 'n1'));
  });

  it('a member whose replication is paused gets heartbeats only, and catches up after', () => {
    const c = new Cluster(THREE);
    c.campaign('n1');
    c.crash('n3');
    for (let i = 0; i < 5; i++) c.raft('n1').propose(bytes(`w${i}`), i);
    c.tickAll(2);
    c.raft('n1').setReplicationPaused(['n3']);
    c.restart('n3');
    const toN3: string[] = [];
    c.onDeliver = (m) => { if (m.to === 'n3') toN3.push(m.type); };
    c.tickAll(10);
    // Heartbeats only, answered; the others commit without it.
    expect(new Set(toN3)).toEqual(new Set(['heartbeat']));
    expect(toN3.length).toBeGreaterThanOrEqual(10);
    expect(appliedTexts(c, 'n3')).toEqual([]);
    c.raft('n1').propose(bytes('w5'), 5);
    c.tickAll(2);
    expect(appliedTexts(c, 'n2')).toHaveLength(6);
    c.raft('n1').setReplicationPaused([]);
    c.tickAll(3);
    expect(appliedTexts(c, 'n3')).toEqual(appliedTexts(c, 'n1'));
  });
});

describe('§5.3 with a commit index on disk', () => {
  it('the hard state never claims an index whose new entry is not durable yet (§5.3)', () => {
    // n2 holds 2/1 and 3/1 uncommitted; a leader of term 2 replaces them and says 3 is
    // committed. Written before the replacing entries, a commit index of 3 could outlive
    // them in a crash, and n2 would restart and apply the old 3/1.
    const n2 = follower('n2', 1, entries({ from: 1, terms: [1, 1, 1] }));
    drain(n2);
    n2.step(append({ prevLogIndex: 1, prevLogTerm: 1, entries: entries({ from: 2,
      terms: [2, 2] }), commitIndex: 3 }));
    const first = n2.ready();
    expect(first.entries.map((e) => e.index)).toEqual([2, 3]);
    expect(first.hardState?.commitIndex ?? 0).toBeLessThanOrEqual(1);
    n2.advance(first);
    n2.persisted(3, 2);
    const second = n2.ready();
    expect(second.hardState?.commitIndex).toBe(3);
  });
});

describe('§5.4 safety', () => {
  it('leader completeness: voter denies a candidate with a less up-to-date log (§5.4.1)', () => {
    const n3 = follower('n3', 2, entries({ from: 1, terms: [1, 2] }), THREE,
      (c) => ({ ...c, checkQuorum: false }));
    let term = 10;
    const ask = (lastLogIndex: number, lastLogTerm: number): boolean => {
      n3.step({ type: 'vote', from: 'n1', to: 'n3', term: term++,
        lastLogIndex, lastLogTerm, transfer: false });
      const answer = drain(n3).find((m) => m.type === 'voteResponse');
      return answer !== undefined && answer.type === 'voteResponse' && answer.granted;
    };
    expect(ask(5, 1)).toBe(false); // longer log, older last term
    expect(ask(1, 2)).toBe(false); // same last term, shorter log
    expect(ask(2, 2)).toBe(true); // as up to date
    expect(ask(1, 3)).toBe(true); // newer last term
  });

  it('commit only entries of the current term by counting replicas (§5.4.2)', () => {
    // n1 restarts with 1/1, 2/2 (not committed) and wins term 3; its empty entry is 3/3.
    const n1 = createRaft({ ...defaultConfig('n1', THREE, 3), preVote: false }, {
      hardState: { term: 2, votedFor: null, commitIndex: 1 }, snapshot: null,
      snapshotDataBytes: null, entries: entries({ from: 1, terms: [1, 2] }) });
    for (let i = 0; i < 20 && n1.status().role === 'follower'; i++) n1.tick();
    n1.step({ type: 'voteResponse', from: 'n2', to: 'n1', term: 3, granted: true });
    expect(n1.status().role).toBe('leader');
    drain(n1);
    takeMark('commit-waits-for-current-term');
    // n2 holds index 2 (term 2): a majority has it, yet it is not of term 3.
    n1.step({ type: 'appendResponse', from: 'n2', to: 'n1', term: 3, success: true,
      matchIndex: 2, rejectedIndex: 0, hintIndex: 0, hintTerm: 0 });
    expect(n1.status().commitIndex).toBe(1);
    expect(takeMark('commit-waits-for-current-term')).toBeGreaterThan(0);
    n1.step({ type: 'appendResponse', from: 'n2', to: 'n1', term: 3, success: true,
      matchIndex: 3, rejectedIndex: 0, hintIndex: 0, hintTerm: 0 });
    expect(n1.status().commitIndex).toBe(3);
  });

  it('a new leader appends an empty entry of its term at once (§5.4.2, §8)', () => {
    const c = new Cluster(THREE);
    c.campaign('n2');
    const first = c.node('n2').disk.entries[0];
    expect(first).toMatchObject({ index: 1, term: 1, type: 'empty' });
  });

  it('leader stamps never decrease, also across leader changes (§5.4, entry time)', () => {
    const c = new Cluster(THREE);
    c.campaign('n1');
    c.raft('n1').propose(bytes('a'), 1000);
    c.raft('n1').propose(bytes('b'), 500); // a clock step back must not lower the stamp
    c.deliverAll();
    c.tickAll(1);
    c.crash('n1');
    c.tick('n3', 10); // n3's lease on n1 runs out
    c.campaign('n2');
    expect(c.leaders()).toEqual(['n2']);
    c.raft('n2').propose(bytes('c'), 10); // the new leader's clock is behind
    c.tickAll(2);
    const stamps = c.node('n2').applied.map((e) => e.timeMs);
    expect(stamps).toEqual([0, 1000, 1000, 1000, 1000]);
  });
});

describe('§6.4 / §8 client interaction', () => {
  it('client read waits for a heartbeat round (§6.4 / §8)', () => {
    const c = new Cluster(THREE);
    c.campaign('n1');
    c.tickAll(1);
    c.raft('n1').readIndex(7);
    c.processAll();
    expect(c.node('n1').readStates).toEqual([]);
    const heartbeats = c.queue.filter((m) => m.type === 'heartbeat');
    expect(heartbeats).toHaveLength(2);
    c.deliverAll();
    expect(c.node('n1').readStates).toEqual([{ requestId: 7, readIndex: 1 }]);
  });

  it('reads pending at one moment share one heartbeat round (§6.4)', () => {
    const c = new Cluster(THREE);
    c.campaign('n1');
    c.tickAll(1);
    for (const id of [1, 2, 3]) c.raft('n1').readIndex(id);
    c.processAll();
    expect(c.queue.filter((m) => m.type === 'heartbeat')).toHaveLength(2);
    c.deliverAll();
    expect(c.node('n1').readStates.map((r) => r.requestId)).toEqual([1, 2, 3]);
  });

  it('a read on a leader with a minority of live peers is never answered (§6.4)', () => {
    const c = new Cluster(THREE, (cfg) => ({ ...cfg, checkQuorum: false }));
    c.campaign('n1');
    c.tickAll(1);
    c.groups = [['n1'], ['n2', 'n3']];
    c.raft('n1').readIndex(9);
    c.deliverAll();
    expect(c.node('n1').readStates).toEqual([]);
    // It fails (readIndex -1) once its deadline passes, so the driver answers 503.
    c.tickAll(25);
    expect(c.node('n1').readStates).toEqual([{ requestId: 9, readIndex: -1 }]);
  });

  it('a new leader serves reads only after committing an entry of its term (§6.4)', () => {
    const c = new Cluster(THREE);
    c.campaign('n1');
    takeMark('read-waits-for-term-commit');
    c.raft('n1').readIndex(1);
    expect(takeMark('read-waits-for-term-commit')).toBe(0);
    c.tickAll(1);
    c.crash('n1');
    c.tick('n3', 10); // n3's lease on n1 runs out
    c.tick('n2', 25);
    c.processAll();
    expect(c.raft('n2').status().role).toBe('pre-candidate');
    c.deliverOnce(); // pre-votes
    c.processAll();
    c.deliverOnce(); // answers
    c.processAll();
    c.deliverOnce(); // votes
    c.processAll();
    c.deliverOnce(); // answers: n2 leads, its empty entry is not committed yet
    expect(c.raft('n2').status().role).toBe('leader');
    c.raft('n2').readIndex(2);
    expect(takeMark('read-waits-for-term-commit')).toBe(1);
    c.deliverAll();
    expect(c.node('n2').readStates).toEqual([{ requestId: 2, readIndex: 2 }]);
  });

  it('a follower asks the leader for the read index (§6.4)', () => {
    const c = new Cluster(THREE);
    c.campaign('n1');
    c.raft('n1').propose(bytes('x'), 1);
    c.tickAll(1);
    c.raft('n3').readIndex(5);
    c.deliverAll();
    expect(c.node('n3').readStates).toEqual([{ requestId: 5, readIndex: 2 }]);
  });

  it('a read fails with readIndex -1 when there is no leader (§6.4)', () => {
    const c = new Cluster(THREE);
    c.raft('n2').readIndex(4);
    c.processAll();
    expect(c.node('n2').readStates).toEqual([{ requestId: 4, readIndex: -1 }]);
  });

  it('a pending read fails when leadership is lost (§6.4)', () => {
    const c = new Cluster(THREE);
    c.campaign('n1');
    c.tickAll(1);
    c.raft('n1').readIndex(3);
    c.processAll();
    c.queue = [];
    c.raft('n1').step({ type: 'heartbeatResponse', from: 'n2', to: 'n1', term: 5, readContext: 0 });
    c.processAll();
    expect(c.node('n1').readStates).toEqual([{ requestId: 3, readIndex: -1 }]);
  });

  it('followers forward proposals to the leader (§8)', () => {
    const c = new Cluster(THREE);
    c.campaign('n1');
    expect(c.raft('n2').propose(bytes('fwd'), 3)).toEqual({ kind: 'forwarded' });
    c.deliverAll();
    c.tickAll(1);
    expect(appliedTexts(c, 'n3')).toEqual(['fwd']);
  });

  it('a proposal with no known leader is dropped (§8)', () => {
    const c = new Cluster(THREE);
    expect(c.raft('n2').propose(bytes('x'), 3)).toEqual({ kind: 'dropped', reason: 'no-leader' });
  });
});

describe('§7 log compaction', () => {
  function lagging() {
    const c = new Cluster(THREE, (cfg) => ({ ...cfg, maxSnapshotChunkBytes: 4 }));
    c.campaign('n1');
    c.crash('n3');
    for (let i = 0; i < 6; i++) c.raft('n1').propose(bytes(`s${i}`), i);
    c.tickAll(2);
    const n1 = c.node('n1');
    const last = n1.applied[n1.applied.length - 1]!;
    const data = bytes('machine-state-at-7');
    c.compact('n1', { index: last.index, term: last.term, timeMs: last.timeMs,
      ...bootstrapConfiguration(THREE) }, data);
    c.raft('n1').propose(bytes('after'), 10);
    c.tickAll(1);
    return { c, data, snapshotIndex: last.index };
  }

  it('snapshot installs on a lagging follower (§7)', () => {
    const { c, data, snapshotIndex } = lagging();
    const chunks: Message[] = [];
    c.onDeliver = (m) => { if (m.type === 'snapshotChunk') chunks.push(m); };
    c.restart('n3');
    let installed: Uint8Array | null = null;
    for (let i = 0; i < 10 && installed === null; i++) {
      c.tick('n1');
      for (let r = 0; r < 20; r++) {
        c.processReady('n3');
        c.processAll();
        if (c.node('n3').disk.snapshot !== null) installed = c.node('n3').disk.snapshotData;
        if (c.queue.length === 0) break;
        c.deliverOnce();
      }
    }
    expect(installed).toEqual(data);
    expect(chunks.length).toBe(Math.ceil(data.length / 4));
    c.tickAll(2);
    expect(c.node('n3').disk.snapshot?.meta.index).toBe(snapshotIndex);
    expect(c.node('n3').disk.entries.map((e) => e.index)).toEqual([snapshotIndex + 1]);
    expect(appliedTexts(c, 'n3')).toEqual(['after']);
  });

  it('a follower that installed a snapshot sends those bytes once it leads (§7)', () => {
    const FIVE = ['n1', 'n2', 'n3', 'n4', 'n5'];
    const c = new Cluster(FIVE, (cfg) => ({ ...cfg, maxSnapshotChunkBytes: 4 }));
    c.campaign('n1');
    c.crash('n4');
    c.crash('n5');
    for (let i = 0; i < 4; i++) c.raft('n1').propose(bytes(`s${i}`), i);
    c.tickAll(2);
    const last = c.node('n1').applied.at(-1)!;
    const data = bytes('machine-state-at-5');
    c.compact('n1', { index: last.index, term: last.term, timeMs: last.timeMs,
      ...bootstrapConfiguration(FIVE) }, data);
    c.restart('n4');
    c.tickAll(3);
    expect(c.node('n4').disk.snapshotData).toEqual(data);
    // n4 leads now; n5, behind the snapshot, can only catch up from n4's copy of it.
    c.raft('n1').transferLeadership('n4');
    c.deliverAll();
    expect(c.leaders()).toEqual(['n4']);
    c.restart('n5');
    c.tickAll(5);
    expect(c.node('n5').disk.snapshot).toMatchObject({ meta: { index: last.index },
      dataBytes: data.length });
    expect(c.node('n5').disk.snapshotData).toEqual(data);
  });

  it('snapshot chunks lost in flight are resent (§7)', () => {
    const { c, data } = lagging();
    c.restart('n3');
    let dropped = 0;
    takeMark('snapshot-resent');
    // Drop every third chunk, three times in all.
    c.dropIf = (m) => m.type === 'snapshotChunk' && dropped < 3 && (m.offset / 4) % 3 === 1 &&
      ++dropped > 0;
    c.tickAll(40);
    expect(dropped).toBe(3);
    expect(takeMark('snapshot-resent')).toBeGreaterThan(0);
    expect(c.node('n3').disk.snapshotData).toEqual(data);
    expect(appliedTexts(c, 'n3')).toEqual(['after']);
  });

  it('a leader sends the bytes of the snapshot it installed, not of an older one (§7)', () => {
    // Found by the simulator (seed 35, 5 nodes): a follower that installed a snapshot kept
    // the bytes of its own older compaction, and once it led it sent the new snapshot's
    // meta with the old bytes; the follower it sent them to diverged from everyone else.
    const FIVE = ['n1', 'n2', 'n3', 'n4', 'n5'];
    const c = new Cluster(FIVE, (cfg) => ({ ...cfg, maxSnapshotChunkBytes: 4 }));
    c.campaign('n1');
    for (let i = 0; i < 3; i++) c.raft('n1').propose(bytes(`a${i}`), i);
    c.tickAll(2);
    const n4Last = c.node('n4').applied.at(-1)!;
    c.compact('n4', { index: n4Last.index, term: n4Last.term, timeMs: n4Last.timeMs,
      ...c.raft('n4').configurationAt(n4Last.index) }, bytes('older-state-of-n4'));
    c.groups = [['n1', 'n2', 'n3'], ['n4'], ['n5']];
    for (let i = 0; i < 6; i++) c.raft('n1').propose(bytes(`b${i}`), 10 + i);
    c.tickAll(2);
    const n1Last = c.node('n1').applied.at(-1)!;
    const state = bytes('state-at-the-newer-index');
    c.compact('n1', { index: n1Last.index, term: n1Last.term, timeMs: n1Last.timeMs,
      ...c.raft('n1').configurationAt(n1Last.index) }, state);
    c.groups = [['n1', 'n2', 'n3', 'n4'], ['n5']];
    c.tickAll(20);
    expect(c.node('n4').disk.snapshotData).toEqual(state);
    c.raft('n1').transferLeadership('n4');
    c.tickAll(5);
    expect(c.leaders()).toEqual(['n4']);
    const sent: Uint8Array[] = [];
    c.onDeliver = (m) => {
      if (m.type === 'snapshotChunk' && m.from === 'n4' && m.to === 'n5') sent.push(m.data);
    };
    c.groups = null;
    c.tickAll(40);
    const whole = Buffer.concat(sent).subarray(0, state.length);
    expect(text(whole)).toBe(text(state));
    expect(c.node('n5').disk.snapshotData).toEqual(state);
  });

  it('the core never holds snapshot bytes: a chunk names its range, the driver fills it', () => {
    const { c, data, snapshotIndex } = lagging();
    const sent: Message[] = [];
    const n1 = c.node('n1').raft;
    const ready = n1.ready.bind(n1);
    n1.ready = () => {
      const rd = ready();
      sent.push(...rd.earlyMessages.filter((m) => m.type === 'snapshotChunk'));
      return rd;
    };
    c.restart('n3');
    c.tickAll(5);
    expect(sent.length).toBeGreaterThan(0);
    for (const m of sent) {
      if (m.type !== 'snapshotChunk') continue;
      expect(m.data.length).toBe(0);
      expect(m.meta.index).toBe(snapshotIndex);
      expect(m.totalBytes).toBe(data.length);
      expect(m.chunkBytes).toBe(Math.min(4, data.length - m.offset));
    }
  });

  it('a follower hands received chunks to its driver in order, then the snapshot (§7)', () => {
    const f = follower('n3', 1, []);
    const meta = { index: 9, term: 1, timeMs: 5, ...bootstrapConfiguration(THREE) };
    const chunk = (offset: number, text3: string) => ({ type: 'snapshotChunk' as const,
      from: 'n1', to: 'n3', term: 1, meta, offset, totalBytes: 6, chunkBytes: 3,
      data: bytes(text3) });
    f.step(chunk(0, 'abc'));
    f.step(chunk(3, 'def'));
    const rd = f.ready();
    expect(rd.receivedSnapshot.map((s) => s.type === 'chunk' ? text(s.data) : s.type))
      .toEqual(['abc', 'def']);
    // Not installed, nor its last chunk answered, until the driver has written every byte.
    expect(rd.snapshot).toBeNull();
    expect(rd.messages.map((m) => m.type === 'snapshotChunkResponse' ? m.nextOffset : m.type))
      .toEqual([3]);
    f.advance(rd);
    // A chunk sent again meanwhile is not answered: the answer would come before the write.
    f.step(chunk(3, 'def'));
    expect(f.hasReady()).toBe(false);
    f.snapshotWritten(9);
    const installed = f.ready();
    expect(installed.snapshot).toEqual({ meta, dataBytes: 6 });
    expect(installed.messages).toContainEqual(expect.objectContaining({
      type: 'snapshotChunkResponse', snapshotIndex: 9, nextOffset: 6 }));
    f.advance(installed);
    // A chunk whose bytes do not match its length is malformed and ignored.
    f.step({ ...chunk(0, 'abc'), meta: { ...meta, index: 12 }, chunkBytes: 4 });
    expect(f.hasReady()).toBe(false);
  });

  it('a transfer the follower no longer needs is abandoned, and its driver told', () => {
    const f = follower('n3', 1, entries({ from: 1, terms: [1, 1, 1, 1] }));
    const meta = { index: 3, term: 1, timeMs: 5, ...bootstrapConfiguration(THREE) };
    f.step({ type: 'snapshotChunk', from: 'n1', to: 'n3', term: 1, meta: { ...meta, index: 9 },
      offset: 0, totalBytes: 6, chunkBytes: 3, data: bytes('abc') });
    drain(f);
    // The log already matches at 3: this snapshot is covered; the one under way is dropped.
    f.step({ type: 'snapshotChunk', from: 'n1', to: 'n3', term: 1, meta, offset: 0,
      totalBytes: 6, chunkBytes: 3, data: bytes('xyz') });
    const rd = f.ready();
    expect(rd.receivedSnapshot).toEqual([{ type: 'abandon', meta: { ...meta, index: 9 } }]);
    f.advance(rd);
  });

  it('a follower that installed a snapshot sends that snapshot once it leads (§7)', () => {
    const FIVE = ['n1', 'n2', 'n3', 'n4', 'n5'];
    const c = new Cluster(FIVE, (cfg) => ({ ...cfg, maxSnapshotChunkBytes: 4 }));
    c.campaign('n1');
    c.raft('n1').propose(bytes('a'), 1);
    c.tickAll(2);
    // n3 compacts a snapshot of its own first, 3 bytes long.
    const early = c.node('n3').applied.at(-1)!;
    c.compact('n3', { index: early.index, term: early.term, timeMs: early.timeMs,
      ...bootstrapConfiguration(FIVE) }, bytes('old'));
    // n2 and n3 miss what follows; n1 compacts it away.
    c.groups = [['n1', 'n4', 'n5'], ['n2'], ['n3']];
    for (let i = 0; i < 4; i++) c.raft('n1').propose(bytes(`s${i}`), 2 + i);
    c.tickAll(2);
    const last = c.node('n1').applied.at(-1)!;
    const newer = bytes('the-newer-snapshot');
    c.compact('n1', { index: last.index, term: last.term, timeMs: last.timeMs,
      ...bootstrapConfiguration(FIVE) },
      newer);
    c.groups = [['n1', 'n3', 'n4', 'n5'], ['n2']];
    c.tickAll(20);
    expect(c.node('n3').disk.snapshotData).toEqual(newer);
    // n3 leads; n2 comes back and needs what n3 holds only in that snapshot.
    c.raft('n1').transferLeadership('n3');
    c.tickAll(20);
    expect(c.leaders()).toEqual(['n3']);
    const chunks: Message[] = [];
    c.onDeliver = (m) => { if (m.type === 'snapshotChunk' && m.from === 'n3') chunks.push(m); };
    c.groups = null;
    c.tickAll(30);
    expect(chunks.length).toBeGreaterThan(0);
    expect(chunks.every((m) => m.type === 'snapshotChunk' && m.meta.index === last.index &&
      m.totalBytes === newer.length)).toBe(true);
    expect(c.node('n2').disk.snapshotData).toEqual(newer);
  });

  it('a stalled transfer of an older snapshot is renewed with the current one (§7)', () => {
    const { c, snapshotIndex } = lagging();
    c.restart('n3');
    // Every chunk of the first snapshot is lost, as when its file was pruned.
    c.dropIf = (m) => m.type === 'snapshotChunk' && m.meta.index === snapshotIndex;
    c.tickAll(2);
    c.raft('n1').propose(bytes('more'), 11);
    c.tickAll(1);
    const n1 = c.node('n1');
    const last = n1.applied.at(-1)!;
    takeMark('snapshot-transfer-renewed');
    c.compact('n1', { index: last.index, term: last.term, timeMs: last.timeMs,
      ...bootstrapConfiguration(THREE) },
      bytes('renewed-state'));
    c.tickAll(20);
    expect(takeMark('snapshot-transfer-renewed')).toBeGreaterThan(0);
    expect(c.node('n3').disk.snapshotData).toEqual(bytes('renewed-state'));
    expect(appliedTexts(c, 'n3')).toEqual([]);
  });

  it('a follower with no room refuses a snapshot; the leader retries, slower each time', () => {
    const { c, data, snapshotIndex } = lagging();
    c.restart('n3');
    c.raft('n3').setSnapshotRoom(data.length - 1);
    const starts: number[] = [];
    let tick = 0;
    c.onDeliver = (m) => {
      if (m.type === 'snapshotChunk' && m.to === 'n3' && m.offset === 0) starts.push(tick);
    };
    for (; tick < 260; tick++) c.tickAll(1);
    // Nothing of it was taken, and every start was refused before its first byte.
    expect(c.node('n3').disk.snapshot).toBeNull();
    expect(c.node('n3').disk.incoming).toBeNull();
    expect(c.raft('n3').lastSnapshotRefusal()).toMatchObject({ meta: { index: snapshotIndex },
      totalBytes: data.length, roomBytes: data.length - 1, count: starts.length });
    // Stalls of 3 heartbeats (1 tick each) doubling: 3, 6, 12, 24, 48, 96, then 96 again.
    const gaps = starts.slice(1).map((at, i) => at - starts[i]!);
    expect(gaps.slice(0, 6)).toEqual([3, 6, 12, 24, 48, 96]);
    c.raft('n3').setSnapshotRoom(data.length);
    c.onDeliver = null;
    c.tickAll(100);
    expect(c.node('n3').disk.snapshotData).toEqual(data);
    expect(appliedTexts(c, 'n3')).toEqual(['after']);
  });

  it('a snapshot storage refused midway is forgotten, and taken again from its start', () => {
    const f = follower('n3', 1, []);
    const meta = { index: 9, term: 1, timeMs: 5, ...bootstrapConfiguration(THREE) };
    const chunk = (offset: number, text3: string) => ({ type: 'snapshotChunk' as const,
      from: 'n1', to: 'n3', term: 1, meta, offset, totalBytes: 9, chunkBytes: 3,
      data: bytes(text3) });
    const steps = () => {
      const rd = f.ready();
      f.advance(rd);
      return rd.receivedSnapshot.map((s) => s.type === 'chunk' ? text(s.data) : s.type);
    };
    f.step(chunk(0, 'abc'));
    expect(steps()).toEqual(['abc']);
    f.step(chunk(3, 'def'));
    // The driver's write of 'abc' ran out of room while 'def' waited for the next Ready.
    expect(f.abandonReceivedSnapshot(9)).toBe(true);
    expect(steps()).toEqual([]);
    // The next chunk finds nothing under way: the answer sends the leader back to 0.
    f.step(chunk(6, 'ghi'));
    const rd = f.ready();
    expect(rd.receivedSnapshot).toEqual([]);
    expect(rd.messages).toContainEqual(expect.objectContaining({
      type: 'snapshotChunkResponse', snapshotIndex: 9, nextOffset: 0 }));
    f.advance(rd);
    for (const [offset, part] of [[0, 'abc'], [3, 'def'], [6, 'ghi']] as const) {
      f.step(chunk(offset, part));
    }
    expect(steps()).toEqual(['abc', 'def', 'ghi']);
    // Every chunk taken, but storage refused the last bytes: still not installed, forgotten.
    expect(f.abandonReceivedSnapshot(9)).toBe(true);
    f.snapshotWritten(9);
    expect(f.hasReady()).toBe(false);
    for (const [offset, part] of [[0, 'abc'], [3, 'def'], [6, 'ghi']] as const) {
      f.step(chunk(offset, part));
    }
    expect(steps()).toEqual(['abc', 'def', 'ghi']);
    f.snapshotWritten(9);
    expect(f.ready().snapshot).toMatchObject({ meta: { index: 9 }, dataBytes: 9 });
    expect(f.abandonReceivedSnapshot(9)).toBe(false);
  });

  it('a snapshot written after its follower stood for election is dropped, not installed',
    () => {
      const f = follower('n3', 1, []);
      const meta = { index: 9, term: 1, timeMs: 5, ...bootstrapConfiguration(THREE) };
      f.step({ type: 'snapshotChunk', from: 'n1', to: 'n3', term: 1, meta, offset: 0,
        totalBytes: 3, chunkBytes: 3, data: bytes('abc') });
      drain(f);
      for (let i = 0; i < 40 && f.status().role === 'follower'; i++) f.tick();
      expect(f.status().role).not.toBe('follower');
      drain(f);
      f.snapshotWritten(9);
      const rd = f.ready();
      expect(rd.snapshot).toBeNull();
      expect(rd.receivedSnapshot).toEqual([{ type: 'abandon', meta }]);
    });

  it('a refusal drops the transfer under way, and its driver is told', () => {
    const f = follower('n3', 1, []);
    const meta = { index: 9, term: 1, timeMs: 5, ...bootstrapConfiguration(THREE) };
    f.step({ type: 'snapshotChunk', from: 'n1', to: 'n3', term: 1, meta, offset: 0,
      totalBytes: 6, chunkBytes: 3, data: bytes('abc') });
    drain(f);
    f.setSnapshotRoom(7);
    f.step({ type: 'snapshotChunk', from: 'n1', to: 'n3', term: 1, meta: { ...meta, index: 12 },
      offset: 0, totalBytes: 8, chunkBytes: 3, data: bytes('xyz') });
    const rd = f.ready();
    expect(rd.receivedSnapshot).toEqual([{ type: 'abandon', meta }]);
    expect(rd.messages.filter((m) => m.type === 'snapshotChunkResponse')).toEqual([]);
    expect(f.lastSnapshotRefusal()).toMatchObject({ totalBytes: 8, roomBytes: 7, count: 1 });
  });
});

describe('thesis: pre-vote, check-quorum, leader lease, transfer', () => {
  it('pre-vote: a partitioned node does not raise its term (§9.6 thesis)', () => {
    const c = new Cluster(THREE);
    c.campaign('n1');
    c.groups = [['n1', 'n2'], ['n3']];
    c.tickAll(100);
    expect(c.raft('n3').status()).toMatchObject({ term: 1, role: 'pre-candidate' });
    c.groups = null;
    c.tickAll(3);
    // Rejoining did not disturb the leader: same leader, same term.
    expect(c.leaders()).toEqual(['n1']);
    expect(c.raft('n1').status().term).toBe(1);
    expect(c.raft('n3').status()).toMatchObject({ role: 'follower', leader: 'n1' });
  });

  it('without pre-vote a rejoining node disrupts the leader (contrast to §9.6 thesis)', () => {
    const c = new Cluster(THREE, (cfg) => ({ ...cfg, preVote: false, checkQuorum: false }));
    c.campaign('n1');
    c.groups = [['n1', 'n2'], ['n3']];
    c.tickAll(100);
    expect(c.raft('n3').status().term).toBeGreaterThan(1);
    c.groups = null;
    c.tickAll(25);
    expect(c.raft('n1').status().term).toBeGreaterThan(1);
  });

  it('check-quorum: a leader that hears from no majority steps down (§6.2 thesis)', () => {
    const c = new Cluster(THREE);
    c.campaign('n1');
    c.groups = [['n1'], ['n2', 'n3']];
    takeMark('check-quorum-step-down');
    for (let i = 0; i < 25; i++) {
      c.tick('n1');
      c.deliverAll();
    }
    expect(c.raft('n1').status()).toMatchObject({ role: 'follower', leader: null, term: 1 });
    expect(takeMark('check-quorum-step-down')).toBe(1);
  });

  it('leader lease: followers with a live leader ignore votes (§4.2.3 thesis)', () => {
    const c = new Cluster(THREE);
    c.campaign('n1');
    takeMark('lease-ignores-vote');
    c.raft('n2').step({ type: 'vote', from: 'n3', to: 'n2', term: 5, lastLogIndex: 9,
      lastLogTerm: 1, transfer: false });
    c.raft('n2').step({ type: 'preVote', from: 'n3', to: 'n2', term: 5, lastLogIndex: 9,
      lastLogTerm: 1 });
    expect(takeMark('lease-ignores-vote')).toBe(2);
    expect(c.raft('n2').status()).toMatchObject({ term: 1, leader: 'n1' });
    c.processAll();
    expect(c.queue.filter((m) => m.type === 'voteResponse' || m.type === 'preVoteResponse'))
      .toEqual([]);
  });

  it('leadership transfer: the target catches up, then wins at once (§3.10 thesis)', () => {
    const c = new Cluster(THREE);
    c.campaign('n1');
    c.crash('n3');
    for (let i = 0; i < 3; i++) c.raft('n1').propose(bytes(`t${i}`), i);
    c.tickAll(1);
    c.restart('n3');
    takeMark('timeout-now-campaign');
    c.raft('n1').transferLeadership('n3');
    expect(c.raft('n1').propose(bytes('during'), 9)).toEqual({ kind: 'dropped',
      reason: 'transferring' });
    for (let i = 0; i < 5 && c.leaders()[0] !== 'n3'; i++) c.tickAll(1);
    expect(takeMark('timeout-now-campaign')).toBe(1);
    expect(c.leaders()).toEqual(['n3']);
    expect(c.raft('n3').status().term).toBe(2);
    c.raft('n3').propose(bytes('after'), 10);
    c.tickAll(1);
    expect(appliedTexts(c, 'n1')).toEqual(['t0', 't1', 't2', 'after']);
  });

  it('leadership transfer is abandoned after an election timeout (§3.10 thesis)', () => {
    const c = new Cluster(THREE);
    c.campaign('n1');
    c.crash('n3');
    takeMark('transfer-aborted');
    c.raft('n1').transferLeadership('n3');
    for (let i = 0; i < 12; i++) {
      c.tick('n1');
      c.tick('n2');
      c.deliverAll();
    }
    expect(takeMark('transfer-aborted')).toBe(1);
    expect(c.raft('n1').propose(bytes('x'), 1)).toMatchObject({ kind: 'proposed' });
  });
});

describe('invariants', () => {
  it('a restored state with commitIndex past its log is refused', () => {
    expect(() => createRaft(defaultConfig('n1', THREE, 1), {
      hardState: { term: 1, votedFor: null, commitIndex: 5 }, snapshot: null,
      snapshotDataBytes: null, entries: entries({ from: 1, terms: [1] }) })).toThrow(/commitIndex/);
  });

  it('an append that would overwrite a committed entry is an invariant violation', () => {
    const log = new RaftLog({ index: 0, term: 0, timeMs: 0, ...bootstrapConfiguration(THREE) },
      entries({ from: 1, terms: [1, 2] }), 2);
    expect(log.maybeAppend(2, 2, entries({ from: 3, terms: [3] }))).toBe(3);
    expect(() => log.maybeAppend(1, 1, entries({ from: 2, terms: [3] }))).toThrow(/committed/);
    expect(() => log.commitTo(1)).not.toThrow();
    expect(log.commitIndex).toBe(2); // never decreases
    expect(() => log.appliedTo(3)).toThrow(/applied/);
  });

  it('an append or a configuration read outside the log is an invariant violation', () => {
    const log = new RaftLog({ index: 0, term: 0, timeMs: 0, ...bootstrapConfiguration(THREE) },
      entries({ from: 1, terms: [1, 2] }), 1);
    expect(() => log.appendAfter(3, entries({ from: 4, terms: [2] }))).toThrow(/outside \[0, 2\]/);
    expect(() => log.appendAfter(0, entries({ from: 1, terms: [2] })))
      .toThrow(/would rewrite committed entries \(commit 1\)/);
    expect(() => log.configurationAt(3)).toThrow(/configuration at 3 outside \[0, 2\]/);
    expect(log.configurationAt(2).index).toBe(0);
    log.appendAfter(1, entries({ from: 2, terms: [3] }));
    expect(log.lastTerm()).toBe(3);
  });

  it('ready() twice without advance() is a driver bug', () => {
    const c = new Cluster(['n1']);
    c.tick('n1');
    const raft = c.raft('n1');
    raft.ready();
    expect(() => raft.ready()).toThrow(/advance/);
  });
});
