/**
 * The run's story: one compact line per event (`  1234.567 n2 crash`), printed only when
 * tracing is on, so a failing seed replayed with `--trace` reads from the first event to the
 * violated invariant. Off, a call costs one branch; callers build text only when `on`.
 */

export class Trace {
  private readonly lines: string[] = [];

  /** `sink` receives every line; null keeps them in memory (tests read `lines`). */
  constructor(readonly on: boolean, private readonly sink: ((line: string) => void) | null,
    private readonly nowUs: () => number) {}

  /** Records one line for `who` (a node id, a client, `net`, `sim`). */
  log(who: string, text: string): void {
    if (!this.on) return;
    const ms = (this.nowUs() / 1000).toFixed(3).padStart(10);
    const line = `${ms} ${who.padEnd(4)} ${text}`;
    if (this.sink !== null) this.sink(line);
    else this.lines.push(line);
  }

  recorded(): readonly string[] {
    return this.lines;
  }
}
