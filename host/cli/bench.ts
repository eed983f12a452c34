/**
 * `hivekv bench`: the benchmark suite (bench/README.md). Starts the servers it measures on
 * 127.0.0.1 (hivekv one node and three; etcd one and three; Redis with its defaults and with
 * appendfsync always), skips one that is not installed with the line that installs it, runs
 * the same workloads on each with one load generator, and writes a report under
 * bench/results/<timestamp>/. The suite is loaded from the built dist/bench/ on demand, so
 * serving never loads it.
 */
import { cpus } from 'node:os';

import { Command, InvalidArgumentError } from 'commander';

const TARGETS = ['hivekv-1', 'hivekv-3', 'etcd-1', 'etcd-3', 'redis', 'redis-aof'] as const;
const CLUSTER_PRESET = { only: ['hivekv-1', 'hivekv-3'], workloads: ['put', 'get'],
  connections: [64] };

function list(value: string): string[] {
  return value.split(',').map((s) => s.trim()).filter((s) => s !== '');
}

function targetList(value: string): string[] {
  const names = list(value);
  for (const name of names) {
    if (!(TARGETS as readonly string[]).includes(name)) {
      throw new InvalidArgumentError(`unknown target "${name}" (one of: ${TARGETS.join(', ')})`);
    }
  }
  return names;
}

function positive(value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError('must be a number above 0');
  return n;
}

function counts(value: string): number[] {
  return list(value).map((s) => {
    const n = Number(s);
    if (!Number.isInteger(n) || n < 1 || n > 1024) {
      throw new InvalidArgumentError(`"${s}" is not a connection count from 1 to 1024`);
    }
    return n;
  });
}

export function benchCommand(): Command {
  return new Command('bench')
    .description('run the benchmark suite against hivekv, etcd and Redis; write a report')
    .option('--quick', 'a smoke run of every part, under two minutes')
    .option('--only <targets>', `comma-separated targets (${TARGETS.join(', ')})`, targetList)
    .option('--workloads <names>', 'comma-separated workloads (see bench/README.md)', list)
    .option('--connections <counts>', 'comma-separated connection counts (default 64 and 1)',
      counts)
    .option('--target <url>', 'measure a running server speaking hivekv\'s HTTP surface')
    .option('--duration <seconds>', 'measured seconds per point (default 4, quick 1)', positive)
    .option('--threads <n>', 'load generator threads (default: 2, or 1 on one core)', positive)
    .option('--keys <n>', 'keys to preload (default 100000, quick 20000)', positive)
    .option('--out <dir>', 'report directory (default bench/results/<timestamp>)')
    .option('--via-follower', 'also load a cluster through a follower')
    .option('--cluster', 'the cluster preset: one node, three, one node again; put and get, 64 ' +
      'connections, through the leader and a follower')
    .option('--no-micro', 'skip the micro benchmarks')
    .option('--micro-time <ms>', 'budget per micro benchmark task (default 500, quick 100)',
      positive)
    .option('--no-sweep', 'skip the open-loop latency sweep')
    .option('--no-reference', 'skip the cross-check by wrk and redis-benchmark')
    .option('--publish', 'copy the charts to bench/charts/ and the tables to bench/RESULTS.md')
    .option('--report-from <dir>', 'write the report of an earlier run again from its ' +
      'results.json (nothing is measured)')
    .exitOverride();
}

interface Flags {
  quick?: boolean; only?: string[]; workloads?: string[]; connections?: number[];
  target?: string; duration?: number; threads?: number; keys?: number; out?: string;
  viaFollower?: boolean; cluster?: boolean; micro: boolean; sweep: boolean; reference: boolean;
  publish?: boolean;
  microTime?: number; reportFrom?: string;
}

export function registerBench(program: Command): void {
  program.addCommand(benchCommand().action(async (flags: Flags) => {
    const cluster = flags.cluster === true;
    const suitePath = '../../bench/suite/run.js';
    const suite = await import(suitePath) as typeof import('../../bench/suite/run.js');
    if (flags.reportFrom !== undefined) {
      await suite.rerender(flags.reportFrom, flags.publish === true);
      return;
    }
    await suite.runSuite({
      quick: flags.quick === true,
      only: (flags.only ?? (cluster ? CLUSTER_PRESET.only : null)) as never,
      workloads: flags.workloads ?? (cluster ? CLUSTER_PRESET.workloads : null),
      connections: flags.connections ?? (cluster ? CLUSTER_PRESET.connections : null),
      target: flags.target ?? null, durationSeconds: flags.duration ?? null,
      threads: Math.floor(flags.threads ?? Math.min(2, cpus().length)), out: flags.out ?? null,
      viaFollower: cluster || flags.viaFollower === true, bracketCluster: cluster,
      micro: flags.micro && !cluster, sweep: flags.sweep && !cluster,
      reference: flags.reference,
      publish: flags.publish === true, keys: flags.keys ?? null,
      microTimeMs: flags.microTime ?? null,
      title: cluster ? 'hivekv cluster benchmark' : 'hivekv beside etcd and Redis',
    });
  }));
}
