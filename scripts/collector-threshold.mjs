// The correction scripts/build-wasm.mjs makes to the runtime's incremental collector before
// compiling the machine (why: see there). Pure, so tests check it against the compiler's own
// copy of the collector.

/** Allocation past which the collector starts a cycle however large the heap is. */
const IDLE_HEADROOM_BYTES = 512 * 1024 * 1024;
export const COLLECTOR = 'rt/itcms';
const THRESHOLD_HELPER = `
// hivekv (scripts/build-wasm.mjs): the idle threshold, saturating and capped.
function idleThreshold(): usize {
  let headroom = <u64>total * (IDLEFACTOR - 100) / 100;
  if (headroom > ${IDLE_HEADROOM_BYTES}) headroom = ${IDLE_HEADROOM_BYTES};
  let wanted = <u64>total + headroom + GRANULARITY;
  return wanted < <u64>usize.MAX_VALUE ? <usize>wanted : usize.MAX_VALUE;
}
`;
/** Each statement that sets the idle threshold, and the anchor the helper goes before. */
const THRESHOLD_STATEMENTS = [
  'threshold = <usize>(<u64>total * IDLEFACTOR / 100) + GRANULARITY;',
  'threshold = total * (IDLEFACTOR / 100) + GRANULARITY;',
  'threshold = <usize>((<u64>total * IDLEFACTOR) / 100) + GRANULARITY;',
];
const HELPER_ANCHOR = '/** Performs a reasonable amount of incremental GC steps. */';

/** The collector's source with the correction, or an error naming what no longer matches. */
export function correctCollector(source, version) {
  const unknown = (what) => new Error(`assemblyscript ${version}: ${COLLECTOR} ${what}; ` +
    'check whether its idle threshold still wraps past 2 GiB (scripts/build-wasm.mjs)');
  let out = source;
  for (const statement of THRESHOLD_STATEMENTS) {
    if (out.split(statement).length !== 2) throw unknown(`has not one "${statement}"`);
    out = out.replace(statement, 'threshold = idleThreshold();');
  }
  if (out.split(HELPER_ANCHOR).length !== 2) throw unknown(`has not one "${HELPER_ANCHOR}"`);
  return out.replace(HELPER_ANCHOR, `${THRESHOLD_HELPER}${HELPER_ANCHOR}`);
}
