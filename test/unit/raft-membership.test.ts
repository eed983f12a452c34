/**
 * Membership changes, one test per claim of the Raft thesis (chapter 4, with §3.10, §6.2,
 * §6.4 and §9.6 under a changing configuration), each named after the claim and its section.
 * The scripted stories live in test/interaction/scenarios/membership-*.txt.
 */
import { describe, expect, it } from 'vitest';
import { takeMark } from '../../host/core/marks.js';
import {
  applyChange, bootstrapConfiguration, checkConfiguration, decodeConfigEntry, encodeConfigEntry,
  isRefused, MEMBERS_MAX, REMOVED_IDS_MAX, VOTERS_MAX, type MembershipChange,
} from '../../host/core/raft/configuration.js';
import { majority } from '../../host/core/raft/quorum.js';
import { createRaft, PROMOTE_LAG_ENTRIES_MAX, type RaftCore } from '../../host/core/raft/raft.js';
import type { Message } from '../../host/core/raft/messages.js';
import type { Configuration, Entry } from '../../host/core/raft/types.js';
import { bytes, Cluster, defaultConfig } from '../interaction/cluster.js';

const THREE = ['n1', 'n2', 'n3'];
let requestId = 1;

function change(raft: RaftCore, what: MembershipChange) {
  return raft.proposeMembership(what, requestId++);
}

const add = (id: string): MembershipChange => ({ kind: 'addLearner', id, peer: `h-${id}:7000` });
const promote = (id: string): MembershipChange => ({ kind: 'promote', id });
const remove = (id: string): MembershipChange => ({ kind: 'remove', id });

/** A three-voter cluster led by n1 with one committed entry of its term. */
function ledByN1(seed = 1): Cluster {
  const c = new Cluster(THREE, undefined, seed);
  c.campaign('n1');
  c.raft('n1').propose(bytes('a'), 1);
  c.deliverAll();
  return c;
}

/** n4 joins empty and is added as a learner; everything is delivered. */
function withLearner(c: Cluster, id = 'n4'): void {
  c.join(id);
  expect(change(c.raft('n1'), add(id))).toMatchObject({ kind: 'proposed' });
  c.deliverAll();
  c.tickAll(1);
}

function voters(raft: RaftCore): readonly string[] {
  return raft.configuration().config.voters;
}

function sent(c: Cluster, from: string, type: Message['type']): Message[] {
  return c.queue.filter((m) => m.from === from && m.type === type);
}

describe('thesis §4.1: single-server changes', () => {
  it('any majority of the old voters overlaps any majority of the new (§4.1)', () => {
    // Differential check of the claim single-server changes rest on, for 1..VOTERS_MAX.
    for (let n = 1; n < VOTERS_MAX; n++) {
      for (const grown of [n + 1, n - 1].filter((m) => m >= 1)) {
        // The worst case: the two majorities share as few servers as the sets allow.
        const shared = Math.min(n, grown);
        expect(majority(n) + majority(grown) - (n + grown - shared)).toBeGreaterThan(0);
      }
    }
  });

  it('a configuration takes effect on the leader when appended, before it commits (§4.1)', () => {
    const c = ledByN1();
    c.join('n4');
    const result = change(c.raft('n1'), add('n4'));
    expect(result).toMatchObject({ kind: 'proposed', index: 3, term: 1 });
    const { index, config } = c.raft('n1').configuration();
    expect(index).toBe(3);
    expect(config.learners).toEqual(['n4']);
    expect(c.raft('n1').status().commitIndex).toBe(2);
    // The leader already replicates to the new member.
    expect(c.raft('n1').matchIndexOf('n4')).toBe(0);
  });

  it('a follower uses a configuration once appended and drops it with its entry (§4.1)', () => {
    const config = applyChange(bootstrapConfiguration(THREE), add('n4'));
    if (isRefused(config)) throw new Error(config.detail);
    const entry: Entry = { term: 1, index: 2, timeMs: 0, type: 'config',
      data: encodeConfigEntry({ change: add('n4'), config }) };
    const n2 = createRaft(defaultConfig('n2', THREE, 2), { hardState: { term: 1, votedFor: null,
      commitIndex: 1 }, snapshot: null, snapshotDataBytes: null, entries: [{ term: 1, index: 1,
      timeMs: 0, type: 'empty', data: new Uint8Array(0) }] });
    n2.step({ type: 'append', from: 'n1', to: 'n2', term: 1, prevLogIndex: 1, prevLogTerm: 1,
      entries: [entry], commitIndex: 1 });
    expect(n2.configuration()).toMatchObject({ index: 2, config: { learners: ['n4'] } });
    // A leader of term 2 overwrites index 2: the configuration before it is back.
    n2.step({ type: 'append', from: 'n3', to: 'n2', term: 2, prevLogIndex: 1, prevLogTerm: 1,
      entries: [{ term: 2, index: 2, timeMs: 0, type: 'empty', data: new Uint8Array(0) }],
      commitIndex: 1 });
    expect(n2.configuration()).toMatchObject({ index: 0, config: { learners: [] } });
  });

  it('one change at a time: the next waits until the previous commits (§4.1)', () => {
    const c = ledByN1();
    c.join('n4');
    c.join('n5');
    expect(change(c.raft('n1'), add('n4'))).toMatchObject({ kind: 'proposed' });
    expect(change(c.raft('n1'), add('n5'))).toMatchObject({ kind: 'refused',
      refusal: 'change-in-progress' });
    c.deliverAll();
    expect(change(c.raft('n1'), add('n5'))).toMatchObject({ kind: 'proposed' });
  });

  it('a new leader changes nothing before it commits an entry of its term (§4.1, 2015 fix)',
    () => {
      const c = ledByN1();
      c.join('n4');
      c.crash('n2');
      c.crash('n3');
      // n1 steps down (check-quorum), n2 and n3 come back and n2 wins term 2 alone with n3,
      // but n3 does not answer its first append yet: nothing of term 2 is committed.
      c.tick('n1', 30);
      c.restart('n2');
      c.restart('n3');
      c.groups = [['n2', 'n3']];
      c.dropIf = (m) => m.type === 'appendResponse';
      c.campaign('n2');
      expect(c.raft('n2').status()).toMatchObject({ role: 'leader', term: 2 });
      takeMark('membership-waits-for-term-commit');
      expect(change(c.raft('n2'), add('n4'))).toMatchObject({ kind: 'refused',
        refusal: 'term-not-committed' });
      expect(takeMark('membership-waits-for-term-commit')).toBe(1);
      c.dropIf = null;
      c.tick('n2', 1);
      c.deliverAll();
      expect(change(c.raft('n2'), add('n4'))).toMatchObject({ kind: 'proposed' });
    });

  it('the configuration survives a restart, from the log and from a snapshot (§4.1, §7)', () => {
    const c = ledByN1();
    withLearner(c);
    c.crash('n2');
    c.restart('n2');
    expect(c.raft('n2').configuration().config.learners).toEqual(['n4']);
    // A snapshot must carry the configuration at its index; another one is a driver bug.
    const n1 = c.raft('n1');
    const applied = c.node('n1').appliedIndex;
    expect(() => n1.compact({ index: applied, term: 1, timeMs: 1,
      ...bootstrapConfiguration(THREE) }, 1)).toThrow(/configuration/);
    c.compact('n1', { index: applied, term: 1, timeMs: 1, ...n1.configurationAt(applied) },
      bytes('x'));
    expect(n1.configuration()).toMatchObject({ index: applied, config: { learners: ['n4'] } });
  });

  it('a follower forwards a change and the leader answers it (§4.1)', () => {
    const c = ledByN1();
    c.join('n4');
    expect(change(c.raft('n2'), add('n4'))).toEqual({ kind: 'forwarded' });
    c.deliverAll();
    expect(c.node('n2').membershipAnswers).toMatchObject([{ result: { kind: 'proposed',
      index: 3, term: 1 } }]);
    expect(change(c.raft('n2'), add('n4'))).toEqual({ kind: 'forwarded' });
    c.deliverAll();
    expect(c.node('n2').membershipAnswers[1]).toMatchObject({ result: { kind: 'refused',
      refusal: 'member-exists' } });
  });
});

describe('thesis §4.2.1: learners', () => {
  it('a learner catches up from the log and never campaigns (§4.2.1)', () => {
    const c = ledByN1();
    withLearner(c);
    expect(c.node('n4').appliedIndex).toBe(c.node('n1').appliedIndex);
    c.crash('n1');
    c.tick('n4', 100);
    expect(c.raft('n4').status()).toMatchObject({ role: 'follower', term: 1 });
  });

  it('a learner never counts for commit (§4.2.1)', () => {
    const c = ledByN1();
    withLearner(c);
    c.groups = [['n1', 'n4'], ['n2', 'n3']];
    c.raft('n1').propose(bytes('b'), 2);
    c.deliverAll();
    expect(c.node('n4').raft.status().lastIndex).toBe(c.raft('n1').status().lastIndex);
    expect(c.raft('n1').status().commitIndex).toBe(c.raft('n1').status().lastIndex - 1);
  });

  it('check-quorum counts voters only: a leader with only a learner steps down (§6.2)', () => {
    const c = ledByN1();
    withLearner(c);
    c.groups = [['n1', 'n4'], ['n2', 'n3']];
    takeMark('check-quorum-step-down');
    c.tickAll(25);
    expect(takeMark('check-quorum-step-down')).toBeGreaterThan(0);
    expect(c.raft('n1').status().role).not.toBe('leader');
  });

  it('a read index needs a majority of voters: a learner\'s answer does not count (§6.4)', () => {
    const c = ledByN1();
    withLearner(c);
    c.groups = [['n1', 'n4'], ['n2', 'n3']];
    c.raft('n1').readIndex(9);
    c.deliverAll();
    expect(c.node('n1').readStates).toEqual([]);
    c.groups = null;
    c.tick('n1', 1);
    c.deliverAll();
    expect(c.node('n1').readStates).toMatchObject([{ requestId: 9 }]);
    expect(c.node('n1').readStates[0]!.readIndex).toBeGreaterThan(0);
  });

  it('a learner\'s vote is never counted, nor its pre-vote (§4.2.1, §9.6)', () => {
    const c = ledByN1();
    withLearner(c);
    c.crash('n1');
    c.crash('n3');
    for (let i = 0; i < 25 && c.raft('n2').status().role === 'follower'; i++) c.tick('n2', 1);
    const { role, term } = c.raft('n2').status();
    expect(role).toBe('pre-candidate');
    takeMark('vote-from-non-voter-ignored');
    // The learner grants: one voter of three and a learner are no majority.
    c.raft('n2').step({ type: 'preVoteResponse', from: 'n4', to: 'n2', term: term + 1,
      granted: true });
    expect(takeMark('vote-from-non-voter-ignored')).toBe(1);
    expect(c.raft('n2').status().role).toBe('pre-candidate');
  });

  it('a node that may not campaign forgets a silent leader, so its lease ends (§4.1, §9.6)',
    () => {
      // n4 may already be a voter in a configuration it has not received (a promotion still
      // on its way): the voters that count on it must get its pre-vote once the leader is
      // gone, which the lease would refuse for as long as n4 still names a leader.
      const c = ledByN1();
      withLearner(c);
      expect(c.raft('n4').status().leader).toBe('n1');
      c.crash('n1');
      for (let i = 0; i < 3 * 10; i++) c.tick('n4', 1);
      expect(c.raft('n4').status()).toMatchObject({ role: 'follower', leader: null });
      // Whatever the phase of its timer, n4 now answers a pre-vote from an up-to-date voter.
      for (let phase = 0; phase < 2 * 10; phase++) {
        c.processAll();
        c.queue.length = 0;
        const { term } = c.raft('n4').status();
        c.raft('n4').step({ type: 'preVote', from: 'n2', to: 'n4', term: term + 1,
          lastLogIndex: c.raft('n2').status().lastIndex, lastLogTerm: 1 });
        c.processReady('n4');
        expect(sent(c, 'n4', 'preVoteResponse'), `phase ${phase}`).toMatchObject([
          { granted: true }]);
        c.tick('n4', 1);
      }
    });

  it('a learner is promoted only once caught up, and told how far behind it is (§4.2.1)', () => {
    const c = ledByN1();
    withLearner(c);
    c.crash('n4');
    for (let i = 0; i < PROMOTE_LAG_ENTRIES_MAX + 5; i++) c.raft('n1').propose(bytes(`p${i}`), i);
    c.deliverAll();
    const refused = change(c.raft('n1'), promote('n4'));
    expect(refused).toMatchObject({ kind: 'refused', refusal: 'not-caught-up' });
    expect(refused.kind === 'refused' && refused.detail)
      .toMatch(/n4 is 5\d\d committed entries behind/);
    c.restart('n4');
    c.tickAll(3);
    expect(change(c.raft('n1'), promote('n4'))).toMatchObject({ kind: 'proposed' });
    c.deliverAll();
    expect(voters(c.raft('n4'))).toEqual(['n1', 'n2', 'n3', 'n4']);
  });

  it('a learner sent heartbeats only is not caught up, however close its log', () => {
    const c = ledByN1();
    withLearner(c);
    c.raft('n1').propose(bytes('p'), 1);
    c.deliverAll();
    c.raft('n1').setReplicationPaused(['n4']);
    const refused = change(c.raft('n1'), promote('n4'));
    expect(refused).toMatchObject({ kind: 'refused', refusal: 'not-caught-up' });
    expect(refused.kind === 'refused' && refused.detail)
      .toMatch(/n4 is 0 committed entries behind .*holds back from catching up/);
    c.raft('n1').setReplicationPaused([]);
    expect(change(c.raft('n1'), promote('n4'))).toMatchObject({ kind: 'proposed' });
  });

  it('a promoted voter counts for commit and elections (§4.1)', () => {
    const c = ledByN1();
    withLearner(c);
    expect(change(c.raft('n1'), promote('n4'))).toMatchObject({ kind: 'proposed' });
    c.deliverAll();
    // Four voters: n1 and n4 alone are no majority; with n2 they are.
    c.groups = [['n1', 'n4'], ['n2', 'n3']];
    c.raft('n1').propose(bytes('b'), 3);
    c.deliverAll();
    const last = c.raft('n1').status().lastIndex;
    expect(c.raft('n1').status().commitIndex).toBe(last - 1);
    c.groups = [['n1', 'n2', 'n4'], ['n3']];
    c.tick('n1', 1);
    c.deliverAll();
    expect(c.raft('n1').status().commitIndex).toBe(last);
  });
});

describe('thesis §4.2.2, §4.2.3: removing members', () => {
  it('a removed member\'s acknowledgements never count (§4.1)', () => {
    const c = ledByN1();
    expect(change(c.raft('n1'), remove('n3'))).toMatchObject({ kind: 'proposed' });
    c.deliverAll();
    // For an election timeout n3 still receives the log, so it learns it was removed and
    // that the removal committed, but its answers count for nothing: n1 and n3 commit nothing.
    c.groups = [['n1', 'n3'], ['n2']];
    c.raft('n1').propose(bytes('b'), 2);
    c.deliverAll();
    const last = c.raft('n1').status().lastIndex;
    expect(c.raft('n3').status().lastIndex).toBe(last);
    expect(c.raft('n1').status().commitIndex).toBe(last - 1);
    c.groups = null;
    c.tickAll(12);
    expect(c.raft('n1').status().commitIndex).toBe(last);
    expect(c.raft('n3').configuration().config.removed).toEqual(['n3']);
    // Then it gets nothing more, and what it says is ignored.
    takeMark('answer-from-non-member-ignored');
    c.raft('n1').step({ type: 'appendResponse', from: 'n3', to: 'n1', term: 1, success: true,
      matchIndex: last, rejectedIndex: 0, hintIndex: 0, hintTerm: 0 });
    expect(takeMark('answer-from-non-member-ignored')).toBe(1);
    expect(c.raft('n1').matchIndexOf('n3')).toBeNull();
  });

  it('a member that knows it was removed never votes nor campaigns (§4.2.2)', () => {
    const c = ledByN1();
    expect(change(c.raft('n1'), remove('n3'))).toMatchObject({ kind: 'proposed' });
    c.deliverAll();
    c.tickAll(1);
    expect(c.raft('n3').configuration().config.removed).toEqual(['n3']);
    c.tick('n3', 100);
    expect(c.raft('n3').status().role).toBe('follower');
    c.raft('n3').step({ type: 'vote', from: 'n2', to: 'n3', term: 9, lastLogIndex: 99,
      lastLogTerm: 9, transfer: true });
    c.processAll();
    const answer = c.queue.find((m) => m.type === 'voteResponse');
    expect(answer).toMatchObject({ granted: false });
  });

  it('a removed member that does not know cannot disrupt: the lease holds (§4.2.3)', () => {
    const c = ledByN1();
    c.crash('n3');
    expect(change(c.raft('n1'), remove('n3'))).toMatchObject({ kind: 'proposed' });
    c.deliverAll();
    c.restart('n3');
    for (let i = 0; i < 60; i++) c.tickAll(1);
    expect(c.raft('n1').status()).toMatchObject({ role: 'leader', term: 1 });
    expect(c.raft('n2').status().term).toBe(1);
  });

  it('a removal still in flight does not stop a node voting: the next leader can undo it',
    () => {
      // n1 appends its own removal but nobody else gets it; n2 then leads and commits at a
      // higher term, and with n3 gone n2 needs n1's vote. Refusing it for an entry that n2
      // will cut from n1's log would leave the cluster with no leader, for good.
      const c = ledByN1();
      c.groups = [['n1'], ['n2', 'n3']];
      expect(change(c.raft('n1'), remove('n1'))).toMatchObject({ kind: 'proposed' });
      c.deliverAll();
      expect(c.raft('n1').configuration().config.removed).toEqual(['n1']);
      const others = (): string[] => c.leaders().filter((id) => id !== 'n1');
      for (let i = 0; i < 80 && others().length === 0; i++) c.tickAll(1);
      const [next] = others();
      if (next === undefined) throw new Error('n2 and n3 elected no leader');
      c.raft(next).propose(bytes('b'), 2);
      c.deliverAll();
      expect(c.raft(next).status().term).toBeGreaterThan(1);
      c.crash(next === 'n2' ? 'n3' : 'n2');
      c.groups = null;
      // Only (pre)votes reach n1: a heartbeat from the leader would cut the removal at once.
      c.dropIf = (m) => m.from === next && m.to === 'n1' && m.type !== 'preVote' &&
        m.type !== 'vote';
      for (let i = 0; i < 40 && c.raft(next).status().role === 'leader'; i++) c.tickAll(1);
      expect(c.raft(next).status().role).not.toBe('leader');
      c.dropIf = null;
      for (let i = 0; i < 60 && c.leaders().length === 0; i++) c.tickAll(1);
      expect(c.leaders()).toEqual([next]);
      c.tickAll(2);
      expect(c.raft('n1').configuration().config.removed).toEqual([]);
    });

  it('a leader removing itself leads without counting itself until it commits (§4.2.2)', () => {
    const c = ledByN1();
    expect(change(c.raft('n1'), remove('n1'))).toMatchObject({ kind: 'proposed' });
    c.groups = [['n1', 'n2'], ['n3']];
    c.deliverAll();
    // n1 and n2 hold the change, but the voters are n2 and n3 now.
    expect(c.raft('n1').status()).toMatchObject({ role: 'leader', commitIndex: 2 });
    c.groups = null;
    takeMark('removed-leader-steps-down');
    c.tick('n1', 1);
    c.deliverAll();
    expect(takeMark('removed-leader-steps-down')).toBe(1);
    // It handed over (§3.10): a voter leads at once, without an election timeout.
    expect(c.leaders()).toHaveLength(1);
    expect(['n2', 'n3']).toContain(c.leaders()[0]);
    c.tick('n1', 100);
    expect(c.raft('n1').status().role).toBe('follower');
  });

  it('a leader that lost its quorum before its own removal committed finishes it (§4.2.2)',
    () => {
      // Voters n1 and n3. n1 appends its removal, which n3 never gets, and steps down on
      // check-quorum. Not a voter in its newest configuration, it would never campaign; n3,
      // on the committed one, needs n1's vote, which n1's longer log refuses: no leader ever
      // (simulator seed 263165206). n1 campaigns on the new configuration and finishes it.
      const c = ledByN1();
      expect(change(c.raft('n1'), remove('n2'))).toMatchObject({ kind: 'proposed' });
      c.deliverAll();
      c.tickAll(2);
      expect(voters(c.raft('n3'))).toEqual(['n1', 'n3']);
      c.crash('n2');
      c.groups = [['n1'], ['n3']];
      expect(change(c.raft('n1'), remove('n1'))).toMatchObject({ kind: 'proposed' });
      c.deliverAll();
      expect(voters(c.raft('n1'))).toEqual(['n3']);
      for (let i = 0; i < 60 && c.raft('n1').status().role === 'leader'; i++) c.tickAll(1);
      expect(c.raft('n1').status().role).not.toBe('leader');
      c.groups = null;
      for (let i = 0; i < 200 && !(c.leaders()[0] === 'n3' &&
        voters(c.raft('n3')).length === 1); i++) c.tickAll(1);
      expect(c.leaders()).toEqual(['n3']);
      expect(voters(c.raft('n3'))).toEqual(['n3']);
      expect(c.raft('n3').status().commitIndex)
        .toBeGreaterThanOrEqual(c.raft('n1').configuration().index);
    });

  it('a stale removal refuses only a candidate whose own log removes it (§4.2.2)', () => {
    // n3 holds n1's removal of n2, which never committed (n1 never heard n3 again). A later
    // leader's log without it (n2's, say) must still get n3's vote, or a cluster where n3 is
    // the vote that counts has no leader ever (simulator seeds 376905612, 1055386320); a
    // candidate whose own log removes it still must not (seed 1989508279).
    const c = ledByN1();
    c.crash('n2');
    c.dropIf = (m) => m.from === 'n3' && m.to === 'n1';
    expect(change(c.raft('n1'), remove('n2'))).toMatchObject({ kind: 'proposed' });
    c.deliverAll();
    const n3 = c.raft('n3');
    expect(n3.configuration().config.removed).toEqual(['n2']);
    expect(n3.configuration().index).toBeGreaterThan(n3.status().commitIndex);
    c.crash('n1');
    c.dropIf = null;
    for (let i = 0; i < 3 * 10; i++) c.tick('n3', 1);
    const ask = (type: 'preVote' | 'vote', selfRemoved: boolean): boolean => {
      c.processAll();
      c.queue.length = 0;
      const { term, lastIndex } = n3.status();
      const later = { from: 'n2', to: 'n3', lastLogIndex: lastIndex + 5,
        lastLogTerm: term + 1, ...(selfRemoved ? { selfRemoved } : {}) };
      n3.step(type === 'preVote' ? { type, ...later, term: term + 1 }
        : { type, ...later, term: term + 1, transfer: false });
      c.processReady('n3');
      const answers = sent(c, 'n3', `${type}Response`);
      expect(answers).toHaveLength(1);
      return (answers[0] as { granted: boolean }).granted;
    };
    expect(ask('preVote', true)).toBe(false);
    expect(ask('preVote', false)).toBe(true);
    expect(ask('vote', true)).toBe(false);
    expect(ask('vote', false)).toBe(true);
  });

  it('the last voter cannot be removed, nor a removed id added again (§4.1)', () => {
    const single = new Cluster(['n1']);
    single.tickAll(1);
    expect(change(single.raft('n1'), remove('n1'))).toMatchObject({ refusal: 'last-voter' });
    const c = ledByN1();
    expect(change(c.raft('n1'), remove('n3'))).toMatchObject({ kind: 'proposed' });
    c.deliverAll();
    expect(change(c.raft('n1'), add('n3'))).toMatchObject({ refusal: 'id-removed' });
  });
});

describe('§5.1 under membership changes', () => {
  it('a sole voter sends no append at a term not yet durable, not even to a learner (§5.1)',
    () => {
      const c = new Cluster(['n1']);
      c.tickAll(1);
      withLearner(c, 'n2');
      c.crash('n1');
      c.restart('n1');
      takeMark('early-message-waits-for-term');
      c.tick('n1', 1);
      const n1 = c.raft('n1');
      expect(n1.status()).toMatchObject({ role: 'leader', term: 2 });
      const ready = n1.ready();
      // Term 2 and the empty entry reach the disk in this Ready; the append to the learner
      // waits for them with the messages, instead of going out before the fsync.
      expect(ready.hardState?.term).toBe(2);
      expect(ready.earlyMessages.filter((m) => m.term === 2)).toEqual([]);
      expect(ready.messages).toContainEqual(expect.objectContaining({ type: 'append', to: 'n2',
        term: 2 }));
      expect(takeMark('early-message-waits-for-term')).toBeGreaterThan(0);
      n1.advance(ready);
      n1.persisted(ready.entries.at(-1)!.index, 2);
      // Once durable, term 2 travels early again (a heartbeat here).
      n1.tick();
      expect(n1.ready().earlyMessages).toContainEqual(expect.objectContaining({
        type: 'heartbeat', to: 'n2', term: 2 }));
    });
});

describe('thesis §3.10 under membership changes', () => {
  it('leadership goes only to a voter, and no change starts during a hand-over (§3.10)', () => {
    const c = ledByN1();
    withLearner(c);
    takeMark('transfer-ignored');
    c.raft('n1').transferLeadership('n4');
    expect(takeMark('transfer-ignored')).toBe(1);
    c.crash('n2');
    c.raft('n1').transferLeadership('n2');
    expect(change(c.raft('n1'), promote('n4'))).toMatchObject({ refusal: 'transferring' });
  });

  it('a learner ignores TimeoutNow: it never campaigns (§3.10, §4.2.1)', () => {
    const c = ledByN1();
    withLearner(c);
    takeMark('timeout-now-ignored-by-non-voter');
    c.raft('n4').step({ type: 'timeoutNow', from: 'n1', to: 'n4', term: 1 });
    expect(takeMark('timeout-now-ignored-by-non-voter')).toBe(1);
    expect(sent(c, 'n4', 'vote')).toEqual([]);
  });

  it('a joining node votes: it may be a voter before it knows it (§4.1), from the term ' +
    'after the first it learns', () => {
    const c = ledByN1();
    c.join('n4');
    // Never having held a term, it may be a voter that lost its files and voted in term 5
    // before: that term counts as voted.
    takeMark('first-term-counts-as-voted');
    c.raft('n4').step({ type: 'vote', from: 'n2', to: 'n4', term: 5, lastLogIndex: 9,
      lastLogTerm: 4, transfer: false });
    expect(takeMark('first-term-counts-as-voted')).toBe(1);
    expect(c.raft('n4').status().term).toBe(5);
    c.processAll();
    expect(c.queue.find((m) => m.from === 'n4' && m.term === 5)).toMatchObject({
      type: 'voteResponse', granted: false });
    c.raft('n4').step({ type: 'vote', from: 'n2', to: 'n4', term: 6, lastLogIndex: 9,
      lastLogTerm: 4, transfer: false });
    c.processAll();
    expect(c.queue.find((m) => m.from === 'n4' && m.term === 6)).toMatchObject({
      type: 'voteResponse', granted: true });
  });
});

describe('a voter that lost its files', () => {
  const vote = (from: string, to: string, term: number, c: Cluster): Message => ({
    type: 'vote', from, to, term, lastLogIndex: c.raft(from).status().lastIndex,
    lastLogTerm: c.raft(from).status().term, transfer: true });
  const answer = (c: Cluster, from: string, term: number) =>
    c.queue.find((m) => m.from === from && m.type === 'voteResponse' && m.term === term);

  it('gives no second vote in the first term it learns, coming back under its old id', () => {
    const c = ledByN1();
    // n3 votes for n2 in term 5 (a transfer's vote: no lease holds it back).
    c.raft('n3').step(vote('n2', 'n3', 5, c));
    c.processAll();
    expect(answer(c, 'n3', 5)).toMatchObject({ granted: true });
    c.queue = [];
    // Its disk is replaced and it starts again as n3 with the old member list.
    c.wipe('n3');
    expect(c.raft('n3').status().term).toBe(0);
    takeMark('first-term-counts-as-voted');
    c.raft('n3').step(vote('n1', 'n3', 5, c));
    expect(takeMark('first-term-counts-as-voted')).toBe(1);
    c.processAll();
    // A grant here would be n3's second vote in term 5: n1 and n2 could both lead it.
    expect(answer(c, 'n3', 5)).toMatchObject({ granted: false });
    c.raft('n3').step(vote('n1', 'n3', 6, c));
    c.processAll();
    expect(answer(c, 'n3', 6)).toMatchObject({ granted: true });
  });

  it('leaves a new cluster\'s first election alone: it carries no log', () => {
    const c = new Cluster(THREE, undefined, 7);
    takeMark('first-term-counts-as-voted');
    c.campaign('n2');
    expect(c.leaders()).toEqual(['n2']);
    expect(c.raft('n2').status().term).toBe(1);
    expect(takeMark('first-term-counts-as-voted')).toBe(0);
  });
});

describe('configuration values', () => {
  const base = bootstrapConfiguration(THREE, [{ id: 'n1', address: 'a:1' }]);

  it('a config entry round-trips and garbage decodes to null', () => {
    const next = applyChange(base, add('n4')) as Configuration;
    const data = encodeConfigEntry({ change: add('n4'), config: next });
    expect(decodeConfigEntry(data)).toEqual({ change: add('n4'), config: next });
    expect(decodeConfigEntry(bytes('{"voters":1}'))).toBeNull();
    expect(decodeConfigEntry(new Uint8Array([0xff]))).toBeNull();
  });

  it.each([
    [add('n1'), 'member-exists'],
    [add('bad id'), 'invalid'],
    [{ kind: 'addLearner', id: 'n4', peer: 'nohost' } as const, 'invalid'],
    [{ kind: 'addLearner', id: 'n4', peer: 'h:0' } as const, 'invalid'],
    [promote('n9'), 'unknown-member'],
    [promote('n1'), 'not-a-learner'],
    [remove('n9'), 'unknown-member'],
  ])('refuses %j: %s', (what, refusal) => {
    expect(applyChange(base, what)).toMatchObject({ refusal });
  });

  it('keeps its bounds: voters, members and removed ids', () => {
    let config: Configuration = bootstrapConfiguration(['v0']);
    for (let i = 1; i < VOTERS_MAX; i++) {
      config = applyChange(config, add(`v${i}`)) as Configuration;
      config = applyChange(config, promote(`v${i}`)) as Configuration;
    }
    config = applyChange(config, add('x')) as Configuration;
    expect(applyChange(config, promote('x'))).toMatchObject({ refusal: 'too-many-voters' });
    for (let i = config.voters.length + config.learners.length; i < MEMBERS_MAX; i++) {
      config = applyChange(config, add(`l${i}`)) as Configuration;
    }
    expect(applyChange(config, add('y'))).toMatchObject({ refusal: 'too-many-members' });
    expect(checkConfiguration(config)).toBeNull();
    let churn: Configuration = bootstrapConfiguration(['v0']);
    for (let i = 0; i < REMOVED_IDS_MAX + 3; i++) {
      churn = applyChange(applyChange(churn, add(`r${i}`)) as Configuration,
        remove(`r${i}`)) as Configuration;
    }
    expect(churn.removed).toHaveLength(REMOVED_IDS_MAX);
    expect(churn.removed[0]).toBe('r3');
  });
});
