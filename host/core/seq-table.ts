/**
 * Calls waiting for an answer, keyed by the sequence number the node gave each one, in the
 * order it gave them: a ring of slots over the span from the oldest waiting call to the
 * newest.
 *
 * Why not a `Map`: V8's ordered hash tables leave every table they replace (a `Map` rebuilds
 * its table as entries come and go) pointing at its successor and still naming its entries,
 * for the sake of iterators that may be open over it. Once one such table is in the old
 * generation, each young-generation collection treats that dead table as a root: the next
 * table survives, is promoted, and keeps the one after it alive in turn, with every call the
 * tables name. Under put load this promoted every object of every call (2.6 MB per
 * collection, 2.3 KB per put), to be swept again by full collections. Slots here are cleared
 * when a call leaves, and the ring is only replaced when it grows.
 *
 * Keys must be set in increasing order; they may leave in any order. Capacity follows the
 * span between the oldest and the newest waiting key, which a deadline on every call bounds.
 * Pure: no I/O.
 */
const CAPACITY_MIN = 64;
/** An empty table this large goes back to `CAPACITY_MIN`; below it, it keeps its ring. */
const CAPACITY_KEPT_WHEN_EMPTY = 1 << 16;

export class SeqTable<T> {
  private slots: Array<T | undefined> = new Array<T | undefined>(CAPACITY_MIN).fill(undefined);
  private mask = CAPACITY_MIN - 1;
  /** No key below this is waiting. */
  private first = 0;
  /** One past the newest key set. */
  private end = 0;
  private count = 0;

  get size(): number {
    return this.count;
  }

  /** Slots in the ring: at least the span from the oldest waiting key to the newest. */
  get capacity(): number {
    return this.slots.length;
  }

  /** Adds `value` under `key`, which must be above every key set before. */
  set(key: number, value: T): void {
    if (!(Number.isSafeInteger(key) && key >= this.end && value !== undefined)) {
      throw new Error(`assertion failed: key ${key} set after ${this.end - 1}`);
    }
    if (this.count === 0) this.first = key;
    if (key - this.first >= this.slots.length) this.grow(key - this.first + 1);
    this.slots[key & this.mask] = value;
    this.end = key + 1;
    this.count++;
  }

  get(key: number): T | undefined {
    if (key < this.first || key >= this.end) return undefined;
    return this.slots[key & this.mask];
  }

  has(key: number): boolean {
    return this.get(key) !== undefined;
  }

  /** Removes the value under `key` and returns it (undefined when none waits there). */
  take(key: number): T | undefined {
    const value = this.get(key);
    if (value === undefined) return undefined;
    this.slots[key & this.mask] = undefined;
    this.count--;
    if (this.count === 0) {
      this.first = this.end;
      if (this.slots.length > CAPACITY_KEPT_WHEN_EMPTY) this.reset();
    } else if (key === this.first) {
      while (this.slots[this.first & this.mask] === undefined) this.first++;
    }
    return value;
  }

  /** Every waiting key and value, oldest first; `take` may be called while iterating. */
  *entries(): IterableIterator<[number, T]> {
    for (let key = this.first; key < this.end; key++) {
      const value = this.slots[key & this.mask];
      if (value !== undefined) yield [key, value];
    }
  }

  /** Removes every value and returns them, oldest first. */
  drain(): T[] {
    const values = Array.from(this.entries(), ([, value]) => value);
    this.reset();
    return values;
  }

  private reset(): void {
    this.slots = new Array<T | undefined>(CAPACITY_MIN).fill(undefined);
    this.mask = CAPACITY_MIN - 1;
    this.first = this.end;
    this.count = 0;
  }

  private grow(span: number): void {
    let capacity = this.slots.length * 2;
    while (capacity < span) capacity *= 2;
    const slots = new Array<T | undefined>(capacity).fill(undefined);
    const mask = capacity - 1;
    for (let key = this.first; key < this.end; key++) {
      slots[key & mask] = this.slots[key & this.mask];
    }
    this.slots = slots;
    this.mask = mask;
  }
}
