/**
 * The commands of a markdown document's `bash` blocks, read as a shell would read the subset
 * the README writes: words, single- and double-quoted strings (a single-quoted one may span
 * lines), a backslash before a newline joining lines, `#` comments, a trailing `&`, leading
 * `NAME=value` assignments, `> file` and `< file`, and one `$(...)` substitution kept as
 * text. Anything else (pipes, `;`, `&&`, variables) is refused with the line, so a README
 * that grows a construct this reader does not know fails its test instead of running
 * something else.
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
  /** `> file`: where its standard output goes, or undefined. */
  readonly stdoutFile: string | undefined;
  /** `< file`: what it reads on standard input, or undefined. */
  readonly stdinFile: string | undefined;
  /** The comment after the command on its last line, without `#`, or '' if none. */
  readonly comment: string;
  /** The command's text as written, for messages. */
  readonly text: string;
}

/** The bodies of the ```bash blocks between the heading `from` and the next heading `to`. */
export function bashBlocks(markdown: string, from: string, to: string): string[] {
  return codeBlocks(markdown, from, to, 'bash');
}

/** The text from the heading `from` to the heading `to` after it. */
export function sectionText(markdown: string, from: string, to: string): string {
  const start = markdown.indexOf(`\n${from}\n`);
  if (start < 0) throw new Error(`no heading "${from}"`);
  const end = markdown.indexOf(`\n${to}\n`, start);
  if (end < 0) throw new Error(`no heading "${to}" after "${from}"`);
  return markdown.slice(start, end);
}

/** The bodies of the code blocks in `lang` between the heading `from` and the heading `to`. */
export function codeBlocks(markdown: string, from: string, to: string, lang: string): string[] {
  const section = sectionText(markdown, from, to);
  const blocks: string[] = [];
  const fence = new RegExp('```' + lang + '\\n([\\s\\S]*?)```', 'g');
  for (let m = fence.exec(section); m !== null; m = fence.exec(section)) blocks.push(m[1]!);
  return blocks;
}

const ASSIGNMENT = /^[A-Za-z_][A-Za-z0-9_]*=/;
const REFUSED = new Set(['|', ';', '`']);
/** What a redirection may name: a plain path. */
const REDIRECT_TARGET = /^[A-Za-z0-9_./-]+/;

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
  return new ShellReader(block).read();
}

/** One pass over a block; each character is handled by `step`. */
class ShellReader {
  private readonly commands: ShellCommand[] = [];
  private words: string[] = [];
  private word: string | null = null;
  private comment = '';
  private background = false;
  private stdoutFile: string | undefined;
  private stdinFile: string | undefined;
  private startAt = 0;
  private i = 0;

  constructor(private readonly block: string) {}

  read(): ShellCommand[] {
    while (this.i < this.block.length) this.step(this.block[this.i]!);
    this.endCommand(this.block.length);
    return this.commands;
  }

  private step(c: string): void {
    const block = this.block;
    if (c === '\n') {
      this.endCommand(this.i);
      this.i++;
    } else if (c === '\\' && block[this.i + 1] === '\n') {
      this.i += 2;
    } else if (c === ' ' || c === '\t') {
      this.endWord();
      this.i++;
    } else if (c === '#' && this.word === null) {
      const eol = block.indexOf('\n', this.i);
      this.comment = block.slice(this.i + 1, eol < 0 ? block.length : eol);
      this.i = eol < 0 ? block.length : eol;
    } else if (c === "'" || c === '"') {
      this.quoted(c);
    } else if (c === '$' && block[this.i + 1] === '(') {
      const close = block.indexOf(')', this.i);
      if (close < 0) this.refuse('an unclosed $(');
      this.word = (this.word ?? '') + block.slice(this.i, close + 1);
      this.i = close + 1;
    } else if (c === '>' || c === '<') {
      this.redirect(c);
    } else if (c === '&') {
      if (block[this.i + 1] === '&') this.refuse('&&');
      this.endWord();
      this.background = true;
      this.i++;
    } else if (REFUSED.has(c) || c === '$') {
      this.refuse(`"${c}"`);
    } else {
      if (this.background) this.refuse('a word after &');
      this.word = (this.word ?? '') + c;
      this.i++;
    }
  }

  private quoted(quote: string): void {
    const close = this.block.indexOf(quote, this.i + 1);
    if (close < 0) this.refuse(`an unclosed ${quote}`);
    const text = this.block.slice(this.i + 1, close);
    if (quote === '"' && /[$`\\]/.test(text)) this.refuse('an expansion inside double quotes');
    this.word = (this.word ?? '') + text;
    this.i = close + 1;
  }

  private redirect(c: string): void {
    this.endWord();
    const rest = this.block.slice(this.i + 1);
    const spaces = /^[ \t]*/.exec(rest)![0].length;
    const target = REDIRECT_TARGET.exec(rest.slice(spaces));
    if (target === null) this.refuse(`"${c}" without a file`);
    if (c === '>') this.stdoutFile = target![0];
    else this.stdinFile = target![0];
    this.i += 1 + spaces + target![0].length;
  }

  private endWord(): void {
    if (this.word !== null) this.words.push(this.word);
    this.word = null;
  }

  private endCommand(at: number): void {
    this.endWord();
    if (this.words.length > 0) {
      this.commands.push({ ...splitAssignments(this.words), background: this.background,
        stdoutFile: this.stdoutFile, stdinFile: this.stdinFile, comment: this.comment.trim(),
        text: this.block.slice(this.startAt, at).trim() });
    }
    this.words = [];
    this.comment = '';
    this.background = false;
    this.stdoutFile = undefined;
    this.stdinFile = undefined;
    this.startAt = at + 1;
  }

  private refuse(what: string): never {
    const line = this.block.slice(0, this.i).split('\n').length;
    throw new Error(`line ${line} of a bash block: ${what}`);
  }
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
