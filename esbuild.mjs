// One build script: the extension host bundle, the headless CLI bundle and the example agent (Node, CommonJS).
// Webview bundles (browser) join here when the first webview screen lands.
import * as esbuild from 'esbuild';

const production = process.argv.includes('--production');

const common = {
  bundle: true,
  platform: 'node',
  format: 'cjs',
  target: 'node22',
  sourcemap: !production,
  minify: production,
  logLevel: 'warning',
};

await Promise.all([
  esbuild.build({
    ...common,
    entryPoints: ['src/extension/extension.ts'],
    outfile: 'dist/extension.js',
    external: ['vscode'],
  }),
  esbuild.build({
    ...common,
    entryPoints: ['src/cli/main.ts'],
    outfile: 'dist/cli.js',
    banner: { js: '#!/usr/bin/env node' },
  }),
  esbuild.build({
    ...common,
    entryPoints: ['examples/agent.ts'],
    outfile: 'dist/example-agent.js',
  }),
]);
