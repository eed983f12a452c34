import { ANSWER_BYTES_WAITING_MAX } from '../http/answer-budget.js';
import { BODY_BYTES_HELD_MAX } from '../http/body-budget.js';
import {
  MAX_STATE_BYTES_DEFAULT, MAX_STATE_BYTES_LIMIT, MAX_STATE_BYTES_MIN, stateBudgetFor,
} from '../machine/memory-budget.js';

/**
 * Node configuration: command-line flags first, then the environment variables of WIRE.md,
 * then defaults. Parsing is pure (flags and environment are passed in) so it is testable; a
 * bad setting is a `ConfigError` with a message an operator can act on at 3 a.m.
 */
import { IDEMPOTENCY_TTL_SECONDS_MAX, VALUE_BYTES_MAX } from '../machine/abi.js';
import type { RequestLimits } from '../machine/request.js';
import type { MemoryLimit } from './memory-limit.js';
import { isStatusUrl } from './status-frame.js';
import { DIGEST_EVERY_DEFAULT } from './checkpoints.js';
import { SNAPSHOT_BYTES_PER_SEC_DEFAULT, SNAPSHOT_LOG_PERCENT_DEFAULT } from './snapshotter.js';
import {
  deriveClusterId, ID_PATTERN, parseClusterSecrets, type ClusterSecrets,
} from '../transport/handshake.js';

export interface PeerAddress {
  readonly id: string;
  readonly host: string;
  readonly port: number;
}

/**
 * The QUEEN_KV_* limits: what the machine's request parser checks (RequestLimits, each field
 * named by its variable there), and the body size the HTTP layer checks before it.
 */
export interface KvLimits extends RequestLimits {
  /** QUEEN_MAX_BODY_BYTES: request body bytes. */
  readonly maxBodyBytes: number;
}

export interface RateSettings {
  /** Calls per second; 0 turns the limit off. */
  readonly readRate: number;
  readonly readBurst: number;
  readonly writeRate: number;
  readonly writeBurst: number;
}

export interface NodeConfig {
  readonly host: string;
  readonly port: number;
  readonly dataDir: string;
  /** This node's id in the cluster; `n1` for a single node. */
  readonly id: string;
  /**
   * Every starting voter, this node included (`--peers`); one entry for a single node;
   * none for a joining node. Later changes live in the log, which wins over this list.
   */
  readonly peers: readonly PeerAddress[];
  /** Where this node accepts peer connections; null for a single node without `--peers`. */
  readonly peerListen: { readonly host: string; readonly port: number } | null;
  /** `--join`: a new member that knows no member list and waits until a leader adds it. */
  readonly join: boolean;
  readonly limits: KvLimits;
  readonly rates: RateSettings;
  /** QUEEN_KV_EXPIRE_EVERY_MS: how often the leader proposes a sweep. */
  readonly expireEveryMs: number;
  /** QUEEN_KV_EXPIRE_BATCH: keys one sweep entry may remove. */
  readonly expireBatch: number;
  /** QUEEN_TENANCY_HEADER: take the tenant from `x-queen-tenant`. */
  readonly tenancyHeader: boolean;
  /** QUEEN_KV_TRUSTED_PROXY: required for tenancyHeader. */
  readonly trustedProxy: boolean;
  /** QUEEN_KV_REQUIRE_GRANT: defaults to tenancyHeader. */
  readonly requireGrant: boolean;
  /** JWT_ENABLED and JWT_SECRET. */
  readonly jwt: { readonly enabled: boolean; readonly secret: string };
  /** HIVEKV_SNAPSHOT_EVERY_ENTRIES: take a snapshot after this many applied entries. */
  readonly snapshotEveryEntries: number;
  /** HIVEKV_SNAPSHOT_EVERY_BYTES: or after this many bytes of log since the last one. */
  readonly snapshotEveryBytes: number;
  /**
   * HIVEKV_SNAPSHOT_BYTES_PER_SEC: how fast this node writes its own snapshots (0: as fast
   * as it can). 0, or 1 MiB to 64 GiB; default 64 MiB (host/node/snapshotter.ts).
   */
  readonly snapshotBytesPerSec: number;
  /**
   * HIVEKV_SNAPSHOT_LOG_PERCENT: the next snapshot waits until the log since the last one
   * holds this percent of its size (0 to 1000, default 25; host/node/snapshotter.ts).
   */
  readonly snapshotLogPercent: number;
  /** HIVEKV_DIGEST_EVERY: a leader proposes a checkpoint every this many entries (0: never). */
  readonly digestEvery: number;
  /** HIVEKV_MIN_FREE_BYTES: below this much free disk the node refuses writes. */
  readonly minFreeBytes: number;
  /**
   * HIVEKV_MAX_WAITING_ANSWER_BYTES: answer bytes that may wait for slow clients, over every
   * connection, before an answer's connection is closed instead (http/answer-budget.ts).
   */
  readonly maxWaitingAnswerBytes: number;
  /**
   * HIVEKV_MAX_HELD_BODY_BYTES: request body bytes held at once, over every connection,
   * before a call is refused with 503 overloaded (http/body-budget.ts).
   */
  readonly maxHeldBodyBytes: number;
  /**
   * HIVEKV_MAX_STATE_BYTES: the state's memory budget (host/machine/memory-budget.ts); past
   * it, writes that would grow the state are refused. 1 MiB to 3 GiB; by default 2.5 GiB, or
   * 40% of the memory the process may use when that is less (`stateBudgetFor`).
   */
  readonly maxStateBytes: number;
  /** Where `maxStateBytes` came from, for the log at start. */
  readonly maxStateBytesFrom: StateBudgetSource;
  /** HIVEKV_REQUEST_TIMEOUT_MS: a call not answered by then is a 503 (outcome unknown). */
  readonly requestTimeoutMs: number;
  /**
   * HIVEKV_IDEMPOTENCY_TTL_SECONDS: how long the record of a call with an Idempotency-Key
   * answers its retries; carried in each keyed entry, so every replica agrees.
   */
  readonly idempotencyTtlSeconds: number;
  /** HIVEKV_TICK_MS: one Raft tick. */
  readonly tickMs: number;
  /**
   * HIVEKV_IDLE_POLL_US: how long the event loop keeps polling for the next call once none
   * is in flight, before it sleeps (host/http/idle-poll.ts). 0 to 10,000; default 200.
   */
  readonly idlePollUs: number;
  /** HIVEKV_LOG_LEVEL: pino level. */
  readonly logLevel: string;
  /**
   * HIVEKV_ADVERTISE_URL: where browsers and tools reach this node's HTTP surface, as the
   * other members show it; null means "from --host and the bound port" (`advertisedUrl`).
   */
  readonly advertiseUrl: string | null;
  /** HIVEKV_CLUSTER_SECRET: what peers prove before their frames count; null for one node. */
  readonly clusterSecrets: ClusterSecrets | null;
  /**
   * HIVEKV_CLUSTER_ID, or derived from `peers`; a data directory keeps the one it first
   * served (`cluster-id-file.ts`), so `source` says whether an operator chose it.
   */
  readonly clusterId: { readonly id: string; readonly source: 'environment' | 'derived' };
  /** HIVEKV_TLS_CERT, HIVEKV_TLS_KEY, HIVEKV_TLS_CA: PEM files; null runs without TLS. */
  readonly tls: TlsFiles | null;
}

export interface TlsFiles {
  /** This node's certificate chain: served on the client and peer ports, and offered as a
   * client certificate when it dials a peer and `caFile` is set. */
  readonly certFile: string;
  readonly keyFile: string;
  /** The CA that signs every member's certificate: with it, peer links are mutual TLS. */
  readonly caFile: string | null;
}

export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

const MAX_KEYS_PER_CALL_CEILING = 4096;
/** HIVEKV_IDLE_POLL_US's default: a client's next call at one connection comes well within it. */
const IDLE_POLL_US_DEFAULT = 200;

type Env = Readonly<Record<string, string | undefined>>;

function intSetting(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  const value = Number(raw);
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw new ConfigError(`${name}=${raw}: expected an integer from ${min} to ${max}`);
  }
  return value;
}

/** An `intSetting` that may also be 0 (off): 0, or from `min` to `max`. */
function rateSetting(env: Env, name: string, fallback: number, min: number,
  max: number): number {
  const raw = env[name];
  if (raw !== undefined && raw.trim() !== '' && Number(raw) === 0) return 0;
  try {
    return intSetting(env, name, fallback, min, max);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    throw new ConfigError(`${name}=${raw ?? ''}: expected 0 (no limit) or an integer from ` +
      `${min} to ${max}`);
  }
}

function boolSetting(env: Env, name: string, fallback: boolean): boolean {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  const lowered = raw.trim().toLowerCase();
  if (lowered === 'true' || lowered === '1' || lowered === 'yes') return true;
  if (lowered === 'false' || lowered === '0' || lowered === 'no') return false;
  throw new ConfigError(`${name}=${raw}: expected true or false`);
}

function parseHostPort(text: string, what: string): { host: string; port: number } {
  const colon = text.lastIndexOf(':');
  const host = colon > 0 ? text.slice(0, colon) : '';
  const port = Number(colon > 0 ? text.slice(colon + 1) : '');
  if (host === '' || !Number.isInteger(port) || port < 0 || port > 65535) {
    throw new ConfigError(`${what} "${text}": expected host:port`);
  }
  return { host, port };
}

/** Parses `n1=127.0.0.1:7001,n2=127.0.0.1:7002`. */
export function parsePeers(text: string): PeerAddress[] {
  const peers: PeerAddress[] = [];
  for (const part of text.split(',')) {
    const item = part.trim();
    if (item === '') continue;
    const eq = item.indexOf('=');
    if (eq <= 0) throw new ConfigError(`--peers entry "${item}": expected id=host:port`);
    const id = item.slice(0, eq);
    if (!/^[A-Za-z0-9_.-]{1,64}$/.test(id)) {
      throw new ConfigError(`--peers entry "${item}": ids are 1 to 64 of [A-Za-z0-9_.-]`);
    }
    if (peers.some((p) => p.id === id)) throw new ConfigError(`--peers names ${id} twice`);
    peers.push({ id, ...parseHostPort(item.slice(eq + 1), `--peers entry ${id}`) });
  }
  return peers;
}

export type Flags = Readonly<Record<string, string | undefined>>;

type ClusterShape = Pick<NodeConfig, 'id' | 'peers' | 'peerListen' | 'join'>;

/**
 * `--join`: no member list, so no cluster id can be derived from one: HIVEKV_CLUSTER_ID must
 * name the cluster, and the node must say where peers reach it.
 */
function joinShape(flags: Flags, env: Env): ClusterShape {
  if (flags['peers'] !== undefined) {
    throw new ConfigError('--join and --peers exclude each other: a joining node learns the ' +
      'members from the leader that adds it');
  }
  const id = flags['id'];
  if (id === undefined || !/^[A-Za-z0-9_.-]{1,64}$/.test(id)) {
    throw new ConfigError('--join needs --id: 1 to 64 of [A-Za-z0-9_.-], the id the operator ' +
      'adds (POST /api/v1/system/members)');
  }
  const listenText = flags['peer-listen'];
  if (listenText === undefined) {
    throw new ConfigError('--join needs --peer-listen HOST:PORT: the address the leader dials');
  }
  if ((env['HIVEKV_CLUSTER_ID'] ?? '').trim() === '') {
    throw new ConfigError('--join needs HIVEKV_CLUSTER_ID: a joining node knows no member ' +
      'list to derive the cluster id from; set the id the other members use');
  }
  return { id, peers: [], peerListen: parseHostPort(listenText, '--peer-listen'), join: true };
}

function clusterShape(flags: Flags, env: Env): ClusterShape {
  if (flags['join'] === 'true') return joinShape(flags, env);
  const peersText = flags['peers'];
  if (peersText === undefined) {
    if (flags['peer-listen'] !== undefined) {
      throw new ConfigError('--peer-listen needs --peers (or --join)');
    }
    const id = flags['id'] ?? 'n1';
    return { id, peers: [{ id, host: '127.0.0.1', port: 0 }], peerListen: null, join: false };
  }
  const peers = parsePeers(peersText);
  const id = flags['id'];
  if (id === undefined) throw new ConfigError('--peers needs --id to say which member this is');
  const self = peers.find((p) => p.id === id);
  if (self === undefined) throw new ConfigError(`--id ${id} is not one of --peers`);
  const listenText = flags['peer-listen'];
  const peerListen = listenText === undefined ? { host: self.host, port: self.port }
    : parseHostPort(listenText, '--peer-listen');
  return { id, peers, peerListen, join: false };
}

function kvLimits(env: Env): KvLimits {
  return {
    // At most the machine's own VALUE_BYTES_MAX: a larger value could never be applied.
    maxValueBytes: intSetting(env, 'QUEEN_KV_MAX_VALUE_BYTES', 65_536, 1, VALUE_BYTES_MAX),
    maxKeyBytes: intSetting(env, 'QUEEN_KV_MAX_KEY_BYTES', 512, 1, 4096),
    maxOpsPerCall: intSetting(env, 'QUEEN_KV_MAX_OPS_PER_CALL', 256, 1, 4096),
    maxKeysPerCall: intSetting(env, 'QUEEN_KV_MAX_KEYS_PER_CALL', 1024, 1,
      MAX_KEYS_PER_CALL_CEILING),
    prefixLimit: intSetting(env, 'QUEEN_KV_PREFIX_LIMIT', 1000, 1, 100_000),
    maxReadBytes: intSetting(env, 'QUEEN_KV_MAX_READ_BYTES', 4 * 1024 * 1024, 1, 1 << 30),
    maxBodyBytes: intSetting(env, 'QUEEN_MAX_BODY_BYTES', 64 * 1024 * 1024, 1024, 1 << 30),
  };
}

function advertiseUrlSetting(env: Env): string | null {
  const raw = env['HIVEKV_ADVERTISE_URL']?.trim();
  if (raw === undefined || raw === '') return null;
  const url = raw.replace(/\/+$/, '');
  if (!isStatusUrl(url)) {
    throw new ConfigError(`HIVEKV_ADVERTISE_URL=${raw}: expected an http:// or https:// URL ` +
      'of at most 512 characters, such as http://10.0.0.5:6632');
  }
  return url;
}

/**
 * The URL other members show for this node: HIVEKV_ADVERTISE_URL, else `http://` (`https://`
 * with TLS) and the `--host` it listens on (this machine's `hostname` for a wildcard address)
 * with the port it bound (`boundPort`, which differs from `--port 0`).
 */
export function advertisedUrl(config: Pick<NodeConfig, 'host' | 'advertiseUrl'> &
  Partial<Pick<NodeConfig, 'tls'>>, boundPort: number, hostname: string): string {
  if (config.advertiseUrl !== null) return config.advertiseUrl;
  const wildcard = config.host === '0.0.0.0' || config.host === '::' || config.host === '';
  const host = wildcard ? hostname : config.host;
  const scheme = config.tls === undefined || config.tls === null ? 'http' : 'https';
  return `${scheme}://${host.includes(':') ? `[${host}]` : host}:${boundPort}`;
}

/** `required`: the node has peers, or joins a cluster (`--join`). */
function clusterSecrets(env: Env, required: boolean): ClusterSecrets | null {
  const text = env['HIVEKV_CLUSTER_SECRET'];
  if (text === undefined || text.trim() === '') {
    if (!required) return null;
    throw new ConfigError('HIVEKV_CLUSTER_SECRET is required for a node with peers: every ' +
      'member proves it before its Raft frames count, so that nobody who merely reaches a ' +
      'peer port can vote or append. Give every node the same one (make it with: ' +
      'openssl rand -hex 32)');
  }
  try {
    return parseClusterSecrets(text);
  } catch (error) {
    throw new ConfigError(`HIVEKV_CLUSTER_SECRET ${(error as Error).message}`);
  }
}

function clusterId(env: Env, peers: readonly PeerAddress[]): NodeConfig['clusterId'] {
  const text = env['HIVEKV_CLUSTER_ID'];
  if (text === undefined || text.trim() === '') {
    return { id: deriveClusterId(peers), source: 'derived' };
  }
  if (!ID_PATTERN.test(text)) {
    throw new ConfigError(`HIVEKV_CLUSTER_ID=${text}: expected 1 to 64 of [A-Za-z0-9_.-]`);
  }
  return { id: text, source: 'environment' };
}

function tlsFiles(env: Env): TlsFiles | null {
  const certFile = env['HIVEKV_TLS_CERT'] ?? '';
  const keyFile = env['HIVEKV_TLS_KEY'] ?? '';
  const caFile = env['HIVEKV_TLS_CA'] ?? '';
  if (certFile === '' && keyFile === '') {
    if (caFile !== '') {
      throw new ConfigError('HIVEKV_TLS_CA needs HIVEKV_TLS_CERT and HIVEKV_TLS_KEY');
    }
    return null;
  }
  if (certFile === '' || keyFile === '') {
    throw new ConfigError('TLS needs both HIVEKV_TLS_CERT (the certificate chain, PEM) and ' +
      'HIVEKV_TLS_KEY (its private key, PEM)');
  }
  return { certFile, keyFile, caFile: caFile === '' ? null : caFile };
}

function stateBudget(env: Env, memory: MemoryLimit | null):
  { maxStateBytes: number; maxStateBytesFrom: StateBudgetSource } {
  const fallback = stateBudgetFor(memory?.bytes ?? null);
  const maxStateBytes = intSetting(env, 'HIVEKV_MAX_STATE_BYTES', fallback, MAX_STATE_BYTES_MIN,
    MAX_STATE_BYTES_LIMIT);
  const set = (env['HIVEKV_MAX_STATE_BYTES'] ?? '').trim() !== '';
  const kind = set ? 'setting' : fallback < MAX_STATE_BYTES_DEFAULT ? 'memory' : 'ceiling';
  return { maxStateBytes, maxStateBytesFrom: { kind, memory } };
}

/** How the memory budget was chosen: set, the wasm32 ceiling's default, or the memory's. */
export interface StateBudgetSource {
  readonly kind: 'setting' | 'ceiling' | 'memory';
  /** What the process may use, where known. */
  readonly memory: MemoryLimit | null;
}

/**
 * Builds the whole configuration, or throws `ConfigError`. `memory`: what the process may
 * use (memory-limit.ts), which bounds the default memory budget; null where unknown.
 */
export function loadConfig(flags: Flags, env: Env, memory: MemoryLimit | null = null):
  NodeConfig {
  const port = flags['port'] === undefined ? 6632 : Number(flags['port']);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new ConfigError(`--port ${flags['port']}: expected 0 to 65535`);
  }
  const tenancyHeader = boolSetting(env, 'QUEEN_TENANCY_HEADER', false);
  const trustedProxy = boolSetting(env, 'QUEEN_KV_TRUSTED_PROXY', false);
  if (tenancyHeader && !trustedProxy) {
    throw new ConfigError('QUEEN_TENANCY_HEADER=true takes the tenant from a header any client ' +
      'can set; it needs QUEEN_KV_TRUSTED_PROXY=true to say a trusted proxy sets it');
  }
  const jwtEnabled = boolSetting(env, 'JWT_ENABLED', false);
  const jwtSecret = env['JWT_SECRET'] ?? '';
  if (jwtEnabled && jwtSecret.length === 0) {
    throw new ConfigError('JWT_ENABLED=true needs JWT_SECRET');
  }
  const limits = kvLimits(env);
  const shape = clusterShape(flags, env);
  return {
    host: flags['host'] ?? '127.0.0.1',
    port,
    dataDir: flags['data'] ?? './data',
    ...shape,
    clusterSecrets: clusterSecrets(env, shape.join || shape.peers.length > 1),
    clusterId: clusterId(env, shape.peers),
    tls: tlsFiles(env),
    limits,
    rates: {
      readRate: intSetting(env, 'QUEEN_KV_READ_RATE', 200, 0, 10_000_000),
      readBurst: intSetting(env, 'QUEEN_KV_READ_BURST', 400, 0, 10_000_000),
      writeRate: intSetting(env, 'QUEEN_KV_WRITE_RATE', 100, 0, 10_000_000),
      writeBurst: intSetting(env, 'QUEEN_KV_WRITE_BURST', 200, 0, 10_000_000),
    },
    expireEveryMs: intSetting(env, 'QUEEN_KV_EXPIRE_EVERY_MS', 1000, 10, 3_600_000),
    expireBatch: intSetting(env, 'QUEEN_KV_EXPIRE_BATCH', 1000, 1, 100_000),
    tenancyHeader,
    trustedProxy,
    requireGrant: boolSetting(env, 'QUEEN_KV_REQUIRE_GRANT', tenancyHeader),
    jwt: { enabled: jwtEnabled, secret: jwtSecret },
    snapshotEveryEntries: intSetting(env, 'HIVEKV_SNAPSHOT_EVERY_ENTRIES', 100_000, 10,
      100_000_000),
    snapshotEveryBytes: intSetting(env, 'HIVEKV_SNAPSHOT_EVERY_BYTES', 256 * 1024 * 1024,
      4096, 64 * 1024 * 1024 * 1024),
    snapshotBytesPerSec: rateSetting(env, 'HIVEKV_SNAPSHOT_BYTES_PER_SEC',
      SNAPSHOT_BYTES_PER_SEC_DEFAULT, 1024 * 1024, 64 * 1024 * 1024 * 1024),
    snapshotLogPercent: intSetting(env, 'HIVEKV_SNAPSHOT_LOG_PERCENT',
      SNAPSHOT_LOG_PERCENT_DEFAULT, 0, 1000),
    digestEvery: intSetting(env, 'HIVEKV_DIGEST_EVERY', DIGEST_EVERY_DEFAULT, 0, 1_000_000_000),
    minFreeBytes: intSetting(env, 'HIVEKV_MIN_FREE_BYTES', 64 * 1024 * 1024, 0, 2 ** 40),
    maxWaitingAnswerBytes: intSetting(env, 'HIVEKV_MAX_WAITING_ANSWER_BYTES',
      ANSWER_BYTES_WAITING_MAX, 1024 * 1024, 2 ** 36),
    maxHeldBodyBytes: intSetting(env, 'HIVEKV_MAX_HELD_BODY_BYTES', BODY_BYTES_HELD_MAX,
      1024 * 1024, 2 ** 36),
    ...stateBudget(env, memory),
    requestTimeoutMs: intSetting(env, 'HIVEKV_REQUEST_TIMEOUT_MS', 5000, 100, 600_000),
    idempotencyTtlSeconds: intSetting(env, 'HIVEKV_IDEMPOTENCY_TTL_SECONDS', 86_400, 1,
      IDEMPOTENCY_TTL_SECONDS_MAX),
    tickMs: intSetting(env, 'HIVEKV_TICK_MS', 50, 1, 10_000),
    idlePollUs: intSetting(env, 'HIVEKV_IDLE_POLL_US', IDLE_POLL_US_DEFAULT, 0, 10_000),
    logLevel: env['HIVEKV_LOG_LEVEL'] ?? 'info',
    advertiseUrl: advertiseUrlSetting(env),
  };
}
