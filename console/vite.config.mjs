// Builds the operator console (console/) into build/console/, served by every node at
// /console. Every module and stylesheet is bundled: the page loads nothing from another host.
import { defineConfig } from 'vite';

export default defineConfig({
  root: new URL('.', import.meta.url).pathname,
  base: '/console/',
  publicDir: false,
  logLevel: 'warn',
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    outDir: new URL('../build/console', import.meta.url).pathname,
    emptyOutDir: true,
    target: 'es2022',
    // One small bundle; inlining nothing keeps every file under the page's policy.
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    reportCompressedSize: false,
    sourcemap: false,
  },
});
