import * as path from 'node:path';

/** Tests run compiled from out/test/<rung>/ or out/test/support/, so the repository root is three levels up. */
export const REPO_ROOT = path.resolve(__dirname, '../../..');

/** The canonical .proto files (and grpc/health/v1/health.proto) the server loads. */
export const PROTOS_DIR = path.join(REPO_ROOT, 'protos');

/** The headless coordinator bundle built by `npm run build`. */
export const CLI_BUNDLE = path.join(REPO_ROOT, 'dist', 'cli.js');
