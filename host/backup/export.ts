/**
 * `hivekv export`'s logic: the dump (dump-format.ts) of a machine snapshot taken at one
 * applied index, produced as it streams. Two sources give that snapshot:
 *
 * - a data directory, replayed to the index asked for through the same module
 *   (host/replay/), then snapshotted by that machine in slices (`exportDataDir`);
 * - a live node's newest durable snapshot file (`GET /api/v1/system/export`,
 *   host/http/operator.ts), taken at one applied index while writes go on.
 *
 * Bounded: one snapshot slice or file chunk and one batch of lines in memory at a time.
 */
import { setImmediate as nextTurn } from 'node:timers/promises';
import type { StateMachine } from '../machine/state-machine.js';
import { LegacySnapshotSkipper } from '../node/envelope.js';
import type { DataDir } from '../replay/data-dir.js';
import { Replayer, ReplayError } from '../replay/replay.js';
import {
  endLine, headerLine, idempotencyLine, rowLine, tenantField, tenantLine,
} from './dump-format.js';
import { SnapshotItems } from './snapshot-items.js';

/** Characters of lines gathered before they are handed on as one chunk. */
export const DUMP_BATCH_CHARS = 256 * 1024;
/** Bytes of machine snapshot cut per slice when exporting a replayed state. */
const EXPORT_SLICE_BYTES = 1024 * 1024;

/** What a dump's header says beside what the snapshot holds. */
export interface DumpFacts {
  readonly term: number;
  readonly digest: string;
  readonly source: 'data' | 'node';
  readonly exportedAt?: Date;
}

/**
 * The dump of the snapshot streamed in `chunks`, as text chunks of about DUMP_BATCH_CHARS.
 * Between batches it waits for the next event-loop turn, so a node streaming an export keeps
 * serving. Throws (mid-stream) when the snapshot bytes are not whole: the dump then lacks its
 * end line, which import refuses.
 */
export async function* dumpText(chunks: AsyncIterable<Uint8Array>, facts: DumpFacts):
  AsyncGenerator<string> {
  const items = await SnapshotItems.open(chunks);
  const head = items.head;
  let batch = headerLine(head, { term: facts.term, digest: facts.digest, source: facts.source,
    exportedAt: facts.exportedAt ?? new Date() });
  const tenantFields = head.tenants.map((t) => tenantField(t.name));
  for (const tenant of head.tenants) batch += tenantLine(tenant);
  for (const record of head.idempotency) {
    batch += idempotencyLine(record);
    if (batch.length >= DUMP_BATCH_CHARS) {
      yield batch;
      batch = '';
      await nextTurn();
    }
  }
  let rows = 0;
  for await (const row of items.rows()) {
    batch += rowLine(tenantFields[row.tenantId]!, row);
    rows++;
    if (batch.length >= DUMP_BATCH_CHARS) {
      yield batch;
      batch = '';
      await nextTurn();
    }
  }
  yield batch + endLine(head.tenants.length, head.idempotency.length, rows);
}

/** The machine's bytes of a stored snapshot (an earlier release's prefix skipped). */
export async function* machineBytesOf(fileChunks: AsyncIterable<Uint8Array>):
  AsyncGenerator<Uint8Array> {
  const legacy = new LegacySnapshotSkipper();
  for await (const chunk of fileChunks) {
    const part = legacy.take(chunk);
    if (part.length > 0) yield part;
  }
}

/**
 * Opens a snapshot of the machine's state now: its size, and its slices (the snapshot is
 * closed once they are all out, or when the consumer stops early). Never whole in memory.
 */
export function openMachineSnapshot(machine: StateMachine):
  { readonly bytes: number; readonly slices: Generator<Uint8Array> } {
  const bytes = machine.snapshotBegin();
  function* slices(): Generator<Uint8Array> {
    try {
      for (let slice = machine.snapshotNext(EXPORT_SLICE_BYTES); slice.length > 0;
        slice = machine.snapshotNext(EXPORT_SLICE_BYTES)) {
        yield slice;
      }
    } finally {
      machine.snapshotAbort();
    }
  }
  return { bytes, slices: slices() };
}

async function* fromSync<T>(items: Iterable<T>): AsyncGenerator<T> {
  for (const item of items) yield item;
}

/**
 * The dump of a data directory's state at `at` (default: the last index its log holds),
 * rebuilt by replay. Rejects with ReplayError when the directory cannot give that index,
 * StorageCorruptionError on a damaged log (file and offset).
 */
export async function exportDataDir(data: DataDir, at?: number):
  Promise<{ index: number; text: AsyncGenerator<string> }> {
  const replayer = await Replayer.start(data, at === undefined ? {} : { to: at });
  let term = replayer.startTerm;
  await replayer.run(() => false, (_index, lastTerm) => {
    term = lastTerm;
  });
  const machine = replayer.machine;
  if (machine.appliedIndex === 0) {
    throw new ReplayError('the directory holds no state yet (nothing applied): nothing to ' +
      'export');
  }
  const facts = { term, digest: machine.digest(), source: 'data' as const };
  const slices = openMachineSnapshot(machine).slices;
  return { index: machine.appliedIndex, text: dumpText(fromSync(slices), facts) };
}
