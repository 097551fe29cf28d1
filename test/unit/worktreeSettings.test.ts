import { strict as assert } from 'node:assert';
import { worktreeSettings } from '../../src/extension/worktreeSettings';

describe('worktree settings (sw4rm.worktrees.*)', () => {
  it("defaults: the sibling folder, each repository's .sw4rm/worktree.json, 30 days of snapshots", () => {
    assert.deepEqual(worktreeSettings({}), { folder: '', setup: undefined, snapshotRetentionDays: 30, warnings: [] });
    assert.deepEqual(worktreeSettings({ setupCopy: [], setupCommand: '  ' }).setup, undefined);
  });

  it('copy globs and a command line replace the file: the command runs by the shell with its timeout', () => {
    const s = worktreeSettings({
      folder: ' /trees ',
      setupCopy: ['.env*'],
      setupCommand: 'npm ci',
      setupTimeoutSeconds: 120,
      snapshotRetentionDays: 7,
    });
    assert.equal(s.folder, '/trees');
    assert.equal(s.snapshotRetentionDays, 7);
    assert.deepEqual(s.setup, {
      copy: ['.env*'],
      setup: { command: 'npm ci', args: [], timeoutSeconds: 120, shell: true },
    });
    assert.deepEqual(s.warnings, []);
  });

  it('names what it ignored or clamped', () => {
    const s = worktreeSettings({
      folder: 3,
      setupCopy: ['../outside'],
      setupTimeoutSeconds: 99_999,
      snapshotRetentionDays: 0,
    });
    assert.equal(s.folder, '');
    assert.equal(s.setup, undefined);
    assert.equal(s.snapshotRetentionDays, 1);
    assert.equal(s.warnings.length, 4);
    assert.match(s.warnings.join('\n'), /setupTimeoutSeconds 99999 is outside 1–3600; using 3600/);
    assert.match(s.warnings.join('\n'), /contains "\.\."/);
    assert.match(worktreeSettings({ setupCopy: 'x' }).warnings[0], /not a list of globs/);
  });
});
