/**
 * `hivekv members list|add|promote|remove --url URL [--token T]`: the cluster's membership
 * through any node's HTTP API (`/api/v1/system/members`, README "Growing, replacing and
 * shrinking a cluster"). Prints the answer's JSON on stdout and exits 0; a refusal or an
 * error prints the error envelope on stderr and exits 2.
 */
import { Command, InvalidArgumentError } from 'commander';

/** How long one request may take: a change answers once committed, or by the node's timeout. */
const REQUEST_TIMEOUT_MS = 60_000;
/** `promote --wait`: how often to ask again while the learner catches up. */
const WAIT_POLL_MS = 1_000;
const WAIT_SECONDS_MAX = 86_400;
const EXIT_REFUSED = 2;

interface Target {
  readonly url: string;
  readonly token: string | undefined;
}

interface Answer {
  readonly status: number;
  readonly body: unknown;
}

/** An error envelope for failures that never reached a node (the node's own look alike). */
function envelope(reason: string, detail: string): unknown {
  return { error: 'cli_error', reason, detail };
}

function parseUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new InvalidArgumentError('expected a URL such as http://127.0.0.1:6632');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new InvalidArgumentError('expected an http:// or https:// URL');
  }
  return url.origin;
}

function parseSeconds(value: string): number {
  const seconds = Number(value);
  if (!Number.isInteger(seconds) || seconds < 0 || seconds > WAIT_SECONDS_MAX) {
    throw new InvalidArgumentError(`expected whole seconds from 0 to ${WAIT_SECONDS_MAX}`);
  }
  return seconds;
}

/** One request with Node's own fetch; a network failure becomes a 0-status envelope. */
async function request(target: Target, method: string, path: string,
  body?: unknown): Promise<Answer> {
  const headers: Record<string, string> = {};
  if (target.token !== undefined) headers['authorization'] = `Bearer ${target.token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  try {
    const response = await fetch(target.url + path, {
      method, headers, body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
    const text = await response.text();
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = envelope('not_json', `HTTP ${response.status}: ${text.slice(0, 200)}`);
    }
    return { status: response.status, body: parsed };
  } catch (error) {
    const cause = error instanceof Error ? (error.cause as Error | undefined)?.message
      ?? error.message : String(error);
    return { status: 0, body: envelope('unreachable', `${target.url}: ${cause}`) };
  }
}

/** Prints the answer where it belongs and sets the exit status. */
function report(answer: Answer): void {
  const text = JSON.stringify(answer.body, null, 2);
  if (answer.status >= 200 && answer.status < 300) {
    console.log(text);
  } else {
    console.error(text);
    process.exitCode = EXIT_REFUSED;
  }
}

function targetOf(command: Command): Target {
  const options = command.optsWithGlobals<{ url: string; token?: string }>();
  return { url: options.url, token: options.token ?? process.env['HIVEKV_TOKEN'] };
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
    console.error(`waiting: ${typeof detail === 'string' ? detail : reason}`);
    await new Promise((resolve) => setTimeout(resolve, WAIT_POLL_MS));
  }
}

export function registerMembers(program: Command): void {
  const members = program.command('members')
    .description('list, add, promote or remove cluster members through a node\'s HTTP API')
    .requiredOption('--url <url>', 'any node, e.g. http://127.0.0.1:6632', parseUrl)
    .option('--token <jwt>', 'an admin token when JWT auth is on (default: $HIVEKV_TOKEN)')
    .addHelpText('after', `
Output is JSON on stdout, exit 0; a refusal prints the error envelope on stderr, exit 2.
Add a node in two steps: start it with "serve --join", add it as a learner, then promote
it once it has caught up (--wait retries while it has not).`);
  members.command('list').description('the members, their roles, the leader\'s match index')
    .action(async (_options: unknown, command: Command) => {
      report(await request(targetOf(command), 'GET', '/api/v1/system/members'));
    });
  members.command('add <id> <peer>')
    .description('add a learner: it catches up from a snapshot and the log, never votes')
    .action(async (id: string, peer: string, _options: unknown, command: Command) => {
      report(await request(targetOf(command), 'POST', '/api/v1/system/members',
        { id, peer, role: 'learner' }));
    });
  members.command('promote <id>').description('make a caught-up learner a voter')
    .option('--wait <seconds>', 'keep asking while it catches up, this long at most',
      parseSeconds, 0)
    .action(async (id: string, options: { wait: number }, command: Command) => {
      report(await promoteWaiting(targetOf(command), id, options.wait));
    });
  members.command('remove <id>')
    .description('remove a member; removing the leader hands leadership over first')
    .action(async (id: string, _options: unknown, command: Command) => {
      report(await request(targetOf(command), 'DELETE',
        `/api/v1/system/members/${encodeURIComponent(id)}`));
    });
}
