/**
 * `hivekv import --data DIR < dump.ndjson`: builds, in an empty or new directory, the data
 * directory of a single node holding the state a dump (`hivekv export`) describes, with the
 * same digest at the dump's index (docs/backup.md). A malformed or truncated dump is refused
 * naming the line, before anything is written.
 */
import { createInterface } from 'node:readline';
import { Command } from 'commander';
import { DUMP_LINE_CHARS_MAX, DumpError } from '../backup/dump-format.js';
import { importDump, ImportTargetError } from '../backup/import.js';
import {
  docsHelp, EXIT_ERROR, EXIT_YES, printAnswer, runCommand, UsageError,
} from './connection.js';

type Options = Record<string, string | undefined>;

/** Node ids as `serve --id` takes them. */
const NODE_ID_PATTERN = /^[A-Za-z0-9_.-]{1,64}$/;

async function* stdinLines(): AsyncGenerator<string> {
  const reader = createInterface({ input: process.stdin, crlfDelay: Infinity });
  let line = 0;
  for await (const text of reader) {
    line++;
    if (text.length > DUMP_LINE_CHARS_MAX) {
      throw new DumpError(line, `longer than ${DUMP_LINE_CHARS_MAX} characters`);
    }
    yield text;
  }
}

async function importAction(options: Options): Promise<number> {
  const dir = options['data'];
  if (dir === undefined || dir.trim() === '') throw new UsageError('--data is required');
  const nodeId = options['id'] ?? 'n1';
  if (!NODE_ID_PATTERN.test(nodeId)) {
    throw new UsageError(`--id ${JSON.stringify(nodeId)}: 1 to 64 of [A-Za-z0-9_.-]`);
  }
  if (process.stdin.isTTY) {
    throw new UsageError('the dump is read from stdin: hivekv import --data DIR < dump.ndjson');
  }
  try {
    const result = await importDump(stdinLines(), dir, { nodeId });
    printAnswer({ imported: dir, nodeId, ...result });
    return EXIT_YES;
  } catch (error) {
    if (error instanceof DumpError || error instanceof ImportTargetError) {
      process.stderr.write(`hivekv import: ${error.message}\n`);
      return EXIT_ERROR;
    }
    throw error;
  }
}

export function registerImport(program: Command): void {
  const command = new Command('import')
    .description('build a single node\'s data directory from a dump read on stdin')
    .requiredOption('--data <dir>', 'an empty or new directory')
    .option('--id <id>', 'the id of the node that will serve it (its only voter)', 'n1')
    .addHelpText('after', docsHelp('backup.md', 'Exit status: 0 imported, 2 a directory ' +
      'that is not empty, a malformed or truncated dump (the message names the line), or a ' +
      'usage mistake; nothing is written then.'))
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride();
  command.action(async (options: Options) => {
    await runCommand('import', () => importAction(options));
  });
  program.addCommand(command);
}
