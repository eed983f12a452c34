#!/usr/bin/env node
// The hivekv command line; the code lives in dist/ (built by `npm ci` / `npm run build`).
import { main } from '../dist/host/cli/program.js';

main(process.argv.slice(2)).catch((error) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
