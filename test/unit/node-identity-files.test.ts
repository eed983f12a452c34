/**
 * The cluster and the member a data directory belongs to (host/node/cluster-id-file.ts):
 * written by the first start, kept by every later one, and a start that names another is
 * refused (or, for a cluster id derived from a changed member list, noted).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  CLUSTER_ID_FILE, MEMBER_ID_FILE, settleClusterId, settleMemberId,
} from '../../host/node/cluster-id-file.js';

let dir = '';

afterEach(() => {
  if (dir !== '') rmSync(dir, { recursive: true, force: true });
  dir = '';
});

function tempDataDir(): string {
  dir = mkdtempSync(join(tmpdir(), 'hivekv-identity-'));
  return dir;
}

describe('settleMemberId', () => {
  it('writes the member at the first start and takes the same one again', async () => {
    const data = tempDataDir();
    await settleMemberId(data, 'n2');
    expect(readFileSync(join(data, MEMBER_ID_FILE), 'utf8')).toBe('n2\n');
    await settleMemberId(data, 'n2');
  });

  it('refuses a start with another --id, naming the directory\'s member', async () => {
    const data = tempDataDir();
    await settleMemberId(data, 'n2');
    await expect(settleMemberId(data, 'n3')).rejects.toThrow(`the data directory ${data} ` +
      'belongs to member n2 (MEMBER_ID); start it with --id n2');
    expect(readFileSync(join(data, MEMBER_ID_FILE), 'utf8')).toBe('n2\n');
  });

  it('refuses a file that holds no member id', async () => {
    const data = tempDataDir();
    writeFileSync(join(data, MEMBER_ID_FILE), 'n2 n3\n');
    await expect(settleMemberId(data, 'n2')).rejects.toThrow('not a member id');
  });
});

describe('settleClusterId', () => {
  it('keeps the first id, notes a derived one that differs, refuses a set one', async () => {
    const data = tempDataDir();
    expect(await settleClusterId(data, { id: 'c1', source: 'derived' }))
      .toEqual({ id: 'c1', note: null });
    expect(readFileSync(join(data, CLUSTER_ID_FILE), 'utf8')).toBe('c1\n');
    const derived = await settleClusterId(data, { id: 'c2', source: 'derived' });
    expect(derived.id).toBe('c1');
    expect(derived.note).toContain('the data directory belongs to cluster c1');
    await expect(settleClusterId(data, { id: 'c2', source: 'environment' }))
      .rejects.toThrow('HIVEKV_CLUSTER_ID=c2, but the data directory');
  });
});
