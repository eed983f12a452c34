import { describe, expect, it } from 'vitest';
import { serveCommand, serveFlags } from '../../host/cli/serve.js';
import { ConfigError, loadConfig } from '../../host/node/config.js';

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
      'n1=127.0.0.1:7001,n2=127.0.0.1:7002,n3=127.0.0.1:7003'), {});
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
    expect(() => loadConfig(flags(...argv), {})).toThrow(message);
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

  it('lets QUEEN_KV_REQUIRE_GRANT default to the tenancy flag', () => {
    const env = { QUEEN_TENANCY_HEADER: 'true', QUEEN_KV_TRUSTED_PROXY: 'true' };
    expect(loadConfig(flags(), env).requireGrant).toBe(true);
    expect(loadConfig(flags(), { ...env, QUEEN_KV_REQUIRE_GRANT: 'false' }).requireGrant)
      .toBe(false);
    expect(loadConfig(flags(), {}).requireGrant).toBe(false);
  });
});
