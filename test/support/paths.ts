import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';

/** Tests run compiled from out/test/<rung>/ or out/test/support/, so the repository root is three levels up. */
export const REPO_ROOT = path.resolve(__dirname, '../../..');

/** The canonical .proto files (and grpc/health/v1/health.proto) the server loads. */
export const PROTOS_DIR = path.join(REPO_ROOT, 'protos');

/** The headless coordinator bundle built by `npm run build`. */
export const CLI_BUNDLE = path.join(REPO_ROOT, 'dist', 'cli.js');

/** A bundle `npm run build` writes from examples/: `dist/example-<name>.js`. */
export function exampleBundle(name: string): string {
  return path.join(REPO_ROOT, 'dist', `example-${name}.js`);
}

/** A mocha `before` hook of the suite it is called in: fails, saying what to do, when a bundle is not built. */
export function requireBundles(...bundles: readonly string[]): void {
  before(() => {
    for (const bundle of bundles) assert.ok(fs.existsSync(bundle), `${bundle} is missing: run \`npm run build\` first`);
  });
}
