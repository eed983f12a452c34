/**
 * The micro benchmarks' figures as JSON for the suite (`bench/suite/micro.ts`): when
 * `BENCH_JSON` names a file, a micro benchmark writes its rows there beside its usual table.
 */
import { writeFileSync } from 'node:fs';

export interface MicroRow {
  readonly name: string;
  readonly perSecond: number;
  readonly unit: string;
  readonly p50us: number | null;
  readonly p99us: number | null;
  readonly rmePercent: number | null;
}

/** Writes `rows` and `notes` to `$BENCH_JSON` when it is set; does nothing otherwise. */
export function writeMicroJson(rows: readonly MicroRow[], notes: readonly string[] = []): void {
  const path = process.env['BENCH_JSON'];
  if (path === undefined || path === '') return;
  writeFileSync(path, JSON.stringify({ rows, notes }, null, 2));
}
