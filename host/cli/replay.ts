/**
 * `hivekv replay --data DIR`: rebuilds the state of a data directory through the same
 * WebAssembly module the node runs (host/replay/), from its newest usable snapshot or, with
 * `--from-start`, from index 1; prints index, term and digest every N entries and at the end.
 * Time travel: `--at INDEX --get NS KEY` answers a get as the node would have at that index;
 * `--history NS KEY` lists every entry that wrote the key. Read-only.
 */
import { Command } from 'commander';
import { DataDir } from '../replay/data-dir.js';
import { Replayer } from '../replay/replay.js';
import { getAt, keyHistory } from '../replay/time-travel.js';
import { docsHelp, EXIT_NO, EXIT_YES, runCommand, UsageError, wholeNumber } from './connection.js';
import { dataCommand, positive, printLine } from './data-command.js';

/** Exit status of a replay that found a checkpoint not matching the replayed state. */
const EXIT_DIVERGED = 3;

type Options = Record<string, string | string[] | boolean | undefined>;

function text(options: Options, name: string): string | undefined {
  const v = options[name];
  return typeof v === 'string' ? v : undefined;
}

/** A `--get NS KEY` / `--history NS KEY` pair, or null when the flag is absent. */
function keyPair(options: Options, name: string): { ns: string; key: string } | null {
  const v = options[name];
  if (v === undefined) return null;
  if (!Array.isArray(v) || v.length !== 2) {
    throw new UsageError(`--${name} takes two arguments: NS KEY`);
  }
  return { ns: v[0]!, key: v[1]! };
}

async function replayDigests(data: DataDir, options: Options): Promise<number> {
  const to = wholeNumber(text(options, 'to'), '--to');
  const every = positive(text(options, 'every'), '--every');
  const json = options['json'] === true;
  const replayer = await Replayer.start(data, { fromStart: options['fromStart'] === true,
    ...(to === undefined ? {} : { to }) });
  const from = replayer.startIndex === 0 ? 'start' : 'snapshot';
  const isMark = (index: number) => every !== undefined && index % every === 0;
  const end = replayer.endIndex;
  let endLine: { index: number; term: number; digest: string } | null = null;
  const summary = await replayer.run(isMark, (index, term, digest) => {
    if (index === end) endLine = { index, term, digest };
    else if (json) printLine({ index, term, digest });
    else process.stdout.write(`index ${index} term ${term} digest ${digest}\n`);
  });
  const { index, term, digest } = endLine!;
  const checkpoints = { passed: summary.checkpointsPassed,
    diverged: summary.checkpointsDiverged, unverifiable: summary.checkpointsUnverifiable };
  if (json) {
    printLine({ index, term, digest, end: true, from, startIndex: replayer.startIndex,
      checkpoints });
  } else {
    process.stdout.write(`end index ${index} term ${term} digest ${digest} (from ` +
      `${from === 'start' ? 'index 1' : `snapshot ${replayer.startIndex}`})\n` +
      `checkpoints: ${checkpoints.passed} passed, ${checkpoints.diverged} diverged, ` +
      `${checkpoints.unverifiable} unverifiable (about an index before the replay's start)\n`);
  }
  const divergence = summary.divergence;
  if (divergence === null) return EXIT_YES;
  const { entryIndex, outcome } = divergence;
  process.stderr.write(`hivekv replay: diverged: the checkpoint at entry ${entryIndex} says ` +
    `the digest at index ${outcome.index} is ${outcome.expected}; this log replays to ` +
    `${outcome.own ?? 'unknown'} there\n`);
  return EXIT_DIVERGED;
}

async function replayAction(options: Options): Promise<number> {
  const dir = text(options, 'data');
  if (dir === undefined || dir.trim() === '') throw new UsageError('--data is required');
  const get = keyPair(options, 'get');
  const history = keyPair(options, 'history');
  const at = wholeNumber(text(options, 'at'), '--at');
  if (get !== null && history !== null) {
    throw new UsageError('--get and --history exclude each other');
  }
  if (get !== null && at === undefined) throw new UsageError('--get needs --at INDEX');
  const tenant = text(options, 'tenant');
  const data = await DataDir.open(dir);
  if (get !== null) {
    const answer = await getAt(data, at!, { ...get, ...(tenant === undefined ? {} : { tenant }) },
      options['fromStart'] === true);
    printLine(answer);
    return answer.result.found ? EXIT_YES : EXIT_NO;
  }
  if (history !== null) {
    let lines = 0;
    const ref = { ...history, ...(tenant === undefined ? {} : { tenant }) };
    for await (const line of keyHistory(data, ref, at)) {
      printLine(line);
      lines++;
    }
    return lines > 0 ? EXIT_YES : EXIT_NO;
  }
  if (at !== undefined) {
    return replayDigests(data, { ...options, to: String(at) });
  }
  return replayDigests(data, options);
}

export function registerReplay(program: Command): void {
  const command = new Command('replay')
    .description('rebuild a data directory\'s state through the machine; digests, time travel')
    .requiredOption('--data <dir>', 'the node\'s data directory (read only)')
    .option('--to <index>', 'stop after this index (default: the log\'s last index)')
    .option('--every <n>', 'print index, term and digest at every multiple of N')
    .option('--json', 'one JSON object per line')
    .option('--from-start', 'start from index 1 instead of the newest snapshot')
    .option('--at <index>', 'the index --get answers at (or --history stops at)')
    .option('--get <ns-key...>', 'NS KEY: the key as the node would have answered at --at')
    .option('--history <ns-key...>', 'NS KEY: every entry that wrote the key')
    .option('--tenant <uuid>', 'the tenant of --get and --history (default: the default tenant)')
    .addHelpText('after', docsHelp('replay.md', 'Exit status: 0 done (found), 1 the key was ' +
      'not found (--get) or never written (--history), 2 a damaged directory, a log that does ' +
      'not reach the index, or a usage mistake, 3 a checkpoint in the log does not match the ' +
      'replayed state (a divergence: stderr names the index and both digests).'))
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride();
  command.action(async (options: Options) => {
    await runCommand('replay', () => dataCommand('replay', () => replayAction(options)));
  });
  program.addCommand(command);
}
