import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';

const root = path.resolve(__dirname, '../../..');

describe("the users' README shipped in the .vsix (docs/user/README.md)", () => {
  const readme = fs.readFileSync(path.join(root, 'docs', 'user', 'README.md'), 'utf8');
  const manifest = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as {
    contributes: { configuration: { properties: Record<string, { default: unknown }> } };
  };

  it('lists every setting the extension contributes, with its default', () => {
    for (const [key, { default: value }] of Object.entries(manifest.contributes.configuration.properties)) {
      const row = readme.split('\n').find((line) => line.startsWith(`| \`${key}\` |`));
      assert.ok(row, `${key} is missing`);
      if (value !== '')
        assert.ok(row.includes(`\`${typeof value === 'string' ? value : JSON.stringify(value)}\``), `${key}: ${row}`);
    }
  });

  it('is written for users: no developer commands', () => {
    assert.doesNotMatch(readme, /npm (test|start|install|run)/);
  });
});
