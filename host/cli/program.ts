/**
 * The `hivekv` command line. Each command lives in a file of its own beside this one and
 * registers itself on the program here, so adding a command touches one line of this file.
 *
 * Exit status: 0 on success, 2 on a usage or configuration error (the message says which
 * flag); a command may use 1 for "ran, but the answer is no" (its help says so).
 */
import { Command, CommanderError } from 'commander';
import { registerBench } from './bench.js';
import { docsPath } from './connection.js';
import { registerDiff } from './diff.js';
import { registerExport } from './export.js';
import { registerHealth } from './health.js';
import { registerImport } from './import.js';
import { registerInspect } from './inspect.js';
import { registerKv } from './kv.js';
import { registerMembers } from './members.js';
import { registerReplay } from './replay.js';
import { registerServe } from './serve.js';

/** Exit status for a usage or configuration error. */
export const EXIT_USAGE = 2;

/** The whole program; `exitOverride` turns commander's own exits into thrown errors. */
export function buildProgram(): Command {
  const program = new Command('hivekv')
    .description('A replicated key/value store with Queen MQ\'s KV HTTP surface.')
    .showHelpAfterError('(run with --help for usage)')
    .addHelpText('after', `\nDocumentation: ${docsPath('cli.md')}`)
    .exitOverride();
  registerServe(program);
  registerKv(program);
  registerHealth(program);
  registerBench(program);
  registerMembers(program);
  registerInspect(program);
  registerReplay(program);
  registerDiff(program);
  registerExport(program);
  registerImport(program);
  return program;
}

/** Runs the command line `argv` (without `node` and the script path). */
export async function main(argv: readonly string[]): Promise<void> {
  const program = buildProgram();
  try {
    await program.parseAsync([...argv], { from: 'user' });
  } catch (error) {
    if (error instanceof CommanderError) {
      // Help and version end the program with code 0; anything else is a usage error.
      process.exit(error.exitCode === 0 ? 0 : EXIT_USAGE);
    }
    throw error;
  }
}
