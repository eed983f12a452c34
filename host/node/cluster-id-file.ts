/**
 * A data directory belongs to one cluster, and to one member of it. The first start writes
 * the cluster id it serves to `<data>/CLUSTER_ID`; every later start keeps that id, so a node
 * restarted with a member list that changed since (members added and removed at run time)
 * still speaks for the cluster its log belongs to, and a directory copied from another
 * cluster cannot link to this one. It writes its member id to `<data>/MEMBER_ID`, and a later
 * start with another `--id` is refused: the directory's term, vote and log are that member's,
 * and a second process speaking for a member with another's votes could elect two leaders in
 * one term. Runs under the data-directory lock, before anything else is written.
 */
import { constants } from 'node:fs';
import { open, readFile, rename } from 'node:fs/promises';
import { join } from 'node:path';
import { ID_PATTERN } from '../transport/handshake.js';
import { fsyncDirectory } from '../storage/wal.js';
import { openWith } from '../storage/descriptors.js';

export const CLUSTER_ID_FILE = 'CLUSTER_ID';
export const MEMBER_ID_FILE = 'MEMBER_ID';

export interface SettledClusterId {
  readonly id: string;
  /** Set when the id differs from what this start's flags would derive: say so in the log. */
  readonly note: string | null;
}

/** The id an id file holds, or null when there is none; throws on anything else in it. */
async function readIdFile(path: string, what: 'cluster' | 'member'): Promise<string | null> {
  let text: string;
  try {
    text = await openWith(() => readFile(path, 'utf8'));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
  const id = text.trim();
  if (!ID_PATTERN.test(id)) {
    throw new Error(`${path} holds "${id.slice(0, 80)}", not a ${what} id; ` + (what === 'cluster'
      ? 'restore it from another member\'s data directory, or remove it and set HIVEKV_CLUSTER_ID'
      : 'write the id of the member this directory belongs to in it (one line)'));
  }
  return id;
}

/** Writes an id file durably: temp file, fsync, rename, directory fsync. */
export async function writeIdFile(dir: string, name: string, id: string): Promise<void> {
  const temp = join(dir, `${name}.tmp`);
  const handle = await openWith(() =>
    open(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC));
  try {
    await handle.writeFile(`${id}\n`);
    await handle.sync();
  } finally {
    await handle.close();
  }
  await rename(temp, join(dir, name));
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
  const stored = await readIdFile(join(dir, CLUSTER_ID_FILE), 'cluster');
  if (stored === null) {
    await writeIdFile(dir, CLUSTER_ID_FILE, configured.id);
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

/**
 * Keeps `<data>/MEMBER_ID`: written with `id` by the first start (and by a start on a
 * directory from before the file), and a start with another id is refused.
 */
export async function settleMemberId(dir: string, id: string): Promise<void> {
  const stored = await readIdFile(join(dir, MEMBER_ID_FILE), 'member');
  if (stored === null) {
    await writeIdFile(dir, MEMBER_ID_FILE, id);
    return;
  }
  if (stored !== id) {
    throw new Error(`the data directory ${dir} belongs to member ${stored} (${MEMBER_ID_FILE}); ` +
      `start it with --id ${stored}, or give member ${id} a directory of its own (an empty one ` +
      'joins as a new member)');
  }
}
