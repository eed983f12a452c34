/**
 * `hivekv health`: `GET /health` of the first node that answers, or of every listed node
 * with `--all`. Exit status 0 when the node (every node) serves requests, 1 when one answered
 * but is starting or stopping (or, with --all, did not answer), 2 when none answered.
 */
import { Command } from 'commander';
import { isHivekvError, type HealthAnswer, type HivekvClient } from '../client/index.js';
import {
  clientFrom, docsHelp, EXIT_ERROR, EXIT_NO, EXIT_YES, printAnswer, runCommand, withConnection,
} from './connection.js';

/** One node's line of `health --all`: its answer, or why it gave none. */
export type NodeReport = HealthAnswer | { readonly url: string; readonly ok: false;
  readonly error: Record<string, unknown> };

async function everyNode(client: HivekvClient): Promise<number> {
  const reports: NodeReport[] = await Promise.all(client.urls.map(async (url) => {
    try {
      return await client.health({ url });
    } catch (error) {
      if (!isHivekvError(error)) throw error;
      return { url, ok: false as const, error: error.toJSON() };
    }
  }));
  printAnswer(reports);
  if (reports.every((report) => report.ok)) return EXIT_YES;
  return reports.some((report) => 'health' in report) ? EXIT_NO : EXIT_ERROR;
}

export function registerHealth(program: Command): void {
  const command = withConnection(new Command('health'))
    .description('is the node serving? role, leader, term, commit and applied index')
    .option('--all', 'ask every listed node, and print one entry per node')
    .addHelpText('after', docsHelp('cli.md', 'Exit status: 0 serving, 1 answered but not ' +
      'serving (with --all: not every node serving), 2 no node answered.'))
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride();
  command.action(async (options: Record<string, string | boolean | undefined>) => {
    await runCommand('health', async () => {
      const client = clientFrom(options as Record<string, string | undefined>);
      if (options['all'] === true) return everyNode(client);
      const answer = await client.health();
      printAnswer(answer);
      return answer.ok ? EXIT_YES : EXIT_NO;
    });
  });
  program.addCommand(command);
}
