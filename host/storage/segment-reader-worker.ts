/**
 * The log reading worker (segment-reader.ts): reads each segment it is given, in order,
 * scans it with the rules of segment-scan.ts, and posts the verdict with the bytes
 * (transferred, not copied). Stops after the first segment that is not whole and sound: the
 * recovery acts on that one and reads no further. Builds no entries for the other thread.
 */
import { parentPort, workerData } from 'node:worker_threads';

import { readWholeFileSync, scanInTurn, type SegmentMessage, type SegmentWork } from
  './segment-reader.js';
import type { SegmentVerdict } from './segment-scan.js';

function post(message: SegmentMessage, transfer: ArrayBuffer[]): void {
  parentPort?.postMessage(message, transfer);
}

const work = workerData as SegmentWork;
let lastTerm = 0;
for (let i = 0; i < work.paths.length; i++) {
  let bytes: Buffer;
  try {
    bytes = readWholeFileSync(work.paths[i] as string);
  } catch (error) {
    post({ i, error: error instanceof Error ? error.message : String(error),
      code: (error as NodeJS.ErrnoException).code }, []);
    break;
  }
  // Entries are checked but none is kept: the other thread builds them from the offsets.
  const scan = scanInTurn(work, i, bytes, lastTerm, Number.MAX_SAFE_INTEGER);
  const buffer = bytes.buffer as ArrayBuffer;
  let verdict: SegmentVerdict;
  if (scan.kind === 'ok') {
    const { entries: _none, ...rest } = scan;
    verdict = rest;
    lastTerm = scan.lastTerm;
  } else {
    verdict = scan;
  }
  post({ i, verdict, bytes: buffer }, [buffer]);
  if (scan.kind !== 'ok') break;
}
