import * as assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ManualClock } from '../../src/core/clock';
import { cleanEnvironment, createGit, type Git } from '../../src/core/worktree/git';
import { parseStatusV2, parseWorktreeList } from '../../src/core/worktree/porcelain';
import { discoverRepositories, type Repository } from '../../src/core/worktree/repositories';
import { InvalidWorktreeIdError, Snapshots } from '../../src/core/worktree/snapshots';
import { WorktreeRefusedError, Worktrees } from '../../src/core/worktree/worktrees';
import { commitAll, git, makeRepo, readTree, refusedWith } from '../support/gitRepo';

const refused = (promise: Promise<unknown>, reason: string) => refusedWith(WorktreeRefusedError, promise, reason);

function assertSameFiles(actual: Map<string, Buffer>, expected: Map<string, Buffer>): void {
  assert.deepEqual([...actual.keys()].sort(), [...expected.keys()].sort());
  for (const [file, bytes] of expected) assert.ok(actual.get(file)!.equals(bytes), `${file} differs`);
}

describe('worktree area: git, repositories, worktrees, snapshots (real repositories)', function () {
  this.timeout(20_000);
  let tmp: string;
  let realGit: Git;
  let clock: ManualClock;
  let snapshots: Snapshots;

  beforeEach(() => {
    tmp = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'sw4rm-wt-')));
    realGit = createGit();
    clock = new ManualClock();
    snapshots = new Snapshots(realGit, clock);
  });
  afterEach(() => {
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  async function repoAndWorktrees(
    name = 'app',
    files?: Record<string, string>,
  ): Promise<{ repo: Repository; worktrees: Worktrees }> {
    const dir = makeRepo(tmp, name, files);
    const [repo] = await discoverRepositories(realGit, [dir]);
    return { repo, worktrees: new Worktrees(realGit, snapshots, repo) };
  }

  describe('git', () => {
    it('runs git without the GIT_* variables of the coordinator’s own environment', async () => {
      const dir = makeRepo(tmp, 'app');
      const saved = {
        GIT_DIR: process.env.GIT_DIR,
        GIT_INDEX_FILE: process.env.GIT_INDEX_FILE,
        GIT_WORK_TREE: process.env.GIT_WORK_TREE,
      };
      process.env.GIT_DIR = path.join(tmp, 'nowhere');
      process.env.GIT_INDEX_FILE = path.join(tmp, 'stray-index');
      process.env.GIT_WORK_TREE = tmp;
      try {
        const out = await realGit.run(dir, ['rev-parse', '--path-format=absolute', '--git-dir']);
        assert.equal(out.stdout.trim(), path.join(dir, '.git'));
        await realGit.run(dir, ['status', '--porcelain=v2']);
        assert.equal(fs.existsSync(path.join(tmp, 'stray-index')), false);
      } finally {
        for (const [k, v] of Object.entries(saved)) {
          if (v === undefined) delete process.env[k];
          else process.env[k] = v;
        }
      }
    });

    it('reports a failing command with its exit code and message, and passes arguments without a shell', async () => {
      const dir = makeRepo(tmp, 'app');
      await assert.rejects(
        realGit.run(dir, ['rev-parse', '--verify', 'no-such-branch']),
        (err: Error & { exitCode?: number }) => err.exitCode === 128 && /Needed a single revision/.test(err.message),
      );
      const out = await realGit.run(dir, ['rev-parse', '--verify', '--quiet', '$(touch pwned); `id`'], {
        okExitCodes: [1],
      });
      assert.equal(out.exitCode, 1);
      assert.equal(fs.existsSync(path.join(dir, 'pwned')), false);
    });
  });

  describe('repositories', () => {
    it('makes every repository of a multi-root workspace a unique repo_id, nested and bare ones included', async () => {
      const first = makeRepo(path.join(tmp, 'one'), 'app');
      const second = makeRepo(path.join(tmp, 'two'), 'app');
      const plain = path.join(tmp, 'plain folder');
      fs.mkdirSync(plain);
      makeRepo(plain, 'lib ünï');
      makeRepo(path.join(plain, 'deep', 'er'), 'tool');
      git(tmp, 'init', '-q', '--bare', path.join(plain, 'server.git'));
      fs.mkdirSync(path.join(first, 'src'));
      git(first, 'worktree', 'add', '-q', path.join(tmp, 'one', 'app-linked'));
      fs.mkdirSync(path.join(tmp, 'not-a-repo'));
      const folders = [
        second,
        first,
        path.join(first, 'src'),
        path.join(tmp, 'one', 'app-linked'),
        plain,
        path.join(tmp, 'not-a-repo'),
        path.join(tmp, 'missing'),
      ];
      const repos = await discoverRepositories(realGit, folders);
      assert.deepEqual(
        repos.map((r) => [r.id, path.relative(tmp, r.path), r.bare]),
        [
          ['app', 'one/app', false],
          ['tool', 'plain folder/deep/er/tool', false],
          ['lib--n-', 'plain folder/lib ünï', false],
          ['server', 'plain folder/server.git', true],
          ['app-2', 'two/app', false],
        ],
      );
      // The same folders in another order give the same ids.
      const again = await discoverRepositories(realGit, [...folders].reverse());
      assert.deepEqual(
        again.map((r) => r.id),
        repos.map((r) => r.id),
      );
    });
  });

  describe('worktrees', () => {
    it('creates a worktree beside the repository on sw4rm/<id> from HEAD, lists it, and removes it cleanly', async () => {
      const { repo, worktrees } = await repoAndWorktrees();
      const head = git(repo.path, 'rev-parse', 'HEAD').trim();
      const made = await worktrees.create('agent-1');
      assert.equal(made.path, path.join(tmp, 'app.sw4rm-worktrees', 'agent-1'));
      assert.equal(made.branch, 'sw4rm/agent-1');
      assert.equal(made.baseCommit, head);
      assert.equal(made.baseRef, 'refs/heads/main');
      assert.deepEqual([made.ahead, made.behind, made.dirty], [0, 0, 0]);
      assert.equal(git(made.path, 'rev-parse', '--abbrev-ref', 'HEAD').trim(), 'sw4rm/agent-1');

      fs.writeFileSync(path.join(made.path, 'work.txt'), 'work\n');
      assert.equal((await worktrees.get('agent-1'))!.dirty, 1);
      commitAll(made.path, 'agent work');
      fs.writeFileSync(path.join(repo.path, 'main.txt'), 'main moved\n');
      commitAll(repo.path, 'main moves on');
      const listed = await worktrees.list();
      assert.deepEqual(
        listed.map((w) => [w.id, w.ahead, w.behind, w.dirty]),
        [['agent-1', 1, 1, 0]],
      );

      await refused(worktrees.remove('agent-1', { isBound: () => false }), 'unmerged');
      git(repo.path, 'merge', '-q', '--no-edit', 'sw4rm/agent-1');
      const removed = await worktrees.remove('agent-1', { isBound: () => false });
      assert.equal(removed.branchKept, false);
      assert.equal(fs.existsSync(made.path), false);
      assert.equal(git(repo.path, 'branch', '--list', 'sw4rm/*'), '');
      assert.deepEqual(await worktrees.list(), []);
    });

    it('creates from a chosen base and records it; refuses ids that are not ids, and bases that are not commits', async () => {
      const { repo, worktrees } = await repoAndWorktrees();
      const first = git(repo.path, 'rev-parse', 'HEAD').trim();
      fs.writeFileSync(path.join(repo.path, 'b.txt'), 'b\n');
      commitAll(repo.path, 'second');
      const made = await worktrees.create('from-first', { base: first });
      assert.equal(made.baseCommit, first);
      assert.equal(made.baseRef, undefined);
      assert.equal(fs.existsSync(path.join(made.path, 'b.txt')), false);
      for (const bad of [
        '',
        '../escape',
        'a/b',
        '-rf',
        '.hidden',
        'x.lock',
        'a..b',
        'ünï',
        'x'.repeat(65),
        'a b',
        'nul\0',
      ]) {
        await assert.rejects(worktrees.create(bad), InvalidWorktreeIdError, JSON.stringify(bad));
      }
      await refused(worktrees.create('bad-base', { base: '--output=/tmp/x' }), 'bad_base');
      await refused(worktrees.create('bad-base', { base: 'no-such-branch' }), 'bad_base');
      await refused(worktrees.create('from-first'), 'exists');
      assert.deepEqual(fs.readdirSync(path.join(tmp, 'app.sw4rm-worktrees')), ['from-first']);
      assert.equal(
        git(repo.path, 'for-each-ref', '--format=%(refname)', 'refs/sw4rm/bases/').trim(),
        'refs/sw4rm/bases/from-first',
      );
    });

    it('refuses a worktrees folder inside the user’s working tree', async () => {
      const { repo } = await repoAndWorktrees();
      const inside = new Worktrees(realGit, snapshots, repo, { root: path.join(repo.path, 'trees') });
      await refused(inside.create('agent-1'), 'inside_working_tree');
      assert.equal(fs.existsSync(path.join(repo.path, 'trees')), false);
    });

    it('refuses a dirty worktree without force; with force snapshots first, keeps the branch, and every file is recoverable', async () => {
      const { repo, worktrees } = await repoAndWorktrees('app', { 'README.md': 'hello\n', '.gitignore': '*.log\n' });
      const made = await worktrees.create('agent-1');
      fs.writeFileSync(path.join(made.path, 'README.md'), 'changed\n');
      fs.writeFileSync(path.join(made.path, 'untracked.bin'), Buffer.from([0, 1, 2, 255, 254]));
      fs.writeFileSync(path.join(made.path, 'build.log'), 'ignored\n');
      const before = readTree(made.path);
      before.delete('build.log');
      const err = await refused(worktrees.remove('agent-1', { isBound: () => false }), 'dirty');
      assert.match(err.message, /2 uncommitted files/);
      assert.ok(fs.existsSync(path.join(made.path, 'untracked.bin')), 'nothing removed when refused');

      const removed = await worktrees.remove('agent-1', { isBound: () => false, force: true });
      assert.equal(fs.existsSync(made.path), false);
      assert.equal(removed.branchKept, true);
      assert.ok(git(repo.path, 'branch', '--list', 'sw4rm/agent-1').includes('sw4rm/agent-1'));

      const recovered = await worktrees.create('recovered', { base: 'sw4rm/agent-1' });
      await snapshots.restore(recovered.path, 'recovered', removed.snapshot);
      const after = readTree(recovered.path);
      assertSameFiles(after, before);
    });

    it('a new worktree of an id whose branch was kept checks that branch out again (its base kept), and says where it is checked out when it cannot', async () => {
      const { repo, worktrees } = await repoAndWorktrees();
      const created: string[] = [];
      const observed = new Worktrees(realGit, snapshots, repo, {
        onCreated: (w, d) => created.push(`${w.id}:${d.reusedBranch}`),
      });
      const made = await observed.create('agent-1');
      fs.writeFileSync(path.join(made.path, 'work.txt'), 'work\n');
      commitAll(made.path, 'agent work');
      const tip = git(made.path, 'rev-parse', 'HEAD').trim();
      assert.equal((await worktrees.remove('agent-1', { isBound: () => false, force: true })).branchKept, true);
      git(repo.path, 'checkout', '-q', 'sw4rm/agent-1');
      const err = await refused(observed.create('agent-1'), 'exists');
      assert.match(err.message, new RegExp(`sw4rm/agent-1 .* is checked out in ${repo.path}`));
      git(repo.path, 'checkout', '-q', 'main');
      const again = await observed.create('agent-1', { base: 'main' });
      assert.equal(again.head, tip);
      assert.equal(fs.readFileSync(path.join(again.path, 'work.txt'), 'utf8'), 'work\n');
      assert.equal(again.baseCommit, made.baseCommit, 'the recorded base is kept');
      assert.equal(again.ahead, 1);
      assert.deepEqual(created, ['agent-1:false', 'agent-1:true']);
    });

    it('never removes a worktree an agent is bound to, forced or not, even when the binding appears during the snapshot', async () => {
      const { worktrees } = await repoAndWorktrees();
      const made = await worktrees.create('agent-1');
      await refused(worktrees.remove('agent-1', { isBound: () => true, force: true }), 'bound');
      let calls = 0;
      await refused(worktrees.remove('agent-1', { isBound: () => calls++ > 0, force: true }), 'bound');
      assert.ok(fs.existsSync(path.join(made.path, 'README.md')));
      assert.equal((await worktrees.list()).length, 1);
    });

    it('refuses a locked worktree', async () => {
      const { repo, worktrees } = await repoAndWorktrees();
      const made = await worktrees.create('agent-1');
      git(repo.path, 'worktree', 'lock', '--reason', 'on a removable disk', made.path);
      const err = await refused(worktrees.remove('agent-1', { isBound: () => false, force: true }), 'locked');
      assert.match(err.message, /removable disk/);
      assert.equal((await worktrees.get('agent-1'))!.locked, true);
    });

    it('recognises a squash-merged worktree as merged and removes it cleanly', async () => {
      const { repo, worktrees } = await repoAndWorktrees();
      const made = await worktrees.create('agent-1');
      fs.writeFileSync(path.join(made.path, 'feature.txt'), 'one\n');
      commitAll(made.path, 'feature part 1');
      fs.appendFileSync(path.join(made.path, 'feature.txt'), 'two\n');
      commitAll(made.path, 'feature part 2');
      assert.equal(await worktrees.isMerged('agent-1'), false);
      git(repo.path, 'merge', '--squash', '-q', 'sw4rm/agent-1');
      git(repo.path, 'commit', '-q', '-m', 'feature (squashed)');
      fs.writeFileSync(path.join(repo.path, 'later.txt'), 'main moves on\n');
      commitAll(repo.path, 'unrelated later work');
      const ancestor = spawnSync('git', ['merge-base', '--is-ancestor', 'sw4rm/agent-1', 'main'], {
        cwd: repo.path,
        env: cleanEnvironment(),
      });
      assert.equal(ancestor.status, 1, 'after a squash merge the branch is not an ancestor of the target');
      assert.equal(await worktrees.isMerged('agent-1'), true);
      const removed = await worktrees.remove('agent-1', { isBound: () => false });
      assert.equal(removed.branchKept, false);
      assert.equal(fs.existsSync(made.path), false);
    });

    it('lists stale worktrees before pruning them, prunes only what was listed, and keeps their branches', async () => {
      const { repo, worktrees } = await repoAndWorktrees();
      const gone = await worktrees.create('gone');
      await worktrees.create('alive');
      fs.rmSync(gone.path, { recursive: true }); // the user deleted the folder by hand
      const stale = (await worktrees.list()).find((w) => w.id === 'gone')!;
      assert.equal(stale.prunable, true);
      assert.equal(stale.dirty, undefined);
      await refused(worktrees.remove('gone', { isBound: () => false }), 'missing_folder');
      const plan = await worktrees.prunePlan();
      assert.deepEqual(
        plan.map((c) => c.name),
        ['gone'],
      );
      await refused(worktrees.prune([]), 'exists');
      assert.deepEqual(
        (await worktrees.prune(plan)).map((c) => c.name),
        ['gone'],
      );
      assert.deepEqual(
        (await worktrees.list()).map((w) => w.id),
        ['alive'],
      );
      assert.ok(git(repo.path, 'branch', '--list', 'sw4rm/gone').includes('sw4rm/gone'));
    });

    it('leaves a consistent state and loses no file when the removal is killed midway', async function () {
      const { repo, worktrees } = await repoAndWorktrees();
      const made = await worktrees.create('agent-1');
      for (let d = 0; d < 30; d++) {
        fs.mkdirSync(path.join(made.path, `dir${d}`));
        for (let f = 0; f < 40; f++)
          fs.writeFileSync(path.join(made.path, `dir${d}`, `committed${f}.txt`), `committed ${d}/${f}\n`);
      }
      commitAll(made.path, 'agent work');
      for (let d = 0; d < 30; d++) {
        for (let f = 0; f < 40; f++)
          fs.writeFileSync(path.join(made.path, `dir${d}`, `untracked${f}.txt`), `untracked ${d}/${f}\n`);
      }
      const original = readTree(made.path);
      const removal = `
        const { createGit } = require(${JSON.stringify(path.resolve(__dirname, '../../src/core/worktree/git.js'))});
        const { Snapshots } = require(${JSON.stringify(path.resolve(__dirname, '../../src/core/worktree/snapshots.js'))});
        const { Worktrees } = require(${JSON.stringify(path.resolve(__dirname, '../../src/core/worktree/worktrees.js'))});
        const { systemClock } = require(${JSON.stringify(path.resolve(__dirname, '../../src/core/clock.js'))});
        const repo = JSON.parse(process.argv[1]);
        const git = createGit();
        new Worktrees(git, new Snapshots(git, systemClock), repo).remove('agent-1', { isBound: () => false, force: true })
          .then(() => process.exit(0), (e) => { console.error(e); process.exit(1); });`;
      const child = spawn(process.execPath, ['-e', removal, JSON.stringify(repo)], { detached: true, stdio: 'ignore' });
      const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
      // Kill the child and its git as soon as git has started deleting files (some directories gone, others left).
      let killedMidway = false;
      for (;;) {
        let left: number;
        try {
          left = fs.readdirSync(made.path).filter((n) => n.startsWith('dir')).length;
        } catch {
          break; // the whole folder went before we looked
        }
        if (left < 30) {
          process.kill(-child.pid!, 'SIGKILL');
          killedMidway = left > 0;
          break;
        }
        if (child.exitCode !== null) break;
        await new Promise((r) => setImmediate(r));
      }
      await exited;
      assert.ok(killedMidway, 'the removal was interrupted while git was deleting files');

      // Consistent: git still knows the worktree and its branch; the snapshot written first has every file.
      const entries = parseWorktreeList(git(repo.path, 'worktree', 'list', '--porcelain', '-z'));
      assert.ok(entries.some((e) => e.branch === 'refs/heads/sw4rm/agent-1'));
      const [snapshot] = await snapshots.list(repo.path, 'agent-1');
      assert.ok(snapshot, 'a snapshot was written before anything was deleted');
      const recovered = await worktrees.create('recovered', { base: 'sw4rm/agent-1' });
      await snapshots.restore(recovered.path, 'recovered', snapshot);
      assertSameFiles(readTree(recovered.path), original);

      // And the removal can be finished: the interrupted state is just a dirty worktree.
      await refused(worktrees.remove('agent-1', { isBound: () => false }), 'dirty');
      await worktrees.remove('agent-1', { isBound: () => false, force: true });
      assert.deepEqual(
        (await worktrees.list()).map((w) => w.id),
        ['recovered'],
      );
    });
  });

  describe('snapshots', () => {
    it('snapshots tracked changes and untracked files (not ignored ones) without touching the files or the index', async () => {
      const { repo } = await repoAndWorktrees('app', {
        'README.md': 'hello\n',
        'gone.txt': 'to delete\n',
        '.gitignore': 'ignored/\n',
      });
      fs.writeFileSync(path.join(repo.path, 'README.md'), 'changed\n');
      fs.writeFileSync(path.join(repo.path, 'staged.txt'), 'staged\n');
      git(repo.path, 'add', 'staged.txt');
      fs.rmSync(path.join(repo.path, 'gone.txt'));
      fs.mkdirSync(path.join(repo.path, 'ignored'));
      fs.writeFileSync(path.join(repo.path, 'ignored', 'secret.env'), 'KEY=1\n');
      const odd = 'new\nline ünï 日本.bin';
      fs.writeFileSync(path.join(repo.path, odd), Buffer.from([0, 10, 13, 255, 128, 1]));
      fs.writeFileSync(path.join(repo.path, 'run.sh'), '#!/bin/sh\n', { mode: 0o755 });

      const statusBefore = git(repo.path, 'status', '--porcelain=v2', '-z', '--untracked-files=all');
      const index = path.join(repo.path, '.git', 'index');
      const indexBefore = { bytes: fs.readFileSync(index), mtime: fs.statSync(index).mtimeMs };
      const filesBefore = readTree(repo.path);

      const snap = await snapshots.take(repo.path, 'main-tree', 'test');
      assert.match(snap.ref, /^refs\/sw4rm\/snapshots\/main-tree\/20260101T000000000Z$/);
      assert.ok(fs.readFileSync(index).equals(indexBefore.bytes), 'the index bytes are unchanged');
      assert.equal(fs.statSync(index).mtimeMs, indexBefore.mtime, 'the index was not rewritten');
      assert.equal(git(repo.path, 'status', '--porcelain=v2', '-z', '--untracked-files=all'), statusBefore);
      assertSameFiles(readTree(repo.path), filesBefore);

      const files = git(repo.path, 'ls-tree', '-r', '-z', '--name-only', snap.commit)
        .split('\0')
        .filter(Boolean)
        .sort();
      assert.deepEqual(files, ['.gitignore', 'README.md', 'run.sh', 'staged.txt', odd].sort());
      assert.equal(git(repo.path, 'rev-parse', `${snap.commit}^`).trim(), git(repo.path, 'rev-parse', 'HEAD').trim());
      assert.match(git(repo.path, 'ls-tree', snap.commit, 'run.sh'), /^100755 /);
    });

    it('restores untracked files byte for byte, after snapshotting the current state first', async () => {
      const { repo } = await repoAndWorktrees('app', { 'README.md': 'hello\n', 'kept.txt': 'kept\n' });
      const bytes = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
      fs.writeFileSync(path.join(repo.path, 'data.bin'), bytes);
      fs.writeFileSync(path.join(repo.path, 'README.md'), 'agent edit\n');
      const wanted = readTree(repo.path);
      const snap = await snapshots.take(repo.path, 'wt', 'before a mistake');

      clock.advance(1000);
      fs.rmSync(path.join(repo.path, 'data.bin'));
      fs.rmSync(path.join(repo.path, 'kept.txt'));
      fs.writeFileSync(path.join(repo.path, 'README.md'), 'a mistake\n');
      fs.writeFileSync(path.join(repo.path, 'later.txt'), 'written after\n');
      const mistaken = readTree(repo.path);

      const { before } = await snapshots.restore(repo.path, 'wt', snap);
      const restored = readTree(repo.path);
      const expected = new Map(wanted);
      expected.set('later.txt', Buffer.from('written after\n')); // an untracked file the snapshot did not have stays
      assertSameFiles(restored, expected);
      const status = parseStatusV2(git(repo.path, 'status', '--porcelain=v2', '-z', '--untracked-files=all'));
      assert.deepEqual(status.entries.map((e) => [e.xy, e.path]).sort(), [
        ['.M', 'README.md'],
        ['??', 'data.bin'],
        ['??', 'later.txt'],
      ]);
      // The state before the restore is itself a snapshot: restoring it undoes the restore.
      assert.deepEqual(
        (await snapshots.list(repo.path, 'wt')).map((s) => s.ref),
        [snap.ref, before.ref],
      );
      await snapshots.restore(repo.path, 'wt', before);
      const undone = readTree(repo.path);
      for (const [file, content] of mistaken) assert.ok(undone.get(file)?.equals(content), file);
    });

    it('names two snapshots in one millisecond apart, and expires them after the retention, never sooner', async () => {
      const { repo } = await repoAndWorktrees();
      const first = await snapshots.take(repo.path, 'wt', 'one');
      const second = await snapshots.take(repo.path, 'wt', 'two');
      assert.equal(second.ref, `${first.ref}-1`);
      clock.advance(30 * 60_000);
      const third = await snapshots.take(repo.path, 'other', 'three');
      const hour = 60 * 60_000;
      clock.advance(hour - 30 * 60_000 - 1);
      assert.deepEqual(await snapshots.expire(repo.path, hour), []);
      clock.advance(1);
      assert.deepEqual(
        (await snapshots.expire(repo.path, hour)).map((s) => s.ref).sort(),
        [first.ref, second.ref].sort(),
      );
      assert.deepEqual(
        (await snapshots.list(repo.path)).map((s) => s.ref),
        [third.ref],
      );
      clock.advance(30 * 60_000);
      assert.deepEqual(
        (await snapshots.expire(repo.path, hour)).map((s) => s.ref),
        [third.ref],
      );
    });
  });
});
