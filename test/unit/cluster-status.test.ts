/**
 * Member status on the peer link: the status frame round-trips, never throws on garbage and
 * never passes for a Raft frame (nor a Raft frame for it); the cluster table keeps the last
 * status of each member, calls it down once it is older than STATUS_STALE_MS, names the
 * leader, measures lag, and follows the members the node knows.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decodeMessage, encodeMessage } from '../../host/core/raft/message-codec.js';
import {
  ClusterStatus, STATUS_SEND_EVERY_MS, STATUS_STALE_MS,
} from '../../host/node/cluster-status.js';
import { advertisedUrl, ConfigError, loadConfig } from '../../host/node/config.js';
import type { Scheduler, TimerHandle } from '../../host/node/scheduler.js';
import type { NodeHealth } from '../../host/node/service.js';
import {
  decodeStatusFrame, encodeStatusFrame, isStatusFrame, STATUS_FRAME_BYTES_MAX, STATUS_FRAME_TAG,
  type MemberStatus,
} from '../../host/node/status-frame.js';
import { testSeed } from '../helpers/seed.js';

const status: MemberStatus = {
  id: 'n2', status: 'ok', role: 'follower', leader: 'n1', term: 4, commitIndex: 90,
  appliedIndex: 88, digest: null, url: 'http://127.0.0.1:6633', sentAtMs: 1_790_000_000_000,
  storageFull: false, stateBytesMax: 2_684_354_560, stateBytes: 1_048_576, catchUpHeld: false,
  catchUpHeldFor: null,
};

function frameOf(value: unknown): Uint8Array {
  const json = new TextEncoder().encode(JSON.stringify(value));
  return Uint8Array.from([STATUS_FRAME_TAG, 1, ...json]);
}

describe('status frame', () => {
  it('round-trips, with and without a digest', () => {
    expect(decodeStatusFrame(encodeStatusFrame(status))).toEqual(status);
    const withDigest = { ...status, digest: 'a1b2c3d4e5f6' };
    expect(decodeStatusFrame(encodeStatusFrame(withDigest))).toEqual(withDigest);
  });

  it('is never a Raft frame, and no Raft frame is a status frame', () => {
    const frame = encodeStatusFrame(status);
    expect(decodeMessage(frame)).toBeNull();
    const raft = encodeMessage({ type: 'heartbeatResponse', from: 'n1', to: 'n2', term: 3,
      readContext: 0 });
    expect(isStatusFrame(raft)).toBe(false);
    expect(decodeStatusFrame(raft)).toBeNull();
  });

  it('skips fields a later release adds, and refuses out-of-bound ones', () => {
    expect(decodeStatusFrame(frameOf({ ...status, zone: 'eu-1' }))).toEqual(status);
    for (const bad of [{ term: -1 }, { term: 1.5 }, { id: '' }, { id: 'a b' }, { role: 'LEAD' },
      { status: 'sleeping' }, { url: 'javascript:alert(1)' }, { url: 'ftp://x' },
      { digest: 'has space' }, { digest: 'x'.repeat(129) }, { leader: 7 },
      { appliedIndex: 2 ** 53 }, { sentAtMs: '1' }, { storageFull: 'yes' },
      { stateBytesMax: 0 }, { stateBytesMax: -5 }, { stateBytesMax: '1' },
      { stateBytes: -1 }, { stateBytes: 0.5 }, { stateBytes: '7' }, { catchUpHeld: 1 },
      { catchUpHeldFor: 'space' }, { catchUpHeld: true, catchUpHeldFor: 'Disk Space' },
      { catchUpHeld: true, catchUpHeldFor: 7 }, { catchUpHeld: true, catchUpHeldFor: '' }]) {
      expect(decodeStatusFrame(frameOf({ ...status, ...bad })), JSON.stringify(bad)).toBeNull();
    }
    // A release before `storageFull` sends none: not full.
    const { storageFull: _, stateBytesMax: __, stateBytes: ___, catchUpHeld: ____,
      catchUpHeldFor: _____, ...earlier } = status;
    expect(decodeStatusFrame(frameOf(earlier))).toEqual({ ...status, storageFull: false,
      stateBytesMax: null, stateBytes: null, catchUpHeld: false, catchUpHeldFor: null });
    // A release before `catchUpHeldFor` held back for want of memory only.
    expect(decodeStatusFrame(frameOf({ ...earlier, catchUpHeld: true }))?.catchUpHeldFor)
      .toBe('memory');
    // A reason a later release adds still reads, as a word.
    expect(decodeStatusFrame(frameOf({ ...status, catchUpHeld: true,
      catchUpHeldFor: 'io_errors' }))?.catchUpHeldFor).toBe('io_errors');
    expect(decodeStatusFrame(frameOf([status]))).toBeNull();
    expect(decodeStatusFrame(frameOf(null))).toBeNull();
  });

  it('refuses a wrong version, bad UTF-8, a truncation and an oversized frame', () => {
    const frame = encodeStatusFrame(status);
    expect(decodeStatusFrame(Uint8Array.from([STATUS_FRAME_TAG, 2, ...frame.slice(2)])))
      .toBeNull();
    expect(decodeStatusFrame(Uint8Array.from([STATUS_FRAME_TAG, 1, 0xff, 0xfe]))).toBeNull();
    for (let cut = 0; cut < frame.length; cut++) {
      expect(decodeStatusFrame(frame.subarray(0, cut))).toBeNull();
    }
    const padded = frameOf({ ...status, pad: 'x'.repeat(STATUS_FRAME_BYTES_MAX) });
    expect(decodeStatusFrame(padded)).toBeNull();
  });

  it('never throws on garbage', () => {
    const seed = testSeed();
    fc.assert(fc.property(fc.uint8Array({ maxLength: 300 }), fc.boolean(), (bytes, tagged) => {
      const frame = tagged ? Uint8Array.from([STATUS_FRAME_TAG, 1, ...bytes]) : bytes;
      const decoded = decodeStatusFrame(frame);
      expect(decoded === null || typeof decoded.id === 'string').toBe(true);
    }), { seed, numRuns: 2000 });
  });

  it('refuses to encode a status it must not send', () => {
    expect(() => encodeStatusFrame({ ...status, url: 'not a url' })).toThrow();
    expect(() => encodeStatusFrame({ ...status, term: Number.NaN })).toThrow();
  });
});

/** A hand-driven clock and timer queue. */
class ManualScheduler implements Scheduler {
  now = 1_790_000_000_000;
  monotonic = 0;
  private timers: Array<{ at: number; run: () => void; cancelled: boolean }> = [];
  nowMs(): number {
    return this.now;
  }
  after(delayMs: number, run: () => void): TimerHandle {
    const timer = { at: this.monotonic + delayMs, run, cancelled: false };
    this.timers.push(timer);
    return { cancel: () => { timer.cancelled = true; } };
  }
  soon(run: () => void): void {
    this.after(0, run);
  }
  advance(ms: number): void {
    this.monotonic += ms;
    this.now += ms;
    const due = this.timers.filter((t) => t.at <= this.monotonic && !t.cancelled);
    this.timers = this.timers.filter((t) => !due.includes(t));
    for (const timer of due) timer.run();
  }
}

function harness(selfId = 'n1') {
  const scheduler = new ManualScheduler();
  const sent: Array<[string, Uint8Array]> = [];
  let members = ['n1', 'n2', 'n3'];
  let voters = ['n1', 'n2', 'n3'];
  let storageFull = false;
  let health: NodeHealth = { status: 'ok', id: selfId, role: 'leader', leader: selfId, term: 4,
    commitIndex: 100, appliedIndex: 100, stateBytes: 0, stateBytesMax: 1 };
  const cluster = new ClusterStatus(selfId, {
    transport: { send: (to, frame) => void sent.push([to, frame]) },
    scheduler,
    monotonicMs: () => scheduler.monotonic,
    members: () => members,
    voters: () => voters,
    health: () => health,
    storageFull: () => storageFull,
  });
  return {
    cluster, scheduler, sent,
    setMembers: (next: string[]) => { members = next; },
    setVoters: (next: string[]) => { voters = next; },
    setHealth: (next: Partial<NodeHealth>) => { health = { ...health, ...next }; },
    setStorageFull: (full: boolean) => { storageFull = full; },
  };
}

function statusFrom(id: string, fields: Partial<MemberStatus> = {}): Uint8Array {
  return encodeStatusFrame({ ...status, id, ...fields });
}

describe('cluster status', () => {
  it('sends its own status to every other member now and every round', () => {
    const { cluster, scheduler, sent, setHealth } = harness();
    setHealth({ digest: 'abc123' });
    cluster.start('http://127.0.0.1:6632');
    expect(sent.map(([to]) => to)).toEqual(['n2', 'n3']);
    const first = decodeStatusFrame(sent[0]![1]);
    expect(first).toMatchObject({ id: 'n1', role: 'leader', term: 4, commitIndex: 100,
      digest: 'abc123', url: 'http://127.0.0.1:6632', sentAtMs: scheduler.now });
    scheduler.advance(STATUS_SEND_EVERY_MS);
    expect(sent).toHaveLength(4);
    cluster.stop();
    scheduler.advance(STATUS_SEND_EVERY_MS * 3);
    expect(sent).toHaveLength(4);
  });

  it('announces its status to every other member at once, besides the rounds', () => {
    // A learner that begins to hold back says so now (main.ts, catchUpReports): its leader
    // must not promote it a round later on what it last heard.
    const { cluster, scheduler, sent, setMembers } = harness();
    cluster.announce();
    expect(sent).toEqual([]);
    cluster.start('http://127.0.0.1:6632');
    sent.length = 0;
    setMembers(['n1', 'n2', 'n3', 'n4']);
    cluster.announce();
    expect(sent.map(([to]) => to)).toEqual(['n2', 'n3', 'n4']);
    expect(decodeStatusFrame(sent[0]![1])).toMatchObject({ id: 'n1', sentAtMs: scheduler.now });
    // The rounds go on at their pace.
    scheduler.advance(STATUS_SEND_EVERY_MS);
    expect(sent).toHaveLength(6);
    cluster.stop();
    cluster.announce();
    expect(sent).toHaveLength(6);
  });

  it('sends its status to a peer whose link came up, once started, to members only', () => {
    const { cluster, sent } = harness();
    cluster.linkUp('n2');
    expect(sent).toEqual([]);
    cluster.start('http://127.0.0.1:6632');
    sent.length = 0;
    cluster.linkUp('n3');
    cluster.linkUp('n9');
    cluster.linkUp('n1');
    expect(sent.map(([to]) => to)).toEqual(['n3']);
    expect(decodeStatusFrame(sent[0]![1]))
      .toMatchObject({ id: 'n1', url: 'http://127.0.0.1:6632' });
    cluster.stop();
    cluster.linkUp('n2');
    expect(sent).toHaveLength(1);
  });

  it('answers a member heard for the first time, or after it went stale, once', () => {
    const { cluster, scheduler, sent } = harness();
    cluster.start('http://127.0.0.1:6632');
    sent.length = 0;
    cluster.accept('n2', statusFrom('n2'));
    expect(sent.map(([to]) => to)).toEqual(['n2']);
    scheduler.monotonic += 500;
    cluster.accept('n2', statusFrom('n2'));
    expect(sent).toHaveLength(1);
    scheduler.monotonic += STATUS_STALE_MS + 1;
    cluster.accept('n2', statusFrom('n2'));
    expect(sent.map(([to]) => to)).toEqual(['n2', 'n2']);
    cluster.stop();
  });

  it('sends whether its storage is full, and names the members whose storage is', () => {
    const { cluster, scheduler, sent, setStorageFull } = harness();
    setStorageFull(true);
    cluster.start('http://127.0.0.1:6632');
    expect(decodeStatusFrame(sent[0]![1])?.storageFull).toBe(true);
    cluster.stop();
    expect(cluster.membersStorageFull()).toEqual([]);
    cluster.accept('n2', statusFrom('n2', { storageFull: true }));
    cluster.accept('n3', statusFrom('n3'));
    expect(cluster.membersStorageFull()).toEqual(['n2']);
    // Room again: n2 says so in its next status.
    cluster.accept('n2', statusFrom('n2'));
    expect(cluster.membersStorageFull()).toEqual([]);
    // A member heard full, then not at all: down, it counts as not full once stale.
    cluster.accept('n3', statusFrom('n3', { storageFull: true }));
    expect(cluster.membersStorageFull()).toEqual(['n3']);
    scheduler.monotonic += STATUS_STALE_MS + 1;
    expect(cluster.membersStorageFull()).toEqual([]);
  });

  it('names no learner whose storage is full: a learner holds back instead', () => {
    const { cluster, setMembers, setVoters } = harness();
    setMembers(['n1', 'n2', 'n3', 'n4']);
    setVoters(['n1', 'n2', 'n3']);
    cluster.accept('n4', statusFrom('n4', { storageFull: true, catchUpHeld: true,
      catchUpHeldFor: 'space' }));
    expect(cluster.membersStorageFull()).toEqual([]);
    expect(cluster.membersHoldingCatchUp()).toEqual(['n4']);
    expect(cluster.catchUpHeldFor('n4')).toBe('space');
    // Promoted, its full volume binds every member's writes.
    setVoters(['n1', 'n2', 'n3', 'n4']);
    expect(cluster.membersStorageFull()).toEqual(['n4']);
  });

  it('takes no learner\'s budget as the smallest: a learner holds back past it instead', () => {
    const { cluster, setMembers, setVoters } = harness();
    setMembers(['n1', 'n2', 'n3', 'n4']);
    setVoters(['n1', 'n2', 'n3']);
    cluster.accept('n2', statusFrom('n2', { stateBytesMax: 800, stateBytes: 500 }));
    cluster.accept('n4', statusFrom('n4', { stateBytesMax: 100, stateBytes: 900 }));
    expect(cluster.smallestStateBudget()).toEqual({ member: 'n2', bytes: 800, appliedIndex: 88 });
    // Its state still counts as a member's: every member reaches the same state.
    expect(cluster.largestState()).toEqual({ member: 'n4', bytes: 900, appliedIndex: 88 });
    setVoters(['n1', 'n2', 'n3', 'n4']);
    expect(cluster.smallestStateBudget()).toEqual({ member: 'n4', bytes: 100, appliedIndex: 88 });
  });

  it('sends its own memory budget, and finds the smallest among the members heard', () => {
    const { cluster, scheduler, sent, setHealth } = harness();
    setHealth({ stateBytesMax: 1000 });
    cluster.start('http://127.0.0.1:6632');
    expect(decodeStatusFrame(sent[0]![1])?.stateBytesMax).toBe(1000);
    cluster.stop();
    expect(cluster.smallestStateBudget()).toBeNull();
    cluster.accept('n2', statusFrom('n2', { stateBytesMax: 800 }));
    cluster.accept('n3', statusFrom('n3', { stateBytesMax: 500 }));
    expect(cluster.smallestStateBudget()).toEqual({ member: 'n3', bytes: 500, appliedIndex: 88 });
    scheduler.monotonic += 2000;
    cluster.accept('n2', statusFrom('n2', { stateBytesMax: 800 }));
    scheduler.monotonic += 1000;
    // n3 unheard for 3 s: down, its budget no longer binds.
    expect(cluster.smallestStateBudget()).toEqual({ member: 'n2', bytes: 800, appliedIndex: 88 });
  });

  it('sends the state it holds, and finds the largest among the members heard', () => {
    const { cluster, scheduler, sent, setHealth } = harness();
    setHealth({ stateBytes: 4096 });
    cluster.start('http://127.0.0.1:6632');
    expect(decodeStatusFrame(sent[0]![1])?.stateBytes).toBe(4096);
    cluster.stop();
    expect(cluster.largestState()).toBeNull();
    cluster.accept('n2', statusFrom('n2', { stateBytes: 300_000_000 }));
    cluster.accept('n3', statusFrom('n3', { stateBytes: null }));
    expect(cluster.largestState()).toEqual({ member: 'n2', bytes: 300_000_000, appliedIndex: 88 });
    scheduler.monotonic += 2000;
    cluster.accept('n3', statusFrom('n3', { stateBytes: 5 }));
    scheduler.monotonic += 1000;
    // n2 unheard for 3 s: down, its state no longer counts.
    expect(cluster.largestState()).toEqual({ member: 'n3', bytes: 5, appliedIndex: 88 });
  });

  it('sends whether it holds back from catching up, and names the members that do', () => {
    const { cluster, scheduler, sent } = harness();
    cluster.start('http://127.0.0.1:6632');
    expect(decodeStatusFrame(sent[0]![1])).toMatchObject({ catchUpHeld: false,
      catchUpHeldFor: null });
    cluster.stop();
    cluster.accept('n2', statusFrom('n2', { catchUpHeld: true, catchUpHeldFor: 'memory' }));
    cluster.accept('n3', statusFrom('n3'));
    expect(cluster.membersHoldingCatchUp()).toEqual(['n2']);
    scheduler.monotonic += STATUS_STALE_MS + 1;
    expect(cluster.membersHoldingCatchUp()).toEqual([]);
  });

  it('keeps the last status of each member; it is down once older than the bound', () => {
    const { cluster, scheduler } = harness();
    expect(cluster.accept('n2', statusFrom('n2'))).toBe(true);
    scheduler.advance(400);
    let view = cluster.view();
    expect(view.members.map((m) => [m.id, m.state, m.ageMs])).toEqual([
      ['n1', 'up', 0], ['n2', 'up', 400], ['n3', 'unknown', null]]);
    expect(view.members[1]!.status).toMatchObject({ role: 'follower', appliedIndex: 88,
      sentAt: new Date(status.sentAtMs).toISOString() });
    scheduler.advance(STATUS_STALE_MS - 400);
    expect(cluster.view().members[1]!.state).toBe('up');
    scheduler.advance(1);
    view = cluster.view();
    expect(view.members[1]!.state).toBe('down');
    expect(view.staleAfterMs).toBe(STATUS_STALE_MS);
  });

  it('names the up member that leads in the highest term, and measures lag from it', () => {
    const { cluster, scheduler, setHealth } = harness();
    setHealth({ role: 'follower', leader: 'n2', term: 5, commitIndex: 120, appliedIndex: 118 });
    cluster.accept('n2', statusFrom('n2', { role: 'leader', term: 5, commitIndex: 130 }));
    cluster.accept('n3', statusFrom('n3', { role: 'leader', term: 4, commitIndex: 100,
      appliedIndex: 95 }));
    let view = cluster.view();
    expect(view.leader).toBe('n2');
    expect(view.members.map((m) => m.lagEntries)).toEqual([12, 42, 35]);
    scheduler.advance(STATUS_STALE_MS + 1);
    view = cluster.view();
    expect(view.leader).toBeNull();
    expect(view.members.map((m) => m.lagEntries)).toEqual([null, null, null]);
  });

  it('drops a status that names another member, comes from a non-member, or is garbage', () => {
    const { cluster } = harness();
    expect(cluster.accept('n2', statusFrom('n3'))).toBe(true);
    expect(cluster.accept('n9', statusFrom('n9'))).toBe(true);
    expect(cluster.accept('n2', Uint8Array.from([STATUS_FRAME_TAG, 1, 123]))).toBe(true);
    expect(cluster.accept('n1', statusFrom('n1'))).toBe(true);
    expect(cluster.view().members.map((m) => m.state)).toEqual(['up', 'unknown', 'unknown']);
  });

  it('leaves every other frame to the Raft core', () => {
    const { cluster } = harness();
    const raft = encodeMessage({ type: 'voteResponse', from: 'n2', to: 'n1', term: 2,
      granted: true });
    expect(cluster.accept('n2', raft)).toBe(false);
    expect(cluster.accept('n2', new Uint8Array(0))).toBe(false);
  });

  it('follows the members the node knows', () => {
    const { cluster, sent, setMembers } = harness();
    cluster.accept('n3', statusFrom('n3'));
    setMembers(['n1', 'n2', 'n4']);
    expect(cluster.view().members.map((m) => [m.id, m.state])).toEqual([
      ['n1', 'up'], ['n2', 'unknown'], ['n4', 'unknown']]);
    setMembers(['n1', 'n2', 'n3']);
    expect(cluster.view().members[2]!.state).toBe('unknown');
    cluster.start('http://127.0.0.1:6632');
    expect(sent.map(([to]) => to)).toEqual(['n2', 'n3']);
  });

  it('estimates each voter\'s clock now from its last status, and leaves out stale ones', () => {
    const { cluster, scheduler, setVoters } = harness();
    cluster.accept('n2', statusFrom('n2', { sentAtMs: scheduler.now + 60_000 }));
    scheduler.advance(400);
    cluster.accept('n3', statusFrom('n3', { sentAtMs: scheduler.now - 5_000 }));
    scheduler.advance(600);
    // n2 was heard 1000 ms ago, n3 600 ms ago: each reading has moved on by as much.
    expect(cluster.voterClocks(123)).toEqual({ voterCount: 3,
      clocksMs: [123, scheduler.now + 60_000, scheduler.now - 5_000] });
    setVoters(['n1', 'n2']);
    expect(cluster.voterClocks(123).clocksMs).toEqual([123, scheduler.now + 60_000]);
    setVoters(['n1', 'n2', 'n3']);
    scheduler.advance(1600);
    expect(cluster.voterClocks(5).clocksMs).toEqual([5, scheduler.now - 5_000]);
    setVoters(['n2', 'n3']);
    expect(cluster.voterClocks(5)).toEqual({ voterCount: 2, clocksMs: [scheduler.now - 5_000] });
  });

  it('sends nothing as a single node', () => {
    const { cluster, sent, setMembers } = harness();
    setMembers(['n1']);
    cluster.start('http://127.0.0.1:6632');
    expect(sent).toEqual([]);
    expect(cluster.view()).toMatchObject({ self: 'n1', leader: 'n1' });
  });
});

describe('advertised URL', () => {
  it('defaults from --host and the bound port, and HIVEKV_ADVERTISE_URL overrides it', () => {
    const config = loadConfig({ host: '127.0.0.1', port: '0' }, {});
    expect(advertisedUrl(config, 41234, 'box')).toBe('http://127.0.0.1:41234');
    expect(advertisedUrl(loadConfig({ host: '0.0.0.0' }, {}), 6632, 'box'))
      .toBe('http://box:6632');
    expect(advertisedUrl(loadConfig({ host: '::1' }, {}), 6632, 'box'))
      .toBe('http://[::1]:6632');
    const advertised = loadConfig({}, { HIVEKV_ADVERTISE_URL: 'https://kv-1.example.com/' });
    expect(advertisedUrl(advertised, 6632, 'box')).toBe('https://kv-1.example.com');
  });

  const badUrls = ['kv-1:6632', 'ftp://kv-1', 'http://', 'http://' + 'a'.repeat(600)];
  it.each(badUrls.map((url) => [url.slice(0, 30), url]))(
    'refuses HIVEKV_ADVERTISE_URL=%s', (_shown, url) => {
      expect(() => loadConfig({}, { HIVEKV_ADVERTISE_URL: url })).toThrow(ConfigError);
    });
});
