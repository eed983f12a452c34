/**
 * Writes the data directory of a single node (`n1`) that holds `keys` keys in a snapshot and
 * `tailEntries` single-put entries in its log after it: what `npm run bench:startup` starts a
 * node on. Everything is written by the node's own code (the machine, the snapshotter,
 * FileStorage: preallocated segments, checksummed records, the hard state file), so the
 * directory is the one a node would have left, only made faster than over HTTP:
 *
 *   index 1                 the empty entry a new leader appends (term 1)
 *   2 .. S                  puts of `keys` keys, `LOAD_OPS_PER_ENTRY` per entry (applied to
 *                           the machine only: the snapshot at S covers them, as after a
 *                           snapshot's log cleanup)
 *   snap/S                  the machine's snapshot at S, configuration {voters: [n1]}
 *   S+1 .. S+tailEntries    one put each, overwriting keys in a scattered order; the value
 *                           names its entry, so a read tells which entry it saw
 *   hardstate               term 1, voted for n1, commit index at the last entry: a node
 *                           must apply every tail entry before it serves (or, with
 *                           `committed: 'snapshot'`, at S, as a node's own stop leaves it).
 *
 * Bounded by its arguments; the caller owns (and removes) `dir`.
 */
import { performance } from 'node:perf_hooks';

import { bootstrapConfiguration } from '../host/core/raft/configuration.js';
import type { Entry, SnapshotMeta } from '../host/core/raft/types.js';
import { encodeCommand } from '../host/machine/codec.js';
import { DEFAULT_TENANT, type KvOp } from '../host/machine/commands.js';
import { StateMachine, type AppliedEntrySink } from '../host/machine/state-machine.js';
import { encodeEnvelope, type Origin } from '../host/node/envelope.js';
import { Snapshotter } from '../host/node/snapshotter.js';
import { FileStorage } from '../host/storage/file-storage.js';
import { HardStateFile } from '../host/storage/hard-state-file.js';

export const STARTUP_NODE_ID = 'n1';
export const STARTUP_NAMESPACE = 'startup';
const LOAD_OPS_PER_ENTRY = 256;
/** Entries handed to storage (and fsynced) at a time. */
const APPEND_BATCH = 4096;
/** Entries applied to the machine per crossing while loading. */
const LOAD_APPLY_BATCH = 64;
const VALUE_BYTES = 100;
/** Odd, and prime to any key count a run uses: the tail visits keys in a scattered order. */
const KEY_STRIDE = 2_654_435_761;
const TERM = 1;
const ENTRIES_MAX = 50_000_000;

export interface StartupDirOptions {
  readonly keys: number;
  readonly tailEntries: number;
  /** Stamp of index 1; later entries are 1 ms apart. Default: now minus one stamp per entry. */
  readonly startMs?: number;
  /**
   * The hard state's commit index: `last` (default) covers the whole log, so the node applies
   * it before it listens; `snapshot` is what a single node's own stop leaves (the commit index
   * is written with snapshots only), so it listens first and applies once elected.
   */
  readonly committed?: 'last' | 'snapshot';
}

export interface StartupDir {
  readonly snapshotIndex: number;
  readonly lastIndex: number;
  /** The key the last entry wrote, and the value it wrote (as the JSON a get answers). */
  readonly lastKey: string;
  readonly lastValue: string;
  /** The machine's digest at the last index, for a node's /health to be compared with. */
  readonly digest: string;
  readonly snapshotBytes: number;
  readonly ms: { readonly load: number; readonly snapshot: number; readonly tail: number };
}

export function startupKey(n: number): string {
  return `key-${String(n).padStart(8, '0')}`;
}

/** The value entry `index` writes: a JSON string of VALUE_BYTES naming the entry. */
export function startupValue(index: number): string {
  const tag = `e${index}-`;
  return tag + 'v'.repeat(Math.max(0, VALUE_BYTES - tag.length));
}

function putOp(key: string, value: string): KvOp {
  return { op: 'put', sentAs: 'put', ns: STARTUP_NAMESPACE, key,
    valueJson: JSON.stringify(value), expiry: { kind: 'forever' }, expect: null,
    required: false };
}

function callEntry(origin: Origin, index: number, timeMs: number, ops: KvOp[]): Entry {
  const command = encodeCommand({ kind: 'call', flags: { requireGrant: false },
    call: { tenant: DEFAULT_TENANT, shape: 'batch', ops, readBytesCeiling: 4 << 20 } });
  // The envelope's seq is the proposal number: one per entry, from 1, per incarnation.
  return { term: TERM, index, timeMs, type: 'normal',
    data: encodeEnvelope(origin, index - 1, command) };
}

const IGNORE_OUTCOMES: AppliedEntrySink = {
  answer: () => undefined,
  done: () => undefined,
  admin: () => undefined,
  swept: () => undefined,
  checkpoint: () => undefined,
  invalid: (entryIndex, detail) => {
    throw new Error(`startup dir: entry ${entryIndex} refused by the machine: ${detail}`);
  },
};

/** Entries 1..S applied to `machine`: the empty entry, then every key once. */
function load(machine: StateMachine, origin: Origin, keys: number, stampOf: (i: number) => number):
  number {
  machine.applyEntries([{ term: TERM, index: 1, timeMs: stampOf(1), type: 'empty',
    data: new Uint8Array(0) }], IGNORE_OUTCOMES);
  let index = 1;
  let batch: Entry[] = [];
  for (let first = 0; first < keys; first += LOAD_OPS_PER_ENTRY) {
    const ops: KvOp[] = [];
    for (let n = first; n < Math.min(first + LOAD_OPS_PER_ENTRY, keys); n++) {
      ops.push(putOp(startupKey(n), startupValue(0)));
    }
    index++;
    batch.push(callEntry(origin, index, stampOf(index), ops));
    if (batch.length === LOAD_APPLY_BATCH) {
      machine.applyEntries(batch, IGNORE_OUTCOMES);
      batch = [];
    }
  }
  machine.applyEntries(batch, IGNORE_OUTCOMES);
  return index;
}

function assertCounts(options: StartupDirOptions): void {
  const { keys, tailEntries } = options;
  if (!Number.isSafeInteger(keys) || keys < 1 || keys > ENTRIES_MAX ||
    !Number.isSafeInteger(tailEntries) || tailEntries < 1 || tailEntries > ENTRIES_MAX) {
    throw new RangeError(`startup dir: keys and tail entries must be 1..${ENTRIES_MAX}`);
  }
}

/** Writes the directory described in the file comment into `dir` (empty or absent). */
export async function buildStartupDir(dir: string, options: StartupDirOptions):
  Promise<StartupDir> {
  assertCounts(options);
  const { keys, tailEntries } = options;
  const loadEntries = 1 + Math.ceil(keys / LOAD_OPS_PER_ENTRY);
  const t0Ms = options.startMs ?? Date.now() - (loadEntries + tailEntries + 1);
  const stampOf = (index: number): number => t0Ms + index;
  const origin: Origin = { nodeId: STARTUP_NODE_ID, incarnation: 0x5eed_0001 };
  const machine = StateMachine.create();
  machine.setOrigin(STARTUP_NODE_ID, origin.incarnation);
  const started = performance.now();
  const snapshotIndex = load(machine, origin, keys, stampOf);
  const loaded = performance.now();

  const storage = new FileStorage(dir);
  await storage.recover();
  storage.setHardState({ term: TERM, votedFor: STARTUP_NODE_ID, commitIndex: 0 });
  await storage.sync();
  const meta: SnapshotMeta = { index: snapshotIndex, term: TERM, timeMs: stampOf(snapshotIndex),
    ...bootstrapConfiguration([STARTUP_NODE_ID],
      [{ id: STARTUP_NODE_ID, address: '127.0.0.1:0' }]) };
  const snapshot = await new Snapshotter(machine, storage).take(meta);
  if (snapshot === null) throw new Error('startup dir: the snapshot was not installed');
  const snapshotted = performance.now();

  const lastIndex = snapshotIndex + tailEntries;
  let lastKey = '';
  for (let from = snapshotIndex + 1; from <= lastIndex; from += APPEND_BATCH) {
    const batch: Entry[] = [];
    for (let index = from; index < Math.min(from + APPEND_BATCH, lastIndex + 1); index++) {
      lastKey = startupKey((index * KEY_STRIDE) % keys);
      batch.push(callEntry(origin, index, stampOf(index), [putOp(lastKey,
        startupValue(index))]));
    }
    storage.append(batch);
    await storage.sync();
    machine.applyEntries(batch, IGNORE_OUTCOMES);
  }
  await storage.close();
  const hardState = new HardStateFile(dir);
  await hardState.read();
  await hardState.write({ term: TERM, votedFor: STARTUP_NODE_ID,
    commitIndex: options.committed === 'snapshot' ? snapshotIndex : lastIndex });
  await hardState.close();
  return { snapshotIndex, lastIndex, lastKey, lastValue: startupValue(lastIndex),
    digest: machine.digest(), snapshotBytes: snapshot.dataBytes,
    ms: { load: loaded - started, snapshot: snapshotted - loaded,
      tail: performance.now() - snapshotted } };
}
