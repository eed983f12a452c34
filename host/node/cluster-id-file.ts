/**
 * A data directory belongs to one cluster. The first start writes the cluster id it serves to
 * `<data>/CLUSTER_ID`; every later start keeps that id, so a node restarted with a member
 * list that changed since (members added and removed at run time) still speaks for the
 * cluster its log belongs to, and a directory copied from another cluster cannot link to
 * this one. Runs under the data-directory lock, before anything else is written.
 */
import { constants } from 'node:fs';
import { open, readFile, rename } from 'node:fs/promises';
import { join } from 'node:path';
import { ID_PATTERN } from '../transport/handshake.js';
import { fsyncDirectory } from '../storage/wal.js';
import { openWith } from '../storage/descriptors.js';

export const CLUSTER_ID_FILE = 'CLUSTER_ID';

export interface SettledClusterId {
  readonly id: string;
  /** Set when the id differs from what this start's flags would derive: say so in the log. */
  readonly note: string | null;
}

async function readClusterIdFile(path: string): Promise<string | null> {
  let text: string;
  try {
    text = await openWith(() => readFile(path, 'utf8'));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
  const id = text.trim();
  if (!ID_PATTERN.test(id)) {
    throw new Error(`${path} holds "${id.slice(0, 80)}", not a cluster id; restore it from ` +
      'another member\'s data directory, or remove it and set HIVEKV_CLUSTER_ID');
  }
  return id;
}

/** Writes the file durably: temp file, fsync, rename, directory fsync. */
async function writeClusterIdFile(dir: string, id: string): Promise<void> {
  const temp = join(dir, `${CLUSTER_ID_FILE}.tmp`);
  const handle = await openWith(() =>
    open(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC));
  try {
    await handle.writeFile(`${id}\n`);
    await handle.sync();
  } finally {
    await handle.close();
  }
  await rename(temp, join(dir, CLUSTER_ID_FILE));
  await fsyncDirectory(dir);
}

/**
 * The cluster id this node serves. `configured` comes from HIVEKV_CLUSTER_ID (`environment`)
 * or from `--peers` (`derived`). Throws when the operator named one cluster and the data
 * directory belongs to another: that is a node about to join the wrong cluster.
 */
export async function settleClusterId(dir: string,
  configured: { readonly id: string; readonly source: 'environment' | 'derived' }):
  Promise<SettledClusterId> {
  const stored = await readClusterIdFile(join(dir, CLUSTER_ID_FILE));
  if (stored === null) {
    await writeClusterIdFile(dir, configured.id);
    return { id: configured.id, note: null };
  }
  if (stored === configured.id) return { id: stored, note: null };
  if (configured.source === 'environment') {
    throw new Error(`HIVEKV_CLUSTER_ID=${configured.id}, but the data directory ${dir} ` +
      `belongs to cluster ${stored}; point --data at this cluster's directory, or set ` +
      `HIVEKV_CLUSTER_ID=${stored}`);
  }
  return { id: stored, note: `the data directory belongs to cluster ${stored}; --peers as ` +
    `given now would derive ${configured.id}, so the directory's id stands` };
}
