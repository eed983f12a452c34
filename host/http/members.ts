/**
 * The membership routes (`admin` when auth is on):
 *   GET    /api/v1/system/members        the configuration in effect, with the leader's
 *                                        matchIndex per member when asked of the leader
 *   POST   /api/v1/system/members        {"id","peer","role":"learner"} adds a learner;
 *                                        {"id","role":"voter"} promotes a caught-up one
 *   DELETE /api/v1/system/members/:id    removes a member, the leader included
 * A change answers once its entry is committed and applied on the node asked, with the new
 * configuration; a refusal is the error envelope: 400 for a bad body, 404 for an unknown
 * member, 409 when the cluster's state forbids it now (another change in flight, a learner
 * not caught up, with how far behind), 503 when no leader took it in time.
 *
 * Validation and the mapping of outcomes are pure; only `answerMembers` awaits the node.
 */
import {
  checkPeerAddress, MEMBER_ID_PATTERN, type MembershipChange,
} from '../core/raft/configuration.js';
import type { MembersRefusal, MembersResult, MembersService } from '../node/service.js';
import { badRequest, isKvError, kvError, type KvError } from './errors.js';

/** A membership body is a few ids and an address; the server refuses a larger one (413). */
export const MEMBERS_BODY_BYTES_MAX = 4096;

export interface MembersAnswer {
  readonly status: number;
  readonly body: string;
}

const FIELDS = new Set(['id', 'peer', 'role']);

/** A POST body as a change, or the 400 that says what is wrong with it. */
export function validateMembersBody(text: string | undefined): MembershipChange | KvError {
  if (text === undefined || text.trim() === '') {
    return badRequest('members_bad_body', 'the body must be {"id","peer","role":"learner"} ' +
      'or {"id","role":"voter"}');
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return badRequest('members_bad_body', 'the body is not JSON');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return badRequest('members_bad_body', 'the body must be a JSON object');
  }
  const record = value as Record<string, unknown>;
  const unknown = Object.keys(record).filter((key) => !FIELDS.has(key));
  if (unknown.length > 0) {
    return badRequest('members_bad_body', `unknown field ${JSON.stringify(unknown[0])}: ` +
      'a body holds id, peer and role');
  }
  const id = validateMemberId(record['id']);
  if (isKvError(id)) return id;
  const { role, peer } = record;
  if (role === 'learner') {
    if (typeof peer !== 'string') {
      return badRequest('members_bad_peer', 'a learner needs "peer": the host:port its peer ' +
        'listener is reached at (serve --peer-listen)');
    }
    const bad = checkPeerAddress(peer);
    return bad === null ? { kind: 'addLearner', id, peer } : badRequest('members_bad_peer', bad);
  }
  if (role === 'voter') {
    if (peer !== undefined) {
      return badRequest('members_bad_body', 'a promotion takes no "peer": the member keeps ' +
        'the address it was added with');
    }
    return { kind: 'promote', id };
  }
  return badRequest('members_bad_role', '"role" must be "learner" (add) or "voter" (promote)');
}

/** A member id from a body or a path segment. */
export function validateMemberId(value: unknown): string | KvError {
  if (typeof value !== 'string' || !MEMBER_ID_PATTERN.test(value)) {
    return badRequest('members_bad_id', 'a member id is 1 to 64 of [A-Za-z0-9_.-]');
  }
  return value;
}

const NOT_FOUND: readonly MembersRefusal[] = ['unknown-member'];
const BAD_REQUEST: readonly MembersRefusal[] = ['invalid'];
const UNAVAILABLE: readonly MembersRefusal[] = ['no-leader', 'term-not-committed', 'transferring'];

/** The envelope of a refusal: `members_<reason>` under the status its kind calls for. */
export function refusalError(refusal: MembersRefusal, detail: string): KvError {
  const reason = `members_${refusal.replace(/-/g, '_')}`;
  if (NOT_FOUND.includes(refusal)) return kvError('not_found', reason, detail);
  if (BAD_REQUEST.includes(refusal)) return badRequest(reason, detail);
  if (UNAVAILABLE.includes(refusal)) {
    return kvError('kv_unavailable', reason, detail, { retryAfterSeconds: 1 });
  }
  return kvError('conflict', reason, detail);
}

export function resultAnswer(result: MembersResult): MembersAnswer | KvError {
  switch (result.kind) {
    case 'done':
      return { status: 200, body: JSON.stringify(result.value) };
    case 'refused':
      return refusalError(result.refusal, result.detail);
    case 'unavailable':
      return kvError('kv_unavailable', result.reason, result.detail,
        { retryAfterSeconds: result.retryAfterSeconds });
  }
}

/**
 * Answers one membership request. `rawId` is the raw path segment of a DELETE; `body` the
 * request body as text (undefined when there is none, a KvError when it was too large).
 */
export async function answerMembers(service: MembersService | undefined, method: string,
  rawId: string, body: string | undefined | KvError): Promise<MembersAnswer | KvError> {
  if (service === undefined) {
    return kvError('not_found', 'not_found', 'this node offers no membership routes');
  }
  if (method === 'GET') return { status: 200, body: JSON.stringify(service.membersView()) };
  if (isKvError(body)) return body;
  if (method === 'DELETE') {
    let decoded: string;
    try {
      decoded = decodeURIComponent(rawId);
    } catch {
      return badRequest('members_bad_id', 'the member id in the path is not valid UTF-8');
    }
    const id = validateMemberId(decoded);
    if (isKvError(id)) return id;
    return resultAnswer(await service.changeMembers({ kind: 'remove', id }));
  }
  const change = validateMembersBody(body);
  if (isKvError(change)) return change;
  return resultAnswer(await service.changeMembers(change));
}
