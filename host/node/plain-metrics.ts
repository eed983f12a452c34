/**
 * Counters and histograms for the hot path, kept as plain numbers and arrays and turned into
 * Prometheus text only when /metrics is scraped. Every call updates a request counter and a
 * latency histogram: through prom-client that meant hashing a label set per update; here it
 * is two map lookups by strings the caller already holds, and an increment.
 *
 * Output is the Prometheus text format 0.0.4, the same series prom-client would write
 * (`_bucket` with cumulative counts and `le="+Inf"`, `_sum`, `_count`), so dashboards and
 * the console read it unchanged. Label values must already be bounded by the caller.
 */

/** Escapes a label value (text format 0.0.4: backslash, double quote, newline). */
function labelValue(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}

function labelText(names: readonly string[], values: readonly string[]): string {
  let text = '';
  for (let i = 0; i < names.length; i++) {
    text += (i === 0 ? '' : ',') + names[i] + '="' + labelValue(values[i] ?? '') + '"';
  }
  return text;
}

/** Formats a number as Prometheus does: integers plainly, `+Inf` for infinity. */
function numberText(value: number): string {
  if (value === Number.POSITIVE_INFINITY) return '+Inf';
  return String(value);
}

/** One histogram series: counts per bucket (not cumulative), sum and count. */
class HistogramSeries {
  readonly counts: Float64Array;
  sum = 0;
  count = 0;

  constructor(readonly labels: readonly string[], bucketCount: number) {
    this.counts = new Float64Array(bucketCount + 1);
  }
}

/** A histogram family with fixed buckets; series are created on first use. */
export class PlainHistogram {
  private readonly series = new Map<string, HistogramSeries>();
  private readonly unlabelled: HistogramSeries | null;

  constructor(
    readonly name: string,
    readonly help: string,
    private readonly buckets: readonly number[],
    private readonly labelNames: readonly string[] = [],
  ) {
    this.unlabelled = labelNames.length === 0 ? new HistogramSeries([], buckets.length) : null;
  }

  /** The series of these label values (one per label name; bounded by the caller). */
  seriesFor(...values: string[]): HistogramSeries {
    if (this.unlabelled !== null) return this.unlabelled;
    const key = values.join('\u0000');
    let series = this.series.get(key);
    if (series === undefined) {
      series = new HistogramSeries(values, this.buckets.length);
      this.series.set(key, series);
    }
    return series;
  }

  /** Adds one observation to `series`; a value that is not a finite number >= 0 is dropped. */
  observe(series: HistogramSeries, value: number): void {
    if (!(value >= 0) || !Number.isFinite(value)) return;
    const buckets = this.buckets;
    let i = 0;
    while (i < buckets.length && value > (buckets[i] as number)) i++;
    series.counts[i]! += 1;
    series.sum += value;
    series.count += 1;
  }

  render(): string {
    let text = `# HELP ${this.name} ${this.help}\n# TYPE ${this.name} histogram\n`;
    const all = this.unlabelled !== null ? [this.unlabelled] : [...this.series.values()];
    for (const series of all) {
      const base = labelText(this.labelNames, series.labels);
      const sep = base === '' ? '' : ',';
      let cumulative = 0;
      for (let i = 0; i <= this.buckets.length; i++) {
        cumulative += series.counts[i] ?? 0;
        const le = i < this.buckets.length ? numberText(this.buckets[i] as number) : '+Inf';
        text += `${this.name}_bucket{le="${le}"${sep}${base}} ${cumulative}\n`;
      }
      const braces = base === '' ? '' : `{${base}}`;
      text += `${this.name}_sum${braces} ${series.sum}\n${this.name}_count${braces} ` +
        `${series.count}\n`;
    }
    return text;
  }
}

/** A counter family; series are created on first use. */
export class PlainCounter {
  private readonly values = new Map<string, { labels: readonly string[]; value: number }>();

  constructor(
    readonly name: string,
    readonly help: string,
    private readonly labelNames: readonly string[],
  ) {}

  inc(by: number, ...labels: string[]): void {
    const key = labels.join('\u0000');
    const slot = this.values.get(key);
    if (slot === undefined) this.values.set(key, { labels, value: by });
    else slot.value += by;
  }

  render(): string {
    let text = `# HELP ${this.name} ${this.help}\n# TYPE ${this.name} counter\n`;
    for (const { labels, value } of this.values.values()) {
      const base = labelText(this.labelNames, labels);
      text += `${this.name}${base === '' ? '' : `{${base}}`} ${value}\n`;
    }
    return text;
  }
}
