/**
 * A small scenario language for Raft interaction tests. Each line is one command; the
 * interpreter runs it against a `Cluster` and writes a text transcript that a test compares
 * with a committed file (`toMatchFileSnapshot`).
 *
 *   nodes n1 n2 n3 [seed=1] [prevote=off] [checkquorum=off] [chunk=BYTES]
 *   campaign n1          tick n1 until it campaigns, then deliver everything
 *   tick n2 5            tick one node, deliver nothing
 *   tick-all 3           tick every live node, delivering after each tick
 *   propose n1 x [now=MS]
 *   read n1 7            read index with request id 7
 *   deliver              process and deliver until quiet, printing every message
 *   partition n1|n2,n3   heal
 *   crash n3             restart n3
 *   transfer n1 n3       compact n1
 *   status               applied n2
 *   join n4              a new empty node that knows no configuration (serve --join)
 *   members n1 add n4 HOST:PORT | members n1 promote n4 | members n1 remove n3
 *   config               every node's configuration in effect
 *   # a comment is echoed
 */
import type { MembershipChange } from '../../host/core/raft/configuration.js';
import { bytes, Cluster, formatEntry, formatMessage } from './cluster.js';

/** Lines one scenario may run. */
export const SCENARIO_LINES_MAX = 500;

export function runScenario(script: string): string {
  const out: string[] = [];
  let cluster: Cluster | null = null;
  nextRequestId = 1;
  const need = (): Cluster => {
    if (cluster === null) throw new Error('the scenario must start with `nodes`');
    return cluster;
  };
  const lines = script.split('\n').map((l) => l.trim()).filter((l) => l !== '');
  if (lines.length > SCENARIO_LINES_MAX) throw new Error('scenario too long');
  for (const line of lines) {
    out.push(line.startsWith('#') ? line : `> ${line}`);
    if (line.startsWith('#')) continue;
    const [command = '', ...args] = line.split(/\s+/);
    if (command === 'nodes') {
      cluster = createCluster(args);
      continue;
    }
    const result = command === 'members' || command === 'config' || command === 'join'
      ? runMembershipCommand(need(), command, args) : runCommand(need(), command, args);
    out.push(...result.map((r) => `  ${r}`));
  }
  return out.join('\n') + '\n';
}

function createCluster(args: readonly string[]): Cluster {
  const ids = args.filter((a) => !a.includes('='));
  const options = new Map(args.filter((a) => a.includes('=')).map((a) => {
    const [key = '', value = ''] = a.split('=');
    return [key, value] as const;
  }));
  const chunk = options.get('chunk');
  return new Cluster(ids, (c) => ({
    ...c,
    preVote: options.get('prevote') !== 'off',
    checkQuorum: options.get('checkquorum') !== 'off',
    maxSnapshotChunkBytes: chunk === undefined ? c.maxSnapshotChunkBytes : Number(chunk),
  }), Number(options.get('seed') ?? 1));
}

function deliverPrinted(c: Cluster): string[] {
  const printed: string[] = [];
  c.onDeliver = (m) => printed.push(formatMessage(m));
  try {
    c.deliverAll();
  } finally {
    c.onDeliver = null;
  }
  return printed;
}

function statusLines(c: Cluster): string[] {
  return [...c.nodes.values()].map((n) => {
    if (!n.up) return `${n.id} down`;
    const s = n.raft.status();
    return `${s.id} ${s.role} term=${s.term} leader=${s.leader ?? '-'} ` +
      `commit=${s.commitIndex} applied=${s.appliedIndex} last=${s.lastIndex}`;
  });
}

function runCommand(c: Cluster, command: string, args: readonly string[]): string[] {
  const id = args[0] ?? '';
  switch (command) {
    case 'campaign': {
      const ticks = c.campaign(id);
      return [`${id} campaigned after ${ticks} ticks`];
    }
    case 'tick':
      c.tick(id, Number(args[1] ?? 1));
      c.processAll();
      return statusLines(c).filter((l) => l.startsWith(`${id} `));
    case 'tick-all':
      c.tickAll(Number(args[0] ?? 1));
      return statusLines(c);
    case 'propose': {
      const now = Number(args.find((a) => a.startsWith('now='))?.slice(4) ?? 0);
      const result = c.raft(id).propose(bytes(args[1] ?? ''), now);
      return [JSON.stringify(result)];
    }
    case 'read':
      c.raft(id).readIndex(Number(args[1]));
      return [];
    case 'deliver': {
      const printed = deliverPrinted(c);
      const reads = [...c.nodes.values()].flatMap((n) => {
        const states = n.readStates.map((r) => `${n.id} read ${r.requestId} -> ${r.readIndex}`);
        n.readStates = [];
        const answers = n.membershipAnswers.map((a) => `${n.id} membership ${a.requestId} -> ` +
          (a.result.kind === 'proposed' ? `proposed at ${a.result.index}/${a.result.term}`
            : `refused ${a.result.refusal}`));
        n.membershipAnswers = [];
        return [...states, ...answers];
      });
      return [...printed, ...reads];
    }
    case 'partition':
      c.groups = (args[0] ?? '').split('|').map((g) => g.split(','));
      return [];
    case 'heal':
      c.groups = null;
      return [];
    case 'crash':
      c.crash(id);
      return [];
    case 'restart':
      c.restart(id);
      return [];
    case 'transfer':
      c.raft(id).transferLeadership(args[1] ?? '');
      return [];
    case 'compact': {
      const node = c.node(id);
      const last = node.applied[node.applied.length - 1];
      if (last === undefined) return ['nothing applied to compact'];
      c.compact(id, { index: last.index, term: last.term, timeMs: last.timeMs,
        ...c.raft(id).configurationAt(last.index) }, bytes(`state@${last.index}`));
      return [`compacted through ${last.index}`];
    }
    case 'status':
      return statusLines(c);
    case 'applied':
      return [c.node(id).applied.map((e) => e.type === 'empty' ? `${e.index}:-`
        : `${e.index}:${formatEntry(e).split(':').slice(1).join(':')}`).join(' ')];
    default:
      throw new Error(`unknown command ${command}`);
  }
}

let nextRequestId = 1;

function runMembershipCommand(c: Cluster, command: string, args: readonly string[]): string[] {
  switch (command) {
    case 'join':
      c.join(args[0] ?? '');
      return [];
    case 'config':
      return [...c.nodes.values()].map((n) => {
        if (!n.up) return `${n.id} down`;
        const { index, config } = n.raft.configuration();
        const committed = index <= n.raft.status().commitIndex ? 'committed' : 'pending';
        return `${n.id} voters=${config.voters.join(',') || '-'} ` +
          `learners=${config.learners.join(',') || '-'} ` +
          `removed=${config.removed.join(',') || '-'} at=${index} ${committed}`;
      });
    case 'members': {
      const [at = '', verb = '', id = '', peer = ''] = args;
      const change: MembershipChange = verb === 'add' ? { kind: 'addLearner', id, peer }
        : verb === 'promote' ? { kind: 'promote', id } : { kind: 'remove', id };
      const result = c.raft(at).proposeMembership(change, nextRequestId++);
      return [result.kind === 'refused' ? `refused ${result.refusal}: ${result.detail}`
        : JSON.stringify(result)];
    }
    default:
      throw new Error(`unknown command ${command}`);
  }
}
