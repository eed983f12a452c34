/**
 * Pieces every view uses: the refusal box (the node's envelope as it came), the outcome of
 * a write, a labelled field, a confirmation dialog. Native elements only, so every control
 * is reachable and usable from the keyboard.
 */
import type { ComponentChildren } from 'preact';
import { useLayoutEffect, useRef } from 'preact/hooks';
import type { Refusal } from './api.js';
import { prettyJson } from './format.js';

/** The node's refusal: status, `error`, `reason` and `detail`, as they came. */
export function RefusalBox({ refusal, title = 'Refused' }: { refusal: Refusal; title?: string }) {
  return (
    <div class="refusal" role="alert" data-test="refusal">
      <strong>{title}{refusal.status > 0 ? ` · HTTP ${refusal.status}` : ''}</strong>
      <dl>
        <dt>error</dt><dd data-test="refusal-error">{refusal.error}</dd>
        <dt>reason</dt><dd data-test="refusal-reason">{refusal.reason}</dd>
        <dt>detail</dt><dd data-test="refusal-detail">{refusal.detail}</dd>
      </dl>
    </div>
  );
}

/** A write's result element: `applied`, `reason` when not, the key's version and value. */
export interface WriteResult {
  readonly applied: boolean;
  readonly reason?: string;
  readonly key: string;
  readonly value: unknown;
  readonly version: number;
}

export function WriteOutcome({ result, op }: { result: WriteResult; op: string }) {
  return (
    <div class={result.applied ? 'outcome applied' : 'outcome not-applied'} role="status"
      data-test="write-outcome">
      <strong>{op} {result.applied ? 'applied' : `not applied: ${result.reason ?? ''}`}</strong>
      <dl>
        <dt>key</dt><dd>{result.key}</dd>
        <dt>version</dt><dd data-test="outcome-version">{result.version}</dd>
        <dt>value</dt><dd><pre>{prettyJson(result.value)}</pre></dd>
      </dl>
    </div>
  );
}

/**
 * A label above its control (the label alone names it, for screen readers too), and an
 * optional hint below it.
 */
export function Field({ label, children, hint }:
  { label: string; children: ComponentChildren; hint?: string }) {
  return (
    <div class="field">
      <label><span class="field-label">{label}</span>{children}</label>
      {hint === undefined ? null : <span class="hint">{hint}</span>}
    </div>
  );
}

/**
 * A modal question. `open` shows it with `showModal()`, which traps focus and closes on
 * Escape; the confirming button says what it does.
 */
export function ConfirmDialog({ open, title, children, confirmLabel, onConfirm, onCancel }: {
  open: boolean; title: string; children: ComponentChildren; confirmLabel: string;
  onConfirm: () => void; onCancel: () => void;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  // Before paint: a key pressed right after the click already reaches the open dialog.
  useLayoutEffect(() => {
    const dialog = ref.current;
    if (dialog === null) return;
    if (open && !dialog.open) dialog.showModal();
    if (!open && dialog.open) dialog.close();
  }, [open]);
  return (
    <dialog ref={ref} class="confirm" aria-labelledby="confirm-title"
      onCancel={(event) => { event.preventDefault(); onCancel(); }}>
      <h2 id="confirm-title">{title}</h2>
      <div>{children}</div>
      <div class="actions">
        <button type="button" onClick={onCancel} autofocus>Cancel</button>
        <button type="button" class="danger" onClick={onConfirm}>{confirmLabel}</button>
      </div>
    </dialog>
  );
}

/** A refusal, an outcome, or nothing: the answer area under a form. */
export function Answer({ refusal, children }:
  { refusal: Refusal | null; children?: ComponentChildren }) {
  if (refusal !== null) return <RefusalBox refusal={refusal} />;
  return <>{children}</>;
}
