/**
 * The peer handshake: before a single Raft frame crosses a link, each end proves to the
 * other that it holds the cluster secret, for this cluster, this pair of members and this
 * connection. Pure: the nonces come in from the caller, nothing here reads a clock, a
 * socket or a random source, so every transcript replays in a test.
 *
 * The exchange is four JSON text messages on a fresh WebSocket (the dialer is the end that
 * connected, the acceptor the end that listened); Raft frames are binary and come after:
 *
 *   1. dialer   -> acceptor  {"t":"hello","v":1,"cluster":C,"from":D,"to":A,"nonce":Nd}
 *   2. acceptor -> dialer    {"t":"challenge","v":1,"nonce":Na,"proof":Pa}
 *   3. dialer   -> acceptor  {"t":"proof","v":1,"proof":Pd}
 *   4. acceptor -> dialer    {"t":"welcome","v":1}
 *   either end, instead:     {"t":"refused","v":1,"reason":R}    and the connection closes
 *
 *   Pa = HMAC-SHA256(secret, transcript("acceptor"))
 *   Pd = HMAC-SHA256(secret, transcript("dialer"))
 *   transcript(role) = "hivekv-peer-v1" NUL role NUL C NUL D NUL A NUL Nd NUL Na
 *
 * Nonces are 32 random bytes and proofs 32 bytes, both base64url without padding. Ids and
 * the cluster id match ID_PATTERN, so NUL cannot occur inside a field and the transcript
 * parses one way only.
 *
 * Why this shape:
 * - Both nonces are in both proofs, so a recorded handshake proves nothing on a new
 *   connection: the other end's fresh nonce differs (no replay), in either direction.
 * - The role is in the transcript, so a proof one end sends cannot be reflected back as the
 *   other role's proof on a second connection.
 * - The cluster id and both member ids are in it, so a proof for one pair or one cluster
 *   is worth nothing for another, and a node of another cluster is refused by name.
 * - Proofs are compared with `timingSafeEqual`, so their bytes do not leak through time.
 * - Rotation: a node offers its first secret and accepts any of its list, so a cluster
 *   moves from `old` to `new,old` to `new` one rolling restart at a time, never split.
 *
 * What it does not do: it authenticates the ends of a link, not each frame after it. On a
 * network where an attacker can rewrite traffic in flight, run the links over TLS
 * (`HIVEKV_TLS_*`), which protects every frame and, with a CA, checks both ends' certificates.
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';

export const HANDSHAKE_VERSION = 1;
/** Every handshake message is at most this many bytes of UTF-8 JSON. */
export const HANDSHAKE_MESSAGE_BYTES_MAX = 512;
/** Bytes of a nonce and of a proof (HMAC-SHA256). */
export const NONCE_BYTES = 32;
export const PROOF_BYTES = 32;
/** Member ids and cluster ids: 1 to 64 of these characters (never NUL). */
export const ID_PATTERN = /^[A-Za-z0-9_.-]{1,64}$/;
/** A secret shorter than this is refused at start: it could be guessed offline. */
export const SECRET_BYTES_MIN = 16;
/** Secrets one node may accept at once (the offered one included). */
export const SECRETS_MAX = 4;

const TRANSCRIPT_LABEL = 'hivekv-peer-v1';
const B64URL_32_PATTERN = /^[A-Za-z0-9_-]{43}$/;

/** Why a handshake ended without a link; `remote-*` reasons come from the other end. */
export type RefusalReason =
  | 'malformed'   // not a handshake message of this version's shape
  | 'version'     // another handshake version
  | 'cluster'     // another cluster id
  | 'member'      // the ids do not name this member and one it admits
  | 'secret'      // the proof does not verify with any secret this end accepts
  | 'protocol';   // a message out of turn, or a Raft frame before the handshake ended

const REASONS: readonly RefusalReason[] =
  ['malformed', 'version', 'cluster', 'member', 'secret', 'protocol'];

export interface ClusterSecrets {
  /** The secret this node proves with (the first of HIVEKV_CLUSTER_SECRET). */
  readonly offered: Uint8Array;
  /** Every secret a peer may prove with, `offered` first. */
  readonly accepted: readonly Uint8Array[];
}

export interface LinkIdentity {
  readonly clusterId: string;
  readonly selfId: string;
}

export type HandshakeStep =
  /** Send `message` and wait for the next one. */
  | { readonly kind: 'send'; readonly message: string }
  /**
   * The link is authenticated: send `message` if not null, then Raft frames may flow.
   * `peerSecretIndex` is the position in `accepted` of the secret the peer proved with (a
   * peer still on an old secret shows here during a rotation).
   */
  | {
      readonly kind: 'established';
      readonly peerId: string;
      readonly peerSecretIndex: number;
      readonly message: string | null;
    }
  /**
   * No link: send `message` if not null, then close. `byPeer` is true when the other end
   * refused (the reason is theirs).
   */
  | {
      readonly kind: 'refused';
      readonly reason: RefusalReason;
      readonly byPeer: boolean;
      readonly detail: string;
      readonly message: string | null;
    };

/**
 * Parses `HIVEKV_CLUSTER_SECRET`: one secret, or several comma separated (the first is
 * offered, every one is accepted). Throws an Error naming the rule a value breaks.
 */
export function parseClusterSecrets(text: string): ClusterSecrets {
  const parts = text.split(',').map((part) => part.trim());
  if (parts.length > SECRETS_MAX) {
    throw new Error(`lists ${parts.length} secrets; at most ${SECRETS_MAX} (new first, then old)`);
  }
  const accepted = parts.map((part, i) => {
    const bytes = new TextEncoder().encode(part);
    if (bytes.length < SECRET_BYTES_MIN) {
      throw new Error(`secret ${i + 1} is ${bytes.length} bytes; each needs at least ` +
        `${SECRET_BYTES_MIN} (make one with: openssl rand -hex 32)`);
    }
    return bytes;
  });
  const offered = accepted[0];
  if (offered === undefined) throw new Error('is empty');
  return { offered, accepted };
}

/**
 * The cluster id a member list implies when `HIVEKV_CLUSTER_ID` does not set one: a hash of
 * every member's id and peer address, in id order, so every node started with the same
 * `--peers` derives the same id and a cluster started elsewhere derives another.
 */
export function deriveClusterId(members: ReadonlyArray<{ id: string; host: string;
  port: number }>): string {
  const lines = members.map((m) => `${m.id}=${m.host}:${m.port}`).sort();
  const hash = createHash('sha256').update(`hivekv-cluster-v1\n${lines.join('\n')}`);
  return `hivekv-${hash.digest('hex').slice(0, 16)}`;
}

function transcript(role: 'dialer' | 'acceptor', clusterId: string, dialerId: string,
  acceptorId: string, dialerNonce: string, acceptorNonce: string): string {
  return [TRANSCRIPT_LABEL, role, clusterId, dialerId, acceptorId, dialerNonce, acceptorNonce]
    .join('\u0000');
}

function prove(secret: Uint8Array, text: string): Buffer {
  return createHmac('sha256', secret).update(text).digest();
}

/** The index in `accepted` of the secret `proof` was made with, or -1. Constant time each. */
function verify(secrets: ClusterSecrets, text: string, proof: Buffer): number {
  let found = -1;
  secrets.accepted.forEach((secret, i) => {
    if (timingSafeEqual(prove(secret, text), proof) && found < 0) found = i;
  });
  return found;
}

function encodeBytes(bytes: Uint8Array): string {
  if (bytes.length !== NONCE_BYTES) throw new Error(`a nonce is ${NONCE_BYTES} bytes`);
  return Buffer.from(bytes).toString('base64url');
}

/** A base64url field of 32 bytes, or null. */
function decodeBytes(value: unknown): Buffer | null {
  if (typeof value !== 'string' || !B64URL_32_PATTERN.test(value)) return null;
  const bytes = Buffer.from(value, 'base64url');
  // 43 characters carry 258 bits: the two spare bits must be zero for one spelling only.
  return bytes.length === NONCE_BYTES && bytes.toString('base64url') === value ? bytes : null;
}

type Fields = Record<string, unknown>;

type Parsed =
  | { readonly kind: 'message'; readonly fields: Fields }
  | { readonly kind: 'step'; readonly step: HandshakeStep };

const MESSAGE_TYPES = ['hello', 'challenge', 'proof', 'welcome', 'refused'];

function message(type: string, fields: Fields = {}): string {
  return JSON.stringify({ t: type, v: HANDSHAKE_VERSION, ...fields });
}

function refuse(reason: RefusalReason, detail: string, tell = true): HandshakeStep {
  return { kind: 'refused', reason, byPeer: false, detail,
    message: tell ? message('refused', { reason }) : null };
}

function hasExactly(fields: Fields, keys: readonly string[]): boolean {
  const names = Object.keys(fields);
  return names.length === keys.length + 2 && keys.every((k) => names.includes(k));
}

/**
 * Parses the message due now, of type `type` with exactly `keys` besides `t` and `v`. The
 * other end's refusal becomes a `refused` step by the peer; another version is 'version'
 * whatever its shape; a well-formed message of another type is 'protocol' (out of turn);
 * anything else off is 'malformed'.
 */
function parse(text: string, type: string, keys: readonly string[]): Parsed {
  const bad = (reason: RefusalReason, detail: string): Parsed =>
    ({ kind: 'step', step: refuse(reason, detail) });
  if (text.length > HANDSHAKE_MESSAGE_BYTES_MAX) {
    return bad('malformed', `a handshake message of ${text.length} characters`);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return bad('malformed', 'a handshake message that is not JSON');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return bad('malformed', 'a handshake message that is not an object');
  }
  const fields = value as Fields;
  if (fields['v'] !== HANDSHAKE_VERSION) {
    return bad('version', `handshake version ${String(fields['v'])}; this node speaks ` +
      `${HANDSHAKE_VERSION}`);
  }
  const t = String(fields['t']);
  if (t === 'refused') {
    const reason = REASONS.find((r) => r === fields['reason']);
    if (reason === undefined || !hasExactly(fields, ['reason'])) {
      return bad('malformed', 'a refusal without a known reason');
    }
    return { kind: 'step', step: { kind: 'refused', reason, byPeer: true,
      detail: `the peer refused the link: ${reason}`, message: null } };
  }
  if (t !== type) {
    return MESSAGE_TYPES.includes(t) ? bad('protocol', `"${t}" where "${type}" was due`)
      : bad('malformed', `an unknown handshake message "${t.slice(0, 32)}"`);
  }
  if (!hasExactly(fields, keys)) {
    return bad('malformed', `a "${type}" message with fields ${Object.keys(fields).join(',')}`);
  }
  return { kind: 'message', fields };
}

/**
 * The dialer's side: `hello()` first, then `receive` for each text message. After
 * `established` or `refused` the handshake is over; any further `receive` is 'protocol'.
 */
export class DialerHandshake {
  private stage: 'start' | 'hello-sent' | 'proof-sent' | 'over' = 'start';
  private readonly nonce: string;
  /** Which accepted secret the acceptor's proof verified with; set with the challenge. */
  private peerSecretIndex = -1;

  /** `nonce`: 32 fresh random bytes, never used for another connection. */
  constructor(private readonly identity: LinkIdentity, private readonly peerId: string,
    private readonly secrets: ClusterSecrets, nonce: Uint8Array) {
    this.nonce = encodeBytes(nonce);
  }

  hello(): string {
    if (this.stage !== 'start') throw new Error('hello() once, first');
    this.stage = 'hello-sent';
    return message('hello', { cluster: this.identity.clusterId, from: this.identity.selfId,
      to: this.peerId, nonce: this.nonce });
  }

  receive(text: string): HandshakeStep {
    const stage = this.stage;
    this.stage = 'over';
    if (stage === 'hello-sent') return this.onChallenge(text);
    if (stage === 'proof-sent') return this.onWelcome(text);
    return refuse('protocol', `a message after the handshake ${stage === 'start' ? 'began'
      : 'ended'}`, false);
  }

  private onChallenge(text: string): HandshakeStep {
    const parsed = parse(text, 'challenge', ['nonce', 'proof']);
    if (parsed.kind === 'step') return parsed.step;
    const { fields } = parsed;
    const theirNonce = decodeBytes(fields['nonce']);
    const theirProof = decodeBytes(fields['proof']);
    if (theirNonce === null || theirProof === null) {
      return refuse('malformed', 'a challenge whose nonce or proof is not 32 base64url bytes');
    }
    const { clusterId, selfId } = this.identity;
    const nonceText = fields['nonce'] as string;
    const expected = transcript('acceptor', clusterId, selfId, this.peerId, this.nonce,
      nonceText);
    const peerSecretIndex = verify(this.secrets, expected, theirProof);
    if (peerSecretIndex < 0) {
      return refuse('secret', `${this.peerId} does not prove a secret this node accepts`);
    }
    this.stage = 'proof-sent';
    this.peerSecretIndex = peerSecretIndex;
    const ours = prove(this.secrets.offered, transcript('dialer', clusterId, selfId,
      this.peerId, this.nonce, nonceText));
    return { kind: 'send', message: message('proof', { proof: ours.toString('base64url') }) };
  }

  private onWelcome(text: string): HandshakeStep {
    const parsed = parse(text, 'welcome', []);
    if (parsed.kind === 'step') return parsed.step;
    return { kind: 'established', peerId: this.peerId, peerSecretIndex: this.peerSecretIndex,
      message: null };
  }
}

/**
 * The acceptor's side: `receive` for each text message (the hello, then the proof).
 * `admits(id)` says whether a member of that id may link to this node (its peer table).
 */
export class AcceptorHandshake {
  private stage: 'hello-due' | 'proof-due' | 'over' = 'hello-due';
  private readonly nonce: string;
  private dialerId = '';
  private dialerNonce = '';

  /** `nonce`: 32 fresh random bytes, never used for another connection. */
  constructor(private readonly identity: LinkIdentity, private readonly secrets: ClusterSecrets,
    nonce: Uint8Array, private readonly admits: (id: string) => boolean) {
    this.nonce = encodeBytes(nonce);
  }

  receive(text: string): HandshakeStep {
    const stage = this.stage;
    this.stage = 'over';
    if (stage === 'hello-due') return this.onHello(text);
    if (stage === 'proof-due') return this.onProof(text);
    return refuse('protocol', 'a message after the handshake ended', false);
  }

  private onHello(text: string): HandshakeStep {
    const parsed = parse(text, 'hello', ['cluster', 'from', 'to', 'nonce']);
    if (parsed.kind === 'step') return parsed.step;
    const { fields } = parsed;
    const { cluster, from, to } = fields;
    if (typeof cluster !== 'string' || !ID_PATTERN.test(cluster) || typeof from !== 'string' ||
      !ID_PATTERN.test(from) || typeof to !== 'string' || !ID_PATTERN.test(to) ||
      decodeBytes(fields['nonce']) === null) {
      return refuse('malformed', 'a hello whose ids or nonce are malformed');
    }
    const { clusterId, selfId } = this.identity;
    if (cluster !== clusterId) {
      return refuse('cluster', `${from} belongs to cluster ${cluster}, this node to ${clusterId}`);
    }
    if (to !== selfId) return refuse('member', `${from} dialled member ${to}, this is ${selfId}`);
    if (from === selfId || !this.admits(from)) {
      return refuse('member', `${from} is not a member this node links to`);
    }
    this.dialerId = from;
    this.dialerNonce = fields['nonce'] as string;
    this.stage = 'proof-due';
    const proof = prove(this.secrets.offered, transcript('acceptor', clusterId, from, selfId,
      this.dialerNonce, this.nonce));
    return { kind: 'send',
      message: message('challenge', { nonce: this.nonce, proof: proof.toString('base64url') }) };
  }

  private onProof(text: string): HandshakeStep {
    const parsed = parse(text, 'proof', ['proof']);
    if (parsed.kind === 'step') return parsed.step;
    const theirProof = decodeBytes(parsed.fields['proof']);
    if (theirProof === null) return refuse('malformed', 'a proof that is not 32 base64url bytes');
    const { clusterId, selfId } = this.identity;
    const expected = transcript('dialer', clusterId, this.dialerId, selfId, this.dialerNonce,
      this.nonce);
    const peerSecretIndex = verify(this.secrets, expected, theirProof);
    if (peerSecretIndex < 0) {
      return refuse('secret', `${this.dialerId} does not prove a secret this node accepts`);
    }
    return { kind: 'established', peerId: this.dialerId, peerSecretIndex,
      message: message('welcome') };
  }
}
