import { strict as assert } from 'node:assert';
import * as path from 'node:path';
import * as esbuild from 'esbuild';
import { REPO_ROOT } from '../support/paths';

/**
 * The extension host's main thread holds no coordinator (ARCHITECTURE.md, "The process model"): the extension's bundle
 * has neither the core's composition nor the host, gRPC or the MCP bridge, which the coordinator's worker bundle has.
 */
describe("the extension's bundle (the extension host's main thread) and the coordinator's worker bundle", function () {
  this.timeout(60_000);

  async function inputsOf(entry: string, external: string[] = []): Promise<string[]> {
    const result = await esbuild.build({
      entryPoints: [path.join(REPO_ROOT, entry)],
      absWorkingDir: REPO_ROOT,
      bundle: true,
      platform: 'node',
      format: 'cjs',
      target: 'node22',
      external,
      metafile: true,
      write: false,
      logLevel: 'silent',
      alias: { 'jsonc-parser': './node_modules/jsonc-parser/lib/esm/main.js' },
    });
    return Object.keys(result.metafile.inputs);
  }

  const COORDINATOR_PARTS = [
    'src/core/coordinator.ts',
    'src/server/host.ts',
    'src/server/server.ts',
    'src/server/bridge/bridgeServer.ts',
    'node_modules/@grpc/grpc-js/',
    'node_modules/@modelcontextprotocol/sdk/',
  ];

  it('the extension bundle has none of the coordinator, the host, gRPC or the MCP bridge', async () => {
    const inputs = await inputsOf('src/extension/extension.ts', ['vscode']);
    const found = COORDINATOR_PARTS.filter((part) => inputs.some((input) => input.startsWith(part)));
    assert.deepEqual(found, [], `the extension's bundle pulls in ${found.join(', ')}`);
  });

  it('the worker bundle has all of them', async () => {
    const inputs = await inputsOf('src/server/worker/coordinatorWorker.ts');
    const missing = COORDINATOR_PARTS.filter((part) => !inputs.some((input) => input.startsWith(part)));
    assert.deepEqual(missing, []);
  });
});
