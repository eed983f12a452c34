/**
 * The operator console's built files (`npm run build` writes them to `build/console/`),
 * read into memory once at startup and served from there: a request never touches the file
 * system, so no path it names can reach a file outside the console. Each file carries its
 * content type, an ETag from its bytes, and its caching rule: the page revalidates on every
 * load (`no-cache`), the files under `assets/` have content-hashed names and never change.
 *
 * Bounded: at most CONSOLE_FILES_MAX files and CONSOLE_BYTES_MAX bytes are loaded; a file of
 * a type not in CONTENT_TYPES is skipped. A missing build is no error: the console then
 * answers 404 `console_not_built`, and the rest of the node runs as usual.
 */
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, extname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Files the console may hold; its build has a handful. */
export const CONSOLE_FILES_MAX = 64;
/** Bytes the console may hold in memory; its build is under 250 KB (a test checks). */
export const CONSOLE_BYTES_MAX = 4 * 1024 * 1024;
/** How far up from this file we look for the directory holding package.json. */
const PACKAGE_ROOT_SEARCH_DEPTH = 8;

const CONTENT_TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json',
  '.woff2': 'font/woff2',
  '.txt': 'text/plain; charset=utf-8',
};

/** Hashed file names under this folder never change content: cache them for a year. */
const IMMUTABLE_FOLDER = 'assets/';
const CACHE_IMMUTABLE = 'public, max-age=31536000, immutable';
const CACHE_REVALIDATE = 'no-cache';

export interface ConsoleFile {
  readonly body: Buffer;
  readonly contentType: string;
  /** Quoted strong validator from the file's bytes. */
  readonly etag: string;
  readonly cacheControl: string;
}

export interface ConsoleAssets {
  /** Where the files were read from (for the log line and the not-built message). */
  readonly dir: string;
  /** Relative path with forward slashes (`index.html`, `assets/index-1a2b.js`) -> file. */
  readonly files: ReadonlyMap<string, ConsoleFile>;
}

/** `build/console` of the package this module belongs to. */
export function consoleDir(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < PACKAGE_ROOT_SEARCH_DEPTH; i++) {
    if (existsSync(join(dir, 'package.json'))) return join(dir, 'build', 'console');
    const up = dirname(dir);
    if (up === dir) break;
    dir = up;
  }
  throw new Error('hivekv: package.json not found above ' + import.meta.url);
}

function* walk(dir: string, depth: number): Generator<string> {
  if (depth > 4) return;
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) yield* walk(path, depth + 1);
    else yield path;
  }
}

/**
 * Reads the console's files from `dir` (default `consoleDir()`). An absent directory gives
 * no files. Throws when the build holds more than the bounds allow (a broken build).
 */
export function loadConsoleAssets(dir: string = consoleDir()): ConsoleAssets {
  const files = new Map<string, ConsoleFile>();
  if (!existsSync(join(dir, 'index.html'))) return { dir, files };
  let totalBytes = 0;
  for (const path of walk(dir, 0)) {
    const contentType = CONTENT_TYPES[extname(path).toLowerCase()];
    if (contentType === undefined) continue;
    const name = relative(dir, path).split(sep).join('/');
    const body = readFileSync(path);
    totalBytes += body.length;
    if (files.size >= CONSOLE_FILES_MAX || totalBytes > CONSOLE_BYTES_MAX) {
      throw new Error(`the console build in ${dir} is over ${CONSOLE_FILES_MAX} files or ` +
        `${CONSOLE_BYTES_MAX} bytes`);
    }
    const digest = createHash('sha256').update(body).digest('base64url').slice(0, 27);
    files.set(name, {
      body,
      contentType,
      etag: `"${digest}"`,
      cacheControl: name.startsWith(IMMUTABLE_FOLDER) ? CACHE_IMMUTABLE : CACHE_REVALIDATE,
    });
  }
  return { dir, files };
}
