import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';

const root = path.resolve(__dirname, '../../..');
const read = (file: string) => fs.readFileSync(path.join(root, file), 'utf8');

/** The package names of the `apt-get install` command in a shell script (continuation lines joined). */
function aptPackages(script: string): string[] {
  const joined = script.replace(/#.*$/gm, '').replace(/\\\n/g, ' ');
  const command = /apt-get install ([^\n]*)/.exec(joined)?.[1] ?? '';
  return command.split(/\s+/).filter((word) => word !== '' && !word.startsWith('-'));
}

describe('README "On a workstation" lists every system package the scripts need', () => {
  const readme = read('README.md');
  const workstation = readme.slice(readme.indexOf('### On a workstation'), readme.indexOf('**Which Node.**'));

  it('every package .ci/run installs', () => {
    const packages = aptPackages(read('.ci/run'));
    assert.ok(packages.length >= 10, packages.join(' '));
    assert.deepEqual(aptPackages(workstation).sort(), [...packages].sort());
  });

  it('every package scripts/install-code-server.sh checks for', () => {
    const list =
      /BUILD_PACKAGES=\(([^)]*)\)/.exec(read('scripts/install-code-server.sh'))?.[1].split(/\s+/).filter(Boolean) ?? [];
    assert.deepEqual(list, [
      'python3',
      'make',
      'g++',
      'pkg-config',
      'libkrb5-dev',
      'libxkbfile-dev',
      'libsecret-1-dev',
      'libx11-dev',
    ]);
    for (const name of list) assert.ok(aptPackages(workstation).includes(name), name);
  });
});
