/**
 * `hivekv members list|add|promote|remove --url URL [--token T]`: the cluster's membership
 * through any node's HTTP API (`/api/v1/system/members`, docs/membership.md). Follows the
 * output contract of the other client commands (connection.ts): the answer's JSON on stdout
 * and exit 0; a refusal, or no node answering, the error envelope on stderr as one JSON line
 * (with `status`, 0 when no node answered) and exit 2. Plain fetch: the client library has
 * no membership calls, and a change must not be retried blindly (it may have applied).
 */
import { Command } from 'commander';
import {
  DEFAULT_URL, docsHelp, EXIT_ERROR, EXIT_YES, printAnswer, UsageError, wholeNumber,
} from './connection.js';

/** How long one request may take: a change answers once committed, or by the node's timeout. */
const REQUEST_TIMEOUT_MS = 60_000;
/** `promote --wait`: how often to ask again while the learner catches up. */
const WAIT_POLL_MS = 1_000;
const WAIT_SECONDS_MAX = 86_400;

interface Target {
  readonly urls: readonly string[];
  readonly token: string | undefined;
  readonly timeoutMs: number;
}

interface Answer {
  readonly status: number;
  readonly body: unknown;
}

type Env = Readonly<Record<string, string | undefined>>;

/** An error envelope for a failure that never reached a node (`status` 0), as kv prints. */
function envelope(reason: string, detail: string): Record<string, unknown> {
  return { error: 'unavailable', reason, detail, status: 0, retryAfterSeconds: null };
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === '' ? undefined : value.trim();
}

/** `--url` (several, comma separated), then HIVEKV_URL, then the default; same for tokens. */
export function targetOf(options: Record<string, string | undefined>,
  env: Env = process.env): Target {
  const urlText = nonEmpty(options['url']) ?? nonEmpty(env['HIVEKV_URL']) ?? DEFAULT_URL;
  const urls = urlText.split(',').map((url) => url.trim()).filter((url) => url !== '')
    .map((url) => {
      let parsed: URL;
      try {
        parsed = new URL(url);
      } catch {
        throw new UsageError(`--url ${JSON.stringify(url)}: expected a URL such as ${DEFAULT_URL}`);
      }
      if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
        throw new UsageError(`--url ${JSON.stringify(url)}: expected an http(s) URL`);
      }
      return parsed.origin;
    });
  return { urls, token: nonEmpty(options['token']) ?? nonEmpty(env['HIVEKV_TOKEN']),
    timeoutMs: wholeNumber(options['timeout'], '--timeout') ?? REQUEST_TIMEOUT_MS };
}

/** One request with Node's own fetch to the first node that answers at all. */
async function request(target: Target, method: string, path: string,
  body?: unknown): Promise<Answer> {
  const headers: Record<string, string> = {};
  if (target.token !== undefined) headers['authorization'] = `Bearer ${target.token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  let failure = 'no URL to ask';
  for (const url of target.urls) {
    try {
      const response = await fetch(url + path, {
        method, headers, body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(target.timeoutMs),
      });
      const text = await response.text();
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = envelope('not_json', `${url} answered ${response.status}: ${text.slice(0, 200)}`);
      }
      return { status: response.status, body: parsed };
    } catch (error) {
      const cause = error instanceof Error ? (error.cause as Error | undefined)?.message
        ?? error.message : String(error);
      failure = `${url}: ${cause}`;
    }
  }
  return { status: 0, body: envelope('unreachable', failure) };
}

/** The answer on stdout (exit 0), or the envelope on stderr as one line (exit 2). */
function report(answer: Answer): number {
  if (answer.status >= 200 && answer.status < 300) {
    printAnswer(answer.body);
    return EXIT_YES;
  }
  const body = typeof answer.body === 'object' && answer.body !== null ? answer.body : {};
  process.stderr.write(JSON.stringify({ ...body, status: answer.status }) + '\n');
  return EXIT_ERROR;
}

function parseSeconds(text: string | undefined): number {
  const seconds = wholeNumber(text, '--wait') ?? 0;
  if (seconds > WAIT_SECONDS_MAX) throw new UsageError(`--wait: at most ${WAIT_SECONDS_MAX}`);
  return seconds;
}

/** `promote --wait S`: asks again while the learner is not caught up (409) or no leader (503). */
async function promoteWaiting(target: Target, id: string, waitSeconds: number): Promise<Answer> {
  const deadline = Date.now() + waitSeconds * 1000;
  for (;;) {
    const answer = await request(target, 'POST', '/api/v1/system/members', { id, role: 'voter' });
    const reason = (answer.body as { reason?: unknown } | null)?.reason;
    const retry = reason === 'members_not_caught_up' || answer.status === 503;
    if (!retry || Date.now() + WAIT_POLL_MS > deadline) return answer;
    const detail = (answer.body as { detail?: unknown }).detail;
    process.stderr.write(`hivekv members promote: waiting: ${typeof detail === 'string'
      ? detail : String(reason)}\n`);
    await new Promise((resolve) => setTimeout(resolve, WAIT_POLL_MS));
  }
}

/** Runs one subcommand's body; a usage mistake is one line of text and exit 2. */
async function run(name: string, body: () => Promise<number>): Promise<void> {
  try {
    process.exitCode = await body();
  } catch (error) {
    process.exitCode = EXIT_ERROR;
    const text = error instanceof UsageError ? error.message
      : `unexpected error: ${error instanceof Error ? error.stack ?? error.message : error}`;
    process.stderr.write(`hivekv members ${name}: ${text}\n`);
  }
}

type Options = Record<string, string | undefined>;

export function registerMembers(program: Command): void {
  const members = new Command('members')
    .description('list, add, promote or remove cluster members through a node\'s HTTP API')
    .option('--url <urls>', `any node, or several comma separated (default: HIVEKV_URL, else ` +
      `${DEFAULT_URL})`)
    .option('--token <jwt>', 'an admin token when JWT auth is on (default: HIVEKV_TOKEN)')
    .option('--timeout <ms>', `time allowed to one request (default ${REQUEST_TIMEOUT_MS})`)
    .addHelpText('after', `
Add a node in two steps: start it with "serve --join", add it as a learner, then promote
it once it has caught up (--wait keeps asking while it has not).` +
      docsHelp('cli.md', 'Exit status: 0 done, 2 refused or failed (the envelope on stderr).'))
    .showHelpAfterError('(run with --help for usage)');
  const target = (command: Command): Target => targetOf(command.optsWithGlobals<Options>());
  members.command('list').description('the members, their roles, the leader\'s match index')
    .action(async (_options: unknown, command: Command) => run('list', async () =>
      report(await request(target(command), 'GET', '/api/v1/system/members'))));
  members.command('add <id> <peer>')
    .description('add a learner: it catches up from a snapshot and the log, never votes')
    .action(async (id: string, peer: string, _options: unknown, command: Command) =>
      run('add', async () => report(await request(target(command), 'POST',
        '/api/v1/system/members', { id, peer, role: 'learner' }))));
  members.command('promote <id>').description('make a caught-up learner a voter')
    .option('--wait <seconds>', 'keep asking while it catches up, this long at most')
    .action(async (id: string, options: Options, command: Command) => run('promote',
      async () => report(await promoteWaiting(target(command), id,
        parseSeconds(options['wait'])))));
  members.command('remove <id>')
    .description('remove a member; removing the leader hands leadership over first')
    .action(async (id: string, _options: unknown, command: Command) => run('remove',
      async () => report(await request(target(command), 'DELETE',
        `/api/v1/system/members/${encodeURIComponent(id)}`))));
  program.addCommand(members);
}
