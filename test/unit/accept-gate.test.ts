/**
 * The accept gate's decisions (host/http/accept-gate.ts): when a node closes its listening
 * socket as file descriptors run short, and when it listens again; and the limit it reads.
 */
import { describe, expect, it } from 'vitest';
import {
  AcceptGate, freeDescriptorsAtLeast, HEADROOM_MAX, HEADROOM_MIN, headroomFor,
  lowestFreeDescriptor, openFilesLimitOf,
} from '../../host/http/accept-gate.js';

describe('headroomFor', () => {
  it('keeps an eighth of the limit free, within its bounds, and never more than half', () => {
    expect(headroomFor(20_000)).toBe(HEADROOM_MAX);
    expect(headroomFor(4096)).toBe(512);
    expect(headroomFor(1024)).toBe(128);
    expect(headroomFor(256)).toBe(HEADROOM_MIN);
    expect(headroomFor(100)).toBe(50);
  });
});

describe('AcceptGate', () => {
  it('pauses once the lowest free descriptor reaches the limit less the headroom', () => {
    const gate = new AcceptGate(1024);
    expect(gate.pauseAt).toBe(896);
    expect(gate.checkAccepting(895, true)).toBeNull();
    expect(gate.isAccepting).toBe(true);
    expect(gate.checkAccepting(896, true)).toBe('pause');
    expect(gate.isAccepting).toBe(false);
    // Paused, a reading of the lowest free descriptor decides nothing: the listener's own
    // descriptor is a hole that makes it look low.
    expect(gate.checkAccepting(10, true)).toBeNull();
  });

  it('pauses when no descriptor is free, or the reserve cannot be filled', () => {
    expect(new AcceptGate(1024).checkAccepting(null, true)).toBe('pause');
    expect(new AcceptGate(1024).checkAccepting(100, false)).toBe('pause');
  });

  it('resumes only when twice the headroom can be opened and the reserve is full', () => {
    const gate = new AcceptGate(1024);
    expect(gate.exhausted()).toBe('pause');
    expect(gate.exhausted()).toBeNull();
    expect(gate.resumeFree).toBe(256);
    expect(gate.checkPaused(false, true)).toBeNull();
    expect(gate.checkPaused(true, false)).toBeNull();
    expect(gate.checkPaused(true, true)).toBe('resume');
    expect(gate.isAccepting).toBe(true);
    expect(gate.checkPaused(true, true)).toBeNull();
  });

  it('tries again after listening again failed', () => {
    const gate = new AcceptGate(1024);
    gate.exhausted();
    expect(gate.checkPaused(true, true)).toBe('resume');
    gate.resumeFailed();
    expect(gate.isAccepting).toBe(false);
    expect(gate.checkPaused(true, true)).toBe('resume');
  });
});

describe('openFilesLimitOf', () => {
  const limits = (openFiles: string) => 'Limit                     Soft Limit           Hard ' +
    'Limit           Units     \nMax processes             95000                95000      ' +
    '          processes \n' + `Max open files            ${openFiles}                files     \n`;

  it('reads the soft limit of the open-files line', () => {
    expect(openFilesLimitOf(limits('20000                1048576'))).toBe(20_000);
  });

  it('gives null for unlimited, a missing line or garbage', () => {
    expect(openFilesLimitOf(limits('unlimited            unlimited'))).toBeNull();
    expect(openFilesLimitOf('Max processes 10 10\n')).toBeNull();
    expect(openFilesLimitOf(limits('0                    0'))).toBeNull();
  });
});

describe('the readings', () => {
  it('find a free descriptor, and tell whether a count of them can be opened', () => {
    const fd = lowestFreeDescriptor();
    expect(fd).not.toBeNull();
    expect(fd).toBeGreaterThan(2);
    expect(freeDescriptorsAtLeast(8)).toBe(true);
    // Everything it opened is closed again: the lowest free descriptor is where it was.
    expect(lowestFreeDescriptor()).toBe(fd);
  });
});
