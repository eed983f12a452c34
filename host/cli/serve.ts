/**
 * `hivekv serve`: run one node until SIGTERM or SIGINT. Flags first, then the environment
 * (README.md, "Configuration"); a bad setting exits 2 with a message that names it.
 */
import { setFlagsFromString } from 'node:v8';
import { Command } from 'commander';
import { ConfigError, loadConfig, type Flags } from '../node/config.js';
import { readMemoryLimit } from '../node/memory-limit.js';
import { docsPath } from './connection.js';

const SERVE_HELP_AFTER = `
A single node needs no flags. A cluster member names itself and every member, and every
member shares a secret:
  HIVEKV_CLUSTER_SECRET=... hivekv serve --port 6632 --data ./data/n1 --id n1 \\
    --peers n1=127.0.0.1:7001,n2=127.0.0.1:7002,n3=127.0.0.1:7003
A new member starts empty and waits until a leader adds it (hivekv members add):
  HIVEKV_CLUSTER_ID=<the cluster's id> hivekv serve --data ./data/n4 --id n4 \\
    --peer-listen 10.0.0.4:7001 --join
--join requires HIVEKV_CLUSTER_ID, --id and --peer-listen, and excludes --peers. Once a
member, a node takes its members from its log: --peers only names the starting members.
Configuration beyond the flags comes from the environment:
  ${docsPath('configuration.md')}`;

/**
 * How far V8's old generation may grow past what survived the last full collection before the
 * next one starts: 400 lets it grow fivefold. A node's JavaScript heap is small (the state
 * lives in WebAssembly memory, the in-memory log's entries in columns and slabs), about
 * 11 MB under load, and V8 starts marking whenever the old generation's free room falls
 * near the young generation's size: with its own growth factor that was nearly always, and
 * under batches of 16 puts it marked the whole heap every 80 to 130 ms (9% of the main
 * thread's samples). 200 took that to a few collections a second while the log's entries
 * still filled the heap; once they left it (entry-columns.ts), 200 left 26 to 42 MB of room
 * and the collector ran 32 to 35 full collections in 11 s of batches of 16 against 8 with
 * 400, at the same rates and tails. A `--heap-growing-percent` given to node itself is left
 * as it is.
 */
const HEAP_GROWING_PERCENT = 400;

function tuneCollector(): void {
  if (process.execArgv.some((arg) => arg.startsWith('--heap-growing-percent'))) return;
  setFlagsFromString(`--heap-growing-percent=${HEAP_GROWING_PERCENT}`);
}

/** The serve command, detached from any program (tests parse flags through it). */
export function serveCommand(): Command {
  return new Command('serve')
    .description('run one node: HTTP on --host:--port, data in --data')
    .option('--host <host>', 'address the HTTP server listens on (default 127.0.0.1)')
    .option('--port <port>', 'HTTP port, 0 for any free one (default 6632)')
    .option('--data <dir>', 'data directory (default ./data)')
    .option('--id <id>', 'this member\'s id (default n1)')
    .option('--peer-listen <host:port>', 'where peers connect (default: this id\'s --peers entry)')
    .option('--peers <list>', 'every member as id=host:port, comma separated')
    .option('--join', 'a new member: wait until a leader adds it (needs HIVEKV_CLUSTER_ID)')
    .addHelpText('after', SERVE_HELP_AFTER)
    .exitOverride();
}

/** Commander's parsed options as the `Flags` record `loadConfig` takes. */
export function serveFlags(command: Command): Flags {
  const options = command.opts<Record<string, string | undefined>>();
  return {
    host: options['host'],
    port: options['port'],
    data: options['data'],
    id: options['id'],
    'peer-listen': options['peerListen'],
    peers: options['peers'],
    join: options['join'] === undefined ? undefined : 'true',
  };
}

export function registerServe(program: Command): void {
  program.addCommand(serveCommand().action(async (_options: unknown, command: Command) => {
    let config;
    try {
      config = loadConfig(serveFlags(command), process.env, readMemoryLimit());
    } catch (error) {
      if (error instanceof ConfigError) {
        console.error(`hivekv serve: ${error.message}`);
        process.exit(2);
      }
      throw error;
    }
    // Loaded here, not at the top: the client commands start without the server's modules.
    const { serve } = await import('../node/main.js');
    tuneCollector();
    await serve(config);
  }));
}
