/**
 * The lifetime every put and increment must declare: `ttlSeconds` or `forever: true`,
 * exactly one. The fields send what the operator chose, none or both included, and the node
 * answers `kv_expiry_not_specified` when the choice is not exactly one.
 */
import { Field } from './widgets.js';

export interface Lifetime {
  readonly ttlSeconds: string;
  readonly forever: boolean;
}

export const noLifetime: Lifetime = Object.freeze({ ttlSeconds: '', forever: false });

/** The operation's lifetime fields, as typed: a number when the text is one. */
export function lifetimeOf(lifetime: Lifetime): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const text = lifetime.ttlSeconds.trim();
  if (text !== '') {
    const seconds = Number(text);
    out['ttlSeconds'] = Number.isFinite(seconds) ? seconds : text;
  }
  if (lifetime.forever) out['forever'] = true;
  return out;
}

export function LifetimeFields({ value, onChange, idPrefix, hint }: {
  value: Lifetime; onChange: (next: Lifetime) => void; idPrefix: string; hint?: string;
}) {
  return (
    <fieldset class="lifetime">
      <legend>Lifetime (required: seconds or forever){hint === undefined ? '' : ` · ${hint}`}
      </legend>
      <div class="row">
        <Field label="TTL seconds">
          <input value={value.ttlSeconds} inputMode="numeric" name={`${idPrefix}-ttl`}
            onInput={(e) => onChange({ ...value, ttlSeconds: e.currentTarget.value })} />
        </Field>
        <label class="check">
          <input type="checkbox" checked={value.forever} name={`${idPrefix}-forever`}
            onChange={(e) => onChange({ ...value, forever: e.currentTarget.checked })} />
          Forever
        </label>
      </div>
    </fieldset>
  );
}
