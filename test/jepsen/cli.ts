/**
 * `npm run jepsen -- --nodes 3|5 --time S --seed N [--nemesis kinds] [--membership]
 * [--clients-per-node K] [--no-probes] [--keep]`: one fault run against real processes, its
 * report on stdout, exit 0 when every check passed, 1 when one failed (the run directory,
 * with each node's log and the history, is kept and named), 2 on a usage error.
 *
 * --nemesis takes a comma-separated list of partition, one-way, delay, flaky, kill, pause, stop
 * (all of them by default) and `none`; --membership adds the membership nemesis, which needs
 * `/api/v1/system/members` on the nodes.
 */
import { DEFAULT_NEMESES, NEMESIS_KINDS, type NemesisKind } from './nemesis.js';
import { runJepsen, type JepsenOptions, type JepsenReport } from './run.js';

function usage(message: string): never {
  console.error(`jepsen: ${message}\nusage: npm run jepsen -- --nodes 3|5 --time S --seed N ` +
    '[--nemesis kind,...|none] [--membership] [--clients-per-node K] [--no-probes] [--keep]');
  process.exit(2);
}

function integer(flag: string, text: string | undefined, min: number, max: number): number {
  const value = Number(text);
  if (text === undefined || !Number.isSafeInteger(value) || value < min || value > max) {
    usage(`${flag} takes an integer from ${min} to ${max}`);
  }
  return value;
}

function parseNemeses(text: string): NemesisKind[] {
  if (text === 'none') return [];
  return text.split(',').map((kind) => {
    const known = NEMESIS_KINDS.find((k) => k === kind.trim());
    if (known === undefined) usage(`unknown nemesis "${kind}" (${NEMESIS_KINDS.join(', ')})`);
    return known;
  });
}

export function parseArgs(argv: readonly string[]): Omit<JepsenOptions, 'log'> {
  let nodes = 3;
  let timeS = 60;
  let seed = Math.floor(Math.random() * 2 ** 31);
  let nemeses: NemesisKind[] = [...DEFAULT_NEMESES];
  let membership = false;
  let clientsPerNode = 2;
  let probes = true;
  let keep = false;
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    const value = () => argv[++i];
    if (flag === '--nodes') nodes = integer(flag, value(), 3, 5);
    else if (flag === '--time') timeS = integer(flag, value(), 1, 900);
    else if (flag === '--seed') seed = integer(flag, value(), 0, 2 ** 31 - 1);
    else if (flag === '--nemesis') nemeses = parseNemeses(value() ?? '');
    else if (flag === '--membership') membership = true;
    else if (flag === '--clients-per-node') clientsPerNode = integer(flag, value(), 1, 16);
    else if (flag === '--no-probes') probes = false;
    else if (flag === '--keep') keep = true;
    else usage(`unknown flag ${flag}`);
  }
  if (nodes !== 3 && nodes !== 5) usage('--nodes is 3 or 5');
  if (membership && !nemeses.includes('membership')) nemeses.push('membership');
  return { nodes, timeS, seed, nemeses, clientsPerNode, probes, keep };
}

export function formatReport(report: JepsenReport): string {
  const lines = [
    `${report.valid ? 'VALID' : 'INVALID'}  seed ${report.seed}  ${report.nodes} nodes  ` +
      `${report.timeS} s (${(report.wallMs / 1000).toFixed(1)} s wall)`,
    `calls: ${Object.entries(report.calls).map(([k, v]) => `${k} ${v}`).join(', ')}`,
    `faults: ${Object.entries(report.faults).map(([k, v]) => `${k} ${v}`).join(', ') ||
      'none'}; probes ${report.probes}`,
  ];
  for (const verdict of report.verdicts) {
    lines.push(`  ${verdict.valid ? 'ok  ' : 'FAIL'} ${verdict.name}: ${verdict.summary}`);
    for (const line of verdict.evidence.slice(0, 20)) lines.push(`         ${line}`);
  }
  if (report.dir !== null) lines.push(`run directory (logs, history.jsonl): ${report.dir}`);
  return lines.join('\n');
}

async function main(): Promise<void> {
  const options = parseArgs(process.argv.slice(2));
  const stop = () => process.exit(130);
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
  const report = await runJepsen({ ...options, log: (line) => console.log(line) });
  console.log(formatReport(report));
  process.exit(report.valid ? 0 : 1);
}

if (process.argv[1]?.endsWith('jepsen/cli.js') === true) {
  main().catch((error: unknown) => {
    console.error(error instanceof Error ? error.stack : error);
    process.exit(1);
  });
}
