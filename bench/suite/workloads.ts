/**
 * The workloads, defined once for every target: what each logical operation is, which keys it
 * touches, and with what value. A logical operation may take several requests (a YCSB
 * read-modify-write is a read and a write; etcd's bounded increment is a compare-and-swap
 * loop); its latency runs from its intended start to its last answer.
 */

/** Logical operations; every target runs each of them (see `codecs.ts` for the spelling). */
export type OpKind = 'get' | 'put' | 'batch' | 'cas' | 'incr' | 'rmw';

export interface Workload {
  readonly name: string;
  /** One sentence for the report. */
  readonly title: string;
  /** Share of each logical operation; the shares add up to 1. */
  readonly mix: Readonly<Partial<Record<OpKind, number>>>;
  readonly distribution: 'uniform' | 'zipfian';
  /** How many distinct keys the workload draws from. */
  readonly keyCount: number;
  /**
   * `preloaded`: the suite's 100k keys, written before the first workload; `fresh`: keys of
   * this run alone, absent at its start (CAS creates them with expect 0; counters start at 0).
   */
  readonly space: 'preloaded' | 'fresh';
  /** For `incr`: the bound the increment must not pass (the rate limiter's limit). */
  readonly incrMax: number;
  /** Part of the short `--quick` set. */
  readonly quick: boolean;
}

export const KEY_COUNT = 100_000;
/** Puts in one batch call. */
export const BATCH_SIZE = 16;
/** Value bytes as stored (hivekv stores a JSON string: 98 characters and its quotes). */
export const VALUE_BYTES = 100;
/** The contended rate limiter: this many hot keys, each admitting at most this many. */
export const HOT_KEYS = 8;
export const HOT_KEY_LIMIT = 20_000;
/** The counters' lifetime, set on creation (hivekv `ttlSeconds`, Redis `EXPIRE`). */
export const COUNTER_TTL_SECONDS = 3600;
/** No-limit counters: a bound no run reaches, so every increment is admitted. */
const UNREACHED_MAX = 1_000_000_000;

const base = { distribution: 'uniform', keyCount: KEY_COUNT, space: 'preloaded',
  incrMax: UNREACHED_MAX, quick: false } as const;

function ycsb(letter: 'a' | 'b' | 'c' | 'f', distribution: 'uniform' | 'zipfian'): Workload {
  const mixes = { a: { get: 0.5, put: 0.5 }, b: { get: 0.95, put: 0.05 }, c: { get: 1 },
    f: { get: 0.5, rmw: 0.5 } } as const;
  const words = { a: '50% reads, 50% updates', b: '95% reads, 5% updates', c: 'reads only',
    f: '50% reads, 50% read-modify-writes (a read, then a write of the key)' } as const;
  return { ...base, name: `ycsb-${letter}-${distribution}`, distribution, mix: mixes[letter],
    title: `YCSB ${letter.toUpperCase()}: ${words[letter]}, ${distribution} keys`,
    quick: letter === 'a' && distribution === 'zipfian' };
}

export const WORKLOADS: readonly Workload[] = [
  { ...base, name: 'put', mix: { put: 1 }, quick: true,
    title: 'put a 100-byte value to a random key of 100k' },
  { ...base, name: 'get', mix: { get: 1 }, quick: true,
    title: 'read a random key of 100k (linearizable where the target offers it)' },
  { ...base, name: 'cas', mix: { cas: 1 }, space: 'fresh', quick: true,
    title: 'compare-and-swap on the version the last answer gave (0: create)' },
  { ...base, name: 'incr', mix: { incr: 1 }, space: 'fresh', quick: true,
    title: 'bounded increment of a random counter of 100k (the bound is never reached)' },
  { ...base, name: 'batch16', mix: { batch: 1 }, quick: true,
    title: `${BATCH_SIZE} puts in one call (one log entry, one etcd txn, one Redis MSET)` },
  ...(['a', 'b', 'c', 'f'] as const).flatMap((letter) =>
    [ycsb(letter, 'uniform'), ycsb(letter, 'zipfian')]),
  { ...base, name: 'ratelimit-hot', mix: { incr: 1 }, keyCount: HOT_KEYS, space: 'fresh',
    incrMax: HOT_KEY_LIMIT, quick: false,
    title: `contended rate limiter: ${HOT_KEYS} hot counters, each admitting ` +
      `${HOT_KEY_LIMIT.toLocaleString('en-US')}` },
];

export function workloadNamed(name: string): Workload {
  const found = WORKLOADS.find((w) => w.name === name);
  if (found === undefined) {
    throw new Error(`unknown workload "${name}" (one of: ${WORKLOADS.map((w) => w.name)
      .join(', ')})`);
  }
  return found;
}

/** Operations one logical op carries (a batch is 16 puts). */
export function opsPerLogical(kind: OpKind): number {
  return kind === 'batch' ? BATCH_SIZE : 1;
}

/** True when the workload writes, so its writes must be read back afterwards. */
export function writes(w: Workload): boolean {
  return (w.mix.put ?? 0) + (w.mix.batch ?? 0) + (w.mix.rmw ?? 0) > 0;
}

/** A value of `bytes` characters carrying `tag` (which run wrote it) and a number. */
export function makeValue(tag: string, n: number, bytes: number): string {
  const head = `${tag}:${n}:`;
  return head + 'x'.repeat(Math.max(0, bytes - head.length));
}

/** The number a value made by `makeValue` carries, or NaN. */
export function valueNumber(value: string | null): number {
  if (value === null) return NaN;
  const first = value.indexOf(':');
  const second = value.indexOf(':', first + 1);
  return first < 0 || second < 0 ? Number(value) : Number(value.slice(first + 1, second));
}

/** The tag a value made by `makeValue` carries. */
export function valueTag(value: string | null): string | null {
  if (value === null) return null;
  const first = value.indexOf(':');
  return first < 0 ? null : value.slice(0, first);
}

/**
 * YCSB's scrambled Zipfian choice (Gray et al., "Quickly generating billion-record synthetic
 * databases", with YCSB's constant 0.99): popular items are spread over the key space by an
 * FNV-1a hash, so the hot keys are not neighbours.
 */
export function zipfianChooser(items: number, random: () => number, theta = 0.99):
  () => number {
  let zetaN = 0;
  for (let i = 1; i <= items; i++) zetaN += 1 / Math.pow(i, theta);
  const zeta2 = 1 + 1 / Math.pow(2, theta);
  const alpha = 1 / (1 - theta);
  const eta = (1 - Math.pow(2 / items, 1 - theta)) / (1 - zeta2 / zetaN);
  return () => {
    const u = random();
    const uz = u * zetaN;
    let rank: number;
    if (uz < 1) rank = 0;
    else if (uz < zeta2) rank = 1;
    else rank = Math.floor(items * Math.pow(eta * u - eta + 1, alpha));
    return fnv1a32(Math.min(rank, items - 1)) % items;
  };
}

function fnv1a32(value: number): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < 4; i++) {
    hash ^= (value >>> (i * 8)) & 0xff;
    hash = Math.imul(hash, 0x01000193);
  }
  return hash >>> 0;
}
