/**
 * Whether this machine's idle vCPUs poll before they halt.
 *
 * On a KVM guest a vCPU with nothing to run halts, which is an exit to the hypervisor, and the
 * next interrupt or wake-up for it pays the way back in: about 25 µs a wake on the machines
 * hivekv is measured on. A call at low concurrency meets a halted vCPU two or three times
 * (its request, its fdatasync's completion, the client's answer), so there that is most of
 * what a call costs beyond its fsync (docs/performance.md, "Idle vCPUs that halt"). Linux's
 * `haltpoll` cpuidle driver polls for a while before it halts; the window is the module
 * parameter `guest_halt_poll_ns`, and 0 turns the polling off. It is a setting of the
 * machine, not of hivekv: a node only reports it (a line in its log at start, and
 * `bench:node`'s one-connection line).
 *
 * Pure apart from `readHaltPolling`, which reads two files under /sys.
 */
import { join } from 'node:path';
import { readOrNull } from './system-files.js';

/** The cpuidle driver of a guest that can poll before it halts. */
const HALTPOLL_DRIVER = 'haltpoll';

export interface HaltPolling {
  /** The cpuidle driver (`/sys/devices/system/cpu/cpuidle/current_driver`). */
  readonly driver: string;
  /** The polling window in ns when the driver is `haltpoll` and says it; else null. */
  readonly pollNs: number | null;
}

/** From the two files' text (null: the file is absent); null when there is no driver. */
export function haltPollingOf(driverText: string | null, pollNsText: string | null):
  HaltPolling | null {
  const driver = driverText?.trim() ?? '';
  if (driver === '') return null;
  // Number('') is 0: an empty file must not read as polling turned off.
  const text = pollNsText?.trim() ?? '';
  const poll = Number(text);
  const pollNs = driver === HALTPOLL_DRIVER && text !== '' && Number.isSafeInteger(poll) &&
    poll >= 0 ? poll : null;
  return { driver, pollNs };
}

/** This machine's setting; null where /sys says nothing (not Linux, no cpuidle). */
export function readHaltPolling(sysRoot = '/sys'): HaltPolling | null {
  return haltPollingOf(
    readOrNull(join(sysRoot, 'devices', 'system', 'cpu', 'cpuidle', 'current_driver')),
    readOrNull(join(sysRoot, 'module', 'haltpoll', 'parameters', 'guest_halt_poll_ns')));
}

/** True when the guest could poll before halting and is told not to. */
export function haltPollingOff(setting: HaltPolling | null): boolean {
  return setting !== null && setting.driver === HALTPOLL_DRIVER && setting.pollNs === 0;
}

/** What a node logs at start when `haltPollingOff`; null otherwise. */
export function haltPollingNotice(setting: HaltPolling | null): string | null {
  if (!haltPollingOff(setting)) return null;
  return 'idle vCPUs halt without polling (cpuidle driver haltpoll, guest_halt_poll_ns 0): ' +
    'a call at low concurrency pays about 25 µs for each halted vCPU it wakes; ' +
    'a machine where latency at one connection matters can set ' +
    '/sys/module/haltpoll/parameters/guest_halt_poll_ns (docs/performance.md, ' +
    '"Idle vCPUs that halt")';
}

/** The setting in a few words, for a benchmark's report; '' when /sys says nothing. */
export function haltPollingWords(setting: HaltPolling | null): string {
  if (setting === null) return '';
  if (setting.driver !== HALTPOLL_DRIVER) return `cpuidle driver ${setting.driver}`;
  if (setting.pollNs === null) return 'cpuidle driver haltpoll, polling window not readable';
  if (setting.pollNs === 0) return 'guest halt polling off (guest_halt_poll_ns 0)';
  return `guest halt polling for up to ${Math.round(setting.pollNs / 1000)} µs ` +
    `(guest_halt_poll_ns ${setting.pollNs})`;
}
