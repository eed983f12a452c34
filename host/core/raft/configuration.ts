/**
 * Cluster configurations and the changes between them (thesis chapter 4), as pure values:
 * the rules a change must obey whatever the leader's state, and the bytes a `config` entry
 * carries.
 *
 * We change membership one server at a time (thesis §4.1), never by joint consensus (§4.3):
 * every operation an operator needs (add a learner, promote it, remove a member) is a
 * single-server change, and any majority of the old voter set overlaps any majority of the
 * new one, so no two leaders can be elected for one term across the change. Joint
 * consensus exists for arbitrary changes in one step, which we do not offer; it would add a
 * second quorum to every decision (commit, election, read index, check-quorum) for no
 * operation we need. Learners (thesis §4.2.1's non-voting members) change no voter set.
 *
 * Pure: no I/O, no clock. The raft core applies the rules that depend on its state (one
 * change at a time, a committed entry of the current term first, a caught-up learner).
 */
import type { Configuration, PeerEntry } from './types.js';

/** Voters one configuration may hold; more would make every quorum slower for no gain. */
export const VOTERS_MAX = 15;
/** Voters and learners together. */
export const MEMBERS_MAX = 32;
/** Removed ids a configuration remembers; past it the oldest is forgotten (and reusable). */
export const REMOVED_IDS_MAX = 1024;
/** Bytes of a peer address (`host:port`). */
export const PEER_ADDRESS_BYTES_MAX = 255;
/** Member ids: what `--id` and `--peers` accept. */
export const MEMBER_ID_PATTERN = /^[A-Za-z0-9_.-]{1,64}$/;

export type MemberRole = 'voter' | 'learner';

/** One change, as an operator asks for it. */
export type MembershipChange =
  | { readonly kind: 'addLearner'; readonly id: string; readonly peer: string }
  | { readonly kind: 'promote'; readonly id: string }
  | { readonly kind: 'remove'; readonly id: string };

/**
 * Why a change was refused, as a stable id (the HTTP layer maps each to a status):
 * the first group depends on the leader's state and may pass later; the second on the
 * configuration and the request.
 */
export type MembershipRefusal =
  | 'no-leader'
  | 'transferring'
  | 'change-in-progress'
  | 'term-not-committed'
  | 'not-caught-up'
  | 'member-exists'
  | 'id-removed'
  | 'unknown-member'
  | 'not-a-learner'
  | 'last-voter'
  | 'too-many-voters'
  | 'too-many-members'
  | 'invalid';

/** Every refusal, in wire-code order (the codec writes the position). */
export const MEMBERSHIP_REFUSALS: readonly MembershipRefusal[] = [
  'no-leader', 'transferring', 'change-in-progress', 'term-not-committed', 'not-caught-up',
  'member-exists', 'id-removed', 'unknown-member', 'not-a-learner', 'last-voter',
  'too-many-voters', 'too-many-members', 'invalid',
];

export interface Refused {
  readonly refusal: MembershipRefusal;
  readonly detail: string;
}

export function isRefused(value: Configuration | Refused): value is Refused {
  return 'refusal' in value;
}

/** The configuration a cluster starts with: `voters` (may be empty for a joining node). */
export function bootstrapConfiguration(voters: readonly string[],
  peers: readonly PeerEntry[] = []): Configuration {
  const ids = [...voters].sort();
  const address = (id: string): string => peers.find((p) => p.id === id)?.address ?? '';
  return { voters: ids, learners: [], peers: ids.map((id) => ({ id, address: address(id) })),
    removed: [] };
}

export function roleOf(config: Configuration, id: string): MemberRole | null {
  if (config.voters.includes(id)) return 'voter';
  if (config.learners.includes(id)) return 'learner';
  return null;
}

export function peerAddressOf(config: Configuration, id: string): string | null {
  return config.peers.find((p) => p.id === id)?.address ?? null;
}

/** `host:port` with a non-empty host and a port in 1..65535; null when it is not. */
export function checkPeerAddress(text: string): string | null {
  if (text.length === 0 || text.length > PEER_ADDRESS_BYTES_MAX) {
    return `a peer address is 1 to ${PEER_ADDRESS_BYTES_MAX} characters of host:port`;
  }
  const colon = text.lastIndexOf(':');
  const port = Number(text.slice(colon + 1));
  if (colon <= 0 || !/^\d{1,5}$/.test(text.slice(colon + 1)) || port < 1 || port > 65535) {
    return `peer address "${text}" is not host:port with a port from 1 to 65535`;
  }
  if (/[\s/?#@]/.test(text)) return `peer address "${text}" holds a space, /, ?, # or @`;
  return null;
}

/**
 * The configuration after `change`, or why the change can never apply to `config`. Keeps
 * every invariant of `Configuration` (checked again by `checkConfiguration`).
 */
export function applyChange(config: Configuration, change: MembershipChange):
  Configuration | Refused {
  if (!MEMBER_ID_PATTERN.test(change.id)) {
    return { refusal: 'invalid', detail: 'a member id is 1 to 64 of [A-Za-z0-9_.-]' };
  }
  const role = roleOf(config, change.id);
  switch (change.kind) {
    case 'addLearner': {
      const bad = checkPeerAddress(change.peer);
      if (bad !== null) return { refusal: 'invalid', detail: bad };
      if (role !== null) {
        return { refusal: 'member-exists', detail: `${change.id} is already a ${role}` };
      }
      if (config.removed.includes(change.id)) {
        return { refusal: 'id-removed', detail: `${change.id} was removed from this cluster ` +
          'and its messages may still be in flight: give the new node a new id' };
      }
      if (config.voters.length + config.learners.length >= MEMBERS_MAX) {
        return { refusal: 'too-many-members', detail: `a cluster has at most ${MEMBERS_MAX} ` +
          'members' };
      }
      return normalize({ ...config, learners: [...config.learners, change.id],
        peers: [...config.peers, { id: change.id, address: change.peer }] });
    }
    case 'promote':
      if (role === null) return unknownMember(change.id);
      if (role === 'voter') {
        return { refusal: 'not-a-learner', detail: `${change.id} is already a voter` };
      }
      if (config.voters.length >= VOTERS_MAX) {
        return { refusal: 'too-many-voters', detail: `a cluster has at most ${VOTERS_MAX} voters` };
      }
      return normalize({ ...config, voters: [...config.voters, change.id],
        learners: config.learners.filter((id) => id !== change.id) });
    case 'remove':
      return removeMember(config, change.id, role);
  }
}

function removeMember(config: Configuration, id: string, role: MemberRole | null):
  Configuration | Refused {
  if (role === null) return unknownMember(id);
  if (role === 'voter' && config.voters.length === 1) {
    return { refusal: 'last-voter', detail: `${id} is the last voter: a cluster needs one` };
  }
  const removed = [...config.removed, id];
  if (removed.length > REMOVED_IDS_MAX) removed.shift();
  return normalize({
    voters: config.voters.filter((v) => v !== id),
    learners: config.learners.filter((l) => l !== id),
    peers: config.peers.filter((p) => p.id !== id),
    removed,
  });
}

function unknownMember(id: string): Refused {
  return { refusal: 'unknown-member', detail: `${id} is not a member of this cluster` };
}

function normalize(config: Configuration): Configuration {
  return {
    voters: [...config.voters].sort(),
    learners: [...config.learners].sort(),
    peers: [...config.peers].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)),
    removed: config.removed,
  };
}

/** Null when `config` keeps every invariant of `Configuration`, else what it breaks. */
export function checkConfiguration(config: Configuration): string | null {
  const members = [...config.voters, ...config.learners];
  if (new Set(members).size !== members.length) return 'a member is listed twice';
  if (config.voters.length > VOTERS_MAX) return `more than ${VOTERS_MAX} voters`;
  if (members.length > MEMBERS_MAX) return `more than ${MEMBERS_MAX} members`;
  if (!members.every((id) => MEMBER_ID_PATTERN.test(id))) return 'a member id is malformed';
  if (!isSorted(config.voters) || !isSorted(config.learners)) return 'ids are not sorted';
  const peerIds = config.peers.map((p) => p.id);
  if (!isSorted(peerIds) || peerIds.join('\u0000') !== [...members].sort().join('\u0000')) {
    return 'peers do not list each member once';
  }
  if (config.removed.length > REMOVED_IDS_MAX) return 'too many removed ids';
  if (config.removed.some((id) => members.includes(id))) return 'a removed id is a member';
  return null;
}

function isSorted(ids: readonly string[]): boolean {
  for (let i = 1; i < ids.length; i++) {
    if ((ids[i - 1] as string) >= (ids[i] as string)) return false;
  }
  return true;
}

/** Only the configuration's own fields (a snapshot meta carries more). */
export function configurationOf(c: Configuration): Configuration {
  return { voters: c.voters, learners: c.learners, peers: c.peers, removed: c.removed };
}

export function sameConfiguration(a: Configuration, b: Configuration): boolean {
  const key = (c: Configuration): string => JSON.stringify([c.voters, c.learners,
    c.peers.map((p) => [p.id, p.address]), c.removed]);
  return key(a) === key(b);
}

// ---- the bytes of a `config` entry --------------------------------------------------------

/** What a `config` entry holds: the change that made it and the whole configuration. */
export interface ConfigEntryData {
  readonly change: MembershipChange;
  readonly config: Configuration;
}

const utf8 = new TextEncoder();
const utf8Strict = new TextDecoder('utf-8', { fatal: true });

/**
 * A `config` entry's bytes: compact JSON, so `inspect` and `replay` can show it as is. The
 * whole configuration travels, not only the change, so that a node reads its configuration
 * from the newest entry alone.
 */
export function encodeConfigEntry(data: ConfigEntryData): Uint8Array {
  const { change, config } = data;
  return utf8.encode(JSON.stringify({
    change, voters: config.voters, learners: config.learners,
    peers: config.peers.map((p) => [p.id, p.address]), removed: config.removed,
  }));
}

/** Decodes a `config` entry; null when the bytes are not exactly one valid configuration. */
export function decodeConfigEntry(bytes: Uint8Array): ConfigEntryData | null {
  let value: unknown;
  try {
    value = JSON.parse(utf8Strict.decode(bytes));
  } catch {
    return null;
  }
  if (typeof value !== 'object' || value === null) return null;
  const record = value as Record<string, unknown>;
  const change = parseChange(record['change']);
  const voters = stringList(record['voters']);
  const learners = stringList(record['learners']);
  const removed = stringList(record['removed']);
  const peers = peerList(record['peers']);
  if (change === null || voters === null || learners === null || removed === null ||
    peers === null) return null;
  const config: Configuration = { voters, learners, peers, removed };
  return checkConfiguration(config) === null ? { change, config } : null;
}

function stringList(value: unknown): string[] | null {
  if (!Array.isArray(value) || !value.every((v): v is string => typeof v === 'string')) {
    return null;
  }
  return value;
}

function peerList(value: unknown): PeerEntry[] | null {
  if (!Array.isArray(value)) return null;
  const peers: PeerEntry[] = [];
  for (const pair of value) {
    const list = stringList(pair);
    if (list === null || list.length !== 2) return null;
    peers.push({ id: list[0] as string, address: list[1] as string });
  }
  return peers;
}

/** Parses a change as `encodeConfigEntry` writes it (and as the wire codec carries it). */
export function parseChange(value: unknown): MembershipChange | null {
  if (typeof value !== 'object' || value === null) return null;
  const { kind, id, peer } = value as Record<string, unknown>;
  if (typeof id !== 'string') return null;
  if (kind === 'addLearner') return typeof peer === 'string' ? { kind, id, peer } : null;
  if (kind === 'promote' || kind === 'remove') return { kind, id };
  return null;
}
