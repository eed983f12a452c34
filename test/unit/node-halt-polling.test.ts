/**
 * What a node reads of its machine's halt polling (host/node/halt-polling.ts): the cpuidle
 * driver and haltpoll's window, from files laid out as /sys lays them out.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';

import {
  haltPollingNotice, haltPollingOf, haltPollingOff, haltPollingWords, readHaltPolling,
} from '../../host/node/halt-polling.js';

const roots: string[] = [];

/** A /sys with the files given (null: absent). */
function sysWith(driver: string | null, pollNs: string | null): string {
  const root = mkdtempSync(join(tmpdir(), 'hivekv-sys-'));
  roots.push(root);
  if (driver !== null) {
    const dir = join(root, 'devices', 'system', 'cpu', 'cpuidle');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'current_driver'), driver);
  }
  if (pollNs !== null) {
    const dir = join(root, 'module', 'haltpoll', 'parameters');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'guest_halt_poll_ns'), pollNs);
  }
  return root;
}

afterEach(() => {
  for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
});

describe('halt polling', () => {
  it('is off on a haltpoll guest told to poll 0 ns, and the node says so', () => {
    const setting = readHaltPolling(sysWith('haltpoll\n', '0\n'));
    expect(setting).toEqual({ driver: 'haltpoll', pollNs: 0 });
    expect(haltPollingOff(setting)).toBe(true);
    expect(haltPollingNotice(setting)).toContain('guest_halt_poll_ns');
    expect(haltPollingWords(setting)).toBe('guest halt polling off (guest_halt_poll_ns 0)');
  });

  it('is on with a window, and the node says nothing', () => {
    const setting = readHaltPolling(sysWith('haltpoll\n', '200000\n'));
    expect(setting).toEqual({ driver: 'haltpoll', pollNs: 200_000 });
    expect(haltPollingNotice(setting)).toBeNull();
    expect(haltPollingWords(setting)).toBe(
      'guest halt polling for up to 200 µs (guest_halt_poll_ns 200000)');
  });

  it('is nothing to report on another driver, or where /sys has no cpuidle', () => {
    const other = readHaltPolling(sysWith('acpi_idle\n', null));
    expect(other).toEqual({ driver: 'acpi_idle', pollNs: null });
    expect(haltPollingNotice(other)).toBeNull();
    expect(haltPollingWords(other)).toBe('cpuidle driver acpi_idle');
    const none = readHaltPolling(sysWith(null, null));
    expect(none).toBeNull();
    expect(haltPollingNotice(none)).toBeNull();
    expect(haltPollingWords(none)).toBe('');
  });

  it('does not take an unreadable window for 0', () => {
    for (const text of ['', 'x', '-1', '1.5']) {
      const setting = haltPollingOf('haltpoll', text);
      expect(setting?.pollNs).toBeNull();
      expect(haltPollingOff(setting)).toBe(false);
    }
    expect(haltPollingOf('haltpoll', null)?.pollNs).toBeNull();
    expect(haltPollingOf('  \n', '0')).toBeNull();
  });
});
