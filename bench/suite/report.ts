/**
 * The run's report: results.json (every figure), results.md (tables), charts/*.svg (rendered
 * headless by vega-lite and vega, no browser), and report.html holding tables and charts.
 * With `publish`, the charts are copied to bench/charts/ and bench/RESULTS.md's "## Suite"
 * section is replaced by this run's tables.
 */
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';

import { renderCharts, type Chart } from './charts.js';
import {
  clusterFigure, clusterTargets, ratioPairs, type Table, tables, workloadNotes,
} from './tables.js';
import { ROOT } from './targets.js';
import type { SuiteResult } from './run.js';

function markdownTable(t: Table): string {
  const escape = (cell: string) => cell.replace(/\|/g, '\\|');
  return [`| ${t.headers.map(escape).join(' | ')} |`,
    `|${t.headers.map((_, i) => (i === 0 ? '---' : '---:')).join('|')}|`,
    ...t.rows.map((row) => `| ${row.map(escape).join(' | ')} |`)].join('\n');
}

const html = (text: string): string => text.replace(/&/g, '&amp;').replace(/</g, '&lt;')
  .replace(/>/g, '&gt;').replace(/&lt;br&gt;/g, '<br>');

function htmlTable(t: Table): string {
  return `<table><thead><tr>${t.headers.map((h) => `<th>${html(h)}</th>`).join('')}` +
    `</tr></thead><tbody>${t.rows.map((row) => `<tr>${row.map((c) => `<td>${html(c)}</td>`)
      .join('')}</tr>`).join('')}</tbody></table>`;
}

function header(r: SuiteResult): string[] {
  const m = r.machine;
  const skipped = r.targets.filter((t) => t.skipped !== null)
    .map((t) => `${t.name} (${t.skipped})`);
  return [
    `Run ${r.startedAt} to ${r.finishedAt}. Machine: ${m.cpuModel}, ${m.cores} cores, ` +
      `${m.memoryGiB} GiB, Linux ${m.kernel}, load average at start ` +
      `${m.loadAverage.join(' ')}.`,
    `Versions: ${Object.entries(r.versions).map(([k, v]) => `${k} ${v}`).join('; ')}.`,
    `Each closed-loop point: ${r.plan.warmupMs / 1000} s warm-up, ${r.plan.durationMs / 1000} ` +
      `s measured; ${r.plan.keyCount.toLocaleString('en-US')} keys of 100-byte values; ` +
      `${r.plan.threads} generator thread(s). Latency is from the intended start of each ` +
      'operation to its last answer (HDR histogram).',
    ...(skipped.length > 0 ? [`Skipped: ${skipped.join('; ')}.`] : []),
  ];
}

function markdown(r: SuiteResult, charts: readonly Chart[], chartDir: string): string {
  const out = [`# ${r.title}`, '', ...header(r).flatMap((line) => [line, '']),
    ...charts.flatMap((c) => [`![${c.title}](${chartDir}/${c.file})`, ''])];
  for (const t of tables(r)) {
    out.push(`## ${t.title}`, '', ...(t.note ? [t.note, ''] : []), markdownTable(t), '');
  }
  out.push('## Workloads and how each target runs them', '', ...workloadNotes(r), '');
  return out.join('\n');
}

function htmlReport(r: SuiteResult, charts: readonly Chart[]): string {
  const sections = tables(r).map((t) => `<h2>${html(t.title)}</h2>` +
    (t.note ? `<p>${html(t.note)}</p>` : '') + htmlTable(t)).join('\n');
  return `<!doctype html><html><head><meta charset="utf-8"><title>${html(r.title)}</title>
<style>body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1200px;padding:0 1em}
table{border-collapse:collapse;margin:1em 0;font-size:13px}td,th{border:1px solid #ccc;
padding:3px 7px;text-align:right}td:first-child,th:first-child{text-align:left}
th{background:#f3f3f3}.chart{margin:1.5em 0}</style></head><body>
<h1>${html(r.title)}</h1>${header(r).map((l) => `<p>${html(l)}</p>`).join('\n')}
${charts.map((c) => `<div class="chart"><h3>${html(c.title)}</h3>${c.svg}</div>`).join('\n')}
${sections}
<h2>Workloads and how each target runs them</h2>
<ul>${workloadNotes(r).map((l) => `<li>${html(l.replace(/^- /, ''))}</li>`).join('')}</ul>
</body></html>`;
}

/** Replaces the "## Suite" section of bench/RESULTS.md (or appends it). */
function publish(r: SuiteResult, charts: readonly Chart[], outDir: string): void {
  const chartsDir = join(ROOT, 'bench', 'charts');
  mkdirSync(chartsDir, { recursive: true });
  for (const c of charts) copyFileSync(join(outDir, 'charts', c.file), join(chartsDir, c.file));
  const path = join(ROOT, 'bench', 'RESULTS.md');
  let text = '# Benchmark results\n';
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    // a new file
  }
  const body = markdown(r, charts, 'charts').replace(/^# .*\n/, '').replace(/^## /gm, '### ');
  const section = `## Suite\n\n\`npm run bench\` (bench/suite/), the latest published run.\n` +
    `${body.trimEnd()}\n`;
  const pattern = /## Suite\n[\s\S]*?(?=\n## |$)/;
  text = pattern.test(text) ? text.replace(pattern, section) : `${text.trimEnd()}\n\n${section}`;
  writeFileSync(path, text);
}

export async function writeReport(r: SuiteResult, outDir: string, toPublish: boolean):
  Promise<void> {
  mkdirSync(join(outDir, 'charts'), { recursive: true });
  writeFileSync(join(outDir, 'results.json'), JSON.stringify({ ...r,
    ratios: ratioPairs(r) }, null, 2));
  const charts = await renderCharts(r);
  for (const c of charts) writeFileSync(join(outDir, 'charts', c.file), c.svg);
  writeFileSync(join(outDir, 'results.md'), markdown(r, charts, 'charts'));
  writeFileSync(join(outDir, 'report.html'), htmlReport(r, charts));
  if (toPublish) publish(r, charts, outDir);
  for (const t of clusterTargets(r) ?? []) {
    process.stderr.write(`${t.name} (${t.goal}): ${clusterFigure(t, t.generator)} by the ` +
      `suite's generator, ${clusterFigure(t, t.wrk)} by wrk\n`);
  }
  process.stderr.write(`report: ${relative(process.cwd(), join(outDir, 'report.html')) ||
    outDir}\n`);
}
