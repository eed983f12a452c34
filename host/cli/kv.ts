/**
 * `hivekv kv get|put|put-if-absent|incr|delete|check|prefix|batch`: one KV call from the
 * command line, through `hivekv/client` (so with its retries and idempotency keys).
 *
 * Values are JSON: `'{"status":"paid"}'`, `42`, `'"a string"'`; a bare word that is not JSON
 * is refused with a hint to quote it, never stored as a guess. Exit status 0 when the
 * operation applied or found, 1 when it did not, 2 on a refusal, no answer or a usage
 * mistake (docs/cli.md).
 */
import { readFileSync } from 'node:fs';
import { Command } from 'commander';
import type {
  BatchResult, ExpiryOptions, GetPrefixOptions, HivekvClient, TtlString, WireOp, WriteResult,
} from '../client/index.js';
import {
  clientFrom, docsHelp, EXIT_NO, EXIT_YES, printAnswer, runCommand, UsageError, wholeNumber,
  withConnection,
} from './connection.js';

/** Bytes of batch input read at most: the node's default body limit. */
export const BATCH_INPUT_BYTES_MAX = 64 * 1024 * 1024;

type Flags = Record<string, string | boolean | undefined>;

/** Parses a value argument as JSON, or explains how to quote it. */
export function parseJsonArgument(text: string, what: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    const quoted = JSON.stringify(text);
    throw new UsageError(`${what} ${text} is not JSON; values are JSON, so a string is ` +
      `quoted: '${quoted}' (in a shell, wrap it in single quotes)`);
  }
}

function jsonNumber(text: string | undefined, flag: string): number | undefined {
  if (text === undefined) return undefined;
  const value = parseJsonArgument(text, flag);
  if (typeof value !== 'number') throw new UsageError(`${flag} ${text}: expected a number`);
  return value;
}

function text(flags: Flags, name: string): string | undefined {
  const value = flags[name];
  return typeof value === 'string' ? value : undefined;
}

/** `--ttl`, `--until` and `--forever` as client expiry options. */
function expiryFrom(flags: Flags): ExpiryOptions {
  const expiry: { ttl?: TtlString; until?: string; forever?: true } = {};
  const ttl = text(flags, 'ttl');
  const until = text(flags, 'until');
  if (ttl !== undefined) expiry.ttl = ttl as TtlString;
  if (until !== undefined) expiry.until = until;
  if (flags['forever'] === true) expiry.forever = true;
  return expiry;
}

function callFrom(flags: Flags): { idempotencyKey?: string } {
  const key = text(flags, 'idempotencyKey');
  return key === undefined ? {} : { idempotencyKey: key };
}

function expectFrom(flags: Flags): { expect?: number } {
  const expect = wholeNumber(text(flags, 'expect'), '--expect');
  return expect === undefined ? {} : { expect };
}

function requiredFrom(flags: Flags): { required?: true } {
  return flags['required'] === true ? { required: true } : {};
}

function verdict(result: WriteResult): number {
  printAnswer(result);
  return result.applied ? EXIT_YES : EXIT_NO;
}

/** A subcommand with the connection flags, its help footer and its body. */
function leaf(name: string, description: string,
  body: (client: HivekvClient, args: string[], flags: Flags) => Promise<number>): Command {
  const command = withConnection(new Command(name).description(description))
    .addHelpText('after', docsHelp('cli.md'))
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride();
  command.action(async (...received: unknown[]) => {
    const self = received[received.length - 1] as Command;
    const flags = self.opts<Flags>();
    await runCommand(`kv ${name}`, async () => {
      const client = clientFrom(flags as Record<string, string | undefined>);
      return body(client, self.args, flags);
    });
  });
  return command;
}

function withLifetime(command: Command): Command {
  return command
    .option('--ttl <duration>', "lifetime: a whole number and s, m, h or d ('90s', '30d')")
    .option('--until <instant>', 'lifetime up to an ISO-8601 instant')
    .option('--forever', 'no lifetime: kept until deleted')
    .option('--idempotency-key <key>', 'the key every attempt of this write carries ' +
      '(default: a fresh random one)');
}

function getCommand(): Command {
  return leaf('get', 'read one key', async (client, [ns, key]) => {
    const result = await client.kv.get(ns as string, key as string);
    printAnswer(result);
    return result.found ? EXIT_YES : EXIT_NO;
  }).argument('<ns>', 'namespace').argument('<key>', 'key');
}

function putCommand(): Command {
  const command = leaf('put', 'write a value (exactly one of --ttl, --until, --forever)',
    async (client, [ns, key, value], flags) => verdict(await client.kv.put(ns as string,
      key as string, parseJsonArgument(value as string, 'value'), {
        ...expiryFrom(flags), ...expectFrom(flags), ...requiredFrom(flags), ...callFrom(flags),
      })));
  return withLifetime(command.argument('<ns>', 'namespace').argument('<key>', 'key')
    .argument('<value>', 'the value, as JSON'))
    .option('--expect <version>', 'write only if the key is at this version (0: absent)')
    .option('--required', 'a lost --expect aborts the call (answers kv_precondition)');
}

function putIfAbsentCommand(): Command {
  const command = leaf('put-if-absent', 'write a value only if the key does not exist',
    async (client, [ns, key, value], flags) => verdict(await client.kv.putIfAbsent(
      ns as string, key as string, parseJsonArgument(value as string, 'value'),
      { ...expiryFrom(flags), ...requiredFrom(flags), ...callFrom(flags) })));
  return withLifetime(command.argument('<ns>', 'namespace').argument('<key>', 'key')
    .argument('<value>', 'the value, as JSON'))
    .option('--required', 'an existing key aborts the call (answers kv_precondition)');
}

function incrCommand(): Command {
  const command = leaf('incr', 'add to a counter; with --min/--max, applies only within them',
    async (client, [ns, key, delta], flags) => {
      const min = jsonNumber(text(flags, 'min'), '--min');
      const max = jsonNumber(text(flags, 'max'), '--max');
      const by = delta === undefined ? 1 : jsonNumber(delta, 'delta') as number;
      return verdict(await client.kv.incr(ns as string, key as string, by, {
        ...expiryFrom(flags), ...(min === undefined ? {} : { min }),
        ...(max === undefined ? {} : { max }), ...callFrom(flags),
      }));
    });
  return withLifetime(command.argument('<ns>', 'namespace').argument('<key>', 'key')
    .argument('[delta]', 'the number to add (default 1; negative subtracts)'))
    .option('--min <number>', 'refuse an increment that would go below this')
    .option('--max <number>', 'refuse an increment that would go above this');
}

function deleteCommand(): Command {
  return leaf('delete', 'delete a key', async (client, [ns, key], flags) =>
    verdict(await client.kv.delete(ns as string, key as string,
      { ...expectFrom(flags), ...requiredFrom(flags), ...callFrom(flags) })))
    .argument('<ns>', 'namespace').argument('<key>', 'key')
    .option('--expect <version>', 'delete only at this version')
    .option('--required', 'a lost --expect aborts the call (answers kv_precondition)')
    .option('--idempotency-key <key>', 'the key every attempt of this write carries');
}

function checkCommand(): Command {
  return leaf('check', 'assert that a key is at a version, writing nothing',
    async (client, [ns, key], flags) => {
      const expect = wholeNumber(text(flags, 'expect'), '--expect') as number;
      return verdict(await client.kv.check(ns as string, key as string, expect));
    })
    .argument('<ns>', 'namespace').argument('<key>', 'key')
    .requiredOption('--expect <version>', 'the version to assert (0: the key is absent)');
}

function prefixCommand(): Command {
  return leaf('prefix', 'read keys under a prefix: one page, or every page with --all',
    async (client, [ns, prefix], flags) => {
      const limit = wholeNumber(text(flags, 'limit'), '--limit');
      const options: GetPrefixOptions = {
        ...(limit === undefined ? {} : { limit }),
        ...(text(flags, 'after') === undefined ? {} : { after: text(flags, 'after') }),
        ...(flags['keysOnly'] === true ? { keysOnly: true } : {}),
      };
      if (flags['all'] !== true) {
        const page = await client.kv.getPrefix(ns as string, prefix as string, options);
        printAnswer(page);
        return page.rows.length > 0 ? EXIT_YES : EXIT_NO;
      }
      let rows = 0;
      for await (const row of client.kv.listAll(ns as string, prefix as string, options)) {
        process.stdout.write(JSON.stringify(row) + '\n');
        rows++;
      }
      return rows > 0 ? EXIT_YES : EXIT_NO;
    })
    .argument('<ns>', 'namespace').argument('<prefix>', 'a non-empty key prefix')
    .option('--limit <n>', 'rows per page (the node clamps it; default 100)')
    .option('--after <key>', 'start after this key (the nextAfter of a page)')
    .option('--keys-only', 'rows without values')
    .option('--all', 'walk every page, printing one row per line (JSON lines)');
}

/** Reads a file, or stdin for `-`, up to BATCH_INPUT_BYTES_MAX. */
async function readInput(file: string): Promise<string> {
  if (file !== '-') {
    try {
      return readFileSync(file, 'utf8');
    } catch (error) {
      throw new UsageError(`cannot read ${file}: ${(error as Error).message}`);
    }
  }
  const chunks: Buffer[] = [];
  let bytes = 0;
  for await (const chunk of process.stdin) {
    const buffer = chunk as Buffer;
    bytes += buffer.byteLength;
    if (bytes > BATCH_INPUT_BYTES_MAX) {
      throw new UsageError(`stdin holds more than ${BATCH_INPUT_BYTES_MAX} bytes`);
    }
    chunks.push(buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** A batch's exit status: 1 when it aborted or a write or check did not apply. */
export function batchExit(result: BatchResult): number {
  if (!result.ok) return EXIT_NO;
  const refused = result.results.some((element) => 'applied' in element && !element.applied);
  return refused ? EXIT_NO : EXIT_YES;
}

function batchCommand(): Command {
  return leaf('batch', 'send a JSON list of operations as one call (from a file or stdin)',
    async (client, [file], flags) => {
      if (file === undefined && process.stdin.isTTY === true) {
        throw new UsageError('give the operations in a file, or pipe them in (- reads a ' +
          'terminal until end of input)');
      }
      const input = parseJsonArgument(await readInput(file ?? '-'), 'the batch input');
      const list = Array.isArray(input) ? input
        : (input as { operations?: unknown } | null)?.operations;
      if (!Array.isArray(list)) {
        throw new UsageError('the batch input is a JSON list of operations, or ' +
          '{"operations":[...]}');
      }
      const batch = client.kv.batch();
      for (const op of list) batch.add(op as WireOp);
      const result = await batch.run(callFrom(flags));
      printAnswer(result);
      return batchExit(result);
    })
    .argument('[file]', 'a JSON file; - or nothing reads stdin')
    .option('--idempotency-key <key>', 'the key every attempt carries, when the call writes')
    .addHelpText('after', `
Input: the operations of POST /api/v1/kv, for example
  [{"op":"putIfAbsent","ns":"orders","key":"ord_1","value":true,"ttl":"7d","required":true},
   {"op":"incr","ns":"stats","key":"charges","delta":1,"forever":true}]
"ttl" and "until" are taken beside "ttlSeconds". Exit 1 when a required operation lost
or any write or check did not apply; reads do not change the exit status.`);
}

const KV_HELP_AFTER = `
Examples:
  hivekv kv put orders 9137 '{"status":"paid"}' --ttl 30d
  hivekv kv get orders 9137
  hivekv kv incr quota acme:2026-08-17T14 --max 1000 --ttl 1h
  hivekv kv put orders 9137 '{"status":"shipped"}' --ttl 30d --expect 42
${docsHelp('cli.md')}`;

export function registerKv(program: Command): void {
  const kv = new Command('kv')
    .description('read and write keys on running nodes (--url or HIVEKV_URL)')
    .addHelpText('after', KV_HELP_AFTER)
    .exitOverride();
  for (const command of [getCommand(), putCommand(), putIfAbsentCommand(), incrCommand(),
    deleteCommand(), checkCommand(), prefixCommand(), batchCommand()]) {
    kv.addCommand(command);
  }
  program.addCommand(kv);
}
