/**
 * Keys: pick a tenant (when tenancy is on) and a namespace, walk a prefix page by page
 * (`getPrefix` with `keysOnly`, `after` as the cursor), open a key (`get`: value, version,
 * `expiresAt`, `updatedAt`), and, with a token that may write, put with a lifetime, replace
 * at the shown version (`expect`), delete and increment. The console checks nothing the
 * node decides: a write without a lifetime goes out as typed, and the refusal comes back.
 */
import { useEffect, useState } from 'preact/hooks';
import type { Api, Outcome, Refusal, Settings } from './api.js';
import { prettyJson } from './format.js';
import { LifetimeFields, lifetimeOf, noLifetime, type Lifetime } from './lifetime.js';
import type { Access } from './session.js';
import {
  Answer, ConfirmDialog, Field, RefusalBox, WriteOutcome, type WriteResult,
} from './widgets.js';

export interface Scope {
  readonly tenant: string;
  readonly ns: string;
}

interface KeyRow {
  readonly key: string;
  readonly version: number;
  readonly expiresAt: string | null;
  readonly updatedAt: string;
}

interface PrefixPage {
  readonly rows: readonly KeyRow[];
  readonly truncated: boolean;
  readonly nextAfter: string | null;
}

interface KeyDetail {
  readonly found: boolean;
  readonly key: string;
  readonly value?: unknown;
  readonly version?: number;
  readonly expiresAt?: string | null;
  readonly updatedAt?: string;
}

interface Walk {
  readonly scope: Scope;
  readonly prefix: string;
  readonly limit: number;
  /** The cursor of every page walked so far; the last one is the current page's. */
  readonly afters: readonly string[];
}

/** A parsed JSON value, or a message saying why the text is not JSON. */
export function parseValue(text: string):
  { ok: true; value: unknown } | { ok: false; why: string } {
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch (error) {
    return { ok: false, why: `the value is not JSON (a string needs quotes): ${
      error instanceof Error ? error.message : error}` };
  }
}

function localRefusal(detail: string): Refusal {
  return { status: 0, error: 'console', reason: 'value_not_json', detail };
}

export function KeysPage({ api, settings, access }:
  { api: Api; settings: Settings; access: Access }) {
  const [tenant, setTenant] = useState('');
  const [ns, setNs] = useState('');
  const [walk, setWalk] = useState<Walk | null>(null);
  const [page, setPage] = useState<Outcome<PrefixPage> | null>(null);
  const [open, setOpen] = useState<Outcome<KeyDetail> | null>(null);
  const scope: Scope = { tenant: settings.tenancy ? tenant.trim() : '', ns: ns.trim() };

  const loadPage = async (next: Walk): Promise<void> => {
    setWalk(next);
    const after = next.afters.at(-1) ?? '';
    setPage(await api.kv<PrefixPage>({ op: 'getPrefix', ns: next.scope.ns, prefix: next.prefix,
      limit: next.limit, after, keysOnly: true }, next.scope.tenant));
  };
  /** `GET /api/v1/kv/:ns/*key`, which a read-only token may call (the batch route not). */
  const openKey = async (where: Scope, key: string): Promise<void> => {
    const path = `/api/v1/kv/${encodeURIComponent(where.ns)}/${encodeURIComponent(key)}`;
    setOpen(await api.call<KeyDetail>('GET', path, undefined,
      where.tenant === '' ? {} : { tenant: where.tenant }));
  };
  /** After a write: the page and the open key show what the node holds now. */
  const refresh = async (where: Scope, key: string): Promise<void> => {
    if (walk !== null) await loadPage(walk);
    await openKey(where, key);
  };

  if (!access.read) {
    return <section><h1>Keys</h1><p>This token may not read keys.</p></section>;
  }
  return (
    <section aria-labelledby="keys-title">
      <h1 id="keys-title">Keys</h1>
      <div class="scope-row">
        {settings.tenancy ? (
          <Field label="Tenant" hint={`empty: the default tenant ${settings.defaultTenant}`}>
            <input value={tenant} onInput={(e) => setTenant(e.currentTarget.value)}
              placeholder={settings.defaultTenant} spellcheck={false} name="tenant" />
          </Field>) : null}
        <Field label="Namespace">
          <input value={ns} onInput={(e) => setNs(e.currentTarget.value)} name="ns"
            placeholder="orders" spellcheck={false} autocomplete="off" />
        </Field>
      </div>
      <div class="keys-layout">
        <div>
          <WalkForm settings={settings} canWalk={access.write} onWalk={(prefix, limit) =>
            void loadPage({ scope, prefix, limit, afters: [''] })}
            onOpen={(key) => void openKey(scope, key)} />
          {page === null || walk === null ? null : <KeyList page={page} walk={walk}
            onOpen={(key) => void openKey(walk.scope, key)} onWalk={(w) => void loadPage(w)} />}
        </div>
        <div>
          {open === null ? null : <KeyDetails api={api} detail={open} access={access}
            scope={scope} onChanged={(where, key) => void refresh(where, key)} />}
          {access.write ? <WriteForms api={api} scope={scope}
            onChanged={(where, key) => void refresh(where, key)} /> : null}
        </div>
      </div>
    </section>
  );
}

function WalkForm({ settings, canWalk, onWalk, onOpen }: {
  settings: Settings; canWalk: boolean; onWalk: (prefix: string, limit: number) => void;
  onOpen: (key: string) => void;
}) {
  const [prefix, setPrefix] = useState('');
  const [limit, setLimit] = useState('100');
  const [key, setKey] = useState('');
  return (
    <div class="card">
      <form aria-label="Walk a prefix" onSubmit={(e) => {
        e.preventDefault();
        onWalk(prefix, Math.min(Math.max(Number(limit) || 100, 1), settings.prefixLimit));
      }}>
        <h2>Walk a prefix</h2>
        {canWalk ? null : <p class="hint">A prefix is read through POST /api/v1/kv, which
          needs a read-write token: the node will refuse this one. Open a key by name.</p>}
        <div class="row">
          <Field label="Prefix" hint="required: a namespace is not listed whole">
            <input value={prefix} onInput={(e) => setPrefix(e.currentTarget.value)}
              name="prefix" spellcheck={false} autocomplete="off" />
          </Field>
          <Field label="Page size">
            <input type="number" min={1} max={settings.prefixLimit} value={limit} name="limit"
              onInput={(e) => setLimit(e.currentTarget.value)} />
          </Field>
        </div>
        <button type="submit">List keys</button>
      </form>
      <form aria-label="Open a key" class="open-key"
        onSubmit={(e) => { e.preventDefault(); onOpen(key); }}>
        <Field label="Key name">
          <input value={key} onInput={(e) => setKey(e.currentTarget.value)} name="open-key"
            spellcheck={false} autocomplete="off" />
        </Field>
        <button type="submit">Open key</button>
      </form>
    </div>
  );
}

function KeyList({ page, walk, onOpen, onWalk }: { page: Outcome<PrefixPage>; walk: Walk;
  onOpen: (key: string) => void; onWalk: (walk: Walk) => void }) {
  if (!page.ok) return <RefusalBox refusal={page.refusal} />;
  const { rows, truncated, nextAfter } = page.value;
  const pageNumber = walk.afters.length;
  return (
    <div class="card">
      <h2>Page {pageNumber} <span class="muted">· {rows.length}{' '}
        {rows.length === 1 ? 'key' : 'keys'} under “{walk.prefix}” in {walk.scope.ns}</span></h2>
      <div class="key-list" tabIndex={-1}>
        <table class="keys" data-test="key-list">
          <thead><tr><th scope="col">Key</th><th scope="col">Version</th>
            <th scope="col">Expires</th><th scope="col">Updated</th></tr></thead>
          <tbody>
            {rows.map((row) => (
              <tr key={row.key} data-key={row.key}>
                <td><button type="button" class="link" onClick={() => onOpen(row.key)}>
                  {row.key}</button></td>
                <td class="num" data-test="key-version">{row.version}</td>
                <td>{row.expiresAt ?? 'never'}</td>
                <td>{row.updatedAt}</td>
              </tr>))}
          </tbody>
        </table>
      </div>
      <div class="pager">
        <button type="button" disabled={walk.afters.length <= 1}
          onClick={() => onWalk({ ...walk, afters: walk.afters.slice(0, -1) })}>
          Previous page</button>
        <button type="button" disabled={!truncated || nextAfter === null}
          onClick={() => onWalk({ ...walk, afters: [...walk.afters, nextAfter ?? ''] })}>
          Next page</button>
      </div>
    </div>
  );
}

function KeyDetails({ api, detail, access, scope, onChanged }: {
  api: Api; detail: Outcome<KeyDetail>; access: Access; scope: Scope;
  onChanged: (scope: Scope, key: string) => void;
}) {
  if (!detail.ok) return <RefusalBox refusal={detail.refusal} />;
  const d = detail.value;
  return (
    <div class="card" data-test="key-detail">
      <h2>Key <code>{d.key}</code></h2>
      {!d.found ? <p>Not found (absent or expired).</p> : (
        <dl class="detail">
          <dt>version</dt><dd data-test="detail-version">{d.version}</dd>
          <dt>expiresAt</dt><dd>{d.expiresAt ?? 'never (forever)'}</dd>
          <dt>updatedAt</dt><dd>{d.updatedAt}</dd>
          <dt>value</dt><dd><pre data-test="detail-value">{prettyJson(d.value)}</pre></dd>
        </dl>)}
      {access.write && d.found && d.version !== undefined ? (
        <VersionedWrites key={d.key} api={api} scope={scope} keyName={d.key}
          version={d.version} value={d.value} onChanged={onChanged} />) : null}
    </div>
  );
}

function VersionedWrites({ api, scope, keyName, version, value, onChanged }: {
  api: Api; scope: Scope; keyName: string; version: number; value: unknown;
  onChanged: (scope: Scope, key: string) => void;
}) {
  const [text, setText] = useState(prettyJson(value));
  // A new version (after a write here or elsewhere) shows its value; the last answer stays.
  useEffect(() => setText(prettyJson(value)), [version]);
  const [lifetime, setLifetime] = useState<Lifetime>(noLifetime);
  const [answer, setAnswer] = useState<Outcome<WriteResult> | null>(null);
  const [op, setOp] = useState('put');
  const [confirming, setConfirming] = useState(false);
  const replace = async (): Promise<void> => {
    const parsed = parseValue(text);
    if (!parsed.ok) return setAnswer({ ok: false, refusal: localRefusal(parsed.why) });
    setOp(`put (expect ${version})`);
    const result = await api.kv<WriteResult>({ op: 'put', ns: scope.ns, key: keyName,
      value: parsed.value, ...lifetimeOf(lifetime), expect: version }, scope.tenant);
    setAnswer(result);
    if (result.ok && result.value.applied) onChanged(scope, keyName);
  };
  const remove = async (): Promise<void> => {
    setConfirming(false);
    setOp(`delete (expect ${version})`);
    const result = await api.kv<WriteResult>({ op: 'delete', ns: scope.ns, key: keyName,
      expect: version }, scope.tenant);
    setAnswer(result);
    if (result.ok && result.value.applied) onChanged(scope, keyName);
  };
  return (
    <>
      <form aria-label="Compare and swap" onSubmit={(e) => { e.preventDefault(); void replace(); }}>
        <h3>Replace at version {version}</h3>
        <Field label="New value (JSON)">
          <textarea rows={4} value={text} onInput={(e) => setText(e.currentTarget.value)}
            name="cas-value" spellcheck={false} />
        </Field>
        <LifetimeFields value={lifetime} onChange={setLifetime} idPrefix="cas" />
        <div class="actions">
          <button type="submit">Replace if still at version {version}</button>
          <button type="button" class="danger" onClick={() => setConfirming(true)}>
            Delete…</button>
        </div>
      </form>
      <ConfirmDialog open={confirming} title={`Delete ${keyName}?`}
        confirmLabel={`Delete at version ${version}`} onConfirm={() => void remove()}
        onCancel={() => setConfirming(false)}>
        <p>The key is deleted only if it is still at version {version}.</p>
      </ConfirmDialog>
      {answer === null ? null : <Answer refusal={answer.ok ? null : answer.refusal}>
        {answer.ok ? <WriteOutcome result={answer.value} op={op} /> : null}</Answer>}
    </>
  );
}

function WriteForms({ api, scope, onChanged }:
  { api: Api; scope: Scope; onChanged: (scope: Scope, key: string) => void }) {
  return (
    <>
      <PutForm api={api} scope={scope} onChanged={onChanged} />
      <IncrForm api={api} scope={scope} onChanged={onChanged} />
    </>
  );
}

function PutForm({ api, scope, onChanged }:
  { api: Api; scope: Scope; onChanged: (scope: Scope, key: string) => void }) {
  const [key, setKey] = useState('');
  const [text, setText] = useState('');
  const [lifetime, setLifetime] = useState<Lifetime>(noLifetime);
  const [answer, setAnswer] = useState<Outcome<WriteResult> | null>(null);
  const submit = async (): Promise<void> => {
    const parsed = parseValue(text);
    if (!parsed.ok) return setAnswer({ ok: false, refusal: localRefusal(parsed.why) });
    const where = scope;
    const result = await api.kv<WriteResult>({ op: 'put', ns: where.ns, key,
      value: parsed.value, ...lifetimeOf(lifetime) }, where.tenant);
    setAnswer(result);
    if (result.ok && result.value.applied) onChanged(where, key);
  };
  return (
    <form class="card" aria-label="Put a key"
      onSubmit={(e) => { e.preventDefault(); void submit(); }}>
      <h2>Put</h2>
      <Field label="Key">
        <input value={key} onInput={(e) => setKey(e.currentTarget.value)} name="put-key"
          spellcheck={false} autocomplete="off" />
      </Field>
      <Field label="Value (JSON)">
        <textarea rows={3} value={text} onInput={(e) => setText(e.currentTarget.value)}
          name="put-value" spellcheck={false} placeholder='{"status":"paid"}' />
      </Field>
      <LifetimeFields value={lifetime} onChange={setLifetime} idPrefix="put" />
      <button type="submit">Put</button>
      {answer === null ? null : <Answer refusal={answer.ok ? null : answer.refusal}>
        {answer.ok ? <WriteOutcome result={answer.value} op="put" /> : null}</Answer>}
    </form>
  );
}

function IncrForm({ api, scope, onChanged }:
  { api: Api; scope: Scope; onChanged: (scope: Scope, key: string) => void }) {
  const [key, setKey] = useState('');
  const [delta, setDelta] = useState('1');
  const [min, setMin] = useState('');
  const [max, setMax] = useState('');
  const [lifetime, setLifetime] = useState<Lifetime>(noLifetime);
  const [answer, setAnswer] = useState<Outcome<WriteResult> | null>(null);
  const number = (text: string): number | string => {
    const value = Number(text);
    return text.trim() !== '' && Number.isFinite(value) ? value : text;
  };
  const submit = async (): Promise<void> => {
    const op: Record<string, unknown> = { op: 'incr', ns: scope.ns, key, delta: number(delta),
      ...lifetimeOf(lifetime) };
    if (min.trim() !== '') op['min'] = number(min);
    if (max.trim() !== '') op['max'] = number(max);
    const result = await api.kv<WriteResult>(op, scope.tenant);
    setAnswer(result);
    if (result.ok && result.value.applied) onChanged(scope, key);
  };
  return (
    <form class="card" aria-label="Increment a counter"
      onSubmit={(e) => { e.preventDefault(); void submit(); }}>
      <h2>Increment</h2>
      <Field label="Key">
        <input value={key} onInput={(e) => setKey(e.currentTarget.value)} name="incr-key"
          spellcheck={false} autocomplete="off" />
      </Field>
      <div class="row">
        <Field label="Delta"><input value={delta} name="incr-delta" inputMode="decimal"
          onInput={(e) => setDelta(e.currentTarget.value)} /></Field>
        <Field label="Min (optional)"><input value={min} name="incr-min" inputMode="decimal"
          onInput={(e) => setMin(e.currentTarget.value)} /></Field>
        <Field label="Max (optional)"><input value={max} name="incr-max" inputMode="decimal"
          onInput={(e) => setMax(e.currentTarget.value)} /></Field>
      </div>
      <LifetimeFields value={lifetime} onChange={setLifetime} idPrefix="incr"
        hint="create-only: a live counter keeps its expiry" />
      <button type="submit">Increment</button>
      {answer === null ? null : <Answer refusal={answer.ok ? null : answer.refusal}>
        {answer.ok ? <WriteOutcome result={answer.value} op="incr" /> : null}</Answer>}
    </form>
  );
}
