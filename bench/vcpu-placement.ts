/**
 * Where a node's main thread ran during a row, and which vCPU took the device interrupts
 * meanwhile, read from Linux's /proc. A lone put's fdatasync is 30 to 60 µs slower at p50
 * when the thread sleeps on a vCPU other than the one the disk interrupts
 * (docs/performance.md, "A lone put's fsync, and the vCPU its thread sleeps on"), so the
 * one-connection verdict of a `bench:node` run is read with its placement beside it.
 * The parsers are pure; `PlacementSampler` reads /proc and says nothing where it is absent.
 */
import { readFileSync } from 'node:fs';

/** The vCPU a thread last ran on: field 39 of /proc/<pid>/task/<tid>/stat, or -1. */
export function lastCpuOf(statText: string): number {
  // The command name (field 2) is in parentheses and may hold spaces or parentheses itself.
  const close = statText.lastIndexOf(')');
  if (close < 0) return -1;
  const fields = statText.slice(close + 2).trim().split(/\s+/);
  // fields[0] is field 3 (the state), so field 39 is fields[36].
  const cpu = Number(fields[36]);
  return Number.isInteger(cpu) && cpu >= 0 ? cpu : -1;
}

/** Per-CPU counts of each numbered (device) interrupt line of /proc/interrupts, by name. */
export function deviceInterrupts(text: string): Map<string, number[]> {
  const lines = text.split('\n');
  const cpuCount = (lines[0] ?? '').trim().split(/\s+/).filter((c) => /^CPU\d+$/.test(c)).length;
  const byName = new Map<string, number[]>();
  if (cpuCount === 0) return byName;
  for (const line of lines.slice(1)) {
    const match = /^\s*(\d+):\s+(.*)$/.exec(line);
    if (match === null) continue;
    const parts = match[2]!.trim().split(/\s+/);
    const counts = parts.slice(0, cpuCount).map(Number);
    if (counts.length < cpuCount || counts.some((n) => !Number.isSafeInteger(n))) continue;
    // The device's name is the last word (for example `virtio1-req.0` or `nvme0q3`).
    const name = `${match[1]}: ${parts.at(-1) ?? ''}`;
    byName.set(name, counts);
  }
  return byName;
}

export interface BusiestInterrupt {
  readonly name: string;
  /** How many of this line's interrupts each CPU took between the two readings. */
  readonly perCpu: readonly number[];
}

/** The device interrupt line that grew the most between two readings, or null if none grew. */
export function busiestInterrupt(before: Map<string, number[]>,
  after: Map<string, number[]>): BusiestInterrupt | null {
  let best: BusiestInterrupt | null = null;
  let bestTotal = 0;
  for (const [name, counts] of after) {
    const earlier = before.get(name);
    if (earlier === undefined || earlier.length !== counts.length) continue;
    const perCpu = counts.map((n, cpu) => Math.max(0, n - earlier[cpu]!));
    const total = perCpu.reduce((a, b) => a + b, 0);
    if (total > bestTotal) {
      best = { name, perCpu };
      bestTotal = total;
    }
  }
  return best;
}

/**
 * A sentence for a row, in lower case to follow "During the put row,": on which vCPUs the
 * thread was seen, and which vCPU took most of the busiest device line's interrupts. Empty
 * when nothing was sampled.
 */
export function placementSentence(cpuSamples: readonly number[],
  interrupt: BusiestInterrupt | null): string {
  const seen = cpuSamples.filter((cpu) => cpu >= 0);
  if (seen.length === 0) return '';
  const counts = new Map<number, number>();
  for (const cpu of seen) counts.set(cpu, (counts.get(cpu) ?? 0) + 1);
  const where = [...counts].sort((a, b) => b[1] - a[1] || a[0] - b[0])
    .map(([cpu, n]) => `vCPU ${cpu} in ${n}`).join(', ');
  let sentence = `the node's main thread was last on ${where} of ${seen.length} samples`;
  if (interrupt !== null) {
    const total = interrupt.perCpu.reduce((a, b) => a + b, 0);
    const top = interrupt.perCpu.indexOf(Math.max(...interrupt.perCpu));
    const share = Math.round((100 * interrupt.perCpu[top]!) / total);
    sentence += `; the device line that interrupted most meanwhile (${interrupt.name}, ` +
      `${total} interrupts) went to vCPU ${top} (${share}%)`;
  }
  return `${sentence}.`;
}

const SAMPLE_EVERY_MS = 100;

/** Samples a process's main thread's vCPU while a row runs. Silent without /proc. */
export class PlacementSampler {
  private readonly samples: number[] = [];
  private readonly interruptsBefore: Map<string, number[]>;
  private readonly timer: NodeJS.Timeout;

  constructor(private readonly pid: number) {
    this.interruptsBefore = deviceInterrupts(readOr('/proc/interrupts'));
    this.timer = setInterval(() => {
      this.samples.push(lastCpuOf(readOr(`/proc/${this.pid}/task/${this.pid}/stat`)));
    }, SAMPLE_EVERY_MS);
    // A row that throws never reaches `stop`; the sampler must not keep the bench alive then.
    this.timer.unref();
  }

  /** Stops sampling and returns the sentence for the row ('' where /proc says nothing). */
  stop(): string {
    clearInterval(this.timer);
    const after = deviceInterrupts(readOr('/proc/interrupts'));
    return placementSentence(this.samples, busiestInterrupt(this.interruptsBefore, after));
  }
}

function readOr(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return '';
  }
}
