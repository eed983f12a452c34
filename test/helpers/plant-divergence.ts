/**
 * Plants a divergence in a stopped node's log: the first record whose data holds `marker`
 * gets the marker's first byte changed to 'P' and is written back framed and checksummed by
 * the storage code's own encoder, so nothing but the content tells. Returns its index.
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { encodeRecord } from '../../host/storage/record.js';
import { scanSegmentBytes } from '../../host/storage/segment-scan.js';

export function plantDivergence(dataDir: string, marker: string): number {
  const walDir = join(dataDir, 'wal');
  for (const name of readdirSync(walDir).filter((n) => n.endsWith('.wal')).sort()) {
    const path = join(walDir, name);
    const bytes = readFileSync(path);
    const scan = scanSegmentBytes(bytes, Number(name.slice(0, 20)), true, 0, 0);
    if (scan.kind !== 'ok') throw new Error(`segment ${name} does not scan: ${scan.kind}`);
    for (const [i, entry] of scan.entries.entries()) {
      const at = Buffer.from(entry.data).indexOf(marker);
      if (at < 0) continue;
      const data = Buffer.from(entry.data);
      data[at] = 'P'.charCodeAt(0);
      bytes.set(encodeRecord({ ...entry, data }), scan.offsets[i]!);
      writeFileSync(path, bytes);
      return entry.index;
    }
  }
  throw new Error('no record holds the marker');
}
