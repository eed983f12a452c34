/**
 * The console's shell: loads the node's settings, asks for a token when JWT is on (kept in
 * `sessionStorage` for this tab only), decides from the token's roles which controls to
 * show, and switches between the four views by the URL's hash, so every view has an address
 * and the back button works.
 */
import { render } from 'preact';
import { useEffect, useMemo, useState } from 'preact/hooks';
import { Api, loadSettings, type Outcome, type Refusal, type Settings } from './api.js';
import { ClusterPage } from './cluster.js';
import { KeysPage } from './keys.js';
import { LivePage } from './live.js';
import { LiveSampler } from './sampler.js';
import {
  accessOf, FULL_ACCESS, storedToken, storeToken, tokenRoles, type Access,
} from './session.js';
import { TenantsPage } from './tenants.js';
import { Field, RefusalBox } from './widgets.js';
import './styles.css';

const PAGES = ['cluster', 'keys', 'tenants', 'live'] as const;
type Page = typeof PAGES[number];
const TITLES: Record<Page, string> = {
  cluster: 'Cluster', keys: 'Keys', tenants: 'Tenants', live: 'Live',
};

function pageFromHash(): Page {
  const name = location.hash.replace(/^#\/?/, '');
  return (PAGES as readonly string[]).includes(name) ? name as Page : 'cluster';
}

function TokenForm({ problem, onToken }:
  { problem: Refusal | null; onToken: (token: string) => void }) {
  const [text, setText] = useState('');
  const [refusal, setRefusal] = useState<Refusal | null>(problem);
  const submit = async (): Promise<void> => {
    const token = text.trim();
    if (tokenRoles(token) === null) {
      setRefusal({ status: 0, error: 'console', reason: 'not_a_jwt',
        detail: 'a token is three base64url parts separated by dots' });
      return;
    }
    // Any route that authenticates tells a valid token (200 or 403) from a bad one (401).
    const probe = await new Api(token, () => undefined).call('GET', '/api/v1/system/cluster');
    if (!probe.ok && probe.refusal.status === 401) return setRefusal(probe.refusal);
    onToken(token);
  };
  return (
    <main class="signin">
      <form class="card" aria-label="Sign in"
        onSubmit={(e) => { e.preventDefault(); void submit(); }}>
        <h1>hivekv console</h1>
        <p>This node checks a JWT on every call. The token stays in this tab only.</p>
        <Field label="Token">
          <input type="password" value={text} name="token" autocomplete="off" autofocus
            onInput={(e) => setText(e.currentTarget.value)} />
        </Field>
        <button type="submit">Sign in</button>
        {refusal === null ? null : <RefusalBox refusal={refusal} />}
      </form>
    </main>
  );
}

function Shell({ settings, access, roles, page, api, sampler, onSignOut }: {
  settings: Settings; access: Access; roles: string; page: Page; api: Api;
  sampler: LiveSampler; onSignOut: (() => void) | null;
}) {
  return (
    <>
      <a class="skip" href="#main">Skip to content</a>
      <header class="top">
        <span class="brand">hivekv</span>
        <nav aria-label="Views">
          {PAGES.map((p) => <a key={p} href={`#/${p}`} aria-current={p === page ? 'page'
            : undefined}>{TITLES[p]}</a>)}
        </nav>
        <span class="who">node <strong>{settings.node}</strong> · {roles}
          {onSignOut === null ? null : <> · <button type="button" class="link"
            onClick={onSignOut}>Sign out</button></>}</span>
      </header>
      <main id="main" data-access={access.admin ? 'admin' : access.write ? 'write'
        : access.read ? 'read' : 'none'}>
        {page === 'cluster' ? <ClusterPage api={api} settings={settings} /> : null}
        {page === 'keys' ? <KeysPage api={api} settings={settings} access={access} /> : null}
        {page === 'tenants' ? <TenantsPage api={api} access={access} /> : null}
        {page === 'live' ? <LivePage sampler={sampler} node={settings.node} /> : null}
      </main>
    </>
  );
}

function App() {
  const [settings, setSettings] = useState<Outcome<Settings> | null>(null);
  const [token, setToken] = useState<string | null>(storedToken());
  const [authProblem, setAuthProblem] = useState<Refusal | null>(null);
  const [page, setPage] = useState<Page>(pageFromHash());
  useEffect(() => void loadSettings().then(setSettings), []);
  useEffect(() => {
    const onHash = (): void => setPage(pageFromHash());
    addEventListener('hashchange', onHash);
    return () => removeEventListener('hashchange', onHash);
  }, []);
  const api = useMemo(() => new Api(token, (refusal) => {
    storeToken(null);
    setToken(null);
    setAuthProblem(refusal);
  }), [token]);
  const sampler = useMemo(() => new LiveSampler(api), [api]);
  useEffect(() => {
    sampler.start();
    return () => sampler.stop();
  }, [sampler]);
  useEffect(() => {
    document.title = `${TITLES[page]} · hivekv`;
  }, [page]);
  if (settings === null) return <main><p>Loading…</p></main>;
  if (!settings.ok) return <main><RefusalBox refusal={settings.refusal} /></main>;
  const s = settings.value;
  if (s.jwt && token === null) {
    return <TokenForm problem={authProblem} onToken={(t) => {
      storeToken(t);
      setAuthProblem(null);
      setToken(t);
    }} />;
  }
  const roles = s.jwt && token !== null ? tokenRoles(token) ?? new Set() : null;
  const access = roles === null ? FULL_ACCESS : accessOf(roles);
  const roleText = roles === null ? 'auth off' : [...roles].join(', ') || 'no role';
  const signOut = s.jwt ? () => {
    storeToken(null);
    setToken(null);
  } : null;
  return <Shell settings={s} access={access} roles={roleText} page={page} api={api}
    sampler={sampler} onSignOut={signOut} />;
}

const root = document.getElementById('app');
if (root !== null) render(<App />, root);
