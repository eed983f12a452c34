#!/usr/bin/env node
// The project's code rules (STYLE.md, "Enforcement"), checked with the TypeScript parser:
// - no line over 100 columns, no function over 70 lines, in host/, assembly/, bench/, test/,
//   console/;
// - the pure parts (host/core/**, assembly/**) import no I/O and read no clock or randomness;
// - the client (host/client/**) runs in browsers: it imports only its own files and uses no
//   Node global;
// - outside assembly/, no `<<` by 31 or more: JavaScript shifts 32-bit integers, so
//   `1 << 40` is 256 (a settings bound once was).
// Exits 1 and lists every finding. A custom script instead of ESLint: these are the only
// rules we enforce, and the parser we already install checks them in well under a second.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';

const ROOT = new URL('..', import.meta.url).pathname;
const SCANNED = ['host', 'assembly', 'bench', 'test', 'scripts', 'console'];
const PURE = ['host/core/', 'assembly/'];
const LINE_COLUMNS_MAX = 100;
const FUNCTION_LINES_MAX = 70;
const FORBIDDEN_MODULES = [/^node:/, /^ws$/, /^hyper-express$/, /^fs$/, /^path$/, /^os$/];
const BROWSER = ['host/client/'];
const NODE_GLOBALS = new Set(['process', 'Buffer', 'require', '__dirname', '__filename', 'global',
  'setImmediate']);
const FORBIDDEN_GLOBALS = new Set([
  'Date', 'setTimeout', 'setInterval', 'setImmediate', 'process', 'performance', 'console',
  'queueMicrotask',
]);

function* sourceFiles(dir) {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (name === 'node_modules' || name.startsWith('.')) continue;
    if (statSync(path).isDirectory()) yield* sourceFiles(path);
    else if (/\.(ts|tsx|mjs)$/.test(name) && !name.endsWith('.d.ts')) yield path;
  }
}

/** A `describe(...)` callback groups tests; its length is the sum of theirs, not a smell. */
function isSuiteBody(node) {
  const parent = node.parent;
  return ts.isCallExpression(parent) && /^describe\b/.test(parent.expression.getText());
}

/** `x.Date` or `{ Date: 1 }` name a property, not the global. */
function isMemberOrDeclarationName(node) {
  const parent = node.parent;
  if (ts.isPropertyAccessExpression(parent) && parent.name === node) return true;
  return (ts.isPropertyAssignment(parent) || ts.isPropertySignature(parent) ||
    ts.isPropertyDeclaration(parent) || ts.isMethodDeclaration(parent)) && parent.name === node;
}

function checkFile(path, findings) {
  const file = relative(ROOT, path);
  const text = readFileSync(path, 'utf8');
  text.split('\n').forEach((line, i) => {
    if (line.length > LINE_COLUMNS_MAX) {
      findings.push(`${file}:${i + 1}: line is ${line.length} columns (max ${LINE_COLUMNS_MAX})`);
    }
  });
  const source = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
  const pure = PURE.some((prefix) => file.startsWith(prefix));
  const browser = BROWSER.some((prefix) => file.startsWith(prefix));
  const lineOf = (pos) => source.getLineAndCharacterOfPosition(pos).line + 1;
  const visit = (node) => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body && !isSuiteBody(node)) {
      const lines = lineOf(node.body.getEnd()) - lineOf(node.body.getStart()) + 1;
      if (lines > FUNCTION_LINES_MAX) {
        const name = node.name?.getText() ?? '(anonymous)';
        findings.push(`${file}:${lineOf(node.getStart())}: function ${name} is ${lines} lines ` +
          `(max ${FUNCTION_LINES_MAX})`);
      }
    }
    if (pure && (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) &&
      node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
      const module = node.moduleSpecifier.text;
      if (FORBIDDEN_MODULES.some((re) => re.test(module))) {
        findings.push(`${file}:${lineOf(node.getStart())}: pure code imports "${module}"`);
      }
    }
    if (browser && (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) &&
      node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier) &&
      !/^\.\.?\//.test(node.moduleSpecifier.text)) {
      findings.push(`${file}:${lineOf(node.getStart())}: browser code imports ` +
        `"${node.moduleSpecifier.text}" (only its own files)`);
    }
    if (browser && ts.isIdentifier(node) && NODE_GLOBALS.has(node.text) &&
      !isMemberOrDeclarationName(node)) {
      findings.push(`${file}:${lineOf(node.getStart())}: browser code uses Node's ${node.text}`);
    }
    if (pure && ts.isIdentifier(node) && FORBIDDEN_GLOBALS.has(node.text) &&
      !isMemberOrDeclarationName(node)) {
      findings.push(`${file}:${lineOf(node.getStart())}: pure code uses ${node.text}`);
    }
    if (!file.startsWith('assembly/') && ts.isBinaryExpression(node) &&
      node.operatorToken.kind === ts.SyntaxKind.LessThanLessThanToken &&
      ts.isNumericLiteral(node.right) && Number(node.right.text) >= 31 &&
      !ts.isBigIntLiteral(node.left)) {
      findings.push(`${file}:${lineOf(node.getStart())}: ${node.getText()} shifts a 32-bit ` +
        `integer; write 2 ** ${node.right.text}`);
    }
    if (pure && ts.isPropertyAccessExpression(node) && node.getText() === 'Math.random') {
      findings.push(`${file}:${lineOf(node.getStart())}: pure code uses Math.random`);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
}

const findings = [];
for (const dir of SCANNED) {
  let exists = true;
  try {
    statSync(join(ROOT, dir));
  } catch {
    exists = false;
  }
  if (exists) for (const path of sourceFiles(join(ROOT, dir))) checkFile(path, findings);
}
if (findings.length > 0) {
  console.error(findings.join('\n'));
  console.error(`lint: ${findings.length} finding(s)`);
  process.exit(1);
}
console.log('lint: clean');
