/**
 * One fault run: start a cluster of real processes behind link proxies, run the clients,
 * the nemesis schedule and the outsider's probes together for the run's time, heal
 * everything, wait for the cluster to agree again, read every key back from every node,
 * and check the history. Each part draws from its own generator seeded from the run's seed.
 * Bounded: the run's time, then at most RECOVERY_TIMEOUT_MS to recover; every process it
 * started is stopped by PID before it returns, whatever happened.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createUnitRandom } from '../../host/core/prng.js';
import {
  checkBank, checkClaims, checkCounters, checkLedger, checkLinearizable, type Verdict,
} from './checkers.js';
import { History, type KeyPart } from './history.js';
import {
  currentLeader, FORGED_TERM, runProbes, runSchedule, type FaultRecord, type NemesisContext,
  type NemesisKind,
} from './nemesis.js';
import { JepsenCluster, type NodeExit } from './nodes.js';
import { checkReplays } from './replay-check.js';
import { SdkRetryClients } from './sdk-retries.js';
import {
  accountKey, ACCOUNTS, Client, kvCall, NAMESPACE, type ClientContext,
} from './workload.js';

const RECOVERY_TIMEOUT_MS = 60_000;
/** Loops of calls through the SDK, each retrying with its own Idempotency-Key. */
const SDK_WORKERS = 2;
const FINAL_READ_KEYS_PER_CALL = 500;

export interface JepsenOptions {
  readonly nodes: number;
  readonly timeS: number;
  readonly seed: number;
  readonly nemeses: readonly NemesisKind[];
  readonly clientsPerNode: number;
  readonly probes: boolean;
  /** Keep the run's directory (data, logs, history) even when every check passes. */
  readonly keep: boolean;
  readonly log: (line: string) => void;
}

export interface JepsenReport {
  readonly seed: number;
  readonly nodes: number;
  readonly timeS: number;
  readonly wallMs: number;
  /** The run's directory, when kept (always when a check failed). */
  readonly dir: string | null;
  readonly calls: Record<string, number>;
  readonly faults: Record<string, number>;
  readonly faultLog: readonly FaultRecord[];
  readonly probes: number;
  readonly verdicts: readonly Verdict[];
  readonly valid: boolean;
}

function stream(seed: number, salt: number): () => number {
  return createUnitRandom((seed ^ Math.imul(salt, 0x9e3779b1)) >>> 0);
}

async function health(cluster: JepsenCluster, id: string): Promise<Record<string, unknown> |
  null> {
  try {
    const response = await fetch(`${cluster.url(id)}/health`,
      { signal: AbortSignal.timeout(1000) });
    return (await response.json()) as Record<string, unknown>;
  } catch {
    return null;
  }
}

/** The checkpoints a node counted in /metrics since it started; 0 when it does not answer. */
async function checkpointsPassed(cluster: JepsenCluster, id: string): Promise<number> {
  try {
    const response = await fetch(`${cluster.url(id)}/metrics`,
      { signal: AbortSignal.timeout(1000) });
    const m = /^hivekv_checkpoints_total\{verdict="passed"\} (\d+)/m.exec(await response.text());
    return m === null ? 0 : Number(m[1]);
  } catch {
    return 0;
  }
}

/**
 * Waits until a leader is agreed and every node reports the same commit and applied index
 * twice in a row. Returns null, or what it saw last when it gives up.
 */
async function recover(cluster: JepsenCluster): Promise<string | null> {
  const deadline = Date.now() + RECOVERY_TIMEOUT_MS;
  let last = '';
  let stable = 0;
  while (Date.now() < deadline) {
    const leader = await currentLeader(cluster);
    const views = await Promise.all(cluster.ids().map((id) => health(cluster, id)));
    const seen = views.map((v) => `${v?.['commitIndex']}/${v?.['appliedIndex']}`);
    const agreed = leader !== null && views.every((v) => v !== null) && new Set(seen).size === 1;
    stable = agreed && seen.join() === last ? stable + 1 : 0;
    last = seen.join();
    if (stable >= 2) return null;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  return `no agreement after ${RECOVERY_TIMEOUT_MS} ms: leader ` +
    `${await currentLeader(cluster)}, commit/applied per node ${last}`;
}

interface ManyResult {
  readonly rows: ReadonlyArray<{ key: string; value: unknown }>;
  readonly missing: readonly string[];
  readonly truncated: boolean;
}

/**
 * Reads `keys` from node `id` with one getMany per FINAL_READ_KEYS_PER_CALL keys, recorded
 * as a get of each key. A call that fails is recorded as failed: the checkers then count one
 * reader fewer, and the ledger checker says so. False once a call failed: the node did not
 * serve after recovery, and each further call would wait out a client timeout for nothing.
 */
async function finalRead(cluster: JepsenCluster, history: History, id: string, f: string,
  keys: readonly string[]): Promise<boolean> {
  for (let at = 0; at < keys.length; at += FINAL_READ_KEYS_PER_CALL) {
    const chunk = keys.slice(at, at + FINAL_READ_KEYS_PER_CALL);
    const operations = [{ op: 'getMany', ns: NAMESPACE, keys: chunk }];
    const op = history.invoke(`final-${id}`, id, f, operations);
    const result = await kvCall(cluster.url(id), operations);
    const many = result.kind === 'answer' && result.status === 200
      ? (result.body as { results?: ManyResult[] }).results?.[0] : undefined;
    if (many === undefined || many.truncated) {
      history.complete(op, 'fail', [], result);
      return false;
    }
    const rows = new Map(many.rows.map((row) => [row.key, row.value]));
    const parts: KeyPart[] = chunk.map((key) => {
      const found = rows.has(key);
      return { key, input: { kind: 'get' }, output: { kind: 'get', found,
        value: found ? JSON.stringify(rows.get(key)) : null } };
    });
    history.complete(op, 'ok', parts, { status: 200 });
  }
  return true;
}

async function finalReads(cluster: JepsenCluster, history: History,
  context: ClientContext): Promise<void> {
  const keys = new Set<string>();
  for (const op of history.ops) {
    for (const part of op.parts) if (/^(reg|ctr|claim)-/.test(part.key)) keys.add(part.key);
  }
  for (const id of cluster.ids()) {
    if (!await finalRead(cluster, history, id, 'final-read', [...keys].sort())) continue;
    let served = true;
    for (const g of [...context.banks].sort((a, b) => a - b)) {
      served = served && await finalRead(cluster, history, id, 'final-bank',
        Array.from({ length: ACCOUNTS }, (_, i) => accountKey(g, i)));
    }
    if (served) {
      await finalRead(cluster, history, id, 'final-ledger', [...context.ledgerKeys].sort());
    }
  }
}

/** The node-level checks: nobody died on its own, nobody heard a stranger's term. */
async function nodeVerdict(cluster: JepsenCluster, recovery: string | null,
  exits: readonly NodeExit[]): Promise<Verdict> {
  const problems: string[] = [];
  for (const exit of exits) {
    if (!exit.expected) {
      problems.push(`${exit.id} exited on its own (code ${exit.code}, signal ${exit.signal}) ` +
        `after ${exit.atMs} ms; see ${cluster.member(exit.id).logFile}`);
    } else if (exit.graceful && exit.code !== 0) {
      problems.push(`${exit.id} did not stop cleanly on SIGTERM (code ${exit.code}, signal ` +
        `${exit.signal}) after ${exit.atMs} ms; see ${cluster.member(exit.id).logFile}`);
    }
  }
  if (recovery !== null) problems.push(recovery);
  let checkpoints = 0;
  for (const id of cluster.ids()) {
    const term = Number((await health(cluster, id))?.['term'] ?? 0);
    if (term >= FORGED_TERM) problems.push(`${id} is at term ${term}: a stranger's frame counted`);
    checkpoints += await checkpointsPassed(cluster, id);
  }
  return { name: 'nodes', valid: problems.length === 0, evidence: problems,
    summary: problems.length === 0 ? 'every node survived, recovered and agreed ' +
      `(${checkpoints} checkpoints passed on the members still running)` : problems[0] ?? '' };
}

function countFaults(faults: readonly FaultRecord[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const fault of faults) counts[fault.kind] = (counts[fault.kind] ?? 0) + 1;
  return counts;
}

/** Runs the workload, nemesis and probes for the run's time; returns the probe count. */
async function runPhase(cluster: JepsenCluster, options: JepsenOptions, history: History,
  clientContext: ClientContext, nemesis: NemesisContext, faults: FaultRecord[],
  sdk: SdkRetryClients):
  Promise<number> {
  const untilMs = Date.now() + options.timeS * 1000;
  const never = () => false;
  const clients = cluster.ids().flatMap((id, n) =>
    Array.from({ length: options.clientsPerNode }, (_, k) => new Client(
      `c${n * options.clientsPerNode + k}`, { id, url: cluster.url(id) },
      { ...clientContext, random: stream(options.seed, 100 + n * 16 + k) })));
  const [probes] = await Promise.all([
    options.probes ? runProbes({ ...nemesis, random: stream(options.seed, 2) }, untilMs, never)
      : Promise.resolve(0),
    runSchedule(nemesis, options.nemeses, untilMs, never, faults),
    ...clients.map((client) => client.run(untilMs, never)),
    sdk.run(untilMs, SDK_WORKERS),
  ]);
  return probes;
}

export async function runJepsen(options: JepsenOptions): Promise<JepsenReport> {
  const wallStart = Date.now();
  const dir = mkdtempSync(join(tmpdir(), `hivekv-jepsen-${options.seed}-`));
  const cluster = new JepsenCluster(dir, options.nodes, randomBytes(24).toString('hex'),
    options.seed, stream(options.seed, 3));
  const stopNow = () => cluster.killNow();
  process.once('exit', stopNow);
  try {
    await cluster.start();
    const startMs = Date.now();
    const history = new History(startMs);
    const clientContext: ClientContext = { history, startMs, random: stream(options.seed, 4),
      ledgerKeys: new Set(), banks: new Set() };
    const nemesis: NemesisContext = { cluster, random: stream(options.seed, 1), startMs,
      log: options.log };
    const faults: FaultRecord[] = [];
    options.log(`seed ${options.seed}: ${options.nodes} nodes, ${options.timeS} s, nemeses ` +
      `${options.nemeses.join(',') || 'none'}, run directory ${dir}`);
    const sdk = new SdkRetryClients(cluster.ids().map((id) => cluster.url(id)),
      stream(options.seed, 5), `s${options.seed}`);
    const probes = await runPhase(cluster, options, history, clientContext, nemesis, faults,
      sdk);
    await cluster.healAll();
    const recovery = await recover(cluster);
    await finalReads(cluster, history, clientContext);
    const verdicts = [
      checkLinearizable(history), checkCounters(history), checkClaims(history),
      checkBank(history), checkLedger(history, clientContext.ledgerKeys),
      await nodeVerdict(cluster, recovery, cluster.exits), await sdk.check(),
    ];
    await cluster.stopAll();
    verdicts.push(await checkReplays(new Map(cluster.ids().map((id) =>
      [id, cluster.member(id).dataDir]))));
    const valid = verdicts.every((v) => v.valid);
    const report: JepsenReport = { seed: options.seed, nodes: options.nodes,
      timeS: options.timeS, wallMs: Date.now() - wallStart, dir: valid && !options.keep ? null
        : dir, calls: history.counts(), faults: countFaults(faults), faultLog: faults, probes,
      verdicts, valid };
    writeFileSync(join(dir, 'history.jsonl'), [...history.eventLines()].join('\n') + '\n');
    writeFileSync(join(dir, 'report.json'), JSON.stringify(report, null, 2));
    if (report.dir === null) rmSync(dir, { recursive: true, force: true });
    return report;
  } finally {
    cluster.killNow();
    process.off('exit', stopNow);
  }
}
