// The membership routes: body validation (a table), the mapping of every refusal to its
// status and reason, the route table, and loopback calls (127.0.0.1, port 0) against a fake
// MembersService: admin only, 400/404/409/413/503 envelopes, the view as answered.
import { afterEach, describe, expect, it } from 'vitest';
import type { MembershipChange } from '../../host/core/raft/configuration.js';
import type { Access, AuthResult, Authenticator, Role } from '../../host/http/guards.js';
import { refusalError, validateMembersBody } from '../../host/http/members.js';
import { matchRoute } from '../../host/http/routes.js';
import { startHttpServer, type HttpServerHandle } from '../../host/http/server.js';
import { DEFAULT_TENANT } from '../../host/machine/commands.js';
import { loadConfig } from '../../host/node/config.js';
import type {
  MembersRefusal, MembersResult, MembersService, MembersView,
} from '../../host/node/service.js';
import { FakeKvService } from '../helpers/fake-service.js';

const VIEW: MembersView = {
  members: [{ id: 'n1', peer: '10.0.0.1:7001', role: 'voter', match: 12 },
    { id: 'n4', peer: '10.0.0.4:7001', role: 'learner', match: 3 }],
  leader: 'n1', term: 2, configIndex: 10, committed: true, source: 'leader', answeredBy: 'n1',
};

class FakeMembers implements MembersService {
  readonly changes: MembershipChange[] = [];
  next: MembersResult = { kind: 'done', value: VIEW };
  membersView(): MembersView {
    return VIEW;
  }
  async changeMembers(change: MembershipChange): Promise<MembersResult> {
    this.changes.push(change);
    return this.next;
  }
}

describe('validateMembersBody', () => {
  it.each([
    ['{"id":"n4","peer":"10.0.0.4:7001","role":"learner"}',
      { kind: 'addLearner', id: 'n4', peer: '10.0.0.4:7001' }],
    ['{"id":"n4","role":"voter"}', { kind: 'promote', id: 'n4' }],
    ['{"role":"learner","peer":"[::1]:7001","id":"a.b_c-9"}',
      { kind: 'addLearner', id: 'a.b_c-9', peer: '[::1]:7001' }],
  ])('accepts %s', (body, change) => {
    expect(validateMembersBody(body)).toEqual(change);
  });

  it.each([
    [undefined, 'members_bad_body'],
    ['not json', 'members_bad_body'],
    ['[1]', 'members_bad_body'],
    ['{"id":"n4","role":"learner","peer":"h:1","extra":1}', 'members_bad_body'],
    ['{"role":"voter"}', 'members_bad_id'],
    ['{"id":"n 4","role":"voter"}', 'members_bad_id'],
    ['{"id":"' + 'x'.repeat(65) + '","role":"voter"}', 'members_bad_id'],
    ['{"id":"n4","role":"learner"}', 'members_bad_peer'],
    ['{"id":"n4","role":"learner","peer":"host"}', 'members_bad_peer'],
    ['{"id":"n4","role":"learner","peer":"h:70000"}', 'members_bad_peer'],
    ['{"id":"n4","role":"learner","peer":"h/x:1"}', 'members_bad_peer'],
    ['{"id":"n4","role":"voter","peer":"h:1"}', 'members_bad_body'],
    ['{"id":"n4"}', 'members_bad_role'],
    ['{"id":"n4","role":"witness"}', 'members_bad_role'],
  ])('refuses %s with %s', (body, reason) => {
    expect(validateMembersBody(body)).toMatchObject({ status: 400, error: 'kv_bad_request',
      reason });
  });
});

describe('refusals', () => {
  it.each([
    ['unknown-member', 404, 'not_found'],
    ['invalid', 400, 'kv_bad_request'],
    ['no-leader', 503, 'kv_unavailable'],
    ['term-not-committed', 503, 'kv_unavailable'],
    ['transferring', 503, 'kv_unavailable'],
    ['change-in-progress', 409, 'conflict'],
    ['not-caught-up', 409, 'conflict'],
    ['member-exists', 409, 'conflict'],
    ['id-removed', 409, 'conflict'],
    ['not-a-learner', 409, 'conflict'],
    ['last-voter', 409, 'conflict'],
    ['too-many-voters', 409, 'conflict'],
    ['too-many-members', 409, 'conflict'],
    ['no-peer-link', 409, 'conflict'],
  ] as Array<[MembersRefusal, number, string]>)('%s is %i %s', (refusal, status, error) => {
    const answer = refusalError(refusal, 'why');
    expect(answer).toMatchObject({ status, error, reason: `members_${refusal.replace(/-/g, '_')}`,
      detail: 'why' });
    expect(answer.retryAfterSeconds === null).toBe(status !== 503);
  });

  it('routes the collection and one member, admin only', () => {
    expect(matchRoute('GET', '/api/v1/system/members')).toMatchObject({ id: 'members',
      access: 'admin', methodAllowed: true });
    expect(matchRoute('PUT', '/api/v1/system/members')).toMatchObject({ methodAllowed: false,
      allow: 'GET, POST' });
    expect(matchRoute('DELETE', '/api/v1/system/members/n4')).toMatchObject({ id: 'member',
      rest: 'n4', access: 'admin', methodAllowed: true });
    expect(matchRoute('GET', '/api/v1/system/members/n4')).toMatchObject({
      methodAllowed: false, allow: 'DELETE' });
    expect(matchRoute('DELETE', '/api/v1/system/members/')).toBeNull();
    expect(matchRoute('DELETE', '/api/v1/system/members/n4/x')).toBeNull();
  });
});

const open: HttpServerHandle[] = [];
afterEach(async () => {
  for (const handle of open.splice(0)) await handle.close();
});

/** Tokens "admin" and "reader". */
class TokenAuth implements Authenticator {
  async authenticate(header: string | undefined): Promise<AuthResult> {
    const token = header?.replace(/^Bearer /, '');
    if (token === 'admin') return { ok: true, roles: new Set<Role>(['admin']) };
    if (token === 'reader') return { ok: true, roles: new Set<Role>(['read-only']) };
    return { ok: false, detail: 'bad token' };
  }
  allows(roles: ReadonlySet<Role>, access: Access): boolean {
    return roles.has('admin') || (access === 'read' && roles.has('read-only'));
  }
}

async function start(members: MembersService | undefined) {
  const log = () => undefined;
  const handle = await startHttpServer({
    service: new FakeKvService(), members, config: loadConfig({}, {}),
    authenticator: new TokenAuth(),
    tenants: { resolve: () => ({ ok: true, tenant: DEFAULT_TENANT }) },
    rateLimiter: { take: () => ({ ok: true }) },
    metrics: { observeRequest: () => undefined, refusal: () => undefined,
      render: async () => '', contentType: 'text/plain' },
    logger: { debug: log, info: log, warn: log, error: log },
  }, '127.0.0.1', 0);
  open.push(handle);
  const base = `http://127.0.0.1:${handle.port}`;
  return async (method: string, path: string, body?: string, token = 'admin') => {
    const res = await fetch(base + path, { method, body,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' } });
    const text = await res.text();
    return { status: res.status, json: JSON.parse(text) as Record<string, unknown>,
      retryAfter: res.headers.get('retry-after') };
  };
}

describe('membership routes over HTTP', () => {
  it('GET answers the view; a change answers the view once done', async () => {
    const members = new FakeMembers();
    const call = await start(members);
    expect(await call('GET', '/api/v1/system/members')).toMatchObject({ status: 200,
      json: VIEW });
    expect(await call('POST', '/api/v1/system/members',
      '{"id":"n5","peer":"10.0.0.5:7001","role":"learner"}')).toMatchObject({ status: 200 });
    expect(await call('DELETE', '/api/v1/system/members/n1')).toMatchObject({ status: 200 });
    expect(members.changes).toEqual([{ kind: 'addLearner', id: 'n5', peer: '10.0.0.5:7001' },
      { kind: 'remove', id: 'n1' }]);
  });

  it('needs the admin role (401, 403)', async () => {
    const call = await start(new FakeMembers());
    expect(await call('GET', '/api/v1/system/members', undefined, 'nobody'))
      .toMatchObject({ status: 401, json: { error: 'unauthorized' } });
    expect(await call('GET', '/api/v1/system/members', undefined, 'reader'))
      .toMatchObject({ status: 403, json: { error: 'forbidden' } });
  });

  it('answers 400, 404, 405, 409, 413 and 503 envelopes', async () => {
    const members = new FakeMembers();
    const call = await start(members);
    expect(await call('POST', '/api/v1/system/members', '{"id":"n5"}'))
      .toMatchObject({ status: 400, json: { reason: 'members_bad_role' } });
    expect(await call('DELETE', '/api/v1/system/members/n%20x'))
      .toMatchObject({ status: 400, json: { reason: 'members_bad_id' } });
    expect(await call('PATCH', '/api/v1/system/members')).toMatchObject({ status: 405 });
    expect(await call('POST', '/api/v1/system/members', `{"id":"${'x'.repeat(5000)}"}`))
      .toMatchObject({ status: 413, json: { error: 'payload_too_large' } });
    members.next = { kind: 'refused', refusal: 'not-caught-up', detail: 'n4 is 900 behind' };
    expect(await call('POST', '/api/v1/system/members', '{"id":"n4","role":"voter"}'))
      .toMatchObject({ status: 409, json: { error: 'conflict', reason: 'members_not_caught_up',
        detail: 'n4 is 900 behind' } });
    members.next = { kind: 'refused', refusal: 'unknown-member', detail: 'no n9' };
    expect(await call('DELETE', '/api/v1/system/members/n9'))
      .toMatchObject({ status: 404, json: { reason: 'members_unknown_member' } });
    members.next = { kind: 'unavailable', reason: 'timeout', detail: 'unknown outcome',
      retryAfterSeconds: 1 };
    expect(await call('DELETE', '/api/v1/system/members/n2'))
      .toMatchObject({ status: 503, json: { error: 'kv_unavailable', reason: 'timeout' },
        retryAfter: '1' });
  });

  it('answers 404 when the node offers no membership routes', async () => {
    const call = await start(undefined);
    expect(await call('GET', '/api/v1/system/members')).toMatchObject({ status: 404 });
  });
});
