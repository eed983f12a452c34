/**
 * Builds what the operator's routes read (`host/http/operator.ts`) from the running node:
 * the cluster table, the tenants list and the pause switch, both linearizable, the console's
 * files and settings. Composition only: the logic lives in the modules it wires.
 */
import { loadConsoleAssets, type ConsoleAssets } from '../http/console-assets.js';
import type { OperatorDeps, TenantRow, TenantsView } from '../http/operator.js';
import { DEFAULT_TENANT } from '../machine/commands.js';
import type { StateMachine } from '../machine/state-machine.js';
import type { ClusterStatus } from './cluster-status.js';
import type { NodeConfig } from './config.js';
import type { Replica } from './replica.js';

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

export function operatorDeps(config: NodeConfig, replica: Replica, machine: StateMachine,
  cluster: ClusterStatus, consoleAssets: ConsoleAssets = loadConsoleAssets()): OperatorDeps {
  return {
    cluster: () => cluster.view(),
    tenants: (maxTenants) => replica.linearizableRead(() => listTenants(machine, maxTenants)),
    kvEnabled: () => replica.linearizableRead(() => !machine.isPaused()),
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
