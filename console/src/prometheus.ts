/**
 * A parser for the Prometheus text exposition format (version 0.0.4), as the node's
 * `/metrics` writes it: one sample a line, `name{label="value",...} value [timestamp]`,
 * `#` lines are comments (HELP, TYPE). Pure: no DOM, no I/O; the console's Live view and
 * the unit tests share it.
 *
 * Bounded and forgiving: a line it cannot read is skipped, never thrown on, and at most
 * SAMPLES_MAX samples are kept from one text, so a node that exposes far more series
 * cannot make the browser tab grow without end.
 */

/** Samples read from one scrape at most. */
export const SAMPLES_MAX = 20_000;

export interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*/;

/** The value text of a sample: a float, `+Inf`, `-Inf` or `NaN`. */
export function parseValue(text: string): number {
  if (text === '+Inf' || text === 'Inf') return Infinity;
  if (text === '-Inf') return -Infinity;
  if (text === 'NaN') return NaN;
  return text.trim() === '' ? NaN : Number(text);
}

/** The labels between braces starting at `text[at]` (just after `{`), and where they end. */
function parseLabels(text: string, at: number):
  { labels: Record<string, string>; end: number } | null {
  const labels: Record<string, string> = {};
  let i = at;
  for (;;) {
    while (text[i] === ' ' || text[i] === ',') i++;
    if (text[i] === '}') return { labels, end: i + 1 };
    const name = LABEL_NAME.exec(text.slice(i))?.[0];
    if (name === undefined) return null;
    i += name.length;
    if (text[i] !== '=' || text[i + 1] !== '"') return null;
    i += 2;
    let value = '';
    while (i < text.length && text[i] !== '"') {
      if (text[i] === '\\') {
        const next = text[i + 1];
        value += next === 'n' ? '\n' : next ?? '';
        i += 2;
      } else {
        value += text[i];
        i++;
      }
    }
    if (text[i] !== '"') return null;
    labels[name] = value;
    i++;
  }
}

/** One sample line, or null for a comment, a blank or an unreadable line. */
export function parseLine(line: string): Sample | null {
  const text = line.trim();
  if (text === '' || text.startsWith('#')) return null;
  const name = NAME.exec(text)?.[0];
  if (name === undefined) return null;
  let labels: Record<string, string> = {};
  let rest = text.slice(name.length);
  if (rest.startsWith('{')) {
    const parsed = parseLabels(rest, 1);
    if (parsed === null) return null;
    labels = parsed.labels;
    rest = rest.slice(parsed.end);
  }
  const fields = rest.trim().split(/\s+/);
  const valueText = fields[0];
  if (valueText === undefined || valueText === '') return null;
  const value = parseValue(valueText);
  if (Number.isNaN(value) && valueText !== 'NaN') return null;
  return { name, labels, value };
}

/** Every sample of a scrape, in order, up to SAMPLES_MAX. */
export function parsePrometheus(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (samples.length >= SAMPLES_MAX) break;
    const sample = parseLine(line);
    if (sample !== null) samples.push(sample);
  }
  return samples;
}
