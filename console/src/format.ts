/** Small formatting helpers for the views. Pure. */

const BYTE_UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];

export function formatBytes(bytes: number): string {
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < BYTE_UNITS.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${unit === 0 ? value : value.toFixed(1)} ${BYTE_UNITS[unit]}`;
}

export function formatCount(value: number): string {
  return value.toLocaleString('en-US');
}

/** Milliseconds as `850 ms` or `12.3 s`. */
export function formatAge(ms: number): string {
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(1)} s`;
}

/** A rate or a latency with sensible precision, or an em dash for no value. */
export function formatNumber(value: number | null | undefined, digits = 2): string {
  if (value === null || value === undefined || !Number.isFinite(value)) return '—';
  if (value >= 100) return Math.round(value).toLocaleString('en-US');
  return value.toFixed(digits);
}

/** Wall-clock time of day, HH:MM:SS, in the browser's zone. */
export function timeOfDay(ms: number): string {
  return new Date(ms).toLocaleTimeString('en-GB', { hour12: false });
}

/** A value as pretty JSON for reading and editing. */
export function prettyJson(value: unknown): string {
  return JSON.stringify(value, null, 2) ?? 'undefined';
}

/** `0000…` digests shortened for a table cell; the full one goes in a title. */
export function shortDigest(digest: string): string {
  return digest.length <= 12 ? digest : `${digest.slice(0, 12)}…`;
}

/**
 * A member's state against its memory budget, as `12.0 MiB of 2.5 GiB`; `—` when it said
 * neither. The member with the smallest budget binds every member's writes that grow it.
 */
export function stateText(status: { readonly stateBytes?: number | null;
  readonly stateBytesMax?: number | null } | null): string {
  const bytes = status?.stateBytes ?? null;
  const max = status?.stateBytesMax ?? null;
  if (bytes === null && max === null) return '—';
  const held = bytes === null ? '?' : formatBytes(bytes);
  return max === null ? held : `${held} of ${formatBytes(max)}`;
}

/** A mark beside a member's health: something it says that holds the cluster's writes. */
export interface MemberMark {
  readonly text: string;
  readonly title: string;
  /** Its `data-test` name. */
  readonly test: string;
}

/** The marks a member's status calls for: a disk low on space, a catch-up held back. */
export function memberMarks(status: { readonly storageFull?: boolean;
  readonly catchUpHeld?: boolean; readonly catchUpHeldFor?: string | null } | null):
  MemberMark[] {
  const marks: MemberMark[] = [];
  if (status?.storageFull === true) {
    marks.push({ text: 'disk full', test: 'member-disk-full',
      title: 'below HIVEKV_MIN_FREE_BYTES free: if it is a voter, every member refuses ' +
        'writes; a learner holds back from catching up instead' });
  }
  if (status?.catchUpHeld === true) {
    const want = status.catchUpHeldFor ?? 'memory';
    marks.push({ text: `held back: ${want === 'space' ? 'disk' : want}`, test: 'member-held',
      title: want === 'memory' ? 'its memory could not hold the state: it takes nothing ' +
        'from the leader, and stays behind until it has the memory or is removed'
        : want === 'space' ? 'a learner low on space: it takes nothing from the leader, ' +
          'and stays behind until it has room or is removed'
        : `it takes nothing from the leader for want of ${want}` });
  }
  return marks;
}
