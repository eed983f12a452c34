/**
 * The two growable regions the host and the machine share: the input region (the host writes
 * a command there) and the output region (the machine writes results there). Both live in
 * unmanaged memory, so the GC never moves or frees them; they move only when they grow, which
 * is why the host re-reads their pointers and re-creates its views after every call.
 * Reading is bounds-checked: a short or malformed command sets `failed` and never traps.
 */

/** Smallest capacity of either region, in bytes. */
const REGION_BYTES_MIN: usize = 65536;

export let inputPtr: usize = 0;
export let inputCap: usize = 0;
export let outputPtr: usize = 0;
export let outputCap: usize = 0;
/** Bytes written to the output region by the current call. */
export let outputLen: usize = 0;

/** Makes the input region hold at least `bytes`; returns its (possibly new) address. */
export function ensureInput(bytes: usize): usize {
  if (bytes <= inputCap) return inputPtr;
  let cap = max(inputCap << 1, max(bytes, REGION_BYTES_MIN));
  inputPtr = inputPtr == 0 ? heap.alloc(cap) : heap.realloc(inputPtr, cap);
  inputCap = cap;
  return inputPtr;
}

/**
 * Makes room for `extra` more output bytes. Inlined: it runs for every byte, word and string
 * an answer or a command writes, and it grows the region only once in a long while.
 */
// @ts-ignore: decorator
@inline function ensureOutput(extra: usize): void {
  if (outputLen + extra > outputCap) growOutput(outputLen + extra);
}

function growOutput(need: usize): void {
  let cap = max(outputCap << 1, max(need, REGION_BYTES_MIN));
  outputPtr = outputPtr == 0 ? heap.alloc(cap) : heap.realloc(outputPtr, cap);
  outputCap = cap;
}

/** Makes room for `extra` more output bytes at once (one reallocation for a snapshot). */
export function reserveOutput(extra: usize): void {
  ensureOutput(extra);
}

/** Drops what the current call wrote past `len` bytes of output. */
export function truncateOutput(len: usize): void {
  assert(len <= outputLen, 'truncateOutput past the end');
  outputLen = len;
}

export function resetOutput(): void {
  outputLen = 0;
  ensureOutput(0);
}

// ---- writer over the output region (little-endian) ----

// @ts-ignore: decorator
@inline export function putU8(v: i32): void {
  ensureOutput(1);
  store<u8>(outputPtr + outputLen, <u8>v);
  outputLen += 1;
}

// @ts-ignore: decorator
@inline export function putU32(v: u32): void {
  ensureOutput(4);
  store<u32>(outputPtr + outputLen, v);
  outputLen += 4;
}

// @ts-ignore: decorator
@inline export function putI64(v: i64): void {
  ensureOutput(8);
  store<i64>(outputPtr + outputLen, v);
  outputLen += 8;
}

/** A u32 length, then the bytes. */
export function putBytes(ptr: usize, len: usize): void {
  ensureOutput(4 + len);
  store<u32>(outputPtr + outputLen, <u32>len);
  memory.copy(outputPtr + outputLen + 4, ptr, len);
  outputLen += 4 + len;
}

export function putString(s: string): void {
  let buf = String.UTF8.encode(s);
  putBytes(changetype<usize>(buf), buf.byteLength);
}

/** Reserves `len` raw bytes and returns their address (valid until the next put). */
// @ts-ignore: decorator
@inline export function reserveRaw(len: usize): usize {
  ensureOutput(len);
  let at = outputPtr + outputLen;
  outputLen += len;
  return at;
}

// ---- bounds-checked reader over a byte range ----

export class Reader {
  pos: usize;
  end: usize;
  failed: bool = false;
  /**
   * The first thing that was wrong, for the `invalid` detail, in two parts joined only when
   * read: a failure allocates nothing, so a function that can only fail this way never
   * reaches the collector (scripts/unread-frames.mjs gives it no frame).
   */
  private whyHead: string = '';
  private whyTail: string = '';

  constructor(start: usize, len: usize) {
    this.pos = start;
    this.end = start + len;
  }

  /** Starts over on another byte range, so a hot path reuses one reader (no allocation). */
  reset(start: usize, len: usize): Reader {
    this.pos = start;
    this.end = start + len;
    this.failed = false;
    this.clearWhy();
    this.lastLen = 0;
    return this;
  }

  get why(): string {
    return this.whyTail.length == 0 ? this.whyHead : this.whyHead + this.whyTail;
  }

  clearWhy(): void {
    this.whyHead = '';
    this.whyTail = '';
  }

  fail(why: string): void {
    this.failParts(why, '');
  }

  /** `fail(head + tail)`, joined when the reason is read. */
  failParts(head: string, tail: string): void {
    if (!this.failed) {
      this.failed = true;
      this.whyHead = head;
      this.whyTail = tail;
    }
    this.pos = this.end;
  }

  // @ts-ignore: decorator
  @inline has(n: usize): bool {
    if (this.failed) return false;
    if (this.end - this.pos < n) {
      this.fail('truncated command');
      return false;
    }
    return true;
  }

  // @ts-ignore: decorator
  @inline u8(): i32 {
    if (!this.has(1)) return 0;
    let v = <i32>load<u8>(this.pos);
    this.pos += 1;
    return v;
  }

  // @ts-ignore: decorator
  @inline u32(): u32 {
    if (!this.has(4)) return 0;
    let v = load<u32>(this.pos);
    this.pos += 4;
    return v;
  }

  // @ts-ignore: decorator
  @inline i64(): i64 {
    if (!this.has(8)) return 0;
    let v = load<i64>(this.pos);
    this.pos += 8;
    return v;
  }

  /**
   * A u32 length, then that many bytes, at most `maxLen`. Returns the bytes' address.
   * Inlined for the common case (the bytes are there); `bytesChecked` decides the rest.
   */
  // @ts-ignore: decorator
  @inline bytes(maxLen: u32, what: string): usize {
    let pos = this.pos;
    if (!this.failed && this.end - pos >= 4) {
      let len = load<u32>(pos);
      if (len <= maxLen && this.end - pos - 4 >= <usize>len) {
        this.lastLen = len;
        this.pos = pos + 4 + <usize>len;
        return pos + 4;
      }
    }
    return this.bytesChecked(maxLen, what);
  }

  /** `bytes`, step by step: fails the reader with the reason when the bytes are not there. */
  bytesChecked(maxLen: u32, what: string): usize {
    let len = this.u32();
    if (this.failed) return 0;
    if (len > maxLen) {
      this.failParts(what, ' too long');
      return 0;
    }
    if (!this.has(<usize>len)) return 0;
    let at = this.pos;
    this.lastLen = len;
    this.pos += len;
    return at;
  }

  /** Length of the last `bytes()` read. */
  lastLen: u32 = 0;
}
