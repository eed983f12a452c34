/**
 * The composition root of a running node (`hivekv serve`, parsed in `host/cli/serve.ts`): it
 * builds the adapters (files, sockets, clock), the machine, the driver and the HTTP server,
 * and owns the process's life from then on.
 */
import { randomInt } from 'node:crypto';
import { createServer } from 'node:net';
import { join, resolve } from 'node:path';
import { JwtAuthenticator } from '../http/auth.js';
import { TokenBucketRateLimiter } from '../http/rate-limit.js';
import { startHttpServer, type HttpServerHandle } from '../http/server.js';
import { HeaderTenantResolver } from '../http/tenancy.js';
import { StateMachine } from '../machine/state-machine.js';
import { FileStorage } from '../storage/file-storage.js';
import { NoPeersTransport } from '../transport/no-peers.js';
import { WsTransport } from '../transport/ws-transport.js';
import type { NodeConfig } from './config.js';
import { lockDataDir } from './data-lock.js';
import { createLogger, type Logger } from './log.js';
import { NodeMetrics } from './metrics.js';
import { Replica } from './replica.js';
import { realScheduler } from './scheduler.js';

/** Election timeout in ticks; with the default 50 ms tick, 500 to 1000 ms. */
const ELECTION_TICKS = 10;
const SHUTDOWN_TRANSFER_MS = 2000;
const SHUTDOWN_DRAIN_MS = 5000;
const METRICS_REFRESH_MS = 5000;
const TENANTS_IN_METRICS_MAX = 100;

function buildTransport(config: NodeConfig) {
  if (config.peers.length === 1 || config.peerListen === null) return new NoPeersTransport();
  return new WsTransport({ selfId: config.id, listen: config.peerListen, peers: config.peers });
}

/**
 * uWebSockets binds with SO_REUSEPORT, so a second node started on a busy port would silently
 * share it with the first and the kernel would split clients between two stores. A plain
 * bind first turns that into a clear start-up error.
 */
async function assertPortFree(host: string, port: number): Promise<void> {
  if (port === 0) return;
  await new Promise<void>((resolvePort, reject) => {
    const probe = createServer();
    probe.once('error', (error: NodeJS.ErrnoException) => {
      reject(new Error(error.code === 'EADDRINUSE'
        ? `${host}:${port} is already in use; stop the process on it or choose another --port`
        : `cannot listen on ${host}:${port}: ${error.message}`));
    });
    probe.listen({ host, port, exclusive: true }, () => probe.close(() => resolvePort()));
  });
}

/** Runs one node with `config` until SIGTERM or SIGINT; exits the process when it ends. */
export async function serve(config: NodeConfig): Promise<void> {
  const logger = createLogger(config.logLevel);
  const dataDir = resolve(config.dataDir);
  await assertPortFree(config.host, config.port);
  const releaseLock = lockDataDir(dataDir);
  const metrics = new NodeMetrics();
  const fatal = (error: Error): never => {
    logger.error({ err: error.message, stack: error.stack }, 'fatal: the node stops');
    logger.flush();
    process.exit(1);
  };
  process.on('unhandledRejection', (reason) => fatal(new Error(`unhandled rejection: ${reason}`)));
  const storage = new FileStorage(join(dataDir), {
    minFreeBytes: config.minFreeBytes,
    onFsyncSeconds: (seconds) => metrics.observeFsync(seconds),
  });
  const machine = StateMachine.create();
  const replica = new Replica({
    id: config.id,
    voters: config.peers.map((p) => p.id),
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
    maxStateBytes: config.maxStateBytes,
  }, { storage, transport: buildTransport(config), machine, scheduler: realScheduler,
    onFatal: fatal, onSwept: (removed) => metrics.sweptKeys(removed),
    onSnapshot: (event) => logger.info({ index: event.index, bytes: event.dataBytes,
      ms: event.ms }, `snapshot ${event.kind}`) });
  await replica.start();
  const http = await startHttpServer({
    service: replica,
    config,
    authenticator: new JwtAuthenticator(config.jwt),
    tenants: new HeaderTenantResolver({ tenancyHeader: config.tenancyHeader }),
    rateLimiter: new TokenBucketRateLimiter(config.rates),
    metrics,
    logger,
  }, config.host, config.port);
  const refresh = setInterval(() => refreshGauges(replica, machine, metrics), METRICS_REFRESH_MS);
  metrics.readMemoryFrom(() => ({ ...machine.memoryUse(), stateBytesMax: replica.maxStateBytes,
    machineMemoryBytes: machine.memoryBytes() }));
  refresh.unref();
  logger.info({ id: config.id, host: config.host, port: http.port, data: dataDir,
    peers: config.peers.length }, 'serving');
  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    void stop(signal, replica, http, logger).then(() => {
      releaseLock();
      process.exit(0);
    }, fatal);
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
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
