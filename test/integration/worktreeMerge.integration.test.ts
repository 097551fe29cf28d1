import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ManualClock } from '../../src/core/clock';
import { createGit, type Git } from '../../src/core/worktree/git';
import { MERGE_SNAPSHOT_KEY, MergeBack, MergeRefusedError, type MergePreview } from '../../src/core/worktree/mergeBack';
import { discoverRepositories } from '../../src/core/worktree/repositories';
import { Snapshots } from '../../src/core/worktree/snapshots';
import { Worktrees } from '../../src/core/worktree/worktrees';
import { git, initRepo, readTree, refusedWith, writeFile as write } from '../support/gitRepo';

const refused = (promise: Promise<unknown>, reason: string) => refusedWith(MergeRefusedError, promise, reason);

function commit(dir: string, message: string, files: Record<string, string>): string {
  for (const [file, content] of Object.entries(files)) write(dir, file, content);
  git(dir, 'add', '-A');
  git(dir, 'commit', '-q', '-m', message);
  return git(dir, 'rev-parse', 'HEAD').trim();
}

/** HEAD (symbolic and commit), the index's entries (mode, blob, stage, path), every file's bytes, and every ref. */
interface CheckoutState {
  head: string;
  branch: string;
  index: string;
  files: Map<string, Buffer>;
  refs: string;
}

function stateOf(dir: string, refsToo = true): CheckoutState {
  return {
    head: git(dir, 'rev-parse', 'HEAD').trim(),
    branch: git(dir, 'symbolic-ref', 'HEAD').trim(),
    index: git(dir, 'ls-files', '--stage', '-z'),
    files: readTree(dir),
    refs: refsToo ? git(dir, 'for-each-ref', '--format=%(refname) %(objectname)') : '',
  };
}

function assertSameState(actual: CheckoutState, expected: CheckoutState, what: string): void {
  assert.equal(actual.head, expected.head, `${what}: HEAD`);
  assert.equal(actual.branch, expected.branch, `${what}: branch`);
  assert.equal(actual.index, expected.index, `${what}: index`);
  assert.deepEqual([...actual.files.keys()].sort(), [...expected.files.keys()].sort(), `${what}: file names`);
  for (const [file, bytes] of expected.files)
    assert.ok(actual.files.get(file)!.equals(bytes), `${what}: ${file} differs`);
  if (expected.refs) assert.equal(actual.refs, expected.refs, `${what}: refs`);
}

describe('worktree merge-back (real repositories)', function () {
  this.timeout(20_000);
  let tmp: string;
  let realGit: Git;
  let clock: ManualClock;
  let snapshots: Snapshots;
  let repoPath: string;
  let worktrees: Worktrees;
  let mergeBack: MergeBack;

  beforeEach(async () => {
    tmp = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'sw4rm-merge-')));
    realGit = createGit();
    clock = new ManualClock();
    snapshots = new Snapshots(realGit, clock);
    repoPath = path.join(tmp, 'app');
    initRepo(repoPath);
    write(repoPath, '.gitignore', 'node_modules/\n.env\n');
    commit(repoPath, 'initial', { 'README.md': 'one\ntwo\nthree\n', 'src/app.js': 'console.log(1);\n' });
    write(repoPath, '.env', 'SECRET=1\n'); // ignored: never touched by a merge or an undo
    const [repo] = await discoverRepositories(realGit, [repoPath]);
    worktrees = new Worktrees(realGit, snapshots, repo);
    mergeBack = new MergeBack(realGit, snapshots, repo, clock);
  });
  afterEach(() => {
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  /** Worktree `w1` with two agent commits, and a commit on main meanwhile (so the branches have diverged). */
  async function divergedAgent(): Promise<string> {
    const wt = await worktrees.create('w1');
    commit(wt.path, 'Add the feature module', { 'src/feature.js': 'export const feature = true;\n' });
    commit(wt.path, 'Document the feature', { 'README.md': 'one\ntwo\nthree\nfeature\n' });
    commit(repoPath, 'Main moves on', { 'CHANGELOG.md': 'main work\n' });
    return wt.path;
  }

  it('merges with a merge commit after approval of a preview (commits, files, diff), and undo restores HEAD, index and files', async () => {
    await divergedAgent();
    const before = stateOf(repoPath, false);
    let seen: MergePreview | undefined;
    const outcome = await mergeBack.merge('w1', { strategy: 'merge' }, async (preview) => {
      seen = preview;
      return true;
    });
    assert.equal(outcome.status, 'merged');
    assert.ok(seen);
    assert.deepEqual(
      seen.commits.map((c) => c.subject),
      ['Add the feature module', 'Document the feature'],
    );
    assert.deepEqual(seen.files, [
      { status: 'M', path: 'README.md' },
      { status: 'A', path: 'src/feature.js' },
    ]);
    assert.match(seen.diff, /\+export const feature = true;/);
    assert.deepEqual(seen.conflicts, []);
    assert.equal(seen.targetBranch, 'refs/heads/main');
    if (outcome.status !== 'merged') return;
    const head = git(repoPath, 'rev-parse', 'HEAD').trim();
    assert.equal(head, outcome.record.resultHead);
    assert.equal(
      git(repoPath, 'rev-list', '--parents', '-n', '1', 'HEAD').trim().split(' ').length,
      3,
      'a merge commit has two parents',
    );
    assert.equal(fs.readFileSync(path.join(repoPath, 'src/feature.js'), 'utf8'), 'export const feature = true;\n');
    assert.equal(git(repoPath, 'status', '--porcelain'), '');
    assert.match(
      git(repoPath, 'log', '-1', '--format=%B'),
      /^Merge sw4rm\/w1 into main\n\n\* Add the feature module\n\* Document the feature/,
    );
    assert.equal(git(repoPath, 'rev-parse', `${outcome.record.snapshot.commit}^1`).trim(), before.head);
    assert.ok(outcome.record.snapshot.ref.startsWith(`refs/sw4rm/snapshots/${MERGE_SNAPSHOT_KEY}/`));

    const undone = await mergeBack.undo(outcome.record);
    assert.equal(undone.head, before.head);
    assertSameState(stateOf(repoPath, false), before, 'after undo');
    assert.equal(fs.readFileSync(path.join(repoPath, '.env'), 'utf8'), 'SECRET=1\n');
  });

  it('squashes into one commit with a message of the agent’s subjects; the worktree is then merged and removes cleanly; undo restores', async () => {
    await divergedAgent();
    const before = stateOf(repoPath, false);
    const outcome = await mergeBack.merge('w1', { strategy: 'squash' }, async () => true);
    assert.equal(outcome.status, 'merged');
    if (outcome.status !== 'merged') return;
    assert.equal(
      git(repoPath, 'rev-list', '--parents', '-n', '1', 'HEAD').trim().split(' ').length,
      2,
      'a squash commit has one parent',
    );
    assert.equal(git(repoPath, 'rev-parse', 'HEAD^').trim(), before.head);
    const message = git(repoPath, 'log', '-1', '--format=%B');
    assert.match(
      message,
      /^Squash sw4rm\/w1: 2 commits\n\n\* Add the feature module \([0-9a-f]{12}\)\n\* Document the feature \([0-9a-f]{12}\)\n/,
    );
    assert.equal(fs.readFileSync(path.join(repoPath, 'README.md'), 'utf8'), 'one\ntwo\nthree\nfeature\n');
    assert.equal(await worktrees.isMerged('w1'), true);

    await mergeBack.undo(outcome.record);
    assertSameState(stateOf(repoPath, false), before, 'after undo');
    assert.equal(await worktrees.isMerged('w1'), false);

    const again = await mergeBack.merge('w1', { strategy: 'squash' }, async () => true);
    assert.equal(again.status, 'merged');
    assert.equal(await worktrees.isMerged('w1'), true);
    const removed = await worktrees.remove('w1', { isBound: () => false });
    assert.equal(removed.branchKept, false);
    assert.deepEqual(await worktrees.list(), []);
  });

  it('rebases the agent’s branch onto the target and fast-forwards; undo restores the target and the agent’s branch', async () => {
    const wtPath = await divergedAgent();
    const before = stateOf(repoPath, false);
    const agentBefore = stateOf(wtPath, false);
    const outcome = await mergeBack.merge('w1', { strategy: 'rebase' }, async () => true);
    assert.equal(outcome.status, 'merged');
    if (outcome.status !== 'merged') return;
    const head = git(repoPath, 'rev-parse', 'HEAD').trim();
    assert.equal(
      head,
      git(repoPath, 'rev-parse', 'sw4rm/w1').trim(),
      'the target is fast-forwarded to the rebased branch',
    );
    assert.equal(git(repoPath, 'rev-parse', 'HEAD~2').trim(), before.head, 'the agent’s two commits sit on the target');
    assert.deepEqual(git(repoPath, 'log', '--format=%s', '-3').trim().split('\n'), [
      'Document the feature',
      'Add the feature module',
      'Main moves on',
    ]);
    assert.equal(git(wtPath, 'status', '--porcelain'), '');
    assert.equal(fs.readFileSync(path.join(wtPath, 'CHANGELOG.md'), 'utf8'), 'main work\n');

    const undone = await mergeBack.undo(outcome.record);
    assert.equal(undone.sourceRestored, true);
    assertSameState(stateOf(repoPath, false), before, 'target after undo');
    assertSameState(stateOf(wtPath, false), agentBefore, 'agent worktree after undo');
  });

  it('refuses a dirty target (a changed file, or an untracked one) and changes nothing', async () => {
    await divergedAgent();
    write(repoPath, 'README.md', 'edited by the user\n');
    const dirty = stateOf(repoPath);
    let asked = false;
    await refused(
      mergeBack.merge('w1', { strategy: 'merge' }, async () => (asked = true)),
      'target_dirty',
    );
    assertSameState(stateOf(repoPath), dirty, 'after the refusal');
    git(repoPath, 'checkout', '--', 'README.md');
    write(repoPath, 'notes.txt', 'untracked\n');
    await refused(
      mergeBack.merge('w1', { strategy: 'squash' }, async () => (asked = true)),
      'target_dirty',
    );
    assert.equal(asked, false);
  });

  it('refuses a target branch checked out in another worktree, and one the main checkout does not have checked out', async () => {
    await divergedAgent();
    git(repoPath, 'branch', 'release');
    const other = path.join(tmp, 'release-checkout');
    git(repoPath, 'worktree', 'add', '-q', other, 'release');
    git(repoPath, 'branch', 'next');
    const before = stateOf(repoPath);
    const err = await refused(
      mergeBack.merge('w1', { strategy: 'merge', target: 'release' }, async () => true),
      'checked_out_elsewhere',
    );
    assert.match(err.message, /release-checkout/);
    await refused(mergeBack.preview('w1', { strategy: 'merge', target: 'next' }), 'target_not_checked_out');
    await refused(mergeBack.preview('w1', { strategy: 'merge', target: 'sw4rm/w1' }), 'bad_target');
    await refused(mergeBack.preview('w1', { strategy: 'merge', target: '--force' }), 'bad_target');
    assertSameState(stateOf(repoPath), before, 'after the refusals');
  });

  it('predicts a conflict before touching anything: names the file, does not ask, changes no ref, index or file', async () => {
    const wt = await worktrees.create('w1');
    commit(wt.path, 'Agent edits line two', { 'README.md': 'one\nTWO (agent)\nthree\n' });
    commit(repoPath, 'User edits line two', { 'README.md': 'one\n2 (user)\nthree\n' });
    const before = stateOf(repoPath);
    const agentBefore = stateOf(wt.path, false);
    let asked = false;
    for (const strategy of ['merge', 'squash', 'rebase'] as const) {
      const outcome = await mergeBack.merge('w1', { strategy }, async () => (asked = true));
      assert.equal(outcome.status, 'conflicts');
      assert.deepEqual(
        outcome.preview.conflicts.map((c) => c.path),
        ['README.md'],
      );
      assert.deepEqual(
        outcome.preview.conflicts[0].stages.map((s) => s.stage),
        [1, 2, 3],
      );
      assert.ok(
        outcome.preview.messages.some((m) => m.type.startsWith('CONFLICT') && m.paths.includes('README.md')),
        JSON.stringify(outcome.preview.messages),
      );
    }
    assert.equal(asked, false);
    assertSameState(stateOf(repoPath), before, 'target');
    assertSameState(stateOf(wt.path, false), agentBefore, 'agent worktree');
  });

  it('does nothing when not approved (no snapshot either)', async () => {
    await divergedAgent();
    const before = stateOf(repoPath);
    for (const strategy of ['merge', 'squash', 'rebase'] as const) {
      const outcome = await mergeBack.merge('w1', { strategy }, async () => false);
      assert.equal(outcome.status, 'not_approved');
    }
    assertSameState(stateOf(repoPath), before, 'after three refusals');
    assert.deepEqual(await snapshots.list(repoPath, MERGE_SNAPSHOT_KEY), []);
  });

  it('refuses a merge whose target moved while it waited for approval', async () => {
    await divergedAgent();
    let moved = '';
    await refused(
      mergeBack.merge('w1', { strategy: 'squash' }, async () => {
        moved = commit(repoPath, 'Committed during the review', { 'other.txt': 'x\n' });
        return true;
      }),
      'changed_since_preview',
    );
    assert.equal(git(repoPath, 'rev-parse', 'HEAD').trim(), moved);
  });

  it('refuses undo when the target moved on, changing nothing; forced, it snapshots the newer state first', async () => {
    await divergedAgent();
    const before = stateOf(repoPath, false);
    const outcome = await mergeBack.merge('w1', { strategy: 'merge' }, async () => true);
    if (outcome.status !== 'merged') assert.fail(outcome.status);
    const later = commit(repoPath, 'Work after the merge', { 'later.txt': 'later\n' });
    const movedState = stateOf(repoPath);
    const err = await refused(mergeBack.undo(outcome.record), 'moved_on');
    assert.match(err.message, /moved on/);
    assertSameState(stateOf(repoPath), movedState, 'after the refused undo');

    write(repoPath, 'later.txt', 'later, edited\n');
    await refused(mergeBack.undo(outcome.record), 'moved_on');
    const forced = await mergeBack.undo(outcome.record, { force: true });
    assertSameState(stateOf(repoPath, false), before, 'after the forced undo');
    assert.ok(forced.before);
    assert.equal(git(repoPath, 'rev-parse', `${forced.before.commit}^1`).trim(), later);
    assert.equal(git(repoPath, 'show', `${forced.before.commit}:later.txt`), 'later, edited\n');
  });
});
