/**
 * Cluster: every member this node knows, from `GET /api/v1/system/cluster` once a second,
 * with role, term, commit and applied index, lag behind the leader, the state it holds of its
 * memory budget, health (a member whose last status is older than the node's `staleAfterMs`
 * is down; one low on disk space is marked) and the state digest where the node reports one.
 * Leadership and health changes are listed as they are seen.
 */
import { useRef, useState } from 'preact/hooks';
import type { Api, Refusal, Settings } from './api.js';
import {
  formatAge, formatCount, memberMarks, shortDigest, stateText, timeOfDay,
} from './format.js';
import { usePoll } from './hooks.js';
import { RefusalBox } from './widgets.js';

export interface MemberStatusView {
  readonly status: string;
  readonly role: string;
  readonly leader: string | null;
  readonly term: number;
  readonly commitIndex: number;
  readonly appliedIndex: number;
  readonly digest: string | null;
  readonly url: string;
  readonly sentAt: string;
  /**
   * Below HIVEKV_MIN_FREE_BYTES free: a voter makes every member refuse writes, a learner
   * holds back (absent: older nodes).
   */
  readonly storageFull?: boolean;
  /** Its memory budget; every member admits growth only up to the smallest (null: unsaid). */
  readonly stateBytesMax?: number | null;
  /** The state it holds (null: unsaid). */
  readonly stateBytes?: number | null;
  /** It holds back from catching up (absent: no). */
  readonly catchUpHeld?: boolean;
  /** What for: `memory`, `space` or a later release's word (absent: memory, if held). */
  readonly catchUpHeldFor?: string | null;
}

export interface MemberView {
  readonly id: string;
  readonly self: boolean;
  readonly state: 'up' | 'down' | 'unknown';
  readonly ageMs: number | null;
  readonly status: MemberStatusView | null;
  readonly lagEntries: number | null;
}

export interface ClusterAnswer {
  readonly self: string;
  readonly leader: string | null;
  readonly staleAfterMs: number;
  readonly members: readonly MemberView[];
}

interface ClusterEvent {
  readonly atMs: number;
  readonly text: string;
}

/** Events listed at most; older ones scroll away. */
const EVENTS_MAX = 50;
const POLL_MS = 1000;

/** What changed between two answers, as sentences. */
export function changes(before: ClusterAnswer | null, after: ClusterAnswer): string[] {
  const out: string[] = [];
  if (before === null || before.leader !== after.leader) {
    const leader = after.members.find((m) => m.id === after.leader);
    out.push(after.leader === null ? 'no leader'
      : `${after.leader} is leader (term ${leader?.status?.term ?? '?'})`);
  }
  for (const member of after.members) {
    const was = before?.members.find((m) => m.id === member.id);
    if (was !== undefined && was.state !== member.state) {
      out.push(`${member.id} is ${member.state}`);
    }
  }
  return out;
}

/** Digests that differ between members at the same applied index (replicas disagree). */
export function digestConflicts(members: readonly MemberView[]): number[] {
  const byIndex = new Map<number, Set<string>>();
  for (const member of members) {
    const status = member.status;
    if (member.state !== 'up' || status === null || status.digest === null) continue;
    const set = byIndex.get(status.appliedIndex) ?? new Set<string>();
    set.add(status.digest);
    byIndex.set(status.appliedIndex, set);
  }
  return [...byIndex].filter(([, digests]) => digests.size > 1).map(([index]) => index);
}

function MemberRow({ member, isLeader }: { member: MemberView; isLeader: boolean }) {
  const s = member.status;
  const age = member.ageMs === null ? 'never heard' : member.self ? 'this node'
    : `heard ${formatAge(member.ageMs)} ago`;
  return (
    <tr data-member={member.id} data-state={member.state} data-role={s?.role ?? ''}
      class={`state-${member.state}${isLeader ? ' leader' : ''}`}>
      <th scope="row">{member.id}{member.self ? <span class="tag">this node</span> : null}</th>
      <td><span class={`badge ${member.state}`} data-test="member-state">{member.state}</span>
        {memberMarks(s).map((mark) => <span key={mark.test} class="badge down mark"
          data-test={mark.test} title={mark.title}>{mark.text}</span>)}
        <span class="muted"> {age}</span></td>
      <td data-test="member-role">{s?.role ?? '—'}{s !== null && s.status !== 'ok'
        ? ` (${s.status})` : ''}{member.state === 'down'
        ? <span class="muted"> (last heard)</span> : null}</td>
      <td class="num">{s === null ? '—' : formatCount(s.term)}</td>
      <td class="num">{s === null ? '—' : formatCount(s.commitIndex)}</td>
      <td class="num">{s === null ? '—' : formatCount(s.appliedIndex)}</td>
      <td class="num" data-test="member-lag">{member.lagEntries === null ? '—'
        : formatCount(member.lagEntries)}</td>
      <td class="num" data-test="member-state-bytes">{stateText(s)}</td>
      <td class="mono" title={s?.digest ?? 'this node reports no digest'}>
        {s?.digest == null ? '—' : shortDigest(s.digest)}</td>
      <td>{s === null ? '—' : <a href={`${s.url}/console`}>{s.url}</a>}</td>
    </tr>
  );
}

function MembersTable({ answer }: { answer: ClusterAnswer }) {
  return (
    <div class="scroll-x">
      <table class="members">
        <caption class="sr-only">Members</caption>
        <thead><tr>
          <th scope="col">Member</th><th scope="col">Health</th><th scope="col">Role</th>
          <th scope="col" class="num">Term</th><th scope="col" class="num">Commit</th>
          <th scope="col" class="num">Applied</th><th scope="col" class="num">Lag</th>
          <th scope="col" class="num" title="the state it holds, of its memory budget">State</th>
          <th scope="col">Digest</th><th scope="col">Address</th>
        </tr></thead>
        <tbody>
          {answer.members.map((m) => (
            <MemberRow key={m.id} member={m} isLeader={m.id === answer.leader} />))}
        </tbody>
      </table>
    </div>
  );
}

function Unreachable({ settings, since, last }:
  { settings: Settings; since: number; last: ClusterAnswer | null }) {
  const others = (last?.members ?? []).filter((m) => !m.self && m.status !== null);
  return (
    <div class="banner down" role="alert">
      <strong>{settings.node}, the node serving this console, is not answering</strong>
      {` since ${timeOfDay(since)}.`}
      {others.length === 0 ? null : <span> Open another member's console:{' '}
        {others.map((m) => <a key={m.id} href={`${m.status!.url}/console`}>{m.id} </a>)}
      </span>}
    </div>
  );
}

export function ClusterPage({ api, settings }: { api: Api; settings: Settings }) {
  const [answer, setAnswer] = useState<ClusterAnswer | null>(null);
  const [refusal, setRefusal] = useState<Refusal | null>(null);
  const [downSince, setDownSince] = useState<number | null>(null);
  const [events, setEvents] = useState<ClusterEvent[]>([]);
  const previous = useRef<ClusterAnswer | null>(null);
  usePoll(async () => {
    const result = await api.call<ClusterAnswer>('GET', '/api/v1/system/cluster');
    if (!result.ok) {
      setRefusal(result.refusal);
      if (result.refusal.status === 0) setDownSince((since) => since ?? Date.now());
      return;
    }
    const now = Date.now();
    const news = changes(previous.current, result.value).map((text) => ({ atMs: now, text }));
    if (news.length > 0) setEvents((list) => [...news.reverse(), ...list].slice(0, EVENTS_MAX));
    previous.current = result.value;
    setAnswer(result.value);
    setRefusal(null);
    setDownSince(null);
  }, POLL_MS);
  return (
    <section aria-labelledby="cluster-title">
      <h1 id="cluster-title">Cluster</h1>
      {downSince !== null ? <Unreachable settings={settings} since={downSince}
        last={answer} /> : null}
      {refusal !== null && refusal.status !== 0 ? <RefusalBox refusal={refusal} /> : null}
      {answer === null ? (refusal === null ? <p>Loading…</p> : null) : (
        <ClusterBody answer={answer} events={events} />
      )}
    </section>
  );
}

function ClusterBody({ answer, events }: { answer: ClusterAnswer; events: ClusterEvent[] }) {
  const leader = answer.members.find((m) => m.id === answer.leader);
  const conflicts = digestConflicts(answer.members);
  return (
    <>
      <p class="headline" data-test="leader" data-leader={answer.leader ?? ''}>
        {answer.leader === null ? <span class="badge down">No leader</span> : <>Leader{' '}
          <strong>{answer.leader}</strong>, term {leader?.status?.term ?? '?'}</>}
        <span class="muted"> · {answer.members.filter((m) => m.state === 'up').length} of{' '}
          {answer.members.length} up · down after {formatAge(answer.staleAfterMs)} of silence
        </span>
      </p>
      {conflicts.length === 0 ? null : (
        <div class="banner down" role="alert">Replicas disagree: different state digests at
          applied index {conflicts.join(', ')}.</div>)}
      <MembersTable answer={answer} />
      <h2>Changes seen</h2>
      <ol class="events" data-test="events">
        {events.map((e, i) => <li key={`${e.atMs}-${i}`}>
          <time>{timeOfDay(e.atMs)}</time> {e.text}</li>)}
      </ol>
    </>
  );
}
