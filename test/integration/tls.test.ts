/**
 * TLS with certificates the test makes with openssl: a single node answers over https (and
 * not over plain http); a three-node cluster with a CA runs its peer links as mutual TLS,
 * elects a leader and replicates; a member whose certificate another CA signed is refused
 * by TLS alone, though it holds the cluster secret; a key that does not match its
 * certificate stops the start with a message that names the files.
 */
import { readFileSync } from 'node:fs';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  httpsCall, makeAuthority, makeLeaf, type Authority, type Leaf,
} from '../helpers/certificates.js';
import { logLines, memberPorts, peersFlag, sleep, waitFor } from '../helpers/cluster.js';
import {
  call, removeDir, startNode, tempDir, UNLIMITED_RATES, type NodeProcess,
} from '../helpers/node-process.js';

const SECRET = 'tls-test-secret-0123456789abcdef';

let certDir = '';
let ca: Authority;
let rogueCa: Authority;
let caPem: Buffer;
const leaves = new Map<string, Leaf>();
const started: NodeProcess[] = [];
const dirs: string[] = [];

beforeAll(() => {
  certDir = tempDir('tls-certs');
  ca = makeAuthority(certDir, 'cluster-ca');
  rogueCa = makeAuthority(certDir, 'rogue-ca');
  caPem = readFileSync(ca.certFile);
  for (const id of ['n1', 'n2', 'n3']) leaves.set(id, makeLeaf(certDir, ca, id));
  leaves.set('rogue', makeLeaf(certDir, rogueCa, 'rogue'));
});

afterEach(async () => {
  for (const node of started.splice(0)) await node.kill();
  for (const dir of dirs.splice(0)) removeDir(dir);
});

afterAll(() => removeDir(certDir));

function tlsEnv(leaf: Leaf, caFile: string | null): Record<string, string> {
  return { HIVEKV_TLS_CERT: leaf.certFile, HIVEKV_TLS_KEY: leaf.keyFile,
    ...(caFile === null ? {} : { HIVEKV_TLS_CA: caFile }) };
}

async function start(id: string, env: Record<string, string>, args: string[] = []):
  Promise<{ node: NodeProcess; url: string }> {
  const dir = tempDir(`tls-${id}`);
  dirs.push(dir);
  const node = await startNode({ dataDir: dir, env: { ...UNLIMITED_RATES, ...env }, args });
  started.push(node);
  return { node, url: `https://127.0.0.1:${node.port}` };
}

async function httpsLeader(urls: readonly string[]): Promise<string> {
  return waitFor('an agreed leader over https', 20_000, async () => {
    const leaders = new Set((await Promise.all(urls.map((u) => httpsCall(u, caPem, 'GET',
      '/health')))).map((h) => h.body?.leader ?? null));
    const [leader] = [...leaders];
    return leaders.size === 1 && typeof leader === 'string' ? leader : undefined;
  });
}

describe('TLS', () => {
  it('serves a single node over https, and not over plain http', async () => {
    const { node, url } = await start('single', tlsEnv(leaves.get('n1')!, null));
    const health = await httpsCall(url, caPem, 'GET', '/health');
    expect(health).toMatchObject({ status: 200, body: { status: 'ok', id: 'n1' } });
    const put = await httpsCall(url, caPem, 'POST', '/api/v1/kv', { operations: [
      { op: 'put', ns: 'tls', key: 'k', value: 1, forever: true }] });
    expect(put.body.results[0].applied).toBe(true);
    await expect(call(node.url, 'GET', '/health')).rejects.toThrow();
    expect(logLines(node, { msg: 'serving' })[0]?.['tls']).toBe(true);
  });

  it('runs a three-node cluster over mutual TLS: it elects a leader and replicates', async () => {
    const members = await memberPorts(3);
    const peers = peersFlag(members);
    const nodes = await Promise.all(members.map((m) => start(m.id, {
      HIVEKV_CLUSTER_SECRET: SECRET, ...tlsEnv(leaves.get(m.id)!, ca.certFile) },
    ['--id', m.id, '--peers', peers])));
    const urls = nodes.map((n) => n.url);
    await httpsLeader(urls);
    const put = await httpsCall(urls[1]!, caPem, 'POST', '/api/v1/kv', { operations: [
      { op: 'put', ns: 'tls', key: 'replicated', value: 'yes', forever: true }] });
    expect(put.body.results[0].applied).toBe(true);
    for (const url of urls) {
      const got = await httpsCall(url, caPem, 'POST', '/api/v1/kv', { operations: [
        { op: 'get', ns: 'tls', key: 'replicated' }] });
      expect(got.body.results[0]).toMatchObject({ found: true, value: 'yes' });
    }
  }, 60_000);

  it('refuses a member whose certificate another CA signed, though it has the secret',
    async () => {
      const members = await memberPorts(3);
      const peers = peersFlag(members);
      const [m1, m2, m3] = members;
      const good = await Promise.all([m1!, m2!].map((m) => start(m.id, {
        HIVEKV_CLUSTER_SECRET: SECRET, ...tlsEnv(leaves.get(m.id)!, ca.certFile) },
      ['--id', m.id, '--peers', peers])));
      // The rogue trusts the cluster's CA, so only its own certificate gives it away.
      const rogue = await start(m3!.id, { HIVEKV_CLUSTER_SECRET: SECRET,
        ...tlsEnv(leaves.get('rogue')!, ca.certFile) }, ['--id', m3!.id, '--peers', peers]);
      await httpsLeader(good.map((g) => g.url));
      await sleep(1500);
      const rogueHealth = await httpsCall(rogue.url, readFileSync(rogueCa.certFile), 'GET',
        '/health');
      expect(rogueHealth.body.leader).toBeNull();
      // Its dials are refused in the TLS handshake (no certificate this CA signed)...
      const tlsRefusals = good.flatMap((g) => logLines(g.node, { msg: 'peer connection refused',
        kind: 'port-tls' }));
      expect(tlsRefusals.length).toBeGreaterThan(0);
      // ...and the members' dials to it fail to verify its certificate.
      const dialFailures = good.flatMap((g) => logLines(g.node,
        { msg: 'cannot reach peer; retrying', peer: 'n3' }));
      expect(dialFailures.some((line) => /certificate/i.test(String(line['error'])))).toBe(true);
    }, 60_000);

  it('refuses to start with a key that does not match its certificate, naming the files',
    async () => {
      const n1 = leaves.get('n1')!;
      const n2 = leaves.get('n2')!;
      await expect(start('mismatch', { HIVEKV_TLS_CERT: n1.certFile,
        HIVEKV_TLS_KEY: n2.keyFile })).rejects.toThrow(/HIVEKV_TLS_CERT=.*n1\.pem.*HIVEKV_TLS_KEY/);
    });
});
