/**
 * The fault run's nemeses: each injects one kind of fault and returns how to heal it. The
 * schedule (`runSchedule`) alternates quiet spells and faults, every choice drawn from the
 * seeded generator, so a seed replays the same sequence of kinds, targets and durations
 * (the current leader, when a fault aims at it, is whoever leads at that moment).
 *
 * Kinds: partition (two sides, links across stalled or reset), one-way (some directed links
 * only), delay, flaky (links that cut connections at random), kill (SIGKILL, then restart,
 * sometimes at once), stop (SIGTERM: a graceful stop under load, as in a rolling restart,
 * which must exit 0; then restart), pause (SIGSTOP, then SIGCONT), and membership (remove
 * a follower through `DELETE /api/v1/system/members/:id`, wipe it, start it with `--join`,
 * add it as a learner and promote it): that one is off unless asked for.
 * Beside the schedule, `runProbes` has an outsider probe the peer ports all along.
 */
import { encodeMessage } from '../../host/core/raft/message-codec.js';
import type { JepsenCluster } from './nodes.js';
import {
  PROBE_KINDS, probeScript, runScript, handshakePart, type ProbeContext,
} from './peer-probe.js';
import type { LinkMode } from './proxy.js';

export const NEMESIS_KINDS = ['partition', 'one-way', 'delay', 'flaky', 'kill', 'pause',
  'stop', 'membership'] as const;
export type NemesisKind = (typeof NEMESIS_KINDS)[number];
/** Everything but membership, which needs the membership API. */
export const DEFAULT_NEMESES: readonly NemesisKind[] = NEMESIS_KINDS.filter((k) =>
  k !== 'membership');

/** The term a probe's forged Raft frame claims; a node that reports it heard a stranger. */
export const FORGED_TERM = 1_000_000_000;

export interface FaultRecord {
  readonly kind: NemesisKind;
  readonly detail: string;
  readonly startMs: number;
  endMs: number | null;
}

export interface NemesisContext {
  readonly cluster: JepsenCluster;
  readonly random: () => number;
  readonly startMs: number;
  readonly log: (line: string) => void;
}

type Heal = () => Promise<void>;

function pick<T>(random: () => number, items: readonly T[]): T {
  const item = items[Math.floor(random() * items.length)];
  if (item === undefined) throw new Error('pick from nothing');
  return item;
}

function between(random: () => number, min: number, max: number): number {
  return min + Math.floor(random() * (max - min + 1));
}

function shuffled<T>(random: () => number, items: readonly T[]): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}

/** The node every live node names as leader, if they agree; null otherwise. */
export async function currentLeader(cluster: JepsenCluster): Promise<string | null> {
  const answers = await Promise.all(cluster.ids().filter((id) => cluster.isUp(id)).map(
    async (id) => {
      try {
        const response = await fetch(`${cluster.url(id)}/health`,
          { signal: AbortSignal.timeout(500) });
        return ((await response.json()) as { leader?: string | null }).leader ?? null;
      } catch {
        return null;
      }
    }));
  const leaders = new Set(answers.filter((a) => a !== null));
  const [leader] = [...leaders];
  return leaders.size === 1 && leader !== undefined ? leader : null;
}

/** Half the time the leader (if there is one), else any node. */
async function target(context: NemesisContext): Promise<string> {
  const { cluster, random } = context;
  const aimAtLeader = random() < 0.5;
  const any = pick(random, cluster.ids());
  if (!aimAtLeader) return any;
  return (await currentLeader(cluster)) ?? any;
}

function blockMode(random: () => number): LinkMode {
  return random() < 0.5 ? { kind: 'stall' } : { kind: 'reset' };
}

function healLinks(context: NemesisContext): Heal {
  return async () => {
    for (const { proxy } of context.cluster.links()) proxy.setMode({ kind: 'pass' });
  };
}

async function partition(context: NemesisContext): Promise<[string, Heal]> {
  const { cluster, random } = context;
  const ids = shuffled(random, cluster.ids());
  const leader = random() < 0.3 ? await currentLeader(cluster) : null;
  const minoritySize = between(random, 1, Math.floor((ids.length - 1) / 2));
  const minority = leader !== null ? [leader] : ids.slice(0, minoritySize);
  const mode = blockMode(random);
  for (const { from, to, proxy } of cluster.links()) {
    if (minority.includes(from) !== minority.includes(to)) proxy.setMode(mode);
  }
  return [`${mode.kind} between [${minority.join(',')}] and the rest`, healLinks(context)];
}

async function oneWay(context: NemesisContext): Promise<[string, Heal]> {
  const { cluster, random } = context;
  const links = shuffled(random, cluster.links()).slice(0, between(random, 1, 3));
  const mode = blockMode(random);
  for (const { proxy } of links) proxy.setMode(mode);
  return [`${mode.kind} ${links.map((l) => `${l.from}->${l.to}`).join(' ')}`, healLinks(context)];
}

async function delay(context: NemesisContext): Promise<[string, Heal]> {
  const ms = between(context.random, 20, 250);
  for (const { proxy } of context.cluster.links()) proxy.setMode({ kind: 'delay', ms });
  return [`every link +${ms} ms`, healLinks(context)];
}

async function flaky(context: NemesisContext): Promise<[string, Heal]> {
  const { cluster, random } = context;
  const links = cluster.links().filter(() => random() < 0.4);
  const cutProbability = 0.02 + random() * 0.1;
  for (const { proxy } of links) proxy.setMode({ kind: 'flaky', cutProbability });
  return [`${links.length} links cut ${(cutProbability * 100).toFixed(0)}% of chunks' ` +
    'connections', healLinks(context)];
}

/**
 * Ends a node's process by `signal` (the leader half the time), then starts it again: at
 * once a third of the time (the data directory must be free right away), else at the heal.
 */
async function endProcess(context: NemesisContext, signal: 'SIGKILL' | 'SIGTERM'):
  Promise<[string, Heal]> {
  const { cluster, random } = context;
  const id = await target(context);
  const atOnce = random() < 0.33;
  await (signal === 'SIGKILL' ? cluster.kill(id) : cluster.terminate(id));
  if (atOnce) {
    await cluster.restart(id);
    return [`${signal} ${id}, restarted at once`, async () => undefined];
  }
  return [`${signal} ${id}`, async () => cluster.restart(id)];
}

async function pause(context: NemesisContext): Promise<[string, Heal]> {
  const id = await target(context);
  context.cluster.pause(id);
  return [`SIGSTOP ${id}`, async () => context.cluster.resume(id)];
}

export const INJECTORS: Record<NemesisKind, (context: NemesisContext) =>
  Promise<[string, Heal]>> = {
  partition, 'one-way': oneWay, delay, flaky, pause,
  kill: (context) => endProcess(context, 'SIGKILL'),
  stop: (context) => endProcess(context, 'SIGTERM'),
  membership: async (context) => replaceMember(context),
};

// ---------------------------------------------------------------- membership

async function admin(url: string, method: string, path: string, body?: unknown):
  Promise<{ status: number; body: unknown }> {
  const response = await fetch(`${url}${path}`, { method, signal: AbortSignal.timeout(10_000),
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await response.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // keep the text
  }
  return { status: response.status, body: parsed };
}

/**
 * Replaces a follower the way an operator would (README, "Replacing a node"): remove it,
 * wipe it, start it empty with `--join` under a new id (a cluster never takes a removed id
 * back), add it as a learner, promote it once caught up. Each step goes to the leader of the
 * moment. The new member's address is its real peer port: a configuration names one address
 * per member, so links to a re-added node bypass the per-link proxies.
 */
async function replaceMember(context: NemesisContext): Promise<[string, Heal]> {
  const { cluster, random } = context;
  const leader = await currentLeader(cluster);
  if (leader === null) return ['membership: no leader, skipped', async () => undefined];
  const id = pick(random, cluster.ids().filter((i) => i !== leader));
  const removed = await admin(cluster.url(leader), 'DELETE', `/api/v1/system/members/${id}`);
  if (removed.status !== 200) {
    return [`membership: remove ${id} answered ${removed.status} ${JSON.stringify(removed.body)}`,
      async () => undefined];
  }
  await cluster.kill(id);
  cluster.wipe(id);
  const member = cluster.member(id);
  const newId = cluster.renameForReplacement(id);
  const peer = `127.0.0.1:${member.peerPort}`;
  member.args = ['--id', newId, '--peer-listen', peer, '--join'];
  await cluster.launch(member);
  const heal = async () => {
    const outcome = await addAndPromote(context, newId, peer, PROMOTE_WITHIN_MS);
    if (outcome !== null) context.log(`membership: ${newId} ${outcome}`);
  };
  return [`membership: removed ${id}, wiped, rejoining as ${newId}`, heal];
}

/** How long the membership heal keeps trying to bring the new member in as a voter. */
const PROMOTE_WITHIN_MS = 60_000;

/** Adds `id` as a learner, then promotes it; null once it is a voter, else what went wrong. */
async function addAndPromote(context: NemesisContext, id: string, peer: string,
  withinMs: number): Promise<string | null> {
  const deadline = Date.now() + withinMs;
  let added = false;
  let last = 'no leader';
  while (Date.now() < deadline) {
    const leader = await currentLeader(context.cluster);
    if (leader !== null) {
      const url = context.cluster.url(leader);
      const answer = added
        ? await admin(url, 'POST', '/api/v1/system/members', { id, role: 'voter' })
        : await admin(url, 'POST', '/api/v1/system/members', { id, peer, role: 'learner' });
      const reason = (answer.body as { reason?: unknown } | null)?.reason;
      // An add whose answer was lost may have committed: the member then exists.
      if (!added && (answer.status === 200 || reason === 'members_member_exists')) added = true;
      else if (added && answer.status === 200) return null;
      last = `${answer.status} ${JSON.stringify(answer.body)}`;
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return `was not ${added ? 'promoted' : 'added'} within ${withinMs / 1000} s: ${last}`;
}

// ---------------------------------------------------------------- the schedule

export interface Schedule {
  readonly faults: FaultRecord[];
}

/**
 * Runs faults of the `kinds` until `untilMs` or `stopped()`: a quiet spell of 0.5 to 3 s,
 * a fault held 1 to 6 s, its heal. Returns the record of every fault.
 */
export async function runSchedule(context: NemesisContext, kinds: readonly NemesisKind[],
  untilMs: number, stopped: () => boolean, faults: FaultRecord[]): Promise<void> {
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
  while (kinds.length > 0 && Date.now() < untilMs && !stopped()) {
    await sleep(between(context.random, 500, 3000));
    if (Date.now() >= untilMs || stopped()) break;
    const kind = pick(context.random, kinds);
    const holdMs = between(context.random, 1000, 6000);
    const [detail, heal] = await INJECTORS[kind](context);
    const record: FaultRecord = { kind, detail, startMs: Date.now() - context.startMs,
      endMs: null };
    faults.push(record);
    context.log(`${(record.startMs / 1000).toFixed(1)}s fault ${kind}: ${detail}`);
    await sleep(Math.max(0, Math.min(holdMs, untilMs - Date.now())));
    await heal();
    record.endMs = Date.now() - context.startMs;
  }
}

// ---------------------------------------------------------------- the outsider

/**
 * An outsider's probes of every node's real peer port (no proxy between), one every
 * `everyMs`, at most `concurrent` at a time, until stopped. Returns how many ran.
 */
export async function runProbes(context: NemesisContext, untilMs: number,
  stopped: () => boolean, everyMs = 250, concurrent = 4): Promise<number> {
  const { cluster, random } = context;
  const raftFrame = encodeMessage({ type: 'append', from: 'n2', to: 'n1', term: FORGED_TERM,
    prevLogIndex: 0, prevLogTerm: 0, commitIndex: 0, entries: [] });
  const recorder = cluster.proxies[1]?.[0] ?? null;
  const probeContext = (targetId: string): ProbeContext => ({
    clusterId: cluster.clusterId, targetId, memberId: targetId === 'n2' ? 'n1' : 'n2',
    raftFrame, recorded: () => recorder?.recorded.find((b) => handshakePart(b) !== null) ?? null,
  });
  let running = 0;
  let count = 0;
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
  while (Date.now() < untilMs && !stopped()) {
    await sleep(everyMs);
    if (running >= concurrent) continue;
    const id = pick(random, cluster.ids());
    const kind = pick(random, PROBE_KINDS);
    const address = cluster.peerAddress(id);
    const script = probeScript(kind, random, address, probeContext(id));
    running++;
    count++;
    void runScript(address, script, 6500).finally(() => {
      running--;
    });
  }
  while (running > 0) await sleep(50);
  return count;
}
