import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { UntrustedGitDirError, worktreeGitDirs } from '../../src/core/worktree/gitDirs';
import { makeTempDir, removeTempDir } from '../support/tempDir';

/**
 * Which git directories the coordinator believes a worktree's `.git` names (src/core/worktree/gitDirs.ts): git's own
 * layout of a linked worktree, laid out by hand here (no git runs), and each way an agent's program could bend it.
 */
describe("a worktree's git directories, as the coordinator believes them", () => {
  let base: string;
  let common: string;
  let worktree: string;
  let own: string;

  beforeEach(() => {
    base = fs.realpathSync(makeTempDir('sw4rm-gitdirs-'));
    common = path.join(base, 'repo', '.git');
    own = path.join(common, 'worktrees', 'w');
    worktree = path.join(base, 'w');
    fs.mkdirSync(own, { recursive: true });
    fs.mkdirSync(worktree);
    fs.writeFileSync(path.join(worktree, '.git'), `gitdir: ${own}\n`);
    fs.writeFileSync(path.join(own, 'commondir'), '../..\n');
    fs.writeFileSync(path.join(own, 'gitdir'), `${path.join(worktree, '.git')}\n`);
  });
  afterEach(() => removeTempDir(base));

  const refused = async (): Promise<string> => {
    try {
      await worktreeGitDirs(worktree);
    } catch (error) {
      assert.ok(error instanceof UntrustedGitDirError, String(error));
      return error.reason;
    }
    assert.fail('refused expected');
  };

  it("believes git's layout of a linked worktree, and a main checkout's .git folder", async () => {
    assert.deepEqual(await worktreeGitDirs(worktree), { gitDir: own, commonDir: common, linked: true });
    assert.deepEqual(await worktreeGitDirs(path.join(base, 'repo')), {
      gitDir: common,
      commonDir: common,
      linked: false,
    });
    assert.equal(await worktreeGitDirs(base), undefined, 'no .git: undefined, never a repository above');
  });

  it('believes relative paths as git writes them with worktree.useRelativePaths', async () => {
    fs.writeFileSync(path.join(worktree, '.git'), 'gitdir: ../repo/.git/worktrees/w\n');
    fs.writeFileSync(path.join(own, 'gitdir'), '../../../../w/.git\n');
    assert.deepEqual(await worktreeGitDirs(worktree), { gitDir: own, commonDir: common, linked: true });
  });

  it("refuses a .git that names a folder outside git's layout (HOME, another repository)", async () => {
    const outside = path.join(base, 'home');
    fs.mkdirSync(outside);
    fs.writeFileSync(path.join(worktree, '.git'), `gitdir: ${outside}\n`);
    assert.equal(await refused(), 'its git directory has no commondir');
    fs.writeFileSync(path.join(outside, 'commondir'), '..\n');
    assert.equal(await refused(), 'its git directory is not <common>/worktrees/<name>');
  });

  it('refuses a commondir rewritten to another repository, and a back link to another worktree', async () => {
    fs.mkdirSync(path.join(base, 'other', '.git'), { recursive: true });
    fs.writeFileSync(path.join(own, 'commondir'), `${path.join(base, 'other', '.git')}\n`);
    assert.equal(await refused(), 'its git directory is not <common>/worktrees/<name>');
    fs.writeFileSync(path.join(own, 'commondir'), '../..\n');
    fs.writeFileSync(path.join(own, 'gitdir'), `${path.join(base, 'v', '.git')}\n`);
    assert.equal(await refused(), 'its git directory belongs to another worktree');
    fs.rmSync(path.join(own, 'gitdir'));
    assert.equal(await refused(), 'its git directory has no gitdir file');
  });

  it('refuses a .git that is a symbolic link, a hard link, too large or not one gitdir line', async () => {
    const dotGit = path.join(worktree, '.git');
    fs.writeFileSync(dotGit, 'gitdir: a\ngitdir: b\n');
    assert.equal(await refused(), '.git is neither a folder nor one "gitdir:" line');
    fs.writeFileSync(dotGit, `gitdir: ${own}\n${'x'.repeat(5000)}`);
    assert.equal(await refused(), '.git is over 4096 bytes');
    fs.writeFileSync(path.join(base, 'elsewhere'), `gitdir: ${own}\n`);
    fs.rmSync(dotGit);
    fs.symlinkSync(path.join(base, 'elsewhere'), dotGit);
    assert.equal(await refused(), '.git is not a regular file');
    fs.rmSync(dotGit);
    fs.linkSync(path.join(base, 'elsewhere'), dotGit);
    assert.equal(await refused(), '.git has more than one link');
    fs.rmSync(dotGit);
    fs.writeFileSync(dotGit, `gitdir: ${path.join(base, 'nowhere')}\n`);
    assert.equal(await refused(), 'the folder .git names does not exist');
  });
});
