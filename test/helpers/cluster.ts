/**
 * Small helpers for tests that run several real nodes: member lists, waiting for a leader,
 * waiting for a log line. Every wait is bounded and fails with what it saw.
 */
import { call, freePort, type NodeProcess } from './node-process.js';

export interface MemberPorts {
  readonly id: string;
  readonly peerPort: number;
}

/** `count` members n1..nN with free loopback peer ports. */
export async function memberPorts(count: number): Promise<MemberPorts[]> {
  const ports = await Promise.all(Array.from({ length: count }, () => freePort()));
  return ports.map((peerPort, i) => ({ id: `n${i + 1}`, peerPort }));
}

/** The `--peers` flag for these members on 127.0.0.1. */
export function peersFlag(members: readonly MemberPorts[]): string {
  return members.map((m) => `${m.id}=127.0.0.1:${m.peerPort}`).join(',');
}

export async function sleep(ms: number): Promise<void> {
  await new Promise((resolve) => setTimeout(resolve, ms));
}

/** Polls `probe` every 100 ms until it returns a value other than undefined, or throws. */
export async function waitFor<T>(what: string, timeoutMs: number,
  probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    }
    await sleep(100);
  }
}

/** Waits until every node names the same leader, one of `ids`, and returns it. */
export async function agreedLeader(nodes: readonly NodeProcess[], timeoutMs = 20_000):
  Promise<string> {
  return waitFor('an agreed leader', timeoutMs, async () => {
    const healths = await Promise.all(nodes.map((n) => call(n.url, 'GET', '/health')));
    const leaders = new Set(healths.map((h) => h.body?.leader ?? null));
    const [leader] = [...leaders];
    return leaders.size === 1 && typeof leader === 'string' ? leader : undefined;
  });
}

/** The JSON log lines of a node that match every field of `fields`. */
export function logLines(node: NodeProcess, fields: Record<string, unknown>):
  Array<Record<string, unknown>> {
  const found: Array<Record<string, unknown>> = [];
  for (const line of node.output().split('\n')) {
    if (!line.startsWith('{')) continue;
    try {
      const record = JSON.parse(line) as Record<string, unknown>;
      if (Object.entries(fields).every(([k, v]) => record[k] === v)) found.push(record);
    } catch {
      // a partial line
    }
  }
  return found;
}
