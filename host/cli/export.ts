/**
 * `hivekv export`: a dump of every live row, the tenant table and its quota rows at one
 * applied index, as newline-delimited JSON on stdout, or durably into `--out FILE`
 * (docs/backup.md). From a data directory (`--data DIR [--at INDEX]`, rebuilt by replay,
 * read-only) or from a live node (`--url URL`: the node's snapshot at one applied index,
 * taken while writes go on). Either way the dump is checked whole (a header, an end line,
 * every line counted) before the command says it is done.
 */
import { once } from 'node:events';
import { Command } from 'commander';
import { DumpFile } from '../backup/dump-file.js';
import { exportDataDir } from '../backup/export.js';
import { DataDir } from '../replay/data-dir.js';
import {
  DEFAULT_URL, docsHelp, EXIT_ERROR, EXIT_YES, printAnswer, runCommand, UsageError,
  wholeNumber,
} from './connection.js';
import { dataCommand } from './data-command.js';

type Options = Record<string, string | undefined>;

/** The route a node serves its export on (docs/http.md). */
export const EXPORT_PATH = '/api/v1/system/export';

/** Where the dump goes: stdout, or a file made durable once the dump is whole. */
interface DumpSink {
  write(chunk: string | Uint8Array): Promise<void>;
  commit(): Promise<void>;
  abort(): Promise<void>;
}

const STDOUT_SINK: DumpSink = {
  write: async (chunk) => {
    if (!process.stdout.write(chunk)) await once(process.stdout, 'drain');
  },
  commit: async () => undefined,
  abort: async () => undefined,
};

/** A reader that went away (`hivekv export ... | head`) ends the export quietly, status 2. */
function quietOnClosedPipe(): void {
  process.stdout.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code !== 'EPIPE') throw error;
    process.exit(EXIT_ERROR);
  });
}

async function fromData(dir: string, at: number | undefined, sink: DumpSink,
  check: StreamCheck): Promise<number> {
  const data = await DataDir.open(dir);
  const dump = await exportDataDir(data, at);
  for await (const text of dump.text) {
    check.see(text);
    await sink.write(text);
  }
  return EXIT_YES;
}

/** Checks, as the dump streams past, that it starts with a header and ends whole. */
class StreamCheck {
  private lines = 0;
  private first = '';
  private tail = '';

  /** The header line, parsed, once `verdict` found the dump whole. */
  header(): Record<string, unknown> {
    return JSON.parse(this.first) as Record<string, unknown>;
  }

  see(text: string): void {
    if (this.lines === 0) {
      const cut = text.indexOf('\n');
      this.first += cut < 0 ? text : text.slice(0, cut);
    }
    for (let i = text.indexOf('\n'); i >= 0; i = text.indexOf('\n', i + 1)) this.lines++;
    this.tail = (this.tail + text).slice(-4096);
  }

  /** Null when whole, else why not. */
  verdict(): string | null {
    let header: { tenantCount?: unknown; rowCount?: unknown; idempotencyRecords?: unknown;
      kind?: unknown };
    let end: { kind?: unknown; tenants?: unknown; rows?: unknown };
    try {
      header = JSON.parse(this.first) as typeof header;
      const lastLines = this.tail.trimEnd().split('\n');
      end = JSON.parse(lastLines[lastLines.length - 1] ?? '') as typeof end;
    } catch {
      return 'the export ended before its end line: it is incomplete (the node stopped or ' +
        'the connection broke)';
    }
    if (header.kind !== 'header' || end.kind !== 'end' || !this.tail.endsWith('\n') ||
      this.lines !== 2 + Number(header.tenantCount) + Number(header.idempotencyRecords) +
        Number(header.rowCount)) {
      return 'the export ended before its end line: it is incomplete (the node stopped or ' +
        'the connection broke)';
    }
    return null;
  }
}

async function fromNode(url: string, token: string | undefined, sink: DumpSink,
  check: StreamCheck): Promise<number> {
  const headers: Record<string, string> = {};
  if (token !== undefined) headers['authorization'] = `Bearer ${token}`;
  let response: Response;
  try {
    response = await fetch(new URL(EXPORT_PATH, url), { headers });
  } catch (error) {
    process.stderr.write(`hivekv export: no answer from ${url}: ` +
      `${(error as Error).cause instanceof Error ? ((error as Error).cause as Error).message
        : (error as Error).message}\n`);
    return EXIT_ERROR;
  }
  if (response.status !== 200 || response.body === null) {
    const body = await response.text();
    process.stderr.write(body.trim() === '' ? `hivekv export: ${url} answered ` +
      `${response.status}\n` : body.trimEnd() + '\n');
    return EXIT_ERROR;
  }
  const decoder = new TextDecoder();
  try {
    for await (const chunk of response.body) {
      check.see(decoder.decode(chunk, { stream: true }));
      await sink.write(chunk);
    }
  } catch (error) {
    process.stderr.write(`hivekv export: the stream from ${url} broke: ` +
      `${(error as Error).message}\n`);
    return EXIT_ERROR;
  }
  return EXIT_YES;
}

/**
 * Runs one export into stdout or `--out`: the file is kept only when the dump arrived whole
 * (then a summary goes to stdout), and removed otherwise.
 */
async function exportInto(out: string | undefined,
  run: (sink: DumpSink, check: StreamCheck) => Promise<number>): Promise<number> {
  const file = out === undefined ? null : await DumpFile.create(out).catch((error: unknown) => {
    throw new UsageError(`--out ${out}: ${(error as Error).message}`);
  });
  const sink: DumpSink = file ?? STDOUT_SINK;
  const check = new StreamCheck();
  let status = EXIT_ERROR;
  try {
    status = await run(sink, check);
    const verdict = status === EXIT_YES ? check.verdict() : null;
    if (verdict !== null) {
      process.stderr.write(`hivekv export: ${verdict}\n`);
      status = EXIT_ERROR;
    }
  } finally {
    if (status === EXIT_YES) await sink.commit();
    else await sink.abort();
  }
  if (file !== null && status === EXIT_YES) {
    const h = check.header();
    printAnswer({ out: file.path, bytes: file.written, index: h['index'], digest: h['digest'],
      tenants: h['tenantCount'], rows: h['rowCount'] });
  }
  return status;
}

async function exportAction(options: Options): Promise<number> {
  quietOnClosedPipe();
  const dir = options['data'];
  const url = options['url'];
  if ((dir === undefined) === (url === undefined)) {
    throw new UsageError('give either --data DIR or --url URL');
  }
  const at = wholeNumber(options['at'], '--at');
  const out = options['out'];
  if (out !== undefined && out.trim() === '') throw new UsageError('--out is empty');
  if (dir !== undefined) {
    if (dir.trim() === '') throw new UsageError('--data is empty');
    return exportInto(out, (sink, check) => fromData(dir, at, sink, check));
  }
  if (at !== undefined) {
    throw new UsageError('--at needs --data: a live node exports its state at one applied ' +
      'index it chooses (the header names it)');
  }
  const token = options['token'] ?? process.env['HIVEKV_TOKEN'];
  const base = (url ?? '').trim() === '' ? DEFAULT_URL : url!.trim();
  if (base.includes(',')) {
    throw new UsageError('--url takes one node\'s URL: the export is that node\'s state');
  }
  try {
    new URL(base);
  } catch {
    throw new UsageError(`--url ${JSON.stringify(base)}: not a URL`);
  }
  const bearer = token === undefined || token.trim() === '' ? undefined : token.trim();
  return exportInto(out, (sink, check) => fromNode(base, bearer, sink, check));
}

export function registerExport(program: Command): void {
  const command = new Command('export')
    .description('dump every live row, tenant and quota row at one index, as ndjson')
    .option('--data <dir>', 'a data directory (read only), rebuilt by replay')
    .option('--at <index>', 'with --data: the index to export (default: the log\'s last)')
    .option('--url <url>', 'a live node: its state at one applied index, while it serves')
    .option('--token <jwt>', 'with --url: bearer token with the admin role (default: ' +
      'HIVEKV_TOKEN)')
    .option('--out <file>', 'write the dump to FILE durably (fsync, rename) instead of ' +
      'stdout, and print a summary')
    .addHelpText('after', docsHelp('backup.md', 'Exit status: 0 the dump is whole on ' +
      'stdout, 2 a damaged directory (file and byte offset), an index the log does not ' +
      'reach, a refusal, an incomplete stream, or a usage mistake.'))
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride();
  command.action(async (options: Options) => {
    await runCommand('export', () => dataCommand('export', () => exportAction(options)));
  });
  program.addCommand(command);
}
