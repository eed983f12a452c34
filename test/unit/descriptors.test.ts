/**
 * The reserve of file descriptors for a node's own files (host/storage/descriptors.ts): an
 * open that finds none stops the accepting first, gives the reserve back, and tries again.
 */
import { describe, expect, it } from 'vitest';
import { DescriptorReserve, isOutOfDescriptors } from '../../host/storage/descriptors.js';

function outOf(code: 'EMFILE' | 'ENFILE'): Error {
  return Object.assign(new Error(`${code}: too many open files`), { code });
}

/** A process with `free` descriptors: numbered spares, and a close that frees one. */
class FakeDescriptors {
  next = 100;
  closed: number[] = [];
  constructor(public free: number) {}
  open = (): number => {
    if (this.free === 0) throw outOf('EMFILE');
    this.free--;
    return this.next++;
  };
  close = (fd: number): void => {
    this.closed.push(fd);
    this.free++;
  };
}

describe('DescriptorReserve', () => {
  it('fills up to its size, and says when it could not', () => {
    const fake = new FakeDescriptors(5);
    const reserve = new DescriptorReserve(4, fake.open, fake.close);
    expect(reserve.fill()).toBe(true);
    expect(reserve.heldCount).toBe(4);
    expect(new DescriptorReserve(4, fake.open, fake.close).fill()).toBe(false);
  });

  it('on EMFILE or ENFILE: tells its listeners, gives the reserve back, and opens', async () => {
    for (const code of ['EMFILE', 'ENFILE'] as const) {
      const fake = new FakeDescriptors(3);
      const reserve = new DescriptorReserve(3, fake.open, fake.close);
      reserve.fill();
      const told: string[] = [];
      reserve.onExhausted(() => told.push(`free ${fake.free}`));
      let tries = 0;
      const opened = await reserve.openWith(async () => {
        tries++;
        if (fake.free === 0) throw outOf(code);
        return fake.open();
      });
      expect(opened).toBe(103);
      expect(tries).toBe(2);
      // The listeners ran before the reserve was given back (no connection takes it first).
      expect(told).toEqual(['free 0']);
      expect(fake.closed).toEqual([100, 101, 102]);
      expect(reserve.heldCount).toBe(0);
      expect(reserve.shortages).toBe(1);
    }
  });

  it('throws any other failure at once, and the last shortage after its tries', async () => {
    const fake = new FakeDescriptors(0);
    const reserve = new DescriptorReserve(2, fake.open, fake.close);
    const enoent = Object.assign(new Error('ENOENT'), { code: 'ENOENT' });
    let tries = 0;
    await expect(reserve.openWith(async () => {
      tries++;
      throw enoent;
    })).rejects.toBe(enoent);
    expect(tries).toBe(1);
    tries = 0;
    await expect(reserve.openWith(async () => {
      tries++;
      throw outOf('EMFILE');
    })).rejects.toMatchObject({ code: 'EMFILE' });
    expect(tries).toBe(5);
    expect(reserve.shortages).toBe(4);
  });

  it('knows the codes of a process or a system out of descriptors', () => {
    expect(isOutOfDescriptors(outOf('EMFILE'))).toBe(true);
    expect(isOutOfDescriptors(outOf('ENFILE'))).toBe(true);
    expect(isOutOfDescriptors(new Error('x'))).toBe(false);
    expect(isOutOfDescriptors(null)).toBe(false);
  });
});
