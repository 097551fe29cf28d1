import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { type WorktreesChange, type WorktreeSetupEvent } from '../../src/core/api';
import { InProcessCoordinatorApi } from '../../src/core/api/inProcessApi';
import { ManualClock } from '../../src/core/clock';
import type { Coordinator, CoordinatorOptions } from '../../src/core/coordinator';
import { createGit } from '../../src/core/worktree/git';
import { MERGE_SNAPSHOT_KEY } from '../../src/core/worktree/mergeBack';
import { discoverRepositories, type Repository } from '../../src/core/worktree/repositories';
import { checkWorktreeId, InvalidWorktreeIdError } from '../../src/core/worktree/snapshots';
import { CoordinatorFixture } from '../support/coordinatorFixture';
import { commitAll, git, makeRepo, readTree, writeFile } from '../support/gitRepo';
import { pollUntil } from '../support/poll';
import { makeTempDir, removeTempDir } from '../support/tempDir';
import { rejection } from '../support/apiErrors';

const DAY_MS = 86_400_000;

describe('CoordinatorApi: worktree operations (real repositories, a real store file)', function () {
  this.timeout(30_000);
  let dir: string;
  let repoPath: string;
  let repositories: Repository[];
  let fixture: CoordinatorFixture;
  let clock: ManualClock;
  let coordinator: Coordinator;
  let api: InProcessCoordinatorApi;
  let changes: WorktreesChange[];
  let setupEvents: WorktreeSetupEvent[];

  async function restartWith(options: Partial<CoordinatorOptions>): Promise<void> {
    fixture.coordinatorOptions = { repositories, ...options };
    fixture.restart();
  }

  before(() => {
    dir = makeTempDir('sw4rm-wtapi-');
  });
  after(() => removeTempDir(dir));

  beforeEach(async () => {
    repoPath = makeRepo(fs.mkdtempSync(path.join(dir, 'ws-')), 'app', { 'README.md': 'hello\n', 'src/a.txt': 'a\n' });
    repositories = await discoverRepositories(createGit(), [repoPath]);
    fixture = new CoordinatorFixture({
      dataDir: fs.mkdtempSync(path.join(dir, 'data-')),
      now: Date.UTC(2026, 0, 1),
      coordinator: { repositories },
      started: (f) => {
        coordinator = f.coordinator;
        api = f.own(new InProcessCoordinatorApi(coordinator));
        f.own(coordinator.hitl.attachOperator('editor:test'));
        changes = [];
        setupEvents = [];
        api.onDidChangeWorktrees((c) => changes.push(c));
        api.onDidRunWorktreeSetup((e) => setupEvents.push(e));
      },
    });
    clock = fixture.clock;
  });
  afterEach(() => fixture.dispose());

  const setupDone = async (worktreeId: string) => coordinator.worktreeOperations.setupOf('app', worktreeId);

  describe('repositories, bind, list', () => {
    it('binds an agent to a new worktree from a base, lists it with its bound agent, and passes the binding change on', async () => {
      const base = git(repoPath, 'rev-parse', 'HEAD').trim();
      writeFile(repoPath, 'later.txt', 'later\n');
      commitAll(repoPath, 'later');
      assert.deepEqual(await api.worktreeRepositories(), [
        { repoId: 'app', path: repoPath, worktreesRoot: `${repoPath}.sw4rm-worktrees` },
      ]);

      const binding = await api.bindAgentToWorktree(
        { agentId: 'agent-1', repoId: 'app', worktreeId: 'feature', base },
        'editor:test',
      );
      assert.equal(binding.state, 'BOUND_HOME');
      assert.equal(binding.worktreePath, path.join(`${repoPath}.sw4rm-worktrees`, 'feature'));
      assert.equal(fs.existsSync(path.join(binding.worktreePath, 'later.txt')), false, 'made from the base, not HEAD');

      const [info] = await api.worktrees();
      assert.deepEqual(structuredClone(info), info);
      assert.equal(info.worktreeId, 'feature');
      assert.equal(info.branch, 'sw4rm/feature');
      assert.equal(info.baseCommit, base);
      assert.equal(info.dirty, 0);
      assert.deepEqual(info.boundAgents, [{ agentId: 'agent-1', state: 'BOUND_HOME', home: true }]);
      assert.deepEqual(
        (await api.worktreeBindings()).map((b) => [b.agentId, b.state]),
        [['agent-1', 'BOUND_HOME']],
      );
      assert.ok(changes.some((c) => c.kind === 'created' && c.worktreeId === 'feature'));
      assert.ok(
        changes.some(
          (c) => c.kind === 'binding' && c.binding.agentId === 'agent-1' && c.binding.state === 'BOUND_HOME',
        ),
      );
      assert.equal(coordinator.log.query({ eventType: 'worktree.created' }).length, 1);
      assert.equal(coordinator.log.query({ eventType: 'worktree.bind_requested' })[0].actor, 'editor:test');
    });

    it('a failed Bind is an answer (BIND_FAILED with its reason), and the 60 s operator notice is passed on', async () => {
      const needed: string[] = [];
      api.onDidNeedWorktreeOperator((b) => needed.push(`${b.agentId}:${b.failure?.reason}`));
      const failed = await api.bindAgentToWorktree({ agentId: 'lost', repoId: 'elsewhere', worktreeId: 'w' }, 'op');
      assert.deepEqual([failed.state, failed.failure?.reason], ['BIND_FAILED', 'worktree_not_found']);
      clock.advance(59_999);
      await pollUntil('the first retry', () =>
        coordinator.worktrees.status('lost').failure?.retries === 1 ? true : undefined,
      );
      assert.deepEqual(needed, []);
      clock.advance(1);
      assert.deepEqual(needed, ['lost:worktree_not_found']);
      assert.ok(
        changes.some(
          (c) => c.kind === 'binding' && c.binding.agentId === 'lost' && c.binding.failure?.notified === true,
        ),
      );
    });

    it('refuses an unknown repository (not_found), a bad worktree id (invalid), a bind the state does not allow (invalid)', async () => {
      assert.equal((await rejection(api.worktreeSnapshots('nope', 'x'))).code, 'not_found');
      assert.equal((await rejection(api.removeWorktree('app', '../x', { confirmed: true }, 'op'))).code, 'invalid');
      assert.equal(
        (await rejection(api.bindAgentToWorktree({ agentId: 'a', repoId: 'app', worktreeId: 'bad/id' }, 'op'))).code,
        'invalid',
      );
      await api.bindAgentToWorktree({ agentId: 'a', repoId: 'app', worktreeId: 'one' }, 'op');
      const err = await rejection(api.bindAgentToWorktree({ agentId: 'a', repoId: 'app', worktreeId: 'two' }, 'op'));
      assert.equal(err.code, 'invalid');
      assert.match(err.message, /BIND is not allowed in state BOUND_HOME/);
    });
  });

  describe('setup after creation', () => {
    it('runs .sw4rm/worktree.json of a trusted repository after the Bind: copies .env*, runs the command, streams its output', async () => {
      await restartWith({ worktreeOperations: { trustRepositoryCommand: true } });
      writeFile(
        repoPath,
        '.sw4rm/worktree.json',
        JSON.stringify({
          copy: ['.env*'],
          setup: { command: 'sh', args: ['-c', 'echo installing; echo done > installed.txt'] },
        }),
      );
      writeFile(repoPath, '.env.local', 'SECRET=1\n');
      fs.appendFileSync(path.join(repoPath, '.git', 'info', 'exclude'), '.env*\n');
      commitAll(repoPath, 'setup config');

      const binding = await api.bindAgentToWorktree({ agentId: 'agent-1', repoId: 'app', worktreeId: 'w1' }, 'op');
      assert.equal(binding.state, 'BOUND_HOME', 'bound as soon as git made the worktree; setup runs after');
      const result = await setupDone('w1');
      assert.ok(result?.ok, result?.failure);
      assert.equal(fs.readFileSync(path.join(binding.worktreePath, '.env.local'), 'utf8'), 'SECRET=1\n');
      assert.equal(fs.lstatSync(path.join(binding.worktreePath, '.env.local')).isSymbolicLink(), false);
      assert.ok(fs.existsSync(path.join(binding.worktreePath, 'installed.txt')));
      assert.ok(setupEvents.some((e) => e.kind === 'output' && e.text.includes('installing')));
      assert.ok(setupEvents.some((e) => e.kind === 'output' && e.text.includes('copied .env.local')));
      const finished = setupEvents.filter((e) => e.kind === 'finished');
      assert.equal(finished.length, 1);
      assert.equal(finished[0].ok, true);
      assert.ok(changes.some((c) => c.kind === 'setup' && c.worktreeId === 'w1'));
      assert.equal(coordinator.log.query({ eventType: 'worktree.setup_finished' }).length, 1);
    });

    it('a failing setup command is shown and recorded (WARN) and the binding stays usable', async () => {
      await restartWith({
        worktreeOperations: { setup: { copy: [], setup: { command: 'sh', args: ['-c', 'echo broken >&2; exit 3'] } } },
      });
      const binding = await api.bindAgentToWorktree({ agentId: 'agent-1', repoId: 'app', worktreeId: 'w1' }, 'op');
      const result = await setupDone('w1');
      assert.equal(result?.ok, false);
      const finished = setupEvents.find((e) => e.kind === 'finished')!;
      assert.equal(finished.ok, false);
      assert.match(finished.text, /exited with code 3.*stay usable/);
      const [event] = coordinator.log.query({ eventType: 'worktree.setup_failed' });
      assert.equal(event.level, 'WARN');
      assert.match(String(event.details.output_tail), /broken/);
      assert.equal(coordinator.worktrees.status('agent-1').state, 'BOUND_HOME');
      assert.equal(coordinator.worktrees.worktreePathOf('agent-1'), binding.worktreePath);
    });

    it('the command of an untrusted repository’s file does not run; its copies do', async () => {
      writeFile(
        repoPath,
        '.sw4rm/worktree.json',
        JSON.stringify({ copy: ['.env'], setup: { command: 'sh', args: ['-c', 'touch ran'] } }),
      );
      writeFile(repoPath, '.env', 'X=1\n');
      const binding = await api.bindAgentToWorktree({ agentId: 'agent-1', repoId: 'app', worktreeId: 'w1' }, 'op');
      const result = await setupDone('w1');
      assert.match(result!.commandSkipped!, /trusted workspace/);
      assert.ok(fs.existsSync(path.join(binding.worktreePath, '.env')));
      assert.equal(fs.existsSync(path.join(binding.worktreePath, 'ran')), false);
    });
  });

  describe('remove, snapshots, restore, prune', () => {
    it('never removes a bound worktree; asks to confirm a dirty one; keeps a snapshot and the branch; the same id binds again on the kept branch and its files come back', async () => {
      const bound = await api.bindAgentToWorktree({ agentId: 'agent-1', repoId: 'app', worktreeId: 'w1' }, 'op');
      writeFile(bound.worktreePath, 'work.txt', 'committed\n');
      commitAll(bound.worktreePath, 'agent work');
      writeFile(bound.worktreePath, 'scratch.txt', 'uncommitted\n');
      const before = readTree(bound.worktreePath);

      const refusedBound = await rejection(api.removeWorktree('app', 'w1', { confirmed: true }, 'op'));
      assert.deepEqual([refusedBound.code, refusedBound.sw4rmCode], ['refused', 'bound']);
      await coordinator.worktrees.unbind('agent-1', { correlationId: 'c' });
      const refusedDirty = await rejection(api.removeWorktree('app', 'w1', { confirmed: false }, 'op'));
      assert.deepEqual([refusedDirty.code, refusedDirty.sw4rmCode], ['refused', 'dirty']);

      const removal = await api.removeWorktree('app', 'w1', { confirmed: true }, 'op');
      assert.equal(removal.branchKept, true);
      assert.ok(removal.snapshot);
      assert.equal(fs.existsSync(bound.worktreePath), false);
      assert.deepEqual(await api.worktrees(), []);
      assert.deepEqual(
        (await api.worktreeSnapshots('app', 'w1')).map((s) => s.ref),
        [removal.snapshot!.ref],
        'a removed worktree’s snapshots are still listed',
      );
      assert.ok(changes.some((c) => c.kind === 'removed'));

      // Bind the same id again: the kept branch is checked out, not refused.
      const again = await api.bindAgentToWorktree({ agentId: 'agent-2', repoId: 'app', worktreeId: 'w1' }, 'op');
      assert.equal(again.state, 'BOUND_HOME');
      assert.equal(fs.readFileSync(path.join(again.worktreePath, 'work.txt'), 'utf8'), 'committed\n');
      assert.equal(coordinator.log.query({ eventType: 'worktree.created' }).at(-1)!.details.reused_branch, true);
      const { before: restoreBefore } = await api.restoreWorktreeSnapshot('app', 'w1', removal.snapshot!.ref, 'op');
      assert.ok(restoreBefore.ref.startsWith('refs/sw4rm/snapshots/w1/'));
      assert.deepEqual([...readTree(again.worktreePath).keys()].sort(), [...before.keys()].sort());
      assert.equal(fs.readFileSync(path.join(again.worktreePath, 'scratch.txt'), 'utf8'), 'uncommitted\n');
      assert.ok(changes.some((c) => c.kind === 'restored'));
      const newestFirst = await api.worktreeSnapshots('app', 'w1');
      assert.equal(newestFirst[0].ref, restoreBefore.ref);
      assert.equal((await api.worktrees())[0].lastSnapshot?.ref, restoreBefore.ref);
      assert.equal(
        (await rejection(api.restoreWorktreeSnapshot('app', 'w1', 'refs/sw4rm/snapshots/w1/none', 'op'))).code,
        'not_found',
      );
    });

    it('prunes exactly what it listed (worktrees whose folder is gone)', async () => {
      const bound = await api.bindAgentToWorktree({ agentId: 'agent-1', repoId: 'app', worktreeId: 'gone' }, 'op');
      await coordinator.worktrees.unbind('agent-1', { correlationId: 'c' });
      fs.rmSync(bound.worktreePath, { recursive: true, force: true }); // the user deleted it outside the coordinator
      const plan = await api.pruneWorktreesPlan();
      assert.deepEqual(
        plan.map((c) => [c.repoId, c.name]),
        [['app', 'gone']],
      );
      assert.equal((await api.worktrees())[0].prunable, true);
      assert.deepEqual(
        (await api.pruneWorktrees(plan, 'op')).map((c) => c.name),
        ['gone'],
      );
      assert.deepEqual(await api.worktrees(), []);
      assert.deepEqual(await api.pruneWorktreesPlan('app'), []);
      assert.ok(changes.some((c) => c.kind === 'pruned'));
      assert.equal(coordinator.log.query({ eventType: 'worktree.pruned' }).length, 1);
    });

    it('expires snapshots after the retention days on the clock, never sooner', async () => {
      await restartWith({ worktreeOperations: { snapshotRetentionDays: 2, expiryIntervalMs: 3_600_000 } });
      const bound = await api.bindAgentToWorktree({ agentId: 'agent-1', repoId: 'app', worktreeId: 'w1' }, 'op');
      writeFile(bound.worktreePath, 'x.txt', 'x\n');
      await coordinator.worktrees.unbind('agent-1', { correlationId: 'c' });
      await api.removeWorktree('app', 'w1', { confirmed: true }, 'op');
      assert.equal((await api.worktreeSnapshots('app', 'w1')).length, 1);
      clock.advance(2 * DAY_MS - 3_600_000); // 47 hours: every hourly run so far finds nothing due
      assert.deepEqual(await coordinator.worktreeOperations.expireSnapshots(), []);
      assert.equal((await api.worktreeSnapshots('app', 'w1')).length, 1);
      clock.advance(3_600_000); // the run at 48 h
      await pollUntil('the snapshot expired', async () =>
        (await api.worktreeSnapshots('app', 'w1')).length === 0 ? true : undefined,
      );
      assert.equal(coordinator.log.query({ eventType: 'worktree.snapshots_expired' }).length, 1);
    });
  });

  describe('merge-back', () => {
    async function agentCommit(worktreeId: string, file: string, content: string): Promise<string> {
      const bound = await api.bindAgentToWorktree({ agentId: `agent-${worktreeId}`, repoId: 'app', worktreeId }, 'op');
      writeFile(bound.worktreePath, file, content);
      commitAll(bound.worktreePath, `agent changes ${file}`);
      return bound.worktreePath;
    }

    it('previews, asks through a MANUAL_OVERRIDE approval carrying the diff, merges when approved, and undoes after a restart', async () => {
      await agentCommit('w1', 'src/a.txt', 'a changed by the agent\n');
      const preview = await api.previewMerge('app', 'w1', { strategy: 'squash' });
      assert.deepEqual(preview.conflicts, []);
      assert.equal(preview.commits.length, 1);
      assert.deepEqual(preview.files, [{ status: 'M', path: 'src/a.txt' }]);
      assert.match(preview.diff, /\+a changed by the agent/);
      const previousHead = git(repoPath, 'rev-parse', 'HEAD').trim();

      const merging = api.mergeBack('app', 'w1', { strategy: 'squash' }, 'editor:test');
      const invocation = await pollUntil('the approval', async () => (await api.approvals({ pendingOnly: true }))[0]);
      assert.equal(invocation.reasonType, 'MANUAL_OVERRIDE');
      assert.deepEqual(invocation.subject, { repoId: 'app', worktreeId: 'w1', taskId: '' });
      assert.match(invocation.context.diffs[0].unified!, /\+a changed by the agent/);
      assert.equal(invocation.context.facts.strategy, 'squash');
      assert.equal(fs.readFileSync(path.join(repoPath, 'src/a.txt'), 'utf8'), 'a\n', 'nothing touched before approval');
      await api.decideApproval(invocation.id, { action: 'approve', rationale: 'looks right' }, 'editor:test');
      const result = await merging;
      assert.equal(result.status, 'merged');
      if (result.status !== 'merged') return;
      assert.equal(result.merge.invocationId, invocation.id);
      assert.equal(result.merge.previousHead, previousHead);
      assert.equal(fs.readFileSync(path.join(repoPath, 'src/a.txt'), 'utf8'), 'a changed by the agent\n');
      assert.ok(changes.some((c) => c.kind === 'merged'));
      const snapshotRefs = git(
        repoPath,
        'for-each-ref',
        '--format=%(refname)',
        `refs/sw4rm/snapshots/${MERGE_SNAPSHOT_KEY}/`,
      ).trim();
      assert.ok(snapshotRefs.startsWith('refs/sw4rm/snapshots/@merge-target/'), snapshotRefs);

      await restartWith({});
      const [merge] = await api.worktreeMerges('app');
      assert.equal(merge.id, result.merge.id);
      const undone = await api.undoMerge(merge.id, 'editor:test');
      assert.equal(undone.head, previousHead);
      assert.equal(git(repoPath, 'rev-parse', 'HEAD').trim(), previousHead);
      assert.equal(fs.readFileSync(path.join(repoPath, 'src/a.txt'), 'utf8'), 'a\n');
      assert.deepEqual(await api.worktreeMerges(), []);
      assert.ok(changes.some((c) => c.kind === 'unmerged'));
      assert.equal((await rejection(api.undoMerge(merge.id, 'op'))).code, 'not_found');
    });

    it('a merge approved while an undo runs waits for it: the undo never erases a merge answered merged', async () => {
      // git's `reset --hard` of the undo is held until released, so that the second merge is approved meanwhile.
      let release: () => void = () => undefined;
      const held = new Promise<void>((resolve) => {
        release = resolve;
      });
      let resetStarted = false;
      const real = createGit();
      await restartWith({
        git: {
          run: async (cwd, args, options) => {
            if (args[0] === 'reset' && cwd === repoPath) {
              resetStarted = true;
              await held;
            }
            return real.run(cwd, args, options);
          },
        },
      });
      const approveNext = async () => {
        const invocation = await pollUntil('the approval', async () => (await api.approvals({ pendingOnly: true }))[0]);
        await api.decideApproval(invocation.id, { action: 'approve', rationale: 'ok' }, 'op');
      };
      await agentCommit('w1', 'src/a.txt', 'a by w1\n');
      const first = api.mergeBack('app', 'w1', { strategy: 'squash' }, 'op');
      await approveNext();
      const merged1 = await first;
      assert.equal(merged1.status, 'merged');
      if (merged1.status !== 'merged') return;

      await agentCommit('w2', 'README.md', 'readme by w2\n');
      const undoing = api.undoMerge(merged1.merge.id, 'op');
      await pollUntil('the undo holding its reset', () => resetStarted || undefined);
      const second = api.mergeBack('app', 'w2', { strategy: 'squash' }, 'op');
      await approveNext();
      // The second merge's approval is in; it must not merge while the undo is between its checks and its reset. Without
      // the per-repository queue it would finish now (real git processes: up to 3 s of wall time are given for that).
      const settledEarly = await Promise.race([
        second.then(
          () => true,
          () => true,
        ),
        new Promise<false>((r) => setTimeout(() => r(false), 3_000)),
      ]);
      assert.equal(settledEarly, false, 'the approved merge waits for the undo under way');
      release();
      await undoing;
      const outcome = await second.then(
        (r) => r.status,
        (err: unknown) => `refused: ${(err as Error).message}`,
      );
      const head = git(repoPath, 'rev-parse', 'HEAD').trim();
      for (const m of await api.worktreeMerges('app')) {
        assert.equal(
          git(repoPath, 'merge-base', '--is-ancestor', m.resultHead, head).trim(),
          '',
          `merge ${m.worktreeId} listed as undoable is in the checkout`,
        );
      }
      if (outcome === 'merged')
        assert.equal(
          fs.readFileSync(path.join(repoPath, 'README.md'), 'utf8'),
          'readme by w2\n',
          'the merge answered merged is in the checkout',
        );
      else assert.match(outcome, /changed while the merge waited for approval/);
    });

    it('a merge approval pending across a restart is cancelled, saying why (no merge waits on it any more)', async () => {
      await agentCommit('w1', 'src/a.txt', 'agent side\n');
      const head = git(repoPath, 'rev-parse', 'HEAD').trim();
      void api.mergeBack('app', 'w1', { strategy: 'merge' }, 'op').catch(() => undefined); // its caller goes with the restart
      const invocation = await pollUntil('the approval', async () => (await api.approvals({ pendingOnly: true }))[0]);
      await restartWith({});
      const after = await api.approval(invocation.id);
      assert.equal(after?.state, 'cancelled');
      assert.match(after!.decision!.rationale, /restarted while this merge waited/);
      assert.deepEqual(await api.approvals({ pendingOnly: true }), []);
      assert.equal(git(repoPath, 'rev-parse', 'HEAD').trim(), head, 'nothing merged');
    });

    it('a denied approval merges nothing; predicted conflicts ask nobody; a dirty target is refused with its reason', async () => {
      await agentCommit('w1', 'src/a.txt', 'agent side\n');
      const head = git(repoPath, 'rev-parse', 'HEAD').trim();
      const merging = api.mergeBack('app', 'w1', { strategy: 'merge' }, 'op');
      const invocation = await pollUntil('the approval', async () => (await api.approvals({ pendingOnly: true }))[0]);
      await api.decideApproval(invocation.id, { action: 'deny', rationale: 'not yet' }, 'op');
      const denied = await merging;
      assert.deepEqual(
        [denied.status, denied.status === 'not_approved' && denied.invocationId],
        ['not_approved', invocation.id],
      );
      assert.equal(git(repoPath, 'rev-parse', 'HEAD').trim(), head);

      writeFile(repoPath, 'src/a.txt', 'main side\n');
      commitAll(repoPath, 'main changes a');
      const conflicted = await api.mergeBack('app', 'w1', { strategy: 'merge' }, 'op');
      assert.equal(conflicted.status, 'conflicts');
      assert.deepEqual(conflicted.status === 'conflicts' && conflicted.conflicts.map((c) => c.path), ['src/a.txt']);
      assert.equal((await api.approvals({ pendingOnly: true })).length, 0);

      writeFile(repoPath, 'README.md', 'uncommitted\n');
      const dirty = await rejection(api.previewMerge('app', 'w1', { strategy: 'merge' }));
      assert.deepEqual([dirty.code, dirty.sw4rmCode], ['refused', 'target_dirty']);
    });

    it('the main checkout’s merge snapshots never mix with those of a worktree named _merge-target', async () => {
      assert.throws(() => checkWorktreeId(MERGE_SNAPSHOT_KEY), InvalidWorktreeIdError);
      const wt = await agentCommit('_merge-target', 'b.txt', 'b\n');
      await coordinator.worktrees.unbind('agent-_merge-target', { correlationId: 'c' });
      writeFile(wt, 'dirty.txt', 'dirty\n');
      await api.removeWorktree('app', '_merge-target', { confirmed: true }, 'op');
      await agentCommit('w2', 'c.txt', 'c\n');
      const merging = api.mergeBack('app', 'w2', { strategy: 'merge' }, 'op');
      const invocation = await pollUntil('the approval', async () => (await api.approvals({ pendingOnly: true }))[0]);
      await api.decideApproval(invocation.id, { action: 'approve', rationale: 'ok' }, 'op');
      assert.equal((await merging).status, 'merged');
      assert.equal((await api.worktreeSnapshots('app', '_merge-target')).length, 1, 'only the removal’s snapshot');
    });
  });
});
