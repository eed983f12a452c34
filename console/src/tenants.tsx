/**
 * Tenants: every tenant the node's state knows, with its live keys and bytes against its
 * quota row, its grant (an enabled row), and a form to set a row; and the operator's pause
 * switch for all of KV, behind a confirmation. All of it needs an admin token; the node
 * refuses anything else and the refusal is shown.
 */
import { useState } from 'preact/hooks';
import type { Api, Outcome, Refusal } from './api.js';
import { formatBytes, formatCount } from './format.js';
import { usePoll } from './hooks.js';
import type { Access } from './session.js';
import { ConfirmDialog, Field, RefusalBox } from './widgets.js';

interface Quota {
  readonly enabled: boolean;
  readonly maxRows: number | null;
  readonly maxBytes: number | null;
  readonly maxReadsPerSec: number | null;
  readonly maxWritesPerSec: number | null;
}

interface TenantRow {
  readonly tenant: string;
  readonly rows: number;
  readonly bytes: number;
  readonly quota: Quota | null;
}

interface TenantsAnswer {
  readonly appliedIndex: number;
  readonly tenants: readonly TenantRow[];
  readonly truncated: boolean;
}

const POLL_MS = 2000;
const QUOTA_FIELDS = ['maxRows', 'maxBytes', 'maxReadsPerSec', 'maxWritesPerSec'] as const;
type QuotaField = typeof QUOTA_FIELDS[number];

/** `used` of `limit` as a bar; over the limit is marked. */
function Usage({ used, limit, format }:
  { used: number; limit: number | null; format: (n: number) => string }) {
  if (limit === null) return <span>{format(used)} <span class="muted">/ unlimited</span></span>;
  const share = limit === 0 ? 1 : Math.min(used / limit, 1);
  const over = used >= limit;
  return (
    <span class={over ? 'usage over' : 'usage'}>
      {format(used)} <span class="muted">/ {format(limit)}</span>
      <meter min={0} max={1} value={share} high={0.8} optimum={0}
        aria-label={`${Math.round(share * 100)}% used`} />
      {over ? <span class="badge down">full</span> : null}
    </span>
  );
}

function grantOf(quota: Quota | null): string {
  if (quota === null) return 'no row';
  return quota.enabled ? 'granted' : 'disabled';
}

function TenantsTable({ answer, onEdit }:
  { answer: TenantsAnswer; onEdit: (row: TenantRow) => void }) {
  return (
    <div class="scroll-x">
      <table class="tenants" data-test="tenants">
        <thead><tr><th scope="col">Tenant</th><th scope="col">Grant</th>
          <th scope="col">Keys</th><th scope="col">Bytes</th><th scope="col">Reads/s</th>
          <th scope="col">Writes/s</th><th scope="col"><span class="sr-only">Edit</span></th>
        </tr></thead>
        <tbody>
          {answer.tenants.map((row) => (
            <tr key={row.tenant} data-tenant={row.tenant}>
              <th scope="row" class="mono">{row.tenant}</th>
              <td>{grantOf(row.quota)}</td>
              <td><Usage used={row.rows} limit={row.quota?.maxRows ?? null}
                format={formatCount} /></td>
              <td><Usage used={row.bytes} limit={row.quota?.maxBytes ?? null}
                format={formatBytes} /></td>
              <td class="num">{row.quota?.maxReadsPerSec ?? 'default'}</td>
              <td class="num">{row.quota?.maxWritesPerSec ?? 'default'}</td>
              <td><button type="button" onClick={() => onEdit(row)}>Edit quota</button></td>
            </tr>))}
        </tbody>
      </table>
      {answer.truncated ? <p class="muted">Only the first {answer.tenants.length} tenants
        are listed.</p> : null}
    </div>
  );
}

function PauseSwitch({ api, running, onChanged }:
  { api: Api; running: boolean | null; onChanged: () => void }) {
  const [confirming, setConfirming] = useState(false);
  const [refusal, setRefusal] = useState<Refusal | null>(null);
  const set = async (kv: boolean): Promise<void> => {
    setConfirming(false);
    const result = await api.call('POST', '/api/v1/system/kv-timers', { kv });
    setRefusal(result.ok ? null : result.refusal);
    onChanged();
  };
  return (
    <div class="card">
      <h2>KV switch</h2>
      <p>KV is <strong data-test="kv-state" class={running === false ? 'badge down' : 'badge up'}>
        {running === null ? 'unknown' : running ? 'running' : 'paused'}</strong> on every node.
      </p>
      {running === false
        ? <button type="button" onClick={() => void set(true)}>Resume KV</button>
        : <button type="button" class="danger" onClick={() => setConfirming(true)}>
          Pause KV…</button>}
      <ConfirmDialog open={confirming} title="Pause KV on every node?" confirmLabel="Pause KV"
        onConfirm={() => void set(false)} onCancel={() => setConfirming(false)}>
        <p>Every KV call on every node will answer 503 <code>kv_disabled</code> (403 inside a
          transaction) until KV is resumed. The switch goes through the replicated log.</p>
      </ConfirmDialog>
      {refusal === null ? null : <RefusalBox refusal={refusal} />}
    </div>
  );
}

function limitText(value: number | null | undefined): string {
  return value === null || value === undefined ? '' : String(value);
}

function QuotaForm({ api, initial, onChanged }:
  { api: Api; initial: TenantRow | null; onChanged: () => void }) {
  const [tenant, setTenant] = useState(initial?.tenant ?? '');
  const [enabled, setEnabled] = useState(initial?.quota?.enabled ?? true);
  const [limits, setLimits] = useState<Record<QuotaField, string>>({
    maxRows: limitText(initial?.quota?.maxRows), maxBytes: limitText(initial?.quota?.maxBytes),
    maxReadsPerSec: limitText(initial?.quota?.maxReadsPerSec),
    maxWritesPerSec: limitText(initial?.quota?.maxWritesPerSec),
  });
  const [answer, setAnswer] = useState<Outcome<unknown> | null>(null);
  const submit = async (): Promise<void> => {
    const body: Record<string, unknown> = { enabled };
    for (const field of QUOTA_FIELDS) {
      const text = limits[field].trim();
      body[field] = text === '' ? null : Number.isFinite(Number(text)) ? Number(text) : text;
    }
    const result = await api.call('PUT',
      `/api/v1/system/kv-quota/${encodeURIComponent(tenant.trim())}`, body);
    setAnswer(result);
    if (result.ok) onChanged();
  };
  return (
    <form class="card" aria-label="Set a quota row"
      onSubmit={(e) => { e.preventDefault(); void submit(); }}>
      <h2>Quota row</h2>
      <Field label="Tenant"><input value={tenant} name="quota-tenant" spellcheck={false}
        onInput={(e) => setTenant(e.currentTarget.value)} /></Field>
      <label class="check"><input type="checkbox" checked={enabled} name="quota-enabled"
        onChange={(e) => setEnabled(e.currentTarget.checked)} /> Granted (writes allowed)</label>
      <div class="row">
        {QUOTA_FIELDS.map((field) => (
          <Field key={field} label={field} hint="empty: unlimited">
            <input value={limits[field]} inputMode="numeric" name={`quota-${field}`}
              onInput={(e) => setLimits({ ...limits, [field]: e.currentTarget.value })} />
          </Field>))}
      </div>
      <button type="submit">Save quota row</button>
      {answer === null ? null : answer.ok ? <p role="status">Saved.</p>
        : <RefusalBox refusal={answer.refusal} />}
    </form>
  );
}

export function TenantsPage({ api, access }: { api: Api; access: Access }) {
  const [answer, setAnswer] = useState<Outcome<TenantsAnswer> | null>(null);
  const [running, setRunning] = useState<boolean | null>(null);
  const [editing, setEditing] = useState<TenantRow | null>(null);
  const [round, setRound] = useState(0);
  usePoll(async () => {
    const [tenants, timers] = await Promise.all([
      api.call<TenantsAnswer>('GET', '/api/v1/system/tenants'),
      api.call<{ kv: boolean }>('GET', '/api/v1/system/kv-timers'),
    ]);
    setAnswer(tenants);
    setRunning(timers.ok ? timers.value.kv : null);
  }, POLL_MS, [round]);
  const reload = () => setRound((n) => n + 1);
  return (
    <section aria-labelledby="tenants-title">
      <h1 id="tenants-title">Tenants</h1>
      {!access.admin ? <p class="muted">These routes need an admin token.</p> : null}
      {answer === null ? <p>Loading…</p> : !answer.ok ? <RefusalBox refusal={answer.refusal} />
        : <>
          {access.admin ? <PauseSwitch api={api} running={running} onChanged={reload} /> : null}
          <TenantsTable answer={answer.value} onEdit={setEditing} />
          {access.admin ? <QuotaForm key={editing?.tenant ?? ''} api={api} initial={editing}
            onChanged={reload} /> : null}
        </>}
    </section>
  );
}
