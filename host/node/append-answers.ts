/**
 * The messages a Ready leaves waiting for an fsync, released when it completes, and a
 * follower's answers to appends among them thinned before they are sent. A follower answers every
 * append once it is durable, and one fsync makes several appends durable at once (under
 * load two or three: bench/RESULTS.md, "Idle cores under puts"): of the successes it then
 * sends one leader in one term, only the one with the highest match index tells the leader
 * anything. The leader takes a success as "the follower holds the log up to matchIndex"
 * (progress.ts: the match only grows, and the appends in flight up to it are freed), so the
 * others are messages a lost network could have dropped anyway, sent and received for
 * nothing.
 *
 * Kept as they are: every other message, every refusal (each one points the leader at a
 * different place to probe from), and the order of what is kept.
 *
 * Pure: no I/O, no clock.
 */
import type { AppendResponseMessage, Message } from '../core/raft/messages.js';

function isSuccess(message: Message): message is AppendResponseMessage {
  return message.type === 'appendResponse' && message.success;
}

/**
 * `messages` without the successes another success to the same peer, in the same term,
 * supersedes (a higher match index, or the same one later). Returns `messages` itself when
 * there is nothing to drop.
 */
export function thinAppendAnswers(messages: readonly Message[]): readonly Message[] {
  if (messages.length < 2) return messages;
  // The position of the success each (peer, term) keeps; most lists have none or one.
  let kept: Map<string, number> | null = null;
  let superseded = 0;
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i]!;
    if (!isSuccess(message)) continue;
    kept ??= new Map();
    const key = `${message.to}\u0000${message.term}`;
    const at = kept.get(key);
    if (at === undefined) {
      kept.set(key, i);
      continue;
    }
    superseded++;
    if ((messages[at] as AppendResponseMessage).matchIndex <= message.matchIndex) kept.set(key, i);
  }
  if (kept === null || superseded === 0) return messages;
  const keptAt = new Set(kept.values());
  return messages.filter((message, i) => !isSuccess(message) || keptAt.has(i));
}

/** Messages of one Ready, waiting for the fsync numbered `afterSync`. */
export interface AwaitingSync {
  readonly messages: readonly Message[];
  readonly afterSync: number;
}

/**
 * Takes from the front of `waiting` (oldest first) every batch the fsync numbered `ticket`
 * released, and returns their messages as one list, thinned: what one fsync releases goes
 * out together, so answers from several Readies thin against each other.
 */
export function releaseAfterSync(waiting: AwaitingSync[], ticket: number): readonly Message[] {
  let released: readonly Message[] = [];
  let batches = 0;
  while (waiting.length > 0 && waiting[0]!.afterSync <= ticket) {
    const next = waiting.shift()!.messages;
    released = batches++ === 0 ? next : [...released, ...next];
  }
  return thinAppendAnswers(released);
}
