/**
 * `hivekv/replay`: open a node's data directory read-only and replay it through the same
 * WebAssembly module the node runs (docs/replay.md).
 *
 *   import { openDataDir, replay } from 'hivekv/replay';
 *   const data = await openDataDir('/var/lib/hivekv');
 *   for await (const { entry, outcome, digest } of replay(data)) { ... }
 */
export {
  DataDir, DataDirError, openDataDir, type KindTally, type LogSummary, type SegmentInfo,
  type SnapshotInfo, type TermRun,
} from './data-dir.js';
export { describeEntry, entryCommand, type EntryDescription } from './describe.js';
export { diffDataDirs, sameEntry, type DiffResult, type DiffSide } from './diff.js';
export {
  replay, Replayer, ReplayError, type EntryOutcome, type ReplayedEntry, type ReplayOptions,
  type ReplaySummary,
} from './replay.js';
export {
  getAt, keyHistory, readKey, type GetAt, type GetResult, type HistoryLine, type KeyRef,
} from './time-travel.js';
export { StorageCorruptionError } from '../storage/storage.js';
export type { Entry, HardState, SnapshotMeta } from '../core/raft/types.js';
