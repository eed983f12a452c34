/**
 * Raft core micro benchmark: step() throughput, in messages per second, for a three-node
 * cluster wired in memory (no encoding, no disk). One iteration proposes a batch of 100-byte
 * entries on the leader and runs Ready/step rounds until every node applied them; the count
 * of step() calls over the time taken is the figure. Also a read-index round.
 *
 * Run: npm run build:ts && node dist/bench/raft-step.bench.js   (BENCH_TIME_MS for the budget)
 */
import { cpus } from 'node:os';

import { Bench } from 'tinybench';

import type { Message } from '../host/core/raft/messages.js';
import { createRaft, type RaftCore } from '../host/core/raft/raft.js';
import { writeMicroJson, type MicroRow } from './micro-json.js';

const IDS = ['n1', 'n2', 'n3'];
const ENTRY_DATA_BYTES = 100;
const TIME_MS = Number(process.env['BENCH_TIME_MS'] ?? 2_000);
const WARMUP_MS = Math.min(300, TIME_MS);
/** Ready/deliver rounds one iteration may take before the benchmark calls it stuck. */
const ROUNDS_MAX = 1_000;

interface Net {
  readonly cores: Map<string, RaftCore>;
  steps: number;
}

function createNet(): Net {
  const cores = new Map<string, RaftCore>();
  for (const [i, id] of IDS.entries()) {
    cores.set(id, createRaft({ id, voters: IDS, electionTicks: 10, heartbeatTicks: 1, seed: i,
      maxInflightAppends: 64, maxEntriesBytesPerAppend: 1024 * 1024,
      maxSnapshotChunkBytes: 1024 * 1024, preVote: true, checkQuorum: true },
    { hardState: { term: 0, votedFor: null, commitIndex: 0 }, snapshot: null,
      snapshotDataBytes: null, entries: [] }));
  }
  return { cores, steps: 0 };
}

/** Runs Ready/step rounds until no node has work; persisting is a no-op here. */
function settle(net: Net): void {
  for (let round = 0; round < ROUNDS_MAX; round++) {
    const queue: Message[] = [];
    for (const core of net.cores.values()) {
      if (!core.hasReady()) continue;
      const ready = core.ready();
      queue.push(...ready.earlyMessages, ...ready.messages);
      core.advance(ready);
      const last = ready.entries[ready.entries.length - 1];
      if (last !== undefined) core.persisted(last.index, last.term);
    }
    if (queue.length === 0) return;
    for (const m of queue) {
      net.cores.get(m.to)!.step(m);
      net.steps++;
    }
  }
  throw new Error('the cluster did not settle');
}

/** Drops applied entries on every node, so the in-memory log stays small across runs. */
function compactAll(net: Net): void {
  for (const core of net.cores.values()) {
    const s = core.status();
    if (s.appliedIndex === 0) continue;
    core.compact({ index: s.appliedIndex, term: s.term, timeMs: 1,
      ...core.configurationAt(s.appliedIndex) }, 0);
  }
}

function elect(net: Net): RaftCore {
  const n1 = net.cores.get('n1')!;
  for (let i = 0; i < 40 && n1.status().role !== 'leader'; i++) {
    n1.tick();
    settle(net);
  }
  if (n1.status().role !== 'leader') throw new Error('n1 was not elected');
  return n1;
}

async function main(): Promise<void> {
  const bench = new Bench({ time: TIME_MS, warmupTime: WARMUP_MS });
  const data = new Uint8Array(ENTRY_DATA_BYTES).fill(7);
  const stepsPerTask = new Map<string, { steps: number; runs: number }>();
  for (const batch of [1, 16, 256]) {
    const net = createNet();
    const leader = elect(net);
    const name = `propose ${batch} x ${ENTRY_DATA_BYTES} B, replicate, commit`;
    const count = { steps: 0, runs: 0 };
    stepsPerTask.set(name, count);
    bench.add(name, () => {
      const before = net.steps;
      for (let i = 0; i < batch; i++) leader.propose(data, 1);
      settle(net);
      count.steps += net.steps - before;
      count.runs++;
      compactAll(net);
    });
  }
  const readNet = createNet();
  const readLeader = elect(readNet);
  const readCount = { steps: 0, runs: 0 };
  stepsPerTask.set('read index round', readCount);
  let requestId = 0;
  bench.add('read index round', () => {
    const before = readNet.steps;
    readLeader.readIndex(++requestId);
    settle(readNet);
    readCount.steps += readNet.steps - before;
    readCount.runs++;
  });
  await bench.run();
  console.log(`node ${process.version}, ${cpus()[0]?.model ?? 'unknown cpu'}`);
  console.log('| task | ops/s | step() msgs/op | step() msgs/s | p50 us | p99 us | rme |');
  console.log('|---|---|---|---|---|---|---|');
  const rows: MicroRow[] = [];
  for (const task of bench.tasks) {
    const r = task.result;
    const count = stepsPerTask.get(task.name);
    if (r === undefined || count === undefined || r.state !== 'completed') continue;
    const perOp = count.steps / Math.max(1, count.runs);
    const opsPerSecond = r.throughput.mean;
    console.log(`| ${task.name} | ${opsPerSecond.toFixed(0)} | ${perOp.toFixed(1)} | ` +
      `${(perOp * opsPerSecond).toFixed(0)} | ${((r.latency.p50 ?? 0) * 1000).toFixed(1)} | ` +
      `${((r.latency.p99 ?? 0) * 1000).toFixed(1)} | ${r.latency.rme.toFixed(1)}% |`);
    rows.push({ name: task.name, perSecond: opsPerSecond, unit: 'rounds/s',
      p50us: (r.latency.p50 ?? 0) * 1000, p99us: (r.latency.p99 ?? 0) * 1000,
      rmePercent: r.latency.rme });
  }
  writeMicroJson(rows);
}

await main();
