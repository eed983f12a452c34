/**
 * What every client-side command shares (`kv`, `health`, and any later command that talks
 * to running nodes): the connection flags and their environment fallbacks, the client they
 * build, the exit statuses, and how answers and refusals are printed.
 *
 * Output contract (docs/cli.md): the answer as JSON on stdout (indented on a terminal, one
 * line otherwise); a refusal or an unanswered call as the error envelope on stderr, one JSON
 * line; a usage mistake as one line of text on stderr.
 */
import { fileURLToPath } from 'node:url';
import type { Command } from 'commander';
import {
  CLIENT_DEFAULTS, createClient, isHivekvError, type HivekvClient,
} from '../client/index.js';

/** The operation applied, or what was asked for was found. */
export const EXIT_YES = 0;
/** The call ran and the answer is no: not applied, not found, a lost `required`. */
export const EXIT_NO = 1;
/** A refusal, no answer, or a usage mistake. */
export const EXIT_ERROR = 2;

/** Where `--url` falls back to when neither it nor HIVEKV_URL is set. */
export const DEFAULT_URL = 'http://127.0.0.1:6632';

/** A mistake in the command line itself, reported as one line and exit status 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

/** The absolute path of a file under docs/ of this package, for help texts. */
export function docsPath(file: string): string {
  return fileURLToPath(new URL(`../../../docs/${file}`, import.meta.url));
}

const KV_EXIT = 'Exit status: 0 applied or found, 1 not applied or not found, 2 refused or ' +
  'failed.';

/** Help text that ends every client-side command's `--help`. */
export function docsHelp(file: string, exitStatus: string = KV_EXIT): string {
  return `\n${exitStatus}\nDocumentation:  ${docsPath(file)}\n` +
    `HTTP reference: ${docsPath('http.md')}`;
}

/** Adds the connection flags to `command`. */
export function withConnection(command: Command): Command {
  return command
    .option('--url <urls>', `node URLs, comma separated (default: HIVEKV_URL, else ${DEFAULT_URL})`)
    .option('--token <jwt>', 'bearer token when the nodes run with JWT_ENABLED (default: ' +
      'HIVEKV_TOKEN)')
    .option('--tenant <uuid>', 'tenant, for nodes behind a proxy with QUEEN_TENANCY_HEADER ' +
      '(default: HIVEKV_TENANT)')
    .option('--timeout <ms>', `time allowed to one attempt (default ${CLIENT_DEFAULTS.timeoutMs})`)
    .option('--retries <n>', `attempts after the first on 503, 429, timeouts and failed ` +
      `connections (default ${CLIENT_DEFAULTS.retries})`);
}

type Env = Readonly<Record<string, string | undefined>>;

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === '' ? undefined : value.trim();
}

/** A whole number flag, or a UsageError naming it. */
export function wholeNumber(text: string | undefined, flag: string): number | undefined {
  if (text === undefined) return undefined;
  if (!/^\d{1,15}$/.test(text.trim())) {
    throw new UsageError(`${flag} ${JSON.stringify(text)}: expected a whole number`);
  }
  return Number(text.trim());
}

/** Builds the client from the connection flags, then the environment, then defaults. */
export function clientFrom(options: Record<string, string | undefined>,
  env: Env = process.env): HivekvClient {
  const urlText = nonEmpty(options['url']) ?? nonEmpty(env['HIVEKV_URL']) ?? DEFAULT_URL;
  const urls = urlText.split(',').map((url) => url.trim()).filter((url) => url !== '');
  const timeoutMs = wholeNumber(options['timeout'], '--timeout');
  const retries = wholeNumber(options['retries'], '--retries');
  try {
    return createClient({
      urls,
      token: nonEmpty(options['token']) ?? nonEmpty(env['HIVEKV_TOKEN']) ?? null,
      tenant: nonEmpty(options['tenant']) ?? nonEmpty(env['HIVEKV_TENANT']) ?? null,
      ...(timeoutMs === undefined ? {} : { timeoutMs }),
      ...(retries === undefined ? {} : { retries }),
    });
  } catch (error) {
    if (error instanceof TypeError || error instanceof RangeError) {
      throw new UsageError(error.message);
    }
    throw error;
  }
}

/** Prints an answer on stdout: indented for a person, one line for a program. */
export function printAnswer(value: unknown): void {
  process.stdout.write(JSON.stringify(value, null, process.stdout.isTTY ? 2 : 0) + '\n');
}

/**
 * Runs a command's body and turns its outcome into the exit status: the body's own status,
 * or 2 with the envelope (a refusal, no answer) or text (a usage mistake, a bug) on stderr.
 * The status is set, not forced, so stdout is flushed before the process ends.
 */
export async function runCommand(name: string, body: () => Promise<number>): Promise<void> {
  try {
    process.exitCode = await body();
  } catch (error) {
    process.exitCode = EXIT_ERROR;
    if (isHivekvError(error)) {
      process.stderr.write(JSON.stringify(error.toJSON()) + '\n');
    } else if (error instanceof UsageError || error instanceof TypeError ||
      error instanceof RangeError) {
      process.stderr.write(`hivekv ${name}: ${error.message}\n`);
    } else {
      // Anything else is a bug; it still exits 2, since 1 would read as "not applied".
      const text = error instanceof Error ? error.stack ?? error.message : String(error);
      process.stderr.write(`hivekv ${name}: unexpected error: ${text}\n`);
    }
  }
}
