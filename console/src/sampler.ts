/**
 * Scrapes `/metrics` once a second for as long as the console is open, whichever view is
 * shown, so the Live view has its five minutes of history when it is opened. Listeners hear
 * each new point; a failed scrape is kept as the latest error and breaks the line.
 */
import type { Api, Refusal } from './api.js';
import { parsePrometheus } from './prometheus.js';
import { History, pointBetween, summarize, type Point, type Scrape } from './series.js';

export const SCRAPE_EVERY_MS = 1000;

export class LiveSampler {
  readonly history = new History();
  latest: Point | null = null;
  /** Refusals seen since the console opened, by reason (the node's counters). */
  refusalTotals: ReadonlyMap<string, number> = new Map();
  error: Refusal | null = null;
  private previous: Scrape | null = null;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private stopped = true;
  private readonly listeners = new Set<() => void>();

  constructor(private readonly api: Api) {}

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    void this.scrape();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  subscribe(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private async scrape(): Promise<void> {
    const answer = await this.api.metricsText();
    const atMs = Date.now();
    if (answer.ok) {
      const scrape = summarize(parsePrometheus(answer.value), atMs);
      const point = this.previous === null ? null : pointBetween(this.previous, scrape);
      this.previous = scrape;
      this.refusalTotals = scrape.refusals;
      this.error = null;
      if (point !== null) {
        this.latest = point;
        this.history.push(point);
      }
    } else {
      this.error = answer.refusal;
      this.previous = null;
    }
    for (const listener of this.listeners) listener();
    if (!this.stopped) this.timer = setTimeout(() => void this.scrape(), SCRAPE_EVERY_MS);
  }
}
