/**
 * `hivekv diff DIR_A DIR_B`: are two data directories the same history? "identical through
 * index N", or the first index where their logs or their replayed digests part, with both
 * entries (host/replay/diff.ts). Read-only.
 */
import { Command } from 'commander';
import { DataDir } from '../replay/data-dir.js';
import { diffDataDirs } from '../replay/diff.js';
import { docsHelp, EXIT_NO, EXIT_YES, runCommand } from './connection.js';
import { dataCommand, printLine } from './data-command.js';

export function registerDiff(program: Command): void {
  const command = new Command('diff')
    .description('compare two data directories: identical through N, or where they part')
    .argument('<dirA>', 'a data directory (read only)')
    .argument('<dirB>', 'another data directory (read only)')
    .option('--json', 'the answer as one JSON object')
    .addHelpText('after', docsHelp('replay.md', 'Exit status: 0 identical through the ' +
      'index both reach, 1 they part (the first index is printed), 2 a damaged directory or ' +
      'a usage mistake.'))
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride();
  command.action(async (dirA: string, dirB: string, options: Record<string, unknown>) => {
    await runCommand('diff', () => dataCommand('diff', async () => {
      const result = await diffDataDirs(await DataDir.open(dirA), await DataDir.open(dirB));
      if (options['json'] === true) {
        printLine(result);
      } else if (result.kind === 'identical') {
        const longer = result.lastIndexA === result.lastIndexB ? ''
          : `; ${dirA} holds entries to ${result.lastIndexA ?? 'none'}, ${dirB} to ` +
            `${result.lastIndexB ?? 'none'}`;
        process.stdout.write(`identical through index ${result.throughIndex}` +
          (result.digest === null ? '' : ` (digest ${result.digest})`) + `${longer}\n`);
      } else {
        process.stdout.write(`${result.kind === 'log' ? 'logs' : 'digests'} part at index ` +
          `${result.index}\n`);
        printLine({ dir: dirA, ...result.a });
        printLine({ dir: dirB, ...result.b });
      }
      return result.kind === 'identical' ? EXIT_YES : EXIT_NO;
    }));
  });
  program.addCommand(command);
}
