/**
 * The progress line: target, workload, seconds left in the point and, roughly, in the suite.
 * On a terminal it is redrawn in place every second; elsewhere (CI logs, tests) each point
 * prints one line when it starts and one with its result.
 */
import type { PointResult } from './run.js';

const REDRAW_MS = 1000;

const fmt = (n: number, digits = 0): string => n.toLocaleString('en-US',
  { maximumFractionDigits: digits, minimumFractionDigits: digits });

export class Progress {
  private readonly startedMs = Date.now();
  private status = '';
  private pointEndsMs = 0;
  private timer: NodeJS.Timeout | null = null;
  private readonly tty = process.stderr.isTTY === true;

  constructor(private readonly estimateSeconds: number) {}

  private suiteLeft(): string {
    const left = Math.max(0, this.estimateSeconds - (Date.now() - this.startedMs) / 1000);
    return left >= 60 ? `~${Math.ceil(left / 60)} min left in the suite`
      : `~${Math.ceil(left)} s left in the suite`;
  }

  private draw(): void {
    if (!this.tty || this.status === '') return;
    const left = Math.max(0, Math.ceil((this.pointEndsMs - Date.now()) / 1000));
    process.stderr.write(`\r\x1b[K${this.status} · ${left} s left · ${this.suiteLeft()}`);
  }

  /** A line of its own, above the progress line. */
  line(text: string): void {
    if (this.tty) process.stderr.write('\r\x1b[K');
    process.stderr.write(`${text}\n`);
    this.draw();
  }

  target(name: string): void {
    this.line(`== ${name}`);
  }

  point(target: string, workload: string, connections: number, mode: string,
    seconds: number): void {
    this.status = `${target} · ${workload} · ${connections} conn · ${mode}`;
    this.pointEndsMs = Date.now() + seconds * 1000;
    if (!this.tty) {
      process.stderr.write(`${this.status} · ${Math.ceil(seconds)} s · ${this.suiteLeft()}\n`);
    }
    this.timer ??= setInterval(() => this.draw(), REDRAW_MS);
    this.draw();
  }

  done(p: PointResult): void {
    const f = p.figures;
    const failed = p.checks.filter((c) => !c.ok).map((c) => c.name);
    this.status = '';
    this.line(`  ${p.target} ${p.workload} ${p.connections} conn ${p.mode === 'open'
      ? `open at ${fmt(p.offeredPerSecond ?? 0)}/s` : 'closed'}: ${fmt(f.opsPerSecond)} ops/s, ` +
      `p50 ${fmt(f.latency.p50Ms, 2)} ms, p99 ${fmt(f.latency.p99Ms, 2)} ms; generator ` +
      `${fmt(f.generatorCores, 2)} cores${f.serverCores === null ? '' : `, server ` +
      `${fmt(f.serverCores, 2)}`}; checks ${failed.length === 0 ? 'ok' :
        `FAILED: ${failed.join(', ')}`}${f.saturated ? '; rate not sustained' : ''}`);
  }

  finish(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    if (this.tty) process.stderr.write('\r\x1b[K');
  }
}
