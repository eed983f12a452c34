/**
 * The commands of a markdown document's `bash` blocks, read as a shell would read the subset
 * the README writes: words, single- and double-quoted strings (a single-quoted one may span
 * lines), a backslash before a newline joining lines, `#` comments, a trailing `&`, leading
 * `NAME=value` assignments and one `$(...)` substitution kept as text. Anything else (pipes,
 * redirections, `;`, `&&`) is refused with the line, so a README that grows a construct this
 * reader does not know fails its test instead of running something else.
 *
 * Pure: text in, commands out.
 */

export interface ShellCommand {
  /** `NAME=value` words before the command name. */
  readonly env: Readonly<Record<string, string>>;
  /** The command name and its arguments, quotes removed. */
  readonly words: readonly string[];
  /** Ended with `&`: runs in the background. */
  readonly background: boolean;
  /** The comment after the command on its last line, without `#`, or '' if none. */
  readonly comment: string;
  /** The command's text as written, for messages. */
  readonly text: string;
}

/** The bodies of the ```bash blocks between the heading `from` and the next heading `to`. */
export function bashBlocks(markdown: string, from: string, to: string): string[] {
  const start = markdown.indexOf(`\n${from}\n`);
  if (start < 0) throw new Error(`no heading "${from}"`);
  const end = markdown.indexOf(`\n${to}\n`, start);
  if (end < 0) throw new Error(`no heading "${to}" after "${from}"`);
  const section = markdown.slice(start, end);
  const blocks: string[] = [];
  const fence = /```bash\n([\s\S]*?)```/g;
  for (let m = fence.exec(section); m !== null; m = fence.exec(section)) blocks.push(m[1]!);
  return blocks;
}

const ASSIGNMENT = /^[A-Za-z_][A-Za-z0-9_]*=/;
const REFUSED = new Set(['|', ';', '>', '<', '`']);

/** Leading `NAME=value` words apart from the command (its name is never one). */
function splitAssignments(words: readonly string[]): { env: Record<string, string>;
  words: string[] } {
  let n = 0;
  const env: Record<string, string> = {};
  while (n < words.length - 1 && ASSIGNMENT.test(words[n]!)) {
    const [name, ...value] = words[n]!.split('=');
    env[name!] = value.join('=');
    n++;
  }
  return { env, words: words.slice(n) };
}

/** The commands of one block, in order. Throws on a construct this reader does not know. */
export function shellCommands(block: string): ShellCommand[] {
  const commands: ShellCommand[] = [];
  let words: string[] = [];
  let word: string | null = null;
  let comment = '';
  let background = false;
  let startAt = 0;
  let i = 0;
  const endWord = (): void => {
    if (word !== null) words.push(word);
    word = null;
  };
  const endCommand = (at: number): void => {
    endWord();
    if (words.length > 0) {
      commands.push({ ...splitAssignments(words), background, comment: comment.trim(),
        text: block.slice(startAt, at).trim() });
    }
    words = [];
    comment = '';
    background = false;
    startAt = at + 1;
  };
  const refuse = (what: string): never => {
    const line = block.slice(0, i).split('\n').length;
    throw new Error(`line ${line} of a bash block: ${what}`);
  };
  while (i < block.length) {
    const c = block[i]!;
    if (c === '\n') {
      endCommand(i);
      i++;
    } else if (c === '\\' && block[i + 1] === '\n') {
      i += 2;
    } else if (c === ' ' || c === '\t') {
      endWord();
      i++;
    } else if (c === '#' && word === null) {
      const eol = block.indexOf('\n', i);
      comment = block.slice(i + 1, eol < 0 ? block.length : eol);
      i = eol < 0 ? block.length : eol;
    } else if (c === "'" || c === '"') {
      const close = block.indexOf(c, i + 1);
      if (close < 0) refuse(`an unclosed ${c}`);
      const quoted = block.slice(i + 1, close);
      if (c === '"' && /[$`\\]/.test(quoted)) refuse('an expansion inside double quotes');
      word = (word ?? '') + quoted;
      i = close + 1;
    } else if (c === '$' && block[i + 1] === '(') {
      const close = block.indexOf(')', i);
      if (close < 0) refuse('an unclosed $(');
      word = (word ?? '') + block.slice(i, close + 1);
      i = close + 1;
    } else if (c === '&') {
      if (block[i + 1] === '&') refuse('&&');
      endWord();
      background = true;
      i++;
    } else if (REFUSED.has(c) || c === '$') {
      refuse(`"${c}"`);
    } else {
      if (background) refuse('a word after &');
      word = (word ?? '') + c;
      i++;
    }
  }
  endCommand(block.length);
  return commands;
}

/** A curl command's request: what the README's calls use of curl, and nothing else. */
export interface CurlRequest {
  readonly method: string;
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string | undefined;
  /** `-i`: the answer's headers are shown too. */
  readonly showHeaders: boolean;
}

/** Reads `curl` words (`-s`, `-S`, `-i` and their bundles, `-X`, `-H`, `-d`, one URL). */
export function curlRequest(words: readonly string[]): CurlRequest {
  if (words[0] !== 'curl') throw new Error(`not a curl command: ${words.join(' ')}`);
  let method: string | null = null;
  let url: string | null = null;
  let body: string | undefined;
  let showHeaders = false;
  const headers: Record<string, string> = {};
  for (let n = 1; n < words.length; n++) {
    const w = words[n]!;
    const value = (): string => {
      const v = words[++n];
      if (v === undefined) throw new Error(`curl: ${w} without a value`);
      return v;
    };
    if (w === '-X') method = value();
    else if (w === '-H') {
      const header = value();
      const colon = header.indexOf(':');
      if (colon < 1) throw new Error(`curl: a header without a name: ${header}`);
      headers[header.slice(0, colon).trim().toLowerCase()] = header.slice(colon + 1).trim();
    } else if (w === '-d') body = value();
    else if (/^-[sSi]+$/.test(w)) showHeaders ||= w.includes('i');
    else if (/^https?:\/\//.test(w) && url === null) url = w;
    else throw new Error(`curl: an option this reader does not know: ${w}`);
  }
  if (url === null) throw new Error(`curl without a URL: ${words.join(' ')}`);
  return { method: method ?? (body === undefined ? 'GET' : 'POST'), url, headers, body,
    showHeaders };
}
