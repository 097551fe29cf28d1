// The CLI's entry point (esbuild.mjs bundles it as dist/cli.js). It checks the Node version before main.ts is
// loaded: esbuild evaluates a module reached by require() only when that require runs, so on an older Node the
// user reads which Node is needed instead of an ERR_UNKNOWN_BUILTIN_MODULE for node:sqlite.
import { isBuiltin } from 'node:module';
import { nodeRefusal } from './nodeCheck';

const refusal = nodeRefusal({
  version: process.version,
  execPath: process.execPath,
  hasSqlite: isBuiltin('node:sqlite'),
});
if (refusal !== undefined) {
  process.stderr.write(refusal);
  process.exitCode = 1;
} else {
  require('./main');
}
