import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Commands, SETTINGS_SECTION, Settings, Views } from '../../src/extension/contributions';

const root = path.resolve(__dirname, '../../..');
const manifest = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
const extensionSource = fs.readdirSync(path.join(root, 'src/extension'), { recursive: true })
  .filter((file) => String(file).endsWith('.ts'))
  .map((file) => fs.readFileSync(path.join(root, 'src/extension', String(file)), 'utf8'))
  .join('\n');

describe('contributions (package.json ⇄ src/extension/contributions.ts)', () => {
  it('declares exactly the commands of the ids module', () => {
    const declared = manifest.contributes.commands.map((c: { command: string }) => c.command).sort();
    assert.deepEqual(declared, Object.values(Commands).sort());
  });

  it('registers every declared command in the extension', () => {
    for (const [key, id] of Object.entries(Commands)) {
      assert.match(extensionSource, new RegExp(`registerCommand\\(Commands\\.${key}\\b`), `command ${id} is declared but never registered`);
    }
  });

  it('declares the view container and the Agents view with the ids the code uses', () => {
    assert.ok(manifest.contributes.viewsContainers.activitybar.some((c: { id: string }) => c.id === Views.container));
    assert.ok(manifest.contributes.views[Views.container].some((v: { id: string }) => v.id === Views.agents));
  });

  it('declares exactly the settings the code reads', () => {
    const declared = Object.keys(manifest.contributes.configuration.properties).sort();
    assert.deepEqual(declared, Object.values(Settings).map((key) => `${SETTINGS_SECTION}.${key}`).sort());
  });

  it('runs only in trusted workspaces and ships an allow-list .vscodeignore', () => {
    assert.equal(manifest.capabilities.untrustedWorkspaces.supported, false);
    const ignore = fs.readFileSync(path.join(root, '.vscodeignore'), 'utf8').split('\n').map((l) => l.trim());
    assert.equal(ignore.find((l) => l && !l.startsWith('#')), '**', 'the first rule must exclude everything');
  });
});
