/**
 * The KV state machine as the host sees it: loads build/hivekv.wasm once per process and
 * wraps one instance per StateMachine with typed calls. This is the only file that touches
 * WebAssembly.*. It never reads a clock: entry times come from the log, read times from the
 * caller. A trap inside the machine surfaces as MachineTrapError (always a bug: drop the
 * instance and rebuild it from snapshot plus log). Views of wasm memory are re-created after
 * every call because a memory grow detaches them.
 */
import { readFileSync, existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  ByteReader, byteViewsOf, ByteWriter, decodeApplyOutput, readAnswer, readAnswerHeader,
  readApplyOutcome, writeCall, type AnswerHeader, type ByteViews,
} from './codec.js';
import type {
  ApplyOutcome, CallAnswer, CheckpointOutcome, KvCall, QuotaSettings, TenantUsage,
} from './commands.js';
import {
  ENTRY_EMPTY, ENTRY_NORMAL, LIMIT_NONE_WIRE, NEXT_EXPIRY_NONE, OUT_CALL, OUT_INVALID,
  SAFE_INTEGER_MAX,
} from './abi.js';
import type { Entry } from '../core/raft/types.js';
import {
  decodeParseOutput, frameBytesMax, writeRequestFrame, type ParseOutcome, type RequestFrame,
  type RequestLimits,
} from './request.js';

/** The wasm trapped (abort or unreachable): always a bug in the machine or the wrapper. */
export class MachineTrapError extends Error {
  override readonly name = 'MachineTrapError';
}

/** How far up from this file we look for the directory holding package.json. */
const PACKAGE_ROOT_SEARCH_DEPTH = 8;
/** First size asked of the input region for a read call, in bytes. */
const READ_INPUT_BYTES_INITIAL = 4096;
/** Largest slice `snapshotNext` asks for (the machine caps it at 64 MiB as well). */
export const SNAPSHOT_SLICE_BYTES_MAX = 64 * 1024 * 1024;

/**
 * The slice of the WebAssembly JS API this file uses, typed here because the project's lib
 * (ES2022 + node) does not declare the WebAssembly namespace.
 */
export interface WasmModule { readonly __wasmModule?: never }
interface WasmApi {
  Module: (new (bytes: Uint8Array) => WasmModule) & {
    imports(m: WasmModule): Array<{ module: string; name: string; kind: string }>;
  };
  Instance: new (m: WasmModule, imports: object) => { exports: unknown };
  RuntimeError: new (message?: string) => Error;
}
export const Wasm: WasmApi = (globalThis as unknown as { WebAssembly: WasmApi }).WebAssembly;

/**
 * Receives, in log order, what `applyEntries` decided about each entry. Views passed to it
 * are into wasm memory and valid only during the call.
 */
/** See `StateMachine.idempotencyStats`. */
export interface IdempotencyStats {
  readonly records: number;
  readonly bytes: number;
  readonly evictions: number;
  readonly replays: number;
}

export interface AppliedEntrySink {
  /** This node proposed the call at `seq`: its answer, ready to send. */
  answer(seq: number, header: AnswerHeader, body: Uint8Array): void;
  /** This node proposed a non-call entry (sweep, admin) at `seq`; it applied. */
  done(seq: number): void;
  /** A pause or quota row changed. */
  admin(): void;
  swept(removedKeys: number): void;
  /** A checkpoint entry (at `entryIndex`) compared the leader's digest with this state's. */
  checkpoint(entryIndex: number, outcome: CheckpointOutcome): void;
  /** The machine refused the entry's command: a bug in the host that proposed it. */
  invalid(entryIndex: number, detail: string): void;
}


/** Takes a read's answer as a view of wasm memory, or the machine's refusal of the call. */
export interface AnswerSink {
  answered(header: AnswerHeader, body: Uint8Array): void;
  refused(detail: string): void;
}

/** Bytes `applyEntries` frames around each entry's data. */
const ENTRY_FRAME_BYTES = 8 + 8 + 1 + 4;

interface Exports {
  memory: { readonly buffer: ArrayBuffer };
  inputRegion(bytes: number): number;
  outputRegion(): number;
  apply(len: number, indexLo: number, indexHi: number, timeLo: number, timeHi: number): number;
  applyEntries(len: number): number;
  setOrigin(len: number, incarnation: number): void;
  read(len: number, nowLo: number, nowHi: number): number;
  snapshotBegin(): number;
  snapshotNext(maxBytes: number): number;
  snapshotAbort(): void;
  restoreBegin(): number;
  restoreChunk(len: number): number;
  restoreEnd(): number;
  restoreAbort(): void;
  clearState(): void;
  stateBytes(): number;
  stateBytesRecount(): number;
  digest(): number;
  digestRecount(): number;
  meta(): number;
  queryTenant(len: number): number;
  tenantsUsage(maxTenants: number): number;
  liveKeyCount(): number;
  nextExpiryMs(): number;
  isPaused(): number;
  structureBytes(): number;
  keyIndexCheck(): number;
  idempotencyStats(): number;
  setRequestLimits(maxValueBytes: number, maxKeyBytes: number, maxOpsPerCall: number,
    maxKeysPerCall: number, prefixLimit: number, maxReadBytesLo: number,
    maxReadBytesHi: number): number;
  parseRequest(len: number): number;
  setGrowthBudget(lo: number, hi: number): void;
}

let compiled: WasmModule | null = null;

/**
 * The wasm file, found by walking up from this module to the package root; or
 * HIVEKV_WASM_PATH, for benchmarks only (another build of the machine measured side by side:
 * replicas running different modules would diverge).
 */
export function wasmPath(): string {
  const benchmarkOverride = process.env['HIVEKV_WASM_PATH'];
  if (benchmarkOverride !== undefined && benchmarkOverride !== '') return benchmarkOverride;
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < PACKAGE_ROOT_SEARCH_DEPTH; i++) {
    if (existsSync(join(dir, 'package.json'))) return join(dir, 'build', 'hivekv.wasm');
    const up = dirname(dir);
    if (up === dir) break;
    dir = up;
  }
  throw new Error('hivekv: package.json not found above ' + import.meta.url);
}

/** The compiled module, shared by every instance of the process. */
export function machineModule(): WasmModule {
  if (compiled === null) compiled = new Wasm.Module(readFileSync(wasmPath()));
  return compiled;
}

/** A u64 digest (little-endian in the output) as 16 hex digits. */
function digestHex(out: Uint8Array): string {
  let hex = '';
  for (let i = 7; i >= 0; i--) hex += out[i]!.toString(16).padStart(2, '0');
  return hex;
}

function lo32(v: number): number {
  return (v % 4294967296) | 0;
}

function hi32(v: number): number {
  return Math.floor(v / 4294967296) | 0;
}

function assertSafeTime(v: number, what: string): void {
  if (!Number.isSafeInteger(v) || v < 0 || v > SAFE_INTEGER_MAX) {
    throw new RangeError(`${what} must be a safe non-negative integer, got ${v}`);
  }
}

/** What the machine's state holds in memory (assembly/memory-use.ts). */
export interface MemoryUse {
  /** rowFootprint of every row (expired ones until swept) plus the tenant table. */
  readonly stateBytes: number;
  /** Rows an open snapshot keeps alive that are no longer in the state. */
  readonly preimageBytes: number;
  /** Rows retired and not yet known reclaimed by the collector: at most this much garbage. */
  readonly retiredBytes: number;
  /** Full collections the machine ran to stay under the 4 GiB ceiling. */
  readonly fullCollections: number;
  /** Dead rows the expiry heap keeps alive until a compaction drops their entries. */
  readonly heapDeadBytes: number;
}

export class StateMachine {
  private readonly x: Exports;
  private applied = 0;
  private lastTime = 0;
  private abortMessage = '';

  private constructor() {
    const instance = new Wasm.Instance(machineModule(), {
      env: {
        abort: (_msg: number, _file: number, line: number, col: number): never => {
          this.abortMessage = `abort at ${line}:${col}`;
          throw new MachineTrapError(`machine aborted (${this.abortMessage})`);
        },
      },
    });
    this.x = instance.exports as unknown as Exports;
  }

  /** A fresh, empty machine. Compiles the module on first use (synchronously). */
  static create(): StateMachine {
    return new StateMachine();
  }

  get appliedIndex(): number { return this.applied; }
  get lastTimeMs(): number { return this.lastTime; }

  /** Runs an export, turning any trap into MachineTrapError. */
  private guard<T>(what: string, fn: () => T): T {
    try {
      return fn();
    } catch (err) {
      if (err instanceof MachineTrapError) throw err;
      if (err instanceof Wasm.RuntimeError) {
        throw new MachineTrapError(`machine trapped in ${what}: ${err.message}`);
      }
      throw err;
    }
  }

  // Addresses come back as i32: one at or past 2 GiB is negative until read as unsigned.
  private output(len: number): Uint8Array {
    return new Uint8Array(this.x.memory.buffer, this.outputAt(), len);
  }

  private input(len: number): Uint8Array {
    const at = this.inputAt(len);
    return new Uint8Array(this.x.memory.buffer, at, len);
  }

  /**
   * Applies one committed entry. Precondition: entryIndex > appliedIndex (an assertion, a
   * bug in the driver otherwise); timeMs a safe integer. A malformed command is an
   * `invalid` outcome and still advances appliedIndex.
   */
  apply(entryIndex: number, timeMs: number, commandBytes: Uint8Array): ApplyOutcome {
    if (!Number.isSafeInteger(entryIndex) || entryIndex <= this.applied) {
      throw new Error(`apply: entry ${entryIndex} is not after applied ${this.applied}`);
    }
    assertSafeTime(timeMs, 'timeMs');
    this.input(commandBytes.length).set(commandBytes);
    const len = this.guard('apply', () => this.x.apply(commandBytes.length,
      lo32(entryIndex), hi32(entryIndex), lo32(timeMs), hi32(timeMs)));
    this.applied = entryIndex;
    this.lastTime = Math.max(this.lastTime, timeMs);
    return decodeApplyOutput(this.output(len));
  }

  /** Answers a read-only call at max(nowMs, lastTimeMs) without changing state. */
  read(call: KvCall, nowMs: number): CallAnswer {
    const r = this.runRead(call, nowMs);
    const kind = r.u8();
    if (kind === OUT_INVALID) return { invalid: r.str() };
    if (kind !== OUT_CALL) throw new Error(`machine output: read answered kind ${kind}`);
    return readAnswer(r);
  }

  /**
   * `read`, with the answer handed to `sink` as a view of wasm memory (no copy): valid only
   * during the sink's call, which must not call the machine.
   */
  readInto(call: KvCall, nowMs: number, sink: AnswerSink): void {
    this.answerInto(this.runRead(call, nowMs), sink);
  }

  /** `readInto` for a command already encoded (the parser's output). */
  readCommandInto(command: Uint8Array, nowMs: number, sink: AnswerSink): void {
    assertSafeTime(nowMs, 'nowMs');
    const at = this.inputAt(command.length);
    this.memory().bytes.set(command, at);
    const len = this.guard('read', () => this.x.read(command.length, lo32(nowMs), hi32(nowMs)));
    this.answerInto(ByteReader.span(this.memory(), this.outputAt(), len), sink);
  }

  private answerInto(r: ByteReader, sink: AnswerSink): void {
    const kind = r.u8();
    if (kind === OUT_INVALID) {
      sink.refused(r.str());
      return;
    }
    if (kind !== OUT_CALL) throw new Error(`machine output: read answered kind ${kind}`);
    const header = readAnswerHeader(r);
    sink.answered(header, r.bytesView(header.bodyLength));
  }

  private runRead(call: KvCall, nowMs: number): ByteReader {
    assertSafeTime(nowMs, 'nowMs');
    const w = new ByteWriter(this.input(READ_INPUT_BYTES_INITIAL), (_cur, min) => {
      // The region keeps its bytes when it grows (realloc); take a fresh view over it.
      return this.input(min);
    });
    writeCall(w, call, { requireGrant: false });
    const len = this.guard('read', () => this.x.read(w.pos, lo32(nowMs), hi32(nowMs)));
    return new ByteReader(this.output(len));
  }

  /** This node's origin: `applyEntries` answers only the calls of entries it proposed. */
  setOrigin(nodeId: string, incarnation: number): void {
    const id = new TextEncoder().encode(nodeId);
    this.input(id.length).set(id);
    this.x.setOrigin(id.length, incarnation | 0);
  }

  /**
   * Applies committed entries in one crossing of the boundary, in order, and tells `sink`
   * what each decided (see AppliedEntrySink). Precondition: the first index is after
   * appliedIndex and the indexes are consecutive (asserted).
   */
  applyEntries(entries: readonly Entry[], sink: AppliedEntrySink): void {
    if (entries.length === 0) return;
    this.writeEntries(entries);
    const last = entries[entries.length - 1]!;
    const len = this.guard('applyEntries', () => this.x.applyEntries(this.entriesBytes));
    this.applied = last.index;
    for (const entry of entries) this.lastTime = Math.max(this.lastTime, entry.timeMs);
    const r = ByteReader.span(this.memory(), this.outputAt(), len);
    for (const entry of entries) this.readEntryOutcome(r, entry.index, sink);
    if (!r.done) throw new Error('machine output: trailing bytes after the entries');
  }

  /** Bytes `writeEntries` last framed into the input region. */
  private entriesBytes = 0;

  private writeEntries(entries: readonly Entry[]): void {
    let bytes = 4;
    let expected = this.applied + 1;
    for (const entry of entries) {
      if (entry.index !== expected) {
        throw new Error(`applyEntries: entry ${entry.index} where ${expected} was expected`);
      }
      assertSafeTime(entry.timeMs, 'timeMs');
      expected++;
      bytes += ENTRY_FRAME_BYTES + entry.data.length;
    }
    // Written through the views of all of memory: a view of its own per call costs more
    // than the framing.
    const base = this.inputAt(bytes);
    const { bytes: memory, view } = this.memory();
    view.setUint32(base, entries.length, true);
    let at = base + 4;
    for (const entry of entries) {
      // Read once: a recovered entry makes its data view when asked (storage/record.ts).
      const data = entry.data;
      view.setUint32(at, lo32(entry.index), true);
      view.setUint32(at + 4, hi32(entry.index), true);
      view.setUint32(at + 8, lo32(entry.timeMs), true);
      view.setUint32(at + 12, hi32(entry.timeMs), true);
      view.setUint8(at + 16, entry.type === 'normal' ? ENTRY_NORMAL : ENTRY_EMPTY);
      view.setUint32(at + 17, data.length, true);
      memory.set(data, at + ENTRY_FRAME_BYTES);
      at += ENTRY_FRAME_BYTES + data.length;
    }
    this.entriesBytes = bytes;
  }

  private readEntryOutcome(r: ByteReader, entryIndex: number, sink: AppliedEntrySink): void {
    const mine = r.u8() === 1;
    const seq = mine ? r.i64() : 0;
    const kind = r.u8();
    if (kind === OUT_CALL) {
      if (!mine) return;
      const header = readAnswerHeader(r);
      sink.answer(seq, header, r.bytesView(header.bodyLength));
      return;
    }
    r.pos -= 1;
    const outcome = readApplyOutcome(r, false);
    if (outcome.kind === 'invalid') sink.invalid(entryIndex, outcome.detail);
    if (outcome.kind === 'sweep' && outcome.removedKeys > 0) sink.swept(outcome.removedKeys);
    if (outcome.kind === 'admin') sink.admin();
    if (outcome.kind === 'checkpoint') sink.checkpoint(entryIndex, outcome);
    if (mine) sink.done(seq);
  }

  /**
   * Opens a snapshot of the state at `appliedIndex` and returns its size in bytes. Entries
   * may be applied while it is open; `snapshotNext` hands it out in slices. One at a time:
   * opening a second is a trap.
   */
  snapshotBegin(): number {
    return new ByteReader(this.output(this.guard('snapshotBegin',
      () => this.x.snapshotBegin()))).i64();
  }

  /**
   * The next slice of the open snapshot, about `maxBytes` long (one row larger than that
   * comes alone), as a copy; empty once every byte was handed out (the snapshot is then
   * closed) or when none is open.
   */
  snapshotNext(maxBytes: number): Uint8Array {
    const ask = Math.max(1, Math.min(Math.floor(maxBytes), SNAPSHOT_SLICE_BYTES_MAX));
    const len = this.guard('snapshotNext', () => this.x.snapshotNext(ask));
    return len === 0 ? new Uint8Array(0) : this.output(len).slice();
  }

  /** Drops the open snapshot, if any. */
  snapshotAbort(): void {
    this.guard('snapshotAbort', () => this.x.snapshotAbort());
  }

  /**
   * Starts replacing the state with a snapshot fed in chunks (`restoreChunk`, then
   * `restoreEnd`). The state stays as it is until `restoreEnd` succeeds.
   */
  restoreBegin(): void {
    this.guard('restoreBegin', () => this.x.restoreBegin());
  }

  /** The next bytes of the snapshot, any length. Throws once the snapshot is invalid. */
  restoreChunk(bytes: Uint8Array): void {
    this.input(bytes.length).set(bytes);
    const len = this.guard('restoreChunk', () => this.x.restoreChunk(bytes.length));
    if (len !== 0) this.refuseSnapshot(len);
  }

  /** Swaps the restored state in. Throws, with the state untouched, when it is not valid. */
  restoreEnd(): void {
    const len = this.guard('restoreEnd', () => this.x.restoreEnd());
    if (len !== 0) this.refuseSnapshot(len);
    this.readMeta();
  }

  /** Drops a restore under way; the state is untouched. */
  restoreAbort(): void {
    this.guard('restoreAbort', () => this.x.restoreAbort());
  }

  /** Empties the state (index 0), so its memory serves the restore that follows. */
  clearState(): void {
    this.guard('clearState', () => this.x.clearState());
    this.readMeta();
  }

  private refuseSnapshot(len: number): never {
    const r = new ByteReader(this.output(len));
    r.u8();
    throw new Error(`restore: invalid snapshot: ${r.str()}`);
  }

  private readMeta(): void {
    const meta = new ByteReader(this.output(this.guard('meta', () => this.x.meta())));
    this.applied = meta.i64();
    this.lastTime = meta.i64();
  }

  /**
   * The state's byte total (rowFootprint of every row, expired ones until swept, plus the
   * tenant table), and the bytes an open snapshot keeps alive besides (its preimages).
   */
  memoryUse(): MemoryUse {
    const r = new ByteReader(this.output(this.guard('stateBytes', () => this.x.stateBytes())));
    return { stateBytes: r.i64(), preimageBytes: r.i64(), retiredBytes: r.i64(),
      fullCollections: r.i64(), heapDeadBytes: r.i64() };
  }

  /** The byte total recounted from scratch: rows and tenant table apart (for tests). */
  recountStateBytes(): { readonly rowBytes: number; readonly tenantBytes: number } {
    const r = new ByteReader(this.output(this.guard('stateBytesRecount',
      () => this.x.stateBytesRecount())));
    return { rowBytes: r.i64(), tenantBytes: r.i64() };
  }

  /** A deterministic hash of the whole logical state, 16 hex digits. */
  digest(): string {
    return digestHex(this.output(this.guard('digest', () => this.x.digest())));
  }

  /** The digest recounted from every row and quota (for tests: must equal `digest()`). */
  recountDigest(): string {
    return digestHex(this.output(this.guard('digestRecount', () => this.x.digestRecount())));
  }

  isPaused(): boolean {
    return this.x.isPaused() === 1;
  }

  private tenantOutput(tenant: string): ByteReader {
    const bytes = new TextEncoder().encode(tenant);
    this.input(bytes.length).set(bytes);
    return new ByteReader(this.output(this.guard('queryTenant',
      () => this.x.queryTenant(bytes.length))));
  }

  quota(tenant: string): QuotaSettings | null {
    const r = this.tenantOutput(tenant);
    if (r.u8() === 0) return null;
    r.i64();
    r.i64();
    if (r.u8() === 0) return null;
    const limit = (v: number): number | null => (v === LIMIT_NONE_WIRE ? null : v);
    const enabled = r.u8() === 1;
    return {
      enabled, maxRows: limit(r.i64()), maxBytes: limit(r.i64()),
      maxReadsPerSec: limit(r.i64()), maxWritesPerSec: limit(r.i64()),
    };
  }

  /** Rows and bytes (user key + value JSON bytes) the tenant holds. */
  usage(tenant: string): TenantUsage {
    const r = this.tenantOutput(tenant);
    if (r.u8() === 0) return { rows: 0, bytes: 0 };
    return { rows: r.i64(), bytes: r.i64() };
  }

  /** Up to maxTenants tenants, in the order the machine first saw them. */
  tenantsUsage(maxTenants: number): Array<{ tenant: string } & TenantUsage> {
    const n = Math.max(0, Math.min(maxTenants | 0, 0x7fffffff));
    const r = new ByteReader(this.output(this.guard('tenantsUsage',
      () => this.x.tenantsUsage(n))));
    const out: Array<{ tenant: string } & TenantUsage> = [];
    for (let count = r.u32(); count > 0; count--) {
      out.push({ tenant: r.str(), rows: r.i64(), bytes: r.i64() });
    }
    return out;
  }

  /** Size of the machine's linear memory, in bytes (it only grows). */
  memoryBytes(): number {
    return this.x.memory.buffer.byteLength;
  }

  /** Heap bytes of the state's own objects (rows, tree, expiry heap), for measurements. */
  structureBytes(): number {
    return new ByteReader(this.output(this.guard('structureBytes',
      () => this.x.structureBytes()))).i64();
  }

  /**
   * The key index beside the tree, checked against it (traps on a disagreement): rows in
   * the tree, rows the index finds, rows it does not hold, and rows whose recorded leaf is
   * stale (a split moved them; the next write of the key corrects it), and whether the index
   * is doubling (0 no, 1 zeroing its next table, 2 draining the old one). For tests.
   */
  keyIndexCheck(): {
    rows: number; indexed: number; notIndexed: number; staleLeaves: number; growPhase: number;
  } {
    const r = new ByteReader(this.output(this.guard('keyIndexCheck',
      () => this.x.keyIndexCheck())));
    return {
      rows: r.i64(), indexed: r.i64(), notIndexed: r.i64(), staleLeaves: r.i64(),
      growPhase: r.i64(),
    };
  }

  /**
   * The earliest entry time at which a sweep could remove a row, or null when no row
   * expires. A lower bound: a sweep stamped before it removes nothing; one at or after it
   * may still remove nothing, once, if the row there was rewritten since.
   */
  nextExpiryMs(): number | null {
    const at = new ByteReader(this.output(this.guard('nextExpiryMs',
      () => this.x.nextExpiryMs()))).i64();
    return at === NEXT_EXPIRY_NONE ? null : at;
  }

  /**
   * The idempotency records held and their bytes (replicated state), and the records evicted
   * at a bound and the retries answered by a record since this process started.
   */
  idempotencyStats(): IdempotencyStats {
    const r = new ByteReader(this.output(this.guard('idempotencyStats',
      () => this.x.idempotencyStats())));
    return { records: r.i64(), bytes: r.i64(), evictions: r.i64(), replays: r.i64() };
  }

  /** Rows held; an expired row counts until a sweep removes it. */
  liveKeyCount(): number {
    return this.x.liveKeyCount();
  }

  /**
   * Sets the limits `parseRequest` enforces (the node's QUEEN_KV_* settings), once at start.
   * Throws a RangeError, changing nothing, when one is beyond what the machine's own command
   * decoder accepts (abi.ts bounds), since every command the parser writes must apply.
   */
  /**
   * The state's memory budget (memory-budget.ts). Below it, a parse's growth estimate is 0,
   * taken without looking rows up: `memoryFull` refuses growing calls only at the budget.
   * Unset, every estimate is exact.
   */
  setGrowthBudget(maxStateBytes: number): void {
    if (!Number.isSafeInteger(maxStateBytes) || maxStateBytes < 0) {
      throw new RangeError(`setGrowthBudget: ${maxStateBytes} is not a byte count`);
    }
    this.x.setGrowthBudget(lo32(maxStateBytes), hi32(maxStateBytes));
  }

  setRequestLimits(limits: RequestLimits): void {
    const order = ['maxValueBytes', 'maxKeyBytes', 'maxOpsPerCall', 'maxKeysPerCall',
      'prefixLimit', 'maxReadBytes'] as const;
    for (const name of order) {
      const v = limits[name];
      if (!Number.isSafeInteger(v) || v < 0 || (name !== 'maxReadBytes' && v > 0x7fffffff)) {
        throw new RangeError(`setRequestLimits: ${name} must be an integer, got ${v}`);
      }
    }
    const bad = this.x.setRequestLimits(limits.maxValueBytes, limits.maxKeyBytes,
      limits.maxOpsPerCall, limits.maxKeysPerCall, limits.prefixLimit,
      lo32(limits.maxReadBytes), hi32(limits.maxReadBytes));
    if (bad !== 0) {
      const name = order[bad - 1] ?? 'a limit';
      throw new RangeError(`setRequestLimits: ${name} = ${limits[name as keyof RequestLimits]} ` +
        'is beyond what the machine accepts');
    }
  }

  /**
   * Parses and validates one request inside the machine: the CMD_CALL command to log, or
   * the 400/413 refusal validate.ts would give. Changes no state. Throws on a malformed
   * frame (a bug in the caller).
   */
  parseRequest(frame: RequestFrame): ParseOutcome {
    const at = this.inputAt(frameBytesMax(frame));
    return this.parseInput(writeRequestFrame(this.wasmBytes(), at, frame));
  }

  /** parseRequest on frame bytes already encoded (tests, fuzzing, tools). */
  parseRequestFrame(frame: Uint8Array): ParseOutcome {
    this.input(frame.length).set(frame);
    return this.parseInput(frame.length);
  }

  /** A view of all of wasm memory, made again only when memory grew (the old one detached). */
  private wasmBytes(): Uint8Array {
    return this.memory().bytes;
  }

  /**
   * Views of all of wasm memory, made again only when memory grew (the old ones detached).
   * Take them after every call that may grow memory (`inputAt` does), not before. A grown
   * memory detaches the buffer the views are over, which then read as empty: checked by
   * their length, where asking the memory for its buffer is a call into C++ on every call.
   */
  private memory(): ByteViews {
    if (this.memoryViews.bytes.length === 0) {
      this.memoryViews = byteViewsOf(new Uint8Array(this.x.memory.buffer));
    }
    return this.memoryViews;
  }

  private memoryViews: ByteViews = byteViewsOf(new Uint8Array(0));

  /** The hot path of every request: no closure, no view but the cached one. */
  private parseInput(len: number): ParseOutcome {
    let outLen: number;
    try {
      outLen = this.x.parseRequest(len);
    } catch (err) {
      if (err instanceof MachineTrapError) throw err;
      if (err instanceof Wasm.RuntimeError) {
        throw new MachineTrapError(`machine trapped in parseRequest: ${err.message}`);
      }
      throw err;
    }
    return decodeParseOutput(this.wasmBytes(), this.outputAt(), outLen);
  }

  /**
   * Addresses of the input and output regions. The exports return them as i32, so one past
   * 2 GiB of wasm memory comes back negative: a node that restarts with a large state
   * reserves its regions above its rows, and every request failed there (RangeError).
   */
  private inputAt(len: number): number {
    return this.x.inputRegion(len) >>> 0;
  }

  private outputAt(): number {
    return this.x.outputRegion() >>> 0;
  }
}
