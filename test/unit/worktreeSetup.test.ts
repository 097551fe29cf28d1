import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { checkCopyGlob, parseSetupConfig, readSetupConfig, SetupConfigError } from '../../src/core/worktree/setup';
import { writeFile as write } from '../support/gitRepo';

// The pure part: copying and running the setup in a real worktree is in test/integration/worktreeSetup.integration.test.ts.
describe('worktree setup: the configuration', () => {
  let tmp: string;
  let repoPath: string;

  beforeEach(() => {
    tmp = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'sw4rm-setup-')));
    repoPath = path.join(tmp, 'app');
    fs.mkdirSync(repoPath);
  });
  afterEach(() => {
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('reads the configuration: settings replace the file; unknown keys, bad types and a shell line with args are refused', async () => {
    assert.deepEqual((await readSetupConfig(repoPath)).source, 'none');
    write(
      repoPath,
      '.sw4rm/worktree.json',
      JSON.stringify({ copy: ['.env*'], setup: { command: 'npm', args: ['ci'] } }),
    );
    const fromFile = await readSetupConfig(repoPath);
    assert.equal(fromFile.source, 'file');
    assert.deepEqual(fromFile.config, {
      copy: ['.env*'],
      setup: { command: 'npm', args: ['ci'], timeoutSeconds: 600, shell: false },
    });
    const fromSettings = await readSetupConfig(repoPath, { copy: [] });
    assert.deepEqual(fromSettings, { source: 'settings', config: { copy: [], setup: undefined } });
    for (const bad of [
      [],
      { copy: '.env' },
      { cp: [] },
      { setup: { command: '' } },
      { setup: { command: 'x', args: [1] } },
      { setup: { command: 'make && make test', shell: true, args: ['-j'] } },
      { setup: { command: 'x', timeoutSeconds: 0 } },
      { setup: { command: 'x', timeoutSeconds: 99999 } },
    ]) {
      assert.throws(() => parseSetupConfig(bad), SetupConfigError, JSON.stringify(bad));
    }
    write(repoPath, '.sw4rm/worktree.json', '{ not json');
    await assert.rejects(readSetupConfig(repoPath), /not valid JSON/);
    fs.rmSync(path.join(repoPath, '.sw4rm/worktree.json'));
    write(tmp, 'elsewhere.json', '{"copy": ["*"]}');
    fs.symlinkSync(path.join(tmp, 'elsewhere.json'), path.join(repoPath, '.sw4rm/worktree.json'));
    await assert.rejects(readSetupConfig(repoPath), /symbolic link/);
  });

  it('refuses globs that could leave the repository', () => {
    for (const glob of [
      '../secret',
      'a/../../b',
      '/etc/passwd',
      '~/.ssh/*',
      'C:/x',
      'a\\..\\b',
      '{..,x}/y',
      'a\u0000b',
      '',
    ]) {
      assert.throws(() => checkCopyGlob(glob), SetupConfigError, JSON.stringify(glob));
    }
    assert.equal(checkCopyGlob('.env*'), '.env*');
  });
});
