import { describe, expect, it } from 'vitest';

import {
  busiestInterrupt, deviceInterrupts, lastCpuOf, placementSentence,
} from '../../bench/vcpu-placement.js';

// A main thread's stat line, its command name holding a space and a parenthesis; the
// processor (field 39) is 1.
const STAT = '4242 (node (main) x) S 1 4242 4242 0 -1 4194560 9418 0 0 0 71 12 0 0 20 0 11 0 ' +
  '1234 1165000704 21000 18446744073709551615 1 1 0 0 0 0 0 16781312 134234626 0 0 0 17 1 ' +
  '0 0 0 0 0 0 0 0 0 0 0 0 0\n';

const INTERRUPTS_BEFORE = `           CPU0       CPU1
  1:          9          0   IO-APIC   1-edge      i8042
 31:          0      10738   PCI-MSIX-0000:00:01.0   3-edge      virtio0-stats
 36:          0   57151942   PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0
 40:  999999999          0   PCI-MSIX-0000:00:03.0   1-edge      eth0-rx
NMI:          0          0   Non-maskable interrupts
LOC:   12345678   23456789   Local timer interrupts
`;

// The same lines a row later: the disk's queue took 40,010 interrupts, the balloon's stats 2,
// the timers millions (not a device line), and eth0-rx, the largest count, none.
const INTERRUPTS_AFTER = INTERRUPTS_BEFORE
  .replace('0      10738', '0      10740')
  .replace('0   57151942', '10   57191942')
  .replace('LOC:   12345678   23456789', 'LOC:   22345678   33456789');

describe('where a row ran (vcpu-placement)', () => {
  it('reads the processor of a stat line whose command holds spaces and parentheses', () => {
    expect(lastCpuOf(STAT)).toBe(1);
    expect(lastCpuOf(STAT.replace(' 17 1 ', ' 17 0 '))).toBe(0);
    expect(lastCpuOf('')).toBe(-1);
    expect(lastCpuOf('12 (short) S 1 2')).toBe(-1);
  });

  it('counts only numbered device lines, by name and per CPU', () => {
    const lines = deviceInterrupts(INTERRUPTS_BEFORE);
    expect([...lines.keys()]).toEqual(['1: i8042', '31: virtio0-stats', '36: virtio1-req.0',
      '40: eth0-rx']);
    expect(lines.get('36: virtio1-req.0')).toEqual([0, 57151942]);
    expect(deviceInterrupts('')).toEqual(new Map());
  });

  it('finds the device line that grew most, not the timer nor the largest count', () => {
    const busiest = busiestInterrupt(deviceInterrupts(INTERRUPTS_BEFORE),
      deviceInterrupts(INTERRUPTS_AFTER));
    expect(busiest).toEqual({ name: '36: virtio1-req.0', perCpu: [10, 40000] });
    expect(busiestInterrupt(deviceInterrupts(INTERRUPTS_AFTER),
      deviceInterrupts(INTERRUPTS_AFTER))).toBeNull();
  });

  it('says where the thread was and where the interrupts went', () => {
    const busiest = { name: '36: virtio1-req.0', perCpu: [10, 40000] };
    expect(placementSentence([1, 1, 0, 1, -1], busiest)).toBe(
      "the node's main thread was last on vCPU 1 in 3, vCPU 0 in 1 of 4 samples; the device " +
      'line that interrupted most meanwhile (36: virtio1-req.0, 40010 interrupts) went to ' +
      'vCPU 1 (100%).');
    expect(placementSentence([0, 0], null)).toBe(
      "the node's main thread was last on vCPU 0 in 2 of 2 samples.");
    expect(placementSentence([-1, -1], busiest)).toBe('');
  });
});
