import { describe, expect, it } from 'vitest';
import { serveCommand, serveFlags } from '../../host/cli/serve.js';
import { advertisedUrl, ConfigError, loadConfig } from '../../host/node/config.js';

const SECRET = { HIVEKV_CLUSTER_SECRET: 'config-test-secret-0123456789' };

/** The serve command's flags as the CLI parses them. */
const flags = (...argv: string[]) => {
  const command = serveCommand().configureOutput({ writeErr: () => {} });
  command.parse(argv, { from: 'user' });
  return serveFlags(command);
};

describe('configuration', () => {
  it('defaults to one node on 127.0.0.1:6632 with data in ./data', () => {
    const config = loadConfig(flags(), {});
    expect(config).toMatchObject({ host: '127.0.0.1', port: 6632, dataDir: './data', id: 'n1' });
    expect(config.peers).toHaveLength(1);
    expect(config.limits.maxValueBytes).toBe(65536);
    expect(config.rates).toEqual({ readRate: 200, readBurst: 400, writeRate: 100,
      writeBurst: 200 });
  });

  it('reads a cluster from --peers, with its own entry as the default --peer-listen', () => {
    const config = loadConfig(flags('--id', 'n2', '--peers',
      'n1=127.0.0.1:7001,n2=127.0.0.1:7002,n3=127.0.0.1:7003'), SECRET);
    expect(config.peers.map((p) => p.id)).toEqual(['n1', 'n2', 'n3']);
    expect(config.peerListen).toEqual({ host: '127.0.0.1', port: 7002 });
  });

  it.each([
    [['--port', 'x'], /--port/],
    [['--peers', 'n1=127.0.0.1:7001'], /--id/],
    [['--id', 'n9', '--peers', 'n1=127.0.0.1:7001'], /not one of --peers/],
    [['--id', 'n1', '--peers', 'n1=127.0.0.1:7001,n1=127.0.0.1:7002'], /twice/],
    [['--peer-listen', '127.0.0.1:7001'], /needs --peers/],
  ])('refuses %j', (argv, message) => {
    expect(() => loadConfig(flags(...argv), SECRET)).toThrow(message);
  });

  const cluster = ['--id', 'n1', '--peers', 'n1=127.0.0.1:7001,n2=127.0.0.1:7002'];

  it('refuses to start a node with peers and no cluster secret, and says why', () => {
    expect(() => loadConfig(flags(...cluster), {}))
      .toThrow(/HIVEKV_CLUSTER_SECRET is required for a node with peers/);
    expect(loadConfig(flags(), {}).clusterSecrets).toBeNull();
  });

  it('derives the cluster id from the member list unless HIVEKV_CLUSTER_ID names one', () => {
    const derived = loadConfig(flags(...cluster), SECRET).clusterId;
    expect(derived).toMatchObject({ source: 'derived' });
    expect(derived.id).toMatch(/^hivekv-[0-9a-f]{16}$/);
    const other = loadConfig(flags('--id', 'n1', '--peers', 'n1=127.0.0.1:7001,n2=10.1.1.1:7002'),
      SECRET).clusterId;
    expect(other.id).not.toBe(derived.id);
    expect(loadConfig(flags(...cluster), { ...SECRET, HIVEKV_CLUSTER_ID: 'prod-eu-1' }).clusterId)
      .toEqual({ id: 'prod-eu-1', source: 'environment' });
  });

  it('reads TLS files from the environment, the CA optional', () => {
    expect(loadConfig(flags(), {}).tls).toBeNull();
    expect(loadConfig(flags(), { HIVEKV_TLS_CERT: 'c.pem', HIVEKV_TLS_KEY: 'k.pem' }).tls)
      .toEqual({ certFile: 'c.pem', keyFile: 'k.pem', caFile: null });
    expect(loadConfig(flags(), { HIVEKV_TLS_CERT: 'c.pem', HIVEKV_TLS_KEY: 'k.pem',
      HIVEKV_TLS_CA: 'ca.pem' }).tls?.caFile).toBe('ca.pem');
  });

  it('advertises https when the client port speaks TLS', () => {
    const tls = loadConfig(flags(), { HIVEKV_TLS_CERT: 'c.pem', HIVEKV_TLS_KEY: 'k.pem' });
    expect(advertisedUrl(tls, 6632, 'box')).toBe('https://127.0.0.1:6632');
    expect(advertisedUrl(loadConfig(flags(), {}), 6632, 'box')).toBe('http://127.0.0.1:6632');
  });

  it('--join: a member with no member list, waiting to be added', () => {
    const config = loadConfig(flags('--id', 'n4', '--peer-listen', '10.0.0.4:7001', '--join'),
      { HIVEKV_CLUSTER_ID: 'c1', ...SECRET });
    expect(config).toMatchObject({ id: 'n4', join: true, peers: [],
      peerListen: { host: '10.0.0.4', port: 7001 } });
    expect(loadConfig(flags(), {}).join).toBe(false);
  });

  it.each([
    [['--id', 'n4', '--peer-listen', '127.0.0.1:7004', '--join'], {}, /HIVEKV_CLUSTER_ID/],
    [['--peer-listen', '127.0.0.1:7004', '--join'], { HIVEKV_CLUSTER_ID: 'c' }, /--id/],
    [['--id', 'n4', '--join'], { HIVEKV_CLUSTER_ID: 'c' }, /--peer-listen/],
    [['--id', 'n4', '--peer-listen', 'h:1', '--peers', 'n4=h:1', '--join'],
      { HIVEKV_CLUSTER_ID: 'c' }, /exclude/],
    [['--id', 'n4', '--peer-listen', '127.0.0.1:7004', '--join'], { HIVEKV_CLUSTER_ID: 'c' },
      /HIVEKV_CLUSTER_SECRET/],
  ])('--join refuses %j without what it needs', (argv, env, message) => {
    expect(() => loadConfig(flags(...argv), env)).toThrow(message);
  });

  it('refuses an unknown flag, naming it', () => {
    expect(() => flags('--bogus', '1')).toThrow(/unknown option '--bogus'/);
  });

  it.each([
    [{ QUEEN_TENANCY_HEADER: 'true' }, /QUEEN_KV_TRUSTED_PROXY/],
    [{ JWT_ENABLED: 'true' }, /JWT_SECRET/],
    [{ QUEEN_KV_MAX_KEYS_PER_CALL: '5000' }, /QUEEN_KV_MAX_KEYS_PER_CALL/],
    [{ QUEEN_KV_WRITE_RATE: '-1' }, /QUEEN_KV_WRITE_RATE/],
    [{ QUEEN_KV_READ_RATE: 'fast' }, /QUEEN_KV_READ_RATE/],
    [{ HIVEKV_CLUSTER_SECRET: 'short' }, /HIVEKV_CLUSTER_SECRET secret 1 is 5 bytes/],
    [{ HIVEKV_CLUSTER_ID: 'has space' }, /HIVEKV_CLUSTER_ID/],
    [{ HIVEKV_TLS_CERT: 'c.pem' }, /HIVEKV_TLS_KEY/],
    [{ HIVEKV_TLS_KEY: 'k.pem' }, /HIVEKV_TLS_CERT/],
    [{ HIVEKV_TLS_CA: 'ca.pem' }, /HIVEKV_TLS_CA needs/],
  ])('refuses environment %j', (env, message) => {
    expect(() => loadConfig(flags(), env)).toThrow(ConfigError);
    expect(() => loadConfig(flags(), env)).toThrow(message);
  });

  it('takes the memory budget from HIVEKV_MAX_STATE_BYTES, 2.5 GiB by default, 1 MiB..3 GiB',
    () => {
      expect(loadConfig(flags(), {}).maxStateBytes).toBe(2.5 * 2 ** 30);
      expect(loadConfig(flags(), { HIVEKV_MAX_STATE_BYTES: '1048576' }).maxStateBytes)
        .toBe(1048576);
      for (const bad of ['1048575', String(3 * 2 ** 30 + 1), '2.5GiB']) {
        expect(() => loadConfig(flags(), { HIVEKV_MAX_STATE_BYTES: bad }))
          .toThrow(/HIVEKV_MAX_STATE_BYTES/);
      }
    });

  it('proposes checkpoints every HIVEKV_DIGEST_EVERY entries, 10,000 by default, 0 for never',
    () => {
      expect(loadConfig(flags(), {}).digestEvery).toBe(10_000);
      expect(loadConfig(flags(), { HIVEKV_DIGEST_EVERY: '0' }).digestEvery).toBe(0);
      for (const bad of ['-1', '2.5', 'often']) {
        expect(() => loadConfig(flags(), { HIVEKV_DIGEST_EVERY: bad }))
          .toThrow(/HIVEKV_DIGEST_EVERY/);
      }
    });

  it('paces snapshots at HIVEKV_SNAPSHOT_BYTES_PER_SEC, 64 MiB by default, 0 for no limit',
    () => {
      expect(loadConfig(flags(), {}).snapshotBytesPerSec).toBe(64 * 1024 * 1024);
      expect(loadConfig(flags(), { HIVEKV_SNAPSHOT_BYTES_PER_SEC: '0' }).snapshotBytesPerSec)
        .toBe(0);
      expect(loadConfig(flags(), { HIVEKV_SNAPSHOT_BYTES_PER_SEC: '1048576' })
        .snapshotBytesPerSec).toBe(1048576);
      for (const bad of ['-1', '1048575', '2.5', 'fast', String(2 ** 37)]) {
        expect(() => loadConfig(flags(), { HIVEKV_SNAPSHOT_BYTES_PER_SEC: bad }))
          .toThrow(/HIVEKV_SNAPSHOT_BYTES_PER_SEC=.*: expected 0 \(no limit\) or an integer/);
      }
    });

  it('waits for HIVEKV_SNAPSHOT_LOG_PERCENT of the last snapshot in log, 25 by default',
    () => {
      expect(loadConfig(flags(), {}).snapshotLogPercent).toBe(25);
      expect(loadConfig(flags(), { HIVEKV_SNAPSHOT_LOG_PERCENT: '0' }).snapshotLogPercent)
        .toBe(0);
      for (const bad of ['-1', '1001', '2.5', 'half']) {
        expect(() => loadConfig(flags(), { HIVEKV_SNAPSHOT_LOG_PERCENT: bad }))
          .toThrow(/HIVEKV_SNAPSHOT_LOG_PERCENT/);
      }
    });

  it('polls an idle loop for HIVEKV_IDLE_POLL_US, 200 by default, 0 for never', () => {
    expect(loadConfig(flags(), {}).idlePollUs).toBe(200);
    expect(loadConfig(flags(), { HIVEKV_IDLE_POLL_US: '0' }).idlePollUs).toBe(0);
    expect(loadConfig(flags(), { HIVEKV_IDLE_POLL_US: '10000' }).idlePollUs).toBe(10_000);
    for (const bad of ['-1', '10001', '2.5', 'spin']) {
      expect(() => loadConfig(flags(), { HIVEKV_IDLE_POLL_US: bad }))
        .toThrow(/HIVEKV_IDLE_POLL_US=.*: expected an integer from 0 to 10000/);
    }
  });

  it('lets QUEEN_KV_REQUIRE_GRANT default to the tenancy flag', () => {
    const env = { QUEEN_TENANCY_HEADER: 'true', QUEEN_KV_TRUSTED_PROXY: 'true' };
    expect(loadConfig(flags(), env).requireGrant).toBe(true);
    expect(loadConfig(flags(), { ...env, QUEEN_KV_REQUIRE_GRANT: 'false' }).requireGrant)
      .toBe(false);
    expect(loadConfig(flags(), {}).requireGrant).toBe(false);
  });
});
