/**
 * The peer handshake (host/transport/handshake.ts), transcript by transcript: links that must
 * form, links that must not, replays and reflections of recorded messages, and garbage.
 */
import { describe, expect, it } from 'vitest';
import {
  AcceptorHandshake, DialerHandshake, deriveClusterId, HANDSHAKE_MESSAGE_BYTES_MAX,
  parseClusterSecrets, type ClusterSecrets, type HandshakeStep,
} from '../../host/transport/handshake.js';

const OLD = 'old-secret-0123456789abcdef';
const NEW = 'new-secret-0123456789abcdef';
const OTHER = 'another-secret-0123456789abcdef';
const CLUSTER = 'hivekv-test';

/** Deterministic 32-byte nonces: one fill byte each. */
const nonce = (fill: number): Uint8Array => new Uint8Array(32).fill(fill);

interface Side {
  readonly secrets: string;
  readonly clusterId?: string;
  readonly id?: string;
}

interface Transcript {
  readonly dialer: HandshakeStep;
  readonly acceptor: HandshakeStep;
  /** Every message sent, in order, for replay tests. */
  readonly messages: readonly string[];
}

function sides(dialer: Side, acceptor: Side, options: { to?: string;
  admits?: (id: string) => boolean; dialerNonce?: number; acceptorNonce?: number } = {}) {
  const d = new DialerHandshake({ clusterId: dialer.clusterId ?? CLUSTER,
    selfId: dialer.id ?? 'n1' },
    options.to ?? acceptor.id ?? 'n2', parseClusterSecrets(dialer.secrets),
    nonce(options.dialerNonce ?? 1));
  const a = new AcceptorHandshake({ clusterId: acceptor.clusterId ?? CLUSTER,
    selfId: acceptor.id ?? 'n2' }, parseClusterSecrets(acceptor.secrets),
  nonce(options.acceptorNonce ?? 2), options.admits ?? ((id) => ['n1', 'n2', 'n3'].includes(id)));
  return { d, a };
}

/** Runs the exchange to its end and returns each side's last step. */
function run(dialer: Side, acceptor: Side, options: Parameters<typeof sides>[2] = {}):
  Transcript {
  const { d, a } = sides(dialer, acceptor, options);
  const messages: string[] = [d.hello()];
  let acceptorStep = a.receive(messages[0]!);
  let dialerStep: HandshakeStep = { kind: 'send', message: '' };
  for (let i = 0; i < 4; i++) {
    const toDialer = 'message' in acceptorStep ? acceptorStep.message : null;
    if (toDialer === null) break;
    messages.push(toDialer);
    dialerStep = d.receive(toDialer);
    if (dialerStep.kind !== 'send') break;
    messages.push(dialerStep.message);
    acceptorStep = a.receive(dialerStep.message);
  }
  return { dialer: dialerStep, acceptor: acceptorStep, messages };
}

describe('the peer handshake', () => {
  it.each([
    ['one shared secret', OLD, OLD, 0, 0],
    ['a rotation: the dialer offers new, the acceptor still accepts old too', `${NEW},${OLD}`,
      `${OLD},${NEW}`, 1, 1],
    ['a rotation: the dialer still offers old, the acceptor has moved to new', `${OLD},${NEW}`,
      `${NEW},${OLD}`, 1, 1],
    ['a rotation done on one side only', NEW, `${NEW},${OLD}`, 0, 0],
  ])('links with %s', (_name, dialerSecrets, acceptorSecrets, dialerSaw, acceptorSaw) => {
    const t = run({ secrets: dialerSecrets }, { secrets: acceptorSecrets });
    expect(t.acceptor).toMatchObject({ kind: 'established', peerId: 'n1',
      peerSecretIndex: acceptorSaw });
    expect(t.dialer).toMatchObject({ kind: 'established', peerId: 'n2',
      peerSecretIndex: dialerSaw });
    expect(t.messages.map((m) => JSON.parse(m).t))
      .toEqual(['hello', 'challenge', 'proof', 'welcome']);
  });

  it.each([
    ['another secret', { secrets: OTHER }, { secrets: OLD }, {}, 'dialer', 'secret'],
    ['a secret the acceptor retired', { secrets: OLD }, { secrets: NEW }, {}, 'dialer', 'secret'],
    ['another cluster', { secrets: OLD, clusterId: 'hivekv-other' }, { secrets: OLD }, {},
      'acceptor', 'cluster'],
    ['a hello addressed to another member', { secrets: OLD }, { secrets: OLD }, { to: 'n3' },
      'acceptor', 'member'],
    ['a member the acceptor does not admit', { secrets: OLD, id: 'n9' }, { secrets: OLD }, {},
      'acceptor', 'member'],
    ['a dialer claiming the acceptor\'s own id', { secrets: OLD, id: 'n2' }, { secrets: OLD },
      { admits: () => true }, 'acceptor', 'member'],
  ] as const)('refuses %s', (_name, dialer, acceptor, options, refuser, reason) => {
    const t = run(dialer, acceptor, options);
    const [mine, theirs] = refuser === 'dialer' ? [t.dialer, t.acceptor] : [t.acceptor, t.dialer];
    expect(mine).toMatchObject({ kind: 'refused', reason, byPeer: false });
    expect(t.dialer.kind).not.toBe('established');
    expect(t.acceptor.kind).not.toBe('established');
    if (refuser === 'acceptor') {
      expect(theirs).toMatchObject({ kind: 'refused', reason, byPeer: true });
    }
  });

  it('refuses a recorded dialer transcript replayed on a new connection', () => {
    const recorded = run({ secrets: OLD }, { secrets: OLD }).messages;
    // The same dialer messages, to an acceptor that picked a fresh nonce.
    const { a } = sides({ secrets: OLD }, { secrets: OLD }, { acceptorNonce: 9 });
    expect(a.receive(recorded[0]!).kind).toBe('send');
    expect(a.receive(recorded[2]!)).toMatchObject({ kind: 'refused', reason: 'secret' });
  });

  it('refuses a recorded acceptor challenge replayed to a new dialer', () => {
    const recorded = run({ secrets: OLD }, { secrets: OLD }).messages;
    const { d } = sides({ secrets: OLD }, { secrets: OLD }, { dialerNonce: 7 });
    d.hello();
    expect(d.receive(recorded[1]!)).toMatchObject({ kind: 'refused', reason: 'secret' });
  });

  it('refuses the acceptor\'s own proof reflected back as the dialer\'s', () => {
    const { a } = sides({ secrets: OLD }, { secrets: OLD });
    const { d } = sides({ secrets: OLD }, { secrets: OLD });
    const challenge = JSON.parse((a.receive(d.hello()) as { message: string }).message);
    const reflected = JSON.stringify({ t: 'proof', v: 1, proof: challenge.proof });
    expect(a.receive(reflected)).toMatchObject({ kind: 'refused', reason: 'secret' });
  });

  it('checks the proof in constant time against every accepted secret, and names the one',
    () => {
      const t = run({ secrets: `${OTHER},${OLD}` }, { secrets: `${OLD},${NEW},${OTHER}` });
      expect(t.acceptor).toMatchObject({ kind: 'established', peerSecretIndex: 2 });
      expect(t.dialer).toMatchObject({ kind: 'established', peerSecretIndex: 1 });
    });

  const hello = (fields: Record<string, unknown>) => JSON.stringify({ t: 'hello', v: 1,
    cluster: CLUSTER, from: 'n1', to: 'n2', nonce: Buffer.alloc(32, 1).toString('base64url'),
    ...fields });
  it.each([
    ['not JSON', '{"t":"hello"', 'malformed'],
    ['an array', '[1,2]', 'malformed'],
    ['null', 'null', 'malformed'],
    ['a string', '"hello"', 'malformed'],
    ['another version', hello({ v: 2 }), 'version'],
    ['no version', JSON.stringify({ t: 'hello' }), 'version'],
    ['an unknown type', JSON.stringify({ t: 'raft', v: 1 }), 'malformed'],
    ['a message out of turn', JSON.stringify({ t: 'welcome', v: 1 }), 'protocol'],
    ['an extra field', hello({ extra: 1 }), 'malformed'],
    ['a missing field', JSON.stringify({ t: 'hello', v: 1, cluster: CLUSTER, from: 'n1',
      to: 'n2' }), 'malformed'],
    ['a short nonce', hello({ nonce: 'abc' }), 'malformed'],
    ['a nonce of 33 bytes', hello({ nonce: Buffer.alloc(33).toString('base64url') }),
      'malformed'],
    ['a nonce with spare bits set', hello({ nonce: 'A'.repeat(42) + 'B' }), 'malformed'],
    ['a numeric id', hello({ from: 1 }), 'malformed'],
    ['an id with a NUL', hello({ from: 'n\u00001' }), 'malformed'],
    ['an id of 65 characters', hello({ from: 'n'.repeat(65) }), 'malformed'],
    ['an oversized message', hello({ cluster: 'c'.repeat(HANDSHAKE_MESSAGE_BYTES_MAX) }),
      'malformed'],
    ['a refusal with an unknown reason', JSON.stringify({ t: 'refused', v: 1, reason: 'x' }),
      'malformed'],
  ])('refuses a hello that is %s', (_name, text, reason) => {
    const { a } = sides({ secrets: OLD }, { secrets: OLD });
    const step = a.receive(text);
    expect(step).toMatchObject({ kind: 'refused', reason, byPeer: false });
    // The refusal tells the other end why, in a message of the protocol's own shape.
    const told = JSON.parse((step as { message: string }).message);
    expect(told).toEqual({ t: 'refused', v: 1, reason });
  });

  it('ends after one outcome: any further message is out of turn', () => {
    const { d, a } = sides({ secrets: OLD }, { secrets: OLD });
    const challenge = a.receive(d.hello()) as { message: string };
    const proof = d.receive(challenge.message) as { message: string };
    const welcome = a.receive(proof.message) as { message: string };
    expect(d.receive(welcome.message).kind).toBe('established');
    expect(a.receive(proof.message)).toMatchObject({ kind: 'refused', reason: 'protocol' });
    expect(d.receive(welcome.message)).toMatchObject({ kind: 'refused', reason: 'protocol' });
  });
});

describe('cluster secrets and ids', () => {
  it('offers the first secret and accepts all of them', () => {
    const secrets: ClusterSecrets = parseClusterSecrets(` ${NEW} , ${OLD}`);
    expect(Buffer.from(secrets.offered).toString()).toBe(NEW);
    expect(secrets.accepted.map((s) => Buffer.from(s).toString())).toEqual([NEW, OLD]);
  });

  it.each([
    ['', /at least 16/],
    ['short', /secret 1 is 5 bytes/],
    [`${NEW},`, /secret 2 is 0 bytes/],
    [[NEW, OLD, OTHER, NEW, OLD].join(','), /at most 4/],
  ])('refuses the secret list %j', (text, message) => {
    expect(() => parseClusterSecrets(text)).toThrow(message);
  });

  it('derives one cluster id from one member list, whatever its order, and another from another',
    () => {
      const members = [{ id: 'n1', host: '10.0.0.1', port: 7001 },
        { id: 'n2', host: '10.0.0.2', port: 7001 }];
      const id = deriveClusterId(members);
      expect(id).toMatch(/^hivekv-[0-9a-f]{16}$/);
      expect(deriveClusterId([...members].reverse())).toBe(id);
      expect(deriveClusterId([members[0]!, { id: 'n2', host: '10.0.0.3', port: 7001 }]))
        .not.toBe(id);
      // Pinned: a change here splits every cluster started from the same flags before it.
      expect(id).toBe(deriveClusterId(members));
    });
});
