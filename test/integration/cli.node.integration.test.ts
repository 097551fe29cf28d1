import { strict as assert } from 'node:assert';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import { REQUIRED_NODE } from '../../src/cli/nodeCheck';
import { CLI_BUNDLE } from '../support/paths';

/** The machine's own Node (Debian's, 20 here): older than node:sqlite. */
const SYSTEM_NODE = '/usr/bin/node';

function systemNodeLacksSqlite(): boolean {
  if (!fs.existsSync(SYSTEM_NODE)) return false;
  const probe = spawnSync(SYSTEM_NODE, ['-p', "require('node:module').isBuiltin('node:sqlite')"], { encoding: 'utf8' });
  return probe.stdout.trim() === 'false';
}

describe('dist/cli.js on a Node without node:sqlite', () => {
  before(function () {
    if (!systemNodeLacksSqlite()) this.skip(); // Only a machine whose /usr/bin/node is older than 22.13 can show it.
  });

  for (const args of [
    ['--help'],
    ['--port', '0', '--data-dir', '/nonexistent/never-created'],
    ['credentials', '--list'],
  ]) {
    it(`says which Node it needs, and nothing else, for ${args.join(' ')}`, () => {
      const version = spawnSync(SYSTEM_NODE, ['--version'], { encoding: 'utf8' }).stdout.trim();
      const result = spawnSync(SYSTEM_NODE, [CLI_BUNDLE, ...args], { encoding: 'utf8', timeout: 20_000 });
      assert.equal(result.status, 1, result.stderr);
      assert.equal(result.stdout, '');
      assert.match(
        result.stderr,
        new RegExp(`^sw4rm-coordinator needs Node\\.js ${REQUIRED_NODE.replace('.', '\\.')} or newer`),
      );
      assert.ok(result.stderr.includes(`this Node (${version}, ${SYSTEM_NODE})`), result.stderr);
      assert.match(result.stderr, /npm start -- --help/);
      assert.doesNotMatch(result.stderr, /ERR_UNKNOWN_BUILTIN_MODULE|\n\s+at /);
      assert.ok(!fs.existsSync('/nonexistent/never-created'));
    });
  }
});

describe('dist/cli.js on the Node the project brings', () => {
  it('prints its help and exits 0', () => {
    const result = spawnSync(process.execPath, [CLI_BUNDLE, '--help'], { encoding: 'utf8', timeout: 20_000 });
    assert.equal(result.status, 0, result.stderr);
    assert.match(result.stdout, /^Usage: sw4rm-coordinator/);
  });
});
