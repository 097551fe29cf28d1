/**
 * The Node.js the CLI needs, checked before anything loads `node:sqlite` (see bin.ts): on an older Node the
 * coordinator would otherwise die with ERR_UNKNOWN_BUILTIN_MODULE before it could say what is wrong.
 */

/** The first Node.js releases with `node:sqlite` available without a flag (22.13 in the 22 line, 23.4 after it). */
export const REQUIRED_NODE = '22.13';

export interface NodeRuntime {
  /** process.version, e.g. "v20.20.2". */
  readonly version: string;
  /** process.execPath. */
  readonly execPath: string;
  /** Whether `node:sqlite` is a built-in module of this Node (module.isBuiltin). */
  readonly hasSqlite: boolean;
}

/** What to tell the user when this Node cannot run the coordinator, or undefined when it can. */
export function nodeRefusal(runtime: NodeRuntime): string | undefined {
  if (runtime.hasSqlite) return undefined;
  return (
    `sw4rm-coordinator needs Node.js ${REQUIRED_NODE} or newer (Node 24 recommended): it keeps its store with the ` +
    `built-in node:sqlite module, which this Node (${runtime.version}, ${runtime.execPath}) does not have.\n` +
    'In a clone of the project, run it through npm, which uses the Node 24 that `npm install` put in ' +
    'node_modules/.bin: `npm start -- --help`, `npx sw4rm-coordinator --help`, or `node_modules/.bin/node dist/cli.js --help`.\n'
  );
}
