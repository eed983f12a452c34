/**
 * What `npm run bench:node` keeps of the run it replaces in bench/RESULTS.md (node-load.ts).
 */

/**
 * The run a "## Node" section holds, as a "### The run before" subsection: its first line's
 * commit and its figures (the table and the one-connection line), not the run before it, so
 * the section keeps two runs at most. Empty when the section holds no table.
 */
export function previousRunOf(section: string): string {
  const ownRun = section.split('\n### The run before')[0]!;
  const commit = /`npm run bench:node`, commit (\w+)/.exec(ownRun)?.[1] ?? 'unknown';
  const lines = ownRun.split('\n');
  const table = lines.filter((l) => l.startsWith('|'));
  if (table.length === 0) return '';
  const notes = lines.filter((l) => l.startsWith('One connection:'));
  return `### The run before (commit ${commit})\n\n${[table.join('\n'), ...notes].join('\n\n')}\n`;
}
