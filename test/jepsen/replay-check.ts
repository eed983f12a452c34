/**
 * After a fault run, every member's data directory is replayed through the machine
 * (host/replay/, as `hivekv replay` does) up to the last index all of them hold: every
 * checkpoint the logs carry must pass, and every directory must reach one digest there. A
 * directory that cannot be replayed to that index (its snapshot is past it) is reported,
 * not failed: there is nothing to compare it at.
 */
import { DataDir } from '../../host/replay/data-dir.js';
import { Replayer, ReplayError } from '../../host/replay/replay.js';
import type { Verdict } from './checkers.js';

interface Replayed {
  readonly id: string;
  readonly digest: string;
  readonly passed: number;
  readonly diverged: string | null;
}

/** Replays the directories (by member id) to their common last index and compares them. */
export async function checkReplays(dirs: ReadonlyMap<string, string>): Promise<Verdict> {
  const opened = new Map<string, DataDir>();
  for (const [id, dir] of dirs) opened.set(id, await DataDir.open(dir));
  const common = Math.min(...[...opened.values()].map((d) => d.lastIndex ?? 0));
  const replayed: Replayed[] = [];
  const skipped: string[] = [];
  for (const [id, data] of opened) {
    let replayer: Replayer;
    try {
      replayer = await Replayer.start(data, { to: common });
    } catch (error) {
      if (!(error instanceof ReplayError)) throw error;
      skipped.push(`${id}: ${error.message}`);
      continue;
    }
    let digest = '';
    const summary = await replayer.run(() => false, (_index, _term, d) => { digest = d; });
    const d = summary.divergence;
    replayed.push({ id, digest, passed: summary.checkpointsPassed,
      diverged: d === null ? null : `${id}: the checkpoint at entry ${d.entryIndex} says ` +
        `${d.outcome.expected} at index ${d.outcome.index}, the log replays to ${d.outcome.own}` });
  }
  const problems = replayed.flatMap((r) => r.diverged === null ? [] : [r.diverged]);
  const digests = new Set(replayed.map((r) => r.digest));
  if (digests.size > 1) {
    problems.push(`the directories part at index ${common}: ` +
      replayed.map((r) => `${r.id} ${r.digest}`).join(', '));
  }
  if (replayed.length === 0) problems.push(`no directory replays to index ${common}`);
  const checkpoints = replayed.reduce((sum, r) => sum + r.passed, 0);
  const summary = problems.length > 0 ? problems[0]! : `${replayed.length} data directories ` +
    `replay to digest ${[...digests][0]} at index ${common}, ${checkpoints} checkpoints ` +
    `verified` + (skipped.length > 0 ? `; not comparable: ${skipped.join('; ')}` : '');
  return { name: 'replay', valid: problems.length === 0, summary, evidence: problems };
}
