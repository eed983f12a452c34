/**
 * When the HTTP server stops accepting connections: when the process's file descriptors run
 * short. At its limit a node would have none left for its own files (host/storage/
 * descriptors.ts), and its HTTP server, which accepts in a loop on a socket that stays
 * readable, would spin a core on `accept` failing with EMFILE while every new client waited in
 * the backlog. So the node closes its listening socket before that: new clients are refused at
 * once (and try another node), the connections it has are served on, and the server's idle
 * timeout closes those that send nothing. It listens again once descriptors are free.
 *
 * Descriptors go to the lowest free number, so while the server accepts, the lowest free
 * descriptor tells how many are in use, give or take the holes a closed one leaves until the
 * next open fills it: the gate reads it (`lowestFreeDescriptor`) a few times a second, for
 * one open and one close. Once the listening socket is closed, its own descriptor is such a
 * hole, so the paused gate asks instead whether twice the headroom can be opened
 * (`freeDescriptorsAtLeast`, then closed again). The decisions are pure (`AcceptGate`); the
 * readings are at the bottom.
 */
import { closeSync, openSync, readFileSync } from 'node:fs';
import { isOutOfDescriptors } from '../storage/descriptors.js';

/** Descriptors kept free for the node's own files and peers, at the least and at the most. */
export const HEADROOM_MIN = 64;
export const HEADROOM_MAX = 1024;

/** What to do with the listening socket. */
export type AcceptMove = 'pause' | 'resume' | null;

export class AcceptGate {
  /** The lowest free descriptor at or past which the server stops accepting. */
  readonly pauseAt: number;
  /** Free descriptors it takes to accept again: twice the headroom, so it does not flap. */
  readonly resumeFree: number;
  private accepting = true;

  constructor(readonly limit: number) {
    const headroom = headroomFor(limit);
    this.pauseAt = limit - headroom;
    this.resumeFree = 2 * headroom;
  }

  get isAccepting(): boolean {
    return this.accepting;
  }

  /**
   * A reading while accepting: the lowest free descriptor (null: none was free), and whether
   * the node's reserve of descriptors is full.
   */
  checkAccepting(lowestFree: number | null, reserveFull: boolean): AcceptMove {
    if (!this.accepting) return null;
    if (lowestFree !== null && lowestFree < this.pauseAt && reserveFull) return null;
    this.accepting = false;
    return 'pause';
  }

  /** A reading while paused: whether `resumeFree` descriptors could be opened at once. */
  checkPaused(enoughFree: boolean, reserveFull: boolean): AcceptMove {
    if (this.accepting || !enoughFree || !reserveFull) return null;
    this.accepting = true;
    return 'resume';
  }

  /** An open of the node's own found no descriptor: stop accepting now. */
  exhausted(): AcceptMove {
    if (!this.accepting) return null;
    this.accepting = false;
    return 'pause';
  }

  /** Listening again failed (the port was taken meanwhile): a later reading tries again. */
  resumeFailed(): void {
    this.accepting = false;
  }
}

/** An eighth of the limit, within HEADROOM_MIN and HEADROOM_MAX, and at most half of it. */
export function headroomFor(limit: number): number {
  const eighth = Math.floor(limit / 8);
  return Math.min(Math.floor(limit / 2), Math.max(HEADROOM_MIN, Math.min(HEADROOM_MAX, eighth)));
}

/** The soft limit on open files, from /proc/self/limits; null where it cannot be read. */
export function openFilesLimit(procRoot = '/proc'): number | null {
  let text: string;
  try {
    text = readFileSync(`${procRoot}/self/limits`, 'utf8');
  } catch {
    return null;
  }
  return openFilesLimitOf(text);
}

/** The soft limit of the "Max open files" line of a limits file, or null (also "unlimited"). */
export function openFilesLimitOf(limitsText: string): number | null {
  const line = limitsText.split('\n').find((l) => l.startsWith('Max open files'));
  const soft = line?.slice('Max open files'.length).trim().split(/\s+/)[0];
  if (soft === undefined || !/^\d+$/.test(soft)) return null;
  const value = Number(soft);
  return Number.isSafeInteger(value) && value > 0 ? value : null;
}

/** The lowest free descriptor, found by taking it and giving it back; null if none is free. */
export function lowestFreeDescriptor(): number | null {
  let fd: number;
  try {
    fd = openSync('/dev/null', 'r');
  } catch (error) {
    if (isOutOfDescriptors(error)) return null;
    throw error;
  }
  closeSync(fd);
  return fd;
}

/** Whether `count` descriptors can be opened at once: opens up to that many, then closes them. */
export function freeDescriptorsAtLeast(count: number): boolean {
  const taken: number[] = [];
  try {
    while (taken.length < count) taken.push(openSync('/dev/null', 'r'));
    return true;
  } catch (error) {
    if (isOutOfDescriptors(error)) return false;
    throw error;
  } finally {
    for (const fd of taken) closeSync(fd);
  }
}
