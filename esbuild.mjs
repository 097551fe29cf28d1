// One build script: the extension host bundle, the headless CLI bundle, the example agent and its sender (Node,
// CommonJS), and one browser bundle (IIFE) plus stylesheet per webview screen in dist/webview/.
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
  // jsonc-parser's UMD build (its "main") requires its parts at run time, which a bundle cannot follow; its ES build can be bundled.
  alias: { 'jsonc-parser': './node_modules/jsonc-parser/lib/esm/main.js' },
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
    entryPoints: ['src/cli/bin.ts'],
    outfile: 'dist/cli.js',
    banner: { js: '#!/usr/bin/env node' },
  }),
  // The editor's coordinator thread (src/server/worker/coordinatorWorker.ts): the extension host runs it as a Worker.
  esbuild.build({
    ...common,
    entryPoints: ['src/server/worker/coordinatorWorker.ts'],
    outfile: 'dist/coordinatorWorker.js',
  }),
  // Validates large payloads off the event loop (src/core/router/payloadChecker.ts); found beside the bundles.
  esbuild.build({
    ...common,
    entryPoints: ['src/core/router/payloadWorker.ts'],
    outfile: 'dist/payloadWorker.js',
  }),
  // Compiles agents' JSON Schemas off the event loop (src/core/tools/schemaThread.ts); found beside the bundles.
  esbuild.build({
    ...common,
    entryPoints: ['src/core/tools/schemaWorker.ts'],
    outfile: 'dist/schemaWorker.js',
  }),
  // Reads large workflow definition files off the event loop (src/core/workflow/definitionThread.ts).
  esbuild.build({
    ...common,
    entryPoints: ['src/core/workflow/definitionWorker.ts'],
    outfile: 'dist/definitionWorker.js',
  }),
  // Runs the built-in debate scorer off the event loop (src/core/reasoning/debateThread.ts).
  esbuild.build({
    ...common,
    entryPoints: ['src/core/reasoning/debateWorker.ts'],
    outfile: 'dist/debateWorker.js',
  }),
  // The MCP bridge's stdio entry point (src/cli/mcpStdio.ts): BridgeEndpoints.stdioCommand runs it beside the bundles.
  esbuild.build({
    ...common,
    entryPoints: ['src/cli/mcpStdio.ts'],
    outfile: 'dist/sw4rm-mcp.js',
  }),
  // The approval hooks' command (src/cli/hookCommand.ts): BridgeEndpoints.hookCommand runs it beside the bundles.
  esbuild.build({
    ...common,
    entryPoints: ['src/cli/hookCommand.ts'],
    outfile: 'dist/sw4rm-hook.js',
  }),
  // The launched agents' starter (src/cli/agentLauncher.ts): the editor's terminal runs it with the launch plan.
  esbuild.build({
    ...common,
    entryPoints: ['src/cli/agentLauncher.ts'],
    outfile: 'dist/sw4rm-launch.js',
  }),
  esbuild.build({
    ...common,
    entryPoints: ['examples/agent.ts'],
    outfile: 'dist/example-agent.js',
  }),
  esbuild.build({
    ...common,
    entryPoints: ['examples/send.ts'],
    outfile: 'dist/example-send.js',
  }),
  esbuild.build({
    ...common,
    entryPoints: ['examples/worktree.ts'],
    outfile: 'dist/example-worktree.js',
  }),
  esbuild.build({
    ...common,
    entryPoints: ['examples/workspaceTools.ts'],
    outfile: 'dist/example-tools.js',
  }),
  esbuild.build({
    ...common,
    entryPoints: ['examples/taskAgent.ts'],
    outfile: 'dist/example-tasks.js',
  }),
  esbuild.build({
    ...common,
    entryPoints: ['examples/toolProvider.ts'],
    outfile: 'dist/example-provider.js',
  }),
  esbuild.build({
    ...common,
    entryPoints: ['examples/negotiationRoom.ts'],
    outfile: 'dist/example-room.js',
  }),
  esbuild.build({
    ...common,
    entryPoints: ['examples/handoff.ts'],
    outfile: 'dist/example-handoff.js',
  }),
  esbuild.build({
    ...common,
    entryPoints: ['examples/workflowAgent.ts'],
    outfile: 'dist/example-workflow.js',
  }),
  // An agent that talks to the swarm through the MCP bridge only (the MCP SDK's Client), run as a launch profile.
  esbuild.build({
    ...common,
    entryPoints: ['examples/mcpAgent.ts'],
    outfile: 'dist/example-mcp.js',
  }),
  esbuild.build({
    ...common,
    platform: 'browser',
    format: 'iife',
    target: 'es2022',
    entryPoints: [
      { in: 'webview/hitl/main.ts', out: 'hitl' },
      { in: 'webview/hitl/hitl.css', out: 'hitl' },
      { in: 'webview/negotiation/main.ts', out: 'negotiation' },
      { in: 'webview/negotiation/negotiation.css', out: 'negotiation' },
    ],
    outdir: 'dist/webview',
  }),
]);
