/**
 * `hivekv inspect --data DIR`: what a data directory holds, read-only (host/replay/): the
 * hard state, the snapshots, the WAL segments, the first and last index, the runs of terms,
 * and entries by kind with their sizes, as one JSON object. `--entries A..B` prints those
 * entries decoded instead, one JSON line each (origin, operations, tenant, time). A damaged
 * log is refused with the file and the byte offset, and a range the log does not hold (past
 * its end, or compacted into a snapshot) with what it holds: exit status 2 either way, never
 * an empty answer that reads as "no such entries".
 */
import { basename } from 'node:path';
import { Command } from 'commander';
import { DataDir } from '../replay/data-dir.js';
import { describeEntry } from '../replay/describe.js';
import { requireEntries } from '../replay/replay.js';
import { docsHelp, EXIT_YES, printAnswer, runCommand, UsageError } from './connection.js';
import { dataCommand, indexRange, printLine } from './data-command.js';

/** The summary `inspect` prints (docs/replay.md). */
export function inspectSummary(data: DataDir): Record<string, unknown> {
  return {
    dir: data.dir,
    hardState: data.hardState,
    firstIndex: data.firstIndex,
    lastIndex: data.lastIndex,
    snapshots: data.snapshots.map((s) => s.ok
      ? { file: basename(s.path), index: s.index, term: s.meta.term, timeMs: s.meta.timeMs,
        dataBytes: s.dataBytes, voters: s.meta.voters, learners: s.meta.learners }
      : { file: basename(s.path), index: s.index, damaged: { offset: s.offset,
        reason: s.reason } }),
    segments: data.segments.map((s) => ({ file: basename(s.path), firstIndex: s.firstIndex,
      lastIndex: s.lastIndex, records: s.records, fileBytes: s.fileBytes,
      usedBytes: s.usedBytes, tornTail: s.tornTail })),
    terms: data.summary.terms,
    entries: data.summary.kinds,
    commands: data.summary.commands,
  };
}

export function registerInspect(program: Command): void {
  const command = new Command('inspect')
    .description('what a data directory holds: snapshots, segments, indexes, terms, entries')
    .requiredOption('--data <dir>', 'the node\'s data directory (read only)')
    .option('--entries <range>', 'print entries A..B (or A.., or N) decoded, one JSON line each')
    .addHelpText('after', docsHelp('replay.md', 'Exit status: 0 done, 2 a damaged or ' +
      'missing directory (the message names the file and byte offset), entries the log ' +
      'does not hold, or a usage mistake.'))
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride();
  command.action(async (options: Record<string, string | undefined>) => {
    await runCommand('inspect', () => dataCommand('inspect', async () => {
      const dir = options['data'];
      if (dir === undefined || dir.trim() === '') throw new UsageError('--data is required');
      const range = options['entries'] === undefined ? null
        : indexRange(options['entries'], '--entries');
      const data = await DataDir.open(dir);
      if (range === null) {
        printAnswer(inspectSummary(data));
        return EXIT_YES;
      }
      requireEntries(data, range.from, range.to);
      for await (const entry of data.entries(range.from, range.to)) {
        printLine(describeEntry(entry));
      }
      return EXIT_YES;
    }));
  });
  program.addCommand(command);
}

