/**
 * Runs the README's commands for a test: its sections read (readme-commands.ts) with the
 * ports it names moved to free ones and its paths moved into a temporary directory, its
 * `curl` calls made with fetch, its `hivekv serve` started as a node this runner stops by
 * PID, and any other `hivekv` command run as a child process with its redirections.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import { hivekv, runNode, type Run } from './hivekv-cli.js';
import {
  freePort, removeDir, startNode, tempDir, UNLIMITED_RATES, type NodeProcess,
} from './node-process.js';
import {
  bashBlocks, codeBlocks, shellCommands, type CurlRequest, type ShellCommand,
} from './readme-commands.js';

export const README = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
/** The ports the README names: HTTP 6632 to 6635, peers 7001 to 7004. */
const README_PORT = /\b(663[2-5]|700[1-4])\b/g;

export interface CurlAnswer {
  readonly status: number;
  readonly headers: Headers;
  readonly text: string;
}

export class ReadmeRunner {
  readonly dir: string;
  /** Variables the README exports, passed to every command after. */
  readonly env: Record<string, string> = {};
  private readonly ports = new Map<string, number>();
  private readonly started: NodeProcess[] = [];

  constructor(name: string) {
    this.dir = tempDir(`readme-${name}`);
  }

  /** The README's port `p` moved to a free one, the same one every time it is named. */
  async port(p: string): Promise<number> {
    let port = this.ports.get(p);
    if (port === undefined) {
      port = await freePort();
      this.ports.set(p, port);
    }
    return port;
  }

  /**
   * A section's commands (from its heading to the heading `to`), its ports moved and each
   * text `replace` names (a path, a `<placeholder>`) replaced; a placeholder left outside a
   * comment is refused by the reader.
   */
  async section(from: string, to: string,
    replace: Record<string, string> = {}): Promise<ShellCommand[]> {
    const commands: ShellCommand[] = [];
    for (const block of bashBlocks(README, from, to)) {
      for (const p of new Set(block.match(README_PORT) ?? [])) await this.port(p);
      let text = block.replace(README_PORT, (p) => String(this.ports.get(p)));
      for (const [was, now] of Object.entries(replace)) text = text.split(was).join(now);
      commands.push(...shellCommands(text));
    }
    return commands;
  }

  /** A section's code blocks in `lang` (`js`, `ts`), the ports they name moved. */
  async code(from: string, to: string, lang: string): Promise<string[]> {
    const blocks = codeBlocks(README, from, to, lang);
    for (const block of blocks) {
      for (const p of new Set(block.match(README_PORT) ?? [])) await this.port(p);
    }
    return blocks.map((block) => block.replace(README_PORT, (p) => String(this.ports.get(p))));
  }

  /**
   * Runs `source` as an ES module from the project's root, as a user's script beside an
   * installed hivekv: `hivekv/client` and `hivekv/machine` resolve through the package's
   * exports.
   */
  runModule(source: string): Promise<Run> {
    return runNode(['--input-type=module'], { stdin: source });
  }

  async curl(request: CurlRequest): Promise<CurlAnswer> {
    const response = await fetch(request.url, { method: request.method,
      headers: request.headers, body: request.body });
    return { status: response.status, headers: response.headers, text: await response.text() };
  }

  /**
   * `hivekv serve ...` (or `npx hivekv serve ...`) started as a node; its `--data` inside
   * this runner's directory. One that names no `--port` gets a free one, not 6632.
   */
  async serve(command: ShellCommand): Promise<NodeProcess> {
    const words = hivekvArgs(command);
    if (words[0] !== 'serve') throw new Error(`not a serve command: ${command.text}`);
    const args: string[] = [];
    let port = 0;
    let dataDir: string | undefined;
    for (let n = 1; n < words.length; n++) {
      if (words[n] === '--port') port = Number(words[++n]);
      else if (words[n] === '--data') dataDir = this.path(words[++n]!);
      else args.push(words[n]!);
    }
    if (dataDir === undefined) throw new Error(`${command.text}: names no --data`);
    const node = await startNode({ port, dataDir, args,
      env: { ...UNLIMITED_RATES, ...this.env, ...command.env } });
    this.started.push(node);
    return node;
  }

  /** A node as `npm start` starts one, on `port`, with its data in `dataDir` here. */
  async startDefault(port: number, dataDir: string): Promise<NodeProcess> {
    const node = await startNode({ port, dataDir: this.path(dataDir), env: UNLIMITED_RATES });
    this.started.push(node);
    return node;
  }

  /** Stops a node this runner started (SIGTERM) and says how it exited. */
  async stop(node: NodeProcess): Promise<number | null> {
    this.started.splice(this.started.indexOf(node), 1);
    return node.stop();
  }

  /** Any other `hivekv` command, with its `< file` and `> file` inside this directory. */
  async run(command: ShellCommand): Promise<Run> {
    const args = hivekvArgs(command);
    const stdinFile = command.stdinFile === undefined ? undefined : this.path(command.stdinFile);
    const run = await hivekv([...args], { env: { ...this.env, ...command.env }, stdinFile });
    if (command.stdoutFile !== undefined) writeFileSync(this.path(command.stdoutFile), run.stdout);
    return run;
  }

  /** A path of the README, inside this runner's directory (an absolute one is taken as is). */
  path(readmePath: string): string {
    return isAbsolute(readmePath) ? readmePath : join(this.dir, readmePath);
  }

  async close(): Promise<void> {
    for (const node of this.started.splice(0)) await node.kill();
    removeDir(this.dir);
  }
}

/** The arguments after `hivekv` of `hivekv ...` or `npx hivekv ...`. */
function hivekvArgs(command: ShellCommand): readonly string[] {
  const words = command.words;
  const at = words[0] === 'npx' ? 1 : 0;
  if (words[at] !== 'hivekv') throw new Error(`not a hivekv command: ${command.text}`);
  return words.slice(at + 1);
}
