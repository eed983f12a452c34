/**
 * The composition root of a running node (`hivekv serve`, parsed in `host/cli/serve.ts`): it
 * builds the adapters (files, sockets, clock), the machine, the driver and the HTTP server,
 * and owns the process's life from then on.
 */
import { randomInt } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { hostname } from 'node:os';
import { createSecureContext } from 'node:tls';
import { join, resolve } from 'node:path';
import {
  AcceptGate, freeDescriptorsAtLeast, lowestFreeDescriptor, openFilesLimit, type AcceptMove,
} from '../http/accept-gate.js';
import { JwtAuthenticator } from '../http/auth.js';
import { TokenBucketRateLimiter } from '../http/rate-limit.js';
import { startHttpServer, type HttpServerHandle } from '../http/server.js';
import { HeaderTenantResolver } from '../http/tenancy.js';
import { StateMachine } from '../machine/state-machine.js';
import { idempotencyGauges } from '../machine/idempotency.js';
import { descriptors } from '../storage/descriptors.js';
import { FileStorage, type SpaceChange } from '../storage/file-storage.js';
import { NoPeersTransport } from '../transport/no-peers.js';
import { assertFrameBound } from '../transport/peer-limits.js';
import type { PeerTlsMaterial } from '../transport/peer-server.js';
import { WsTransport } from '../transport/ws-transport.js';
import {
  settleClusterId, settleMemberId, type SettledClusterId,
} from './cluster-id-file.js';
import { ClusterClock, type BoundedClock } from './cluster-clock.js';
import { ClusterStatus, STATUS_SEND_EVERY_MS } from './cluster-status.js';
import { DIVERGED_EXIT_CODE, DivergenceError } from './checkpoints.js';
import { advertisedUrl, type NodeConfig, type TlsFiles } from './config.js';
import { lockDataDir } from './data-lock.js';
import { haltPollingNotice, readHaltPolling } from './halt-polling.js';
import { createLogger, type Logger } from './log.js';
import {
  MAX_STATE_BYTES_DEFAULT, MEMORY_SHARE_FOR_STATE, restoreRoomFor, stateBudgetFor,
} from '../machine/memory-budget.js';
import { LOOP_CHECK_MS, LoopStallWatch } from './loop-stalls.js';
import { NodeMetrics } from './metrics.js';
import { operatorDeps } from './operator-views.js';
import { registerPeerMetrics } from './peer-metrics.js';
import {
  RAFT_FRAME_SETTINGS, Replica, type ReplicaDeps, type ReplicaOptions, type SnapshotEvent,
} from './replica.js';
import { realScheduler } from './scheduler.js';
import { StartupTimeline } from './startup-timeline.js';

/** Election timeout in ticks; with the default 50 ms tick, 500 to 1000 ms. */
const ELECTION_TICKS = 10;
const SHUTDOWN_TRANSFER_MS = 2000;
const SHUTDOWN_DRAIN_MS = 5000;
const METRICS_REFRESH_MS = 5000;
/**
 * How often the accept gate reads the lowest free descriptor. The server accepts thousands of
 * connections a second, so it must be often; a reading is one open and one close.
 */
const DESCRIPTOR_CHECK_MS = 100;
/** While paused, a reading opens up to twice the headroom (accept-gate.ts): every 500 ms. */
const PAUSED_CHECK_EVERY_TICKS = 5;
const TENANTS_IN_METRICS_MAX = 100;

function buildTransport(config: NodeConfig, clusterId: string, tls: PeerTlsMaterial | null,
  logger: Logger, onLinkUp: (peer: string) => void) {
  // A node without a peer listener or a secret cannot link: it stays a single node
  // (membership changes answer 409 members_no_peer_link).
  const secrets = config.clusterSecrets;
  if (config.peerListen === null || secrets === null) return new NoPeersTransport();
  assertFrameBound(RAFT_FRAME_SETTINGS);
  return new WsTransport({ selfId: config.id, clusterId, secrets, listen: config.peerListen,
    peers: config.peers, tls, log: logger.child({ component: 'peers' }),
    onLinkChange: (peer, up) => { if (up) onLinkUp(peer); } });
}

/**
 * Reads the PEM files once at start and checks that they make a TLS context (parseable, the
 * key matching the certificate): a file that cannot serve stops the start, named, instead
 * of failing the first handshake.
 */
function readTlsMaterial(files: TlsFiles | null): PeerTlsMaterial | null {
  if (files === null) return null;
  const read = (variable: string, path: string): Buffer => {
    try {
      return readFileSync(path);
    } catch (error) {
      throw new Error(`${variable}=${path}: ${(error as Error).message}`);
    }
  };
  const material = {
    cert: read('HIVEKV_TLS_CERT', files.certFile),
    key: read('HIVEKV_TLS_KEY', files.keyFile),
    ca: files.caFile === null ? null : read('HIVEKV_TLS_CA', files.caFile),
  };
  try {
    createSecureContext({ cert: material.cert, key: material.key, ca: material.ca ?? undefined });
  } catch (error) {
    throw new Error(`HIVEKV_TLS_CERT=${files.certFile}, HIVEKV_TLS_KEY=${files.keyFile}` +
      `${files.caFile === null ? '' : `, HIVEKV_TLS_CA=${files.caFile}`}: ` +
      `${(error as Error).message}`);
  }
  return material;
}

/**
 * uWebSockets binds with SO_REUSEPORT, so a second node started on a busy port would silently
 * share it with the first and the kernel would split clients between two stores. A plain
 * bind first turns that into a clear start-up error.
 */
async function assertPortFree(host: string, port: number, flag = '--port'): Promise<void> {
  if (port === 0) return;
  await new Promise<void>((resolvePort, reject) => {
    const probe = createServer();
    probe.once('error', (error: NodeJS.ErrnoException) => {
      reject(new Error(error.code === 'EADDRINUSE'
        ? `${host}:${port} is already in use; stop the process on it or choose another ${flag}`
        : `cannot listen on ${host}:${port}: ${error.message}`));
    });
    probe.listen({ host, port, exclusive: true }, () => probe.close(() => resolvePort()));
  });
}

/** The cluster and the member the data directory belongs to (cluster-id-file.ts). */
async function settleIdentity(dataDir: string, config: NodeConfig,
  logger: Logger): Promise<SettledClusterId> {
  const clusterId = await settleClusterId(dataDir, config.clusterId);
  await settleMemberId(dataDir, config.id);
  if (clusterId.note !== null) logger.info({ clusterId: clusterId.id }, clusterId.note);
  return clusterId;
}

/** The HTTP port and the peer port are free, before anything of the data directory is touched. */
async function assertPortsFree(config: NodeConfig): Promise<void> {
  await assertPortFree(config.host, config.port);
  if (config.peerListen !== null) {
    await assertPortFree(config.peerListen.host, config.peerListen.port, '--peer-listen');
  }
}

/** The driver's settings: a joining node starts with no voters (it learns them). */
function replicaOptions(config: NodeConfig, clusterId: string): ReplicaOptions {
  return {
    id: config.id,
    voters: config.join ? [] : config.peers.map((p) => p.id),
    peers: config.peers,
    peerLink: config.peerListen !== null && config.clusterSecrets !== null,
    seed: randomInt(2 ** 31),
    incarnation: randomInt(2 ** 32),
    tickMs: config.tickMs,
    electionTicks: ELECTION_TICKS,
    requestTimeoutMs: config.requestTimeoutMs,
    requireGrant: config.requireGrant,
    expireEveryMs: config.expireEveryMs,
    expireBatch: config.expireBatch,
    snapshotEveryEntries: config.snapshotEveryEntries,
    snapshotEveryBytes: config.snapshotEveryBytes,
    snapshotBytesPerSec: config.snapshotBytesPerSec,
    snapshotLogPercent: config.snapshotLogPercent,
    clusterId,
    requestLimits: config.limits,
    maxStateBytes: config.maxStateBytes,
    restoreRoomBytes: restoreRoomFor(config.maxStateBytesFrom.memory?.bytes ?? null,
      config.maxStateBytes),
    digestEvery: config.digestEvery,
  };
}

/**
 * What of the machine the operator should know: its halting of idle vCPUs (halt-polling.ts),
 * and a memory budget sized to, or set past, the memory the process may use.
 */
function noteMachine(logger: Logger, config: NodeConfig): void {
  const haltPolling = haltPollingNotice(readHaltPolling());
  if (haltPolling !== null) logger.info({}, haltPolling);
  const { kind, memory } = config.maxStateBytesFrom;
  if (memory === null) return;
  const sharePercent = Math.round(MEMORY_SHARE_FOR_STATE * 100);
  const figures = { maxStateBytes: config.maxStateBytes, memoryBytes: memory.bytes,
    memoryFrom: memory.source };
  if (kind === 'memory') {
    logger.info(figures, `memory budget: ${sharePercent}% of the memory this process may ` +
      `use, less than the default ${MAX_STATE_BYTES_DEFAULT / 2 ** 30} GiB ` +
      '(HIVEKV_MAX_STATE_BYTES sets it)');
  } else if (kind === 'setting' && config.maxStateBytes > stateBudgetFor(memory.bytes)) {
    logger.warn(figures, `HIVEKV_MAX_STATE_BYTES is over ${sharePercent}% of the memory ` +
      'this process may use: at 1.2 to 1.9 times the state in memory, the process may be ' +
      'killed for memory before the budget refuses a write');
  }
}

/**
 * Free space and slow fsyncs on the loop in /metrics; a node that starts short of space says
 * so now, not at its first write.
 */
function watchSpace(storage: FileStorage, metrics: NodeMetrics): void {
  metrics.readSlowLoopSyncsFrom(() => storage.slowLoopSyncs);
  storage.isLowOnSpace();
  metrics.readFreeBytesFrom(() => {
    try {
      return storage.freeBytes();
    } catch {
      // Closed, or its directory gone: the gauge is left out rather than the scrape failing.
      return null;
    }
  });
}

/** The data directory's free space crossed HIVEKV_MIN_FREE_BYTES: writes stop, or go on. */
function reportSpace(logger: Logger, change: SpaceChange): void {
  const figures = { freeBytes: change.freeBytes, minFreeBytes: change.minFreeBytes };
  if (change.low) {
    logger.warn(figures, 'the data directory is low on free space: writes are refused (503 ' +
      'storage_full) until HIVEKV_MIN_FREE_BYTES are free; reads go on');
  } else {
    logger.info(figures, 'the data directory has room again: writes are taken');
  }
}

/** What the replica learns of the other members from their statuses (cluster-status.ts). */
function membersDeps(cluster: ClusterStatus):
  Pick<ReplicaDeps, 'sideFrames' | 'membersStorageFull' | 'memberStateBudget' |
    'largestMemberState' | 'membersHoldingCatchUp'> {
  return { sideFrames: cluster, membersStorageFull: () => cluster.membersStorageFull(),
    memberStateBudget: () => cluster.smallestStateBudget(),
    largestMemberState: () => cluster.largestState(),
    membersHoldingCatchUp: () => cluster.membersHoldingCatchUp() };
}

/** The replica's clock and what it says when a new leader's wait for its voters' ran out. */
function stampClockDeps(cluster: ClusterStatus, metrics: NodeMetrics,
  logger: Logger): Pick<ReplicaDeps, 'stampClock' | 'onClockWaitedOut'> {
  return {
    stampClock: startStampClock(cluster, metrics, logger),
    onClockWaitedOut: (waitedMs) => logger.warn({ waitedMs }, 'this node leads without having ' +
      'heard a majority of the voters\' clocks: it stamps the log by its own clock; check ' +
      'that its peers run this release and their links are up'),
  };
}

/** The clock the node stamps entries by: its own, held within its voters' (cluster-clock.ts). */
function startStampClock(cluster: ClusterStatus, metrics: NodeMetrics,
  logger: Logger): ClusterClock {
  const clock = new ClusterClock({ wallMs: () => realScheduler.nowMs(),
    monotonicMs: () => performance.now(), voterClocks: (ownMs) => cluster.voterClocks(ownMs),
    onStanding: (bounded, ownMs) => reportClock(logger, bounded, ownMs) });
  metrics.readClockOffsetFrom(() => clock.offsetMs());
  // Read once a second besides the proposals, so an idle node says when its clock is wrong.
  setInterval(() => clock.nowMs(), STATUS_SEND_EVERY_MS).unref();
  return clock;
}

/** This node's clock left the bound its voters' clocks set, or came back within it. */
function reportClock(logger: Logger, clock: BoundedClock, ownMs: number): void {
  const figures = { clockMs: ownMs, offsetMs: Math.round(clock.offsetMs),
    stampMs: Math.round(clock.nowMs) };
  if (clock.standing === 'within') {
    logger.info(figures, 'this node\'s clock agrees with a majority of the voters\' again: ' +
      'it stamps the log by its own clock');
    return;
  }
  logger.warn(figures, `this node's clock runs ${clock.standing} of what a majority of the ` +
    'voters\' clocks allow: it stamps the log and judges expiry by their time instead; ' +
    'set its clock right (NTP)');
}

/** A follower refused by its leader's every retry logs one line a minute, with the count. */
const REFUSED_SNAPSHOT_LOG_EVERY_MS = 60_000;

/** Each snapshot milestone goes to /metrics and to the log. */
function reportSnapshot(metrics: NodeMetrics,
  logger: Logger): (event: SnapshotEvent) => void {
  let refusedLoggedAtMs = Number.NEGATIVE_INFINITY;
  let refusedUnlogged = 0;
  return (event) => {
    metrics.snapshotMilestone(event);
    if (event.kind === 'no_room') {
      logger.warn({ index: event.index, bytes: event.dataBytes, detail: event.detail },
        'snapshot not taken for want of free space: the log is not compacted, and grows ' +
        'until writes stop at HIVEKV_MIN_FREE_BYTES; free space or grow the volume');
      return;
    }
    if (event.kind === 'refused') {
      refusedUnlogged += 1;
      const nowMs = performance.now();
      if (nowMs - refusedLoggedAtMs < REFUSED_SNAPSHOT_LOG_EVERY_MS) return;
      logger.warn({ index: event.index, bytes: event.dataBytes, detail: event.detail,
        refusalsSinceLastLine: refusedUnlogged }, event.refusedFor === 'memory'
        ? 'snapshot from the leader refused for want of memory: its state is larger than ' +
          'this node can hold. This node stays behind its leader, which sends it again ' +
          'later; give the process more memory, or remove this member'
        : 'snapshot from the leader refused for want of free space: this node stays ' +
          'behind its leader, which sends it again later; free space or grow the volume');
      refusedLoggedAtMs = nowMs;
      refusedUnlogged = 0;
      return;
    }
    logger.info({ index: event.index, bytes: event.dataBytes, ms: event.ms },
      `snapshot ${event.kind}`);
  };
}

/**
 * What a member that holds back from catching up (too little memory for the state, or a
 * learner low on space), and its leader, say of it (replica.ts): the member logs it and
 * tells every member at once (`announce`, its status), so its leader stops sending it the
 * log, and refuses to promote it, within a round trip.
 */
function catchUpReports(logger: Logger, cluster: ClusterStatus):
  Pick<ReplicaDeps, 'onCatchUpHeld' | 'onReplicationPaused'> {
  return {
    onCatchUpHeld: (hold) => {
      reportCatchUpHeld(logger, hold);
      cluster.announce();
    },
    onReplicationPaused: (member, paused) =>
      reportReplicationPaused(logger, member, paused, cluster.catchUpHeldFor(member)),
  };
}

/** A follower that holds its leader's entries says so, and why, and when it ends. */
function reportCatchUpHeld(logger: Logger,
  hold: Parameters<NonNullable<ReplicaDeps['onCatchUpHeld']>>[0]): void {
  if (hold === null) {
    logger.info({}, 'the leader\'s entries are taken again: this node catches up');
  } else if (hold.want === 'memory') {
    logger.warn({ detail: hold.detail }, 'the leader\'s entries held for want of memory: its ' +
      'state is larger than this node can hold. This node stays behind its leader; give the ' +
      'process more memory, or remove this member');
  } else {
    logger.warn({ detail: hold.detail }, 'the leader\'s entries held for want of space: ' +
      'this learner stays behind its leader; free space in its data directory, or remove it');
  }
}

/** A leader that sends a member heartbeats only, because it holds back, says so, and why. */
function reportReplicationPaused(logger: Logger, member: string, paused: boolean,
  heldFor: string | null): void {
  if (paused) {
    const want = heldFor ?? 'memory';
    logger.warn({ member, want }, `${member} holds back from catching up for want of ${want}: ` +
      `it is sent heartbeats only, and stays behind until it has the ${want} or is removed`);
  } else {
    logger.info({ member }, `${member} catches up again: it is sent the log`);
  }
}

/** Runs one node with `config` until SIGTERM or SIGINT; exits the process when it ends. */
export async function serve(config: NodeConfig): Promise<void> {
  const startup = new StartupTimeline('process started');
  const logger = createLogger(config.logLevel);
  const dataDir = resolve(config.dataDir);
  await assertPortsFree(config);
  const tls = readTlsMaterial(config.tls);
  const releaseLock = await lockDataDir(dataDir);
  const clusterId = await settleIdentity(dataDir, config, logger);
  noteMachine(logger, config);
  const metrics = new NodeMetrics();
  const fatal = (error: Error): never => {
    logger.error({ err: error.message, stack: error.stack }, 'fatal: the node stops');
    logger.flush();
    process.exit(error instanceof DivergenceError ? DIVERGED_EXIT_CODE : 1);
  };
  process.on('unhandledRejection', (reason) => fatal(new Error(`unhandled rejection: ${reason}`)));
  const storage = new FileStorage(join(dataDir), { minFreeBytes: config.minFreeBytes,
    onFsyncSeconds: (seconds) => metrics.observeFsync(seconds), onRecoverPhase: startup.mark,
    onSpaceChange: (change) => reportSpace(logger, change) });
  const machine = StateMachine.create();
  startup.mark('wasm instantiated');
  // A link comes up on a socket event, after `cluster` below is set.
  const transport = buildTransport(config, clusterId.id, tls, logger, (p) => cluster.linkUp(p));
  if (transport instanceof WsTransport) registerPeerMetrics(metrics.registry, transport.stats);
  // The status table asks the replica for members and health only once both exist.
  const cluster: ClusterStatus = new ClusterStatus(config.id, {
    transport, scheduler: realScheduler, monotonicMs: () => performance.now(),
    members: (): readonly string[] => replica.members(), health: () => replica.health(),
    voters: (): readonly string[] => replica.voters(),
    storageFull: () => replica.storageFull(), catchUpHeldFor: () => replica.catchUpHeldFor() });
  const replica: Replica = new Replica(replicaOptions(config, clusterId.id), {
    storage, transport, machine, scheduler: realScheduler, ...membersDeps(cluster),
    ...stampClockDeps(cluster, metrics, logger),
    onFatal: fatal, onSwept: (removed) => metrics.sweptKeys(removed),
    onCheckpoint: (verdict) => metrics.checkpointApplied(verdict),
    onSnapshot: reportSnapshot(metrics, logger), onStartPhase: startup.mark,
    ...catchUpReports(logger, cluster) });
  await replica.start();
  watchSpace(storage, metrics);
  const http = await startHttpServer({
    service: replica,
    members: replica,
    config,
    authenticator: new JwtAuthenticator(config.jwt),
    tenants: new HeaderTenantResolver({ tenancyHeader: config.tenancyHeader }),
    rateLimiter: new TokenBucketRateLimiter(config.rates),
    metrics,
    logger,
    operator: operatorDeps(config, replica, machine, cluster),
  }, config.host, config.port);
  const url = advertisedUrl(config, http.port, hostname());
  cluster.start(url);
  watchNode(metrics, logger, replica, machine, http);
  watchDescriptors(http, metrics, logger);
  // The handlers go in before `serving` is said: a supervisor (or a test) that stops the node
  // the moment it reads that line must get the graceful stop, not the default of the signal.
  onStopSignals((signal) => {
    cluster.stop();
    void stop(signal, replica, http, logger).then(() => {
      releaseLock();
      process.exit(0);
    }, fatal);
  });
  logger.info({ id: config.id, host: config.host, port: http.port, data: dataDir,
    peers: config.peers.length, join: config.join, url, console: `${url}/console`, clusterId:
    clusterId.id, tls: config.tls !== null, startup: startup.end('serving') }, 'serving');
}

/** Calls `shutdown` once, on the first SIGTERM or SIGINT; a second signal changes nothing. */
function onStopSignals(shutdown: (signal: string) => void): void {
  let stopping = false;
  const once = (signal: string) => {
    if (stopping) return;
    stopping = true;
    shutdown(signal);
  };
  process.on('SIGTERM', () => once('SIGTERM'));
  process.on('SIGINT', () => once('SIGINT'));
}

/** The gauges refreshed on a timer or read at each scrape, and the loop's stalls. */
function watchNode(metrics: NodeMetrics, logger: Logger, replica: Replica,
  machine: StateMachine, http: HttpServerHandle): void {
  const refresh = setInterval(() => refreshGauges(replica, machine, metrics), METRICS_REFRESH_MS);
  refresh.unref();
  metrics.readMemoryFrom(() => ({ ...machine.memoryUse(), stateBytesMax: replica.maxStateBytes,
    machineMemoryBytes: machine.memoryBytes(), ...idempotencyGauges(machine) }));
  metrics.readIdlePollFrom(() => http.idlePollSeconds());
  metrics.readHttpBudgetsFrom(() => http.budgets());
  watchLoopStalls(metrics, logger);
}

/**
 * Holds the reserve of descriptors for the node's own files, and closes the HTTP listening
 * socket while descriptors run short (host/http/accept-gate.ts), opening it again once they
 * are free.
 */
function watchDescriptors(http: HttpServerHandle, metrics: NodeMetrics, logger: Logger): void {
  const limit = openFilesLimit();
  const unguarded = (why: string): void => {
    logger.warn({ why }, 'the node will not stop accepting connections before its file ' +
      'descriptors run out');
  };
  if (limit === null) {
    unguarded('the limit on open files cannot be read (/proc/self/limits)');
    return;
  }
  try {
    descriptors.fill();
  } catch (error) {
    // No /dev/null to hold descriptors on (a bare container): no reserve, and no readings.
    unguarded(`descriptors cannot be held in reserve: ${(error as Error).message}`);
    return;
  }
  const gate = new AcceptGate(limit);
  let pauses = 0;
  let resumeFailureLogged = false;
  const move = (next: AcceptMove, lowestFree: number | null, cause: string): void => {
    if (next === 'pause') {
      http.closeListener();
      pauses++;
      logger.warn({ lowestFreeDescriptor: lowestFree, limit, pauseAt: gate.pauseAt,
        resumeFree: gate.resumeFree, cause }, 'not accepting connections: file ' +
        'descriptors run short (open connections are served; new ones are refused)');
    } else if (next === 'resume') {
      void http.listenAgain().catch(() => false).then((listening) => {
        if (listening) {
          resumeFailureLogged = false;
          logger.info({ limit, freeDescriptors: `${gate.resumeFree} or more` },
            'accepting connections again');
          return;
        }
        gate.resumeFailed();
        if (!resumeFailureLogged) {
          resumeFailureLogged = true;
          logger.error({ port: http.port }, 'cannot listen again on the HTTP port: trying ' +
            'again while descriptors are free');
        }
      });
    }
  };
  let readings = true;
  descriptors.onExhausted(() => {
    // Without readings nothing would listen again: the reserve alone is given back.
    if (!readings) return;
    move(gate.exhausted(), null, 'an open of the node\'s own found no free descriptor');
  });
  readDescriptorsEvery(DESCRIPTOR_CHECK_MS, gate, move, (why) => {
    readings = false;
    unguarded(why);
    if (!gate.isAccepting) void http.listenAgain().catch(() => false);
  });
  metrics.readAcceptingFrom(() => ({ accepting: gate.isAccepting, pauses,
    shortages: descriptors.shortages }));
}

/**
 * The gate's readings: the lowest free descriptor while accepting, and while paused every
 * PAUSED_CHECK_EVERY_TICKS readings whether the resume's headroom can be opened. A reading
 * that fails for another reason than a shortage stops them (`stopped`), and the server is
 * left listening: a guard must never be what stops a node serving.
 */
function readDescriptorsEvery(everyMs: number, gate: AcceptGate,
  move: (next: AcceptMove, lowestFree: number | null, cause: string) => void,
  stopped: (why: string) => void): void {
  let ticks = 0;
  const timer = setInterval(() => {
    try {
      ticks++;
      const reserveFull = descriptors.fill();
      if (gate.isAccepting) {
        const lowestFree = lowestFreeDescriptor();
        move(gate.checkAccepting(lowestFree, reserveFull), lowestFree,
          lowestFree === null ? 'no descriptor was free' : 'few descriptors were free');
      } else if (ticks % PAUSED_CHECK_EVERY_TICKS === 0) {
        move(gate.checkPaused(freeDescriptorsAtLeast(gate.resumeFree), reserveFull), null, '');
      }
    } catch (error) {
      clearInterval(timer);
      stopped(`a reading of the descriptors failed: ${(error as Error).message}`);
    }
  }, everyMs);
  timer.unref();
}

/** A line in the log, and a count in `/metrics`, when the event loop is held (loop-stalls.ts). */
function watchLoopStalls(metrics: NodeMetrics, logger: Logger): void {
  const watch = new LoopStallWatch(performance.now());
  metrics.readLoopStallsFrom(() => watch.total);
  const timer = setInterval(() => {
    const report = watch.check(performance.now());
    if (report === null) return;
    logger.warn({ stalls: report.stalls, longestMs: report.longestMs, windowMs: report.sinceMs },
      'event loop stalled');
  }, LOOP_CHECK_MS);
  timer.unref();
}

function refreshGauges(replica: Replica, machine: StateMachine, metrics: NodeMetrics): void {
  const status = replica.raftStatus();
  metrics.setRaft({
    term: status.term,
    commitIndex: status.commitIndex,
    appliedIndex: machine.appliedIndex,
    lastIndex: status.lastIndex,
    isLeader: status.role === 'leader',
  });
  metrics.setTenantUsage(machine.tenantsUsage(TENANTS_IN_METRICS_MAX));
}

/** SIGTERM: stop taking requests, hand leadership over, finish in-flight calls, flush. */
async function stop(signal: string, replica: Replica, http: HttpServerHandle,
  logger: Logger): Promise<void> {
  logger.info({ signal }, 'stopping: no new requests');
  http.stopAccepting();
  await replica.transferLeadership(SHUTDOWN_TRANSFER_MS);
  await http.drain(SHUTDOWN_DRAIN_MS);
  await replica.stop();
  await http.close();
  logger.info({}, 'stopped');
}
