/**
 * Builds what the operator's routes read (`host/http/operator.ts`) from the running node:
 * the cluster table, the tenants list and the pause switch, both linearizable, the console's
 * files and settings, and the export of the state at one applied index. Composition only:
 * the logic lives in the modules it wires.
 */
import { dumpText, machineBytesOf } from '../backup/export.js';
import { loadConsoleAssets, type ConsoleAssets } from '../http/console-assets.js';
import type { OperatorDeps, TenantRow, TenantsView } from '../http/operator.js';
import { DEFAULT_TENANT } from '../machine/commands.js';
import type { StateMachine } from '../machine/state-machine.js';
import type { ClusterStatus } from './cluster-status.js';
import type { NodeConfig } from './config.js';
import type { Replica } from './replica.js';
import type { ServiceResult } from './service.js';

/** The tenants the machine knows, up to `maxTenants`, with usage and quota rows. */
export function listTenants(machine: StateMachine, maxTenants: number): TenantsView {
  const usage = machine.tenantsUsage(maxTenants + 1);
  const tenants: TenantRow[] = usage.slice(0, maxTenants).map((row) => ({
    tenant: row.tenant,
    rows: row.rows,
    bytes: row.bytes,
    quota: machine.quota(row.tenant),
  }));
  return { appliedIndex: machine.appliedIndex, tenants, truncated: usage.length > maxTenants };
}

/**
 * The dump of a state no older than now: a linearizable read first (every write answered
 * before the call is in), then the newest durable snapshot at or past that index, taken now
 * if there is none, streamed from its file.
 */
async function exportDump(replica: Replica, machine: StateMachine):
  Promise<ServiceResult<{ index: number; text: AsyncIterable<string> }>> {
  const barrier = await replica.linearizableRead(() => machine.appliedIndex);
  if (barrier.kind !== 'done') return barrier;
  let snapshot: Awaited<ReturnType<Replica['snapshotForExport']>>;
  try {
    snapshot = await replica.snapshotForExport(barrier.value);
  } catch (error) {
    return { kind: 'unavailable', reason: 'shutting_down', retryAfterSeconds: 1,
      detail: `no snapshot to export: ${(error as Error).message}` };
  }
  return { kind: 'done', value: { index: snapshot.meta.index,
    text: dumpText(machineBytesOf(snapshot.chunks), { term: snapshot.meta.term,
      digest: snapshot.digest, source: 'node' }) } };
}

export function operatorDeps(config: NodeConfig, replica: Replica, machine: StateMachine,
  cluster: ClusterStatus, consoleAssets: ConsoleAssets = loadConsoleAssets()): OperatorDeps {
  return {
    cluster: () => cluster.view(),
    tenants: (maxTenants) => replica.linearizableRead(() => listTenants(machine, maxTenants)),
    kvEnabled: () => replica.linearizableRead(() => !machine.isPaused()),
    exportDump: () => exportDump(replica, machine),
    consoleAssets,
    consoleSettings: {
      node: config.id,
      jwt: config.jwt.enabled,
      tenancy: config.tenancyHeader,
      defaultTenant: DEFAULT_TENANT,
      prefixLimit: config.limits.prefixLimit,
    },
  };
}
