// The Worktrees view's rows, the Agents view's worktree rows and the worktree commands' texts as plain data
// (src/extension/worktreesModel.ts).
import { strict as assert } from 'node:assert';
import type {
  BindingStatus,
  CoordinatorApi,
  MergePreview,
  WorktreeInfo,
  WorktreeRepositoryInfo,
} from '../../src/core/api';
import { ManualClock } from '../../src/core/clock';
import { WORKTREES_REFRESH_MS, WorktreeState } from '../../src/extension/worktreeState';
import {
  agentWorktreeRow,
  bindFailedNoticeText,
  bindResultText,
  conflictNotice,
  conflictPredictionText,
  fileList,
  forcedRemoveQuestion,
  groupByRepository,
  isCommitId,
  mergeQuestion,
  notificationText,
  parseChangedFiles,
  prunePlanQuestion,
  removalRefusalText,
  repositoryRow,
  strategyChoices,
  worktreeOf,
  worktreeRow,
} from '../../src/extension/worktreesModel';

const T0 = Date.UTC(2026, 0, 2, 3, 4, 5);
const time = (ms: number) => new Date(ms).toISOString().slice(11, 19);
const BASE = '1a2b3c4d5e6f7a8b9c0d1a2b3c4d5e6f7a8b9c0d';

function worktree(overrides: Partial<WorktreeInfo> = {}): WorktreeInfo {
  return {
    repoId: 'app',
    worktreeId: 'coder-1',
    path: '/src/app.sw4rm-worktrees/coder-1',
    branch: 'sw4rm/coder-1',
    baseCommit: BASE,
    baseRef: 'refs/heads/main',
    ahead: 2,
    behind: 1,
    dirty: 3,
    locked: false,
    prunable: false,
    boundAgents: [{ agentId: 'coder-1', state: 'BOUND_HOME', home: true }],
    lastSnapshot: {
      worktreeId: 'coder-1',
      ref: 'refs/sw4rm/snapshots/coder-1/20260102T030405000Z',
      commit: 'f'.repeat(40),
      takenAt: T0,
    },
    ...overrides,
  };
}

function binding(overrides: Partial<BindingStatus> = {}): BindingStatus {
  return {
    agentId: 'coder-1',
    state: 'BOUND_HOME',
    repoId: 'app',
    homeWorktreeId: 'coder-1',
    homePath: '/src/app.sw4rm-worktrees/coder-1',
    worktreeId: 'coder-1',
    worktreePath: '/src/app.sw4rm-worktrees/coder-1',
    switch: null,
    nonHomeUntil: null,
    failure: null,
    updatedAt: T0,
    ...overrides,
  };
}

function preview(overrides: Partial<MergePreview> = {}): MergePreview {
  return {
    worktreeId: 'coder-1',
    strategy: 'merge',
    sourceBranch: 'refs/heads/sw4rm/coder-1',
    sourceCommit: 'a'.repeat(40),
    targetBranch: 'refs/heads/main',
    targetCommit: 'b'.repeat(40),
    targetPath: '/src/app',
    commits: [{ commit: 'c'.repeat(40), subject: 'Fix the parser' }],
    sourceDirty: 0,
    conflicts: [],
    messages: [],
    files: [{ status: 'M', path: 'src/parser.ts' }],
    diff: '',
    diffTruncated: false,
    message: 'Merge',
    ...overrides,
  };
}

const REPOS: WorktreeRepositoryInfo[] = [
  { repoId: 'web', path: '/src/web', worktreesRoot: '/src/web.sw4rm-worktrees' },
  { repoId: 'app', path: '/src/app', worktreesRoot: '/src/app.sw4rm-worktrees' },
];

describe('Worktrees view rows', () => {
  it('groups worktrees under their repositories, repositories and worktrees ordered by id, empty repositories included', () => {
    const groups = groupByRepository(REPOS, [
      worktree({ worktreeId: 'b' }),
      worktree({ worktreeId: 'a' }),
      worktree({ repoId: 'gone', worktreeId: 'x' }),
    ]);
    assert.deepEqual(
      groups.map((g) => [g.repository.repoId, g.worktrees.map((w) => w.worktreeId)]),
      [
        ['app', ['a', 'b']],
        ['gone', ['x']],
        ['web', []],
      ],
    );
    assert.equal(groups[1].repository.path, '', 'a repo_id no longer in the workspace has no path');
    assert.deepEqual(repositoryRow(groups[0]), {
      label: 'app',
      description: '2 worktrees',
      tooltip: 'repository: app\npath: /src/app\nagent worktrees in: /src/app.sw4rm-worktrees\n2 worktrees',
    });
    assert.equal(
      repositoryRow({ repository: REPOS[1], worktrees: [worktree({ prunable: true })] }).description,
      '1 worktree, 1 stale',
    );
  });

  it('shows branch, base, ahead/behind, dirty count and who is bound in the description, the id as the label', () => {
    const row = worktreeRow(worktree(), time);
    assert.equal(row.label, 'coder-1');
    assert.equal(row.description, 'sw4rm/coder-1 ← main · ↑2 ↓1 · 3 changed files · coder-1 (home)');
    assert.equal(row.contextValue, 'worktree+bound+dirty+ahead');
    assert.equal(row.icon, 'bound');
  });

  it('keeps every fact in the tooltip: path, base commit, ahead/behind, dirty count, binding, last snapshot', () => {
    assert.equal(
      worktreeRow(worktree(), time).tooltip,
      [
        'worktree: coder-1 (repository app)',
        'path: /src/app.sw4rm-worktrees/coder-1',
        'branch: sw4rm/coder-1',
        'base: main @ 1a2b3c4d5e6f',
        'ahead/behind its base: 2 ahead, 1 behind',
        'uncommitted: 3 changed files',
        'bound: coder-1 (home, BOUND_HOME)',
        'last snapshot: 03:04:05 (refs/sw4rm/snapshots/coder-1/20260102T030405000Z)',
      ].join('\n'),
    );
  });

  it('marks a stale (prunable) worktree first in its description, with its own icon and context marker', () => {
    const row = worktreeRow(worktree({ prunable: true, dirty: undefined, boundAgents: [], ahead: 0, behind: 0 }), time);
    assert.equal(row.description, 'stale: folder gone · sw4rm/coder-1 ← main · up to date · not bound');
    assert.equal(row.contextValue, 'worktree+stale');
    assert.equal(row.icon, 'stale');
    assert.match(row.tooltip, /uncommitted: folder missing/);
    assert.match(row.tooltip, /stale: its folder is gone; Prune Stale Worktrees forgets it/);
  });

  it('names an agent switched in beside the home agent, and a locked worktree', () => {
    const row = worktreeRow(
      worktree({
        locked: true,
        dirty: 0,
        ahead: 0,
        baseRef: undefined,
        boundAgents: [
          { agentId: 'coder-1', state: 'BOUND_HOME', home: true },
          { agentId: 'helper', state: 'BOUND_NON_HOME', home: false },
        ],
      }),
      time,
    );
    assert.equal(
      row.description,
      'locked · sw4rm/coder-1 ← 1a2b3c4d5e6f · ↑0 ↓1 · clean · coder-1 (home), helper (switched in)',
    );
    assert.equal(row.contextValue, 'worktree+bound+locked');
    assert.match(row.tooltip, /bound: coder-1 \(home, BOUND_HOME\), helper \(switched in, BOUND_NON_HOME\)/);
    assert.match(row.tooltip, /last snapshot: 03:04:05/);
    assert.match(
      worktreeRow(worktree({ lastSnapshot: undefined, baseRef: undefined, baseCommit: undefined }), time).tooltip,
      /base: unknown[\s\S]*last snapshot: none/,
    );
  });
});

describe('the worktree row under an agent (Agents view)', () => {
  it('shows nothing for an unbound agent', () => {
    assert.equal(
      agentWorktreeRow(binding({ state: 'UNBOUND', worktreeId: '', worktreePath: '' }), undefined, time),
      undefined,
    );
  });

  it('shows the worktree id, branch and state; the tooltip has path, base, ahead/behind and dirty count', () => {
    const row = agentWorktreeRow(binding(), worktree(), time)!;
    assert.equal(row.label, 'Worktree coder-1');
    assert.equal(row.description, 'sw4rm/coder-1 · BOUND_HOME · 3 changed files');
    assert.equal(
      row.tooltip,
      [
        'worktree: coder-1 (repository app)',
        'state: BOUND_HOME',
        'path: /src/app.sw4rm-worktrees/coder-1',
        'branch: sw4rm/coder-1',
        'base: main @ 1a2b3c4d5e6f',
        'ahead/behind its base: 2 ahead, 1 behind',
        'uncommitted: 3 changed files',
      ].join('\n'),
    );
    assert.equal(row.contextValue, 'agentWorktree+BOUND_HOME');
    assert.equal(row.worktreeId, 'coder-1');
  });

  it('says when a switched agent returns home, and what a pending switch waits for', () => {
    const away = agentWorktreeRow(
      binding({ state: 'BOUND_NON_HOME', worktreeId: 'helper', worktreePath: '/w/helper', nonHomeUntil: T0 + 60_000 }),
      worktree({ worktreeId: 'helper', branch: 'sw4rm/helper', dirty: 0 }),
      time,
    )!;
    assert.equal(away.description, 'sw4rm/helper · BOUND_NON_HOME');
    assert.equal(away.contextValue, 'agentWorktree+BOUND_NON_HOME+nonHome');
    assert.match(away.tooltip, /home: coder-1\nreturns home: 03:05:05/);
    const pending = agentWorktreeRow(
      binding({
        state: 'SWITCH_PENDING',
        switch: {
          targetWorktreeId: 'helper',
          targetPath: '/w/helper',
          invocationId: 'inv-1',
          requestedAt: T0,
          ttlMs: null,
        },
      }),
      undefined,
      time,
    )!;
    assert.equal(pending.description, 'sw4rm/coder-1 · SWITCH_PENDING', 'the branch is named even before git was read');
    assert.match(pending.tooltip, /switch to helper waits for approval inv-1/);
  });

  it('shows a failed bind with its reason, retries and what to do', () => {
    const row = agentWorktreeRow(
      binding({
        state: 'BIND_FAILED',
        worktreeId: '',
        worktreePath: '',
        failure: {
          reason: 'worktree_locked',
          detail: 'locked by hand',
          since: T0,
          retries: 3,
          nextRetryAt: null,
          notified: true,
        },
      }),
      undefined,
      time,
    )!;
    assert.equal(row.description, 'BIND_FAILED · worktree_locked');
    assert.match(row.tooltip, /reason: worktree_locked: locked by hand\nsince: 03:04:05\nretries: 3 \(no retry left\)/);
    assert.equal(row.worktreeId, undefined);
  });

  it('finds the worktree a binding works in by repo_id and worktree id', () => {
    const list = [worktree({ repoId: 'web' }), worktree({ worktreeId: 'other' }), worktree()];
    assert.equal(worktreeOf(binding(), list), list[2]);
  });
});

describe('worktree command texts', () => {
  it('says how a bind ended, and the 60 s notice names the agent, the worktree and the reason', () => {
    assert.deepEqual(bindResultText(binding()), {
      ok: true,
      text: 'Agent coder-1 is bound to worktree coder-1 (BOUND_HOME) at /src/app.sw4rm-worktrees/coder-1.',
    });
    const failed = binding({
      state: 'BIND_FAILED',
      failure: {
        reason: 'filesystem_error',
        detail: 'a folder is in the way',
        since: T0,
        retries: 3,
        nextRetryAt: null,
        notified: true,
      },
    });
    assert.equal(bindResultText(failed).ok, false);
    assert.match(
      bindResultText(failed).text,
      /could not be bound to worktree coder-1: filesystem_error: a folder is in the way/,
    );
    assert.equal(
      bindFailedNoticeText(failed),
      'Agent coder-1 has not been bound to worktree coder-1 of app for 60 s: filesystem_error: a folder is in the way. ' +
        'No automatic retry is left. Fix the cause and bind again, or look at the log.',
    );
  });

  it('refuses to remove a bound worktree naming who is bound; asks again for a dirty one, saying a snapshot is written and the branch kept', () => {
    assert.equal(
      removalRefusalText('bound', worktree(), 'x'),
      'Worktree coder-1 is not removed: coder-1 (home, BOUND_HOME) is bound to it. Unbind first.',
    );
    assert.equal(
      removalRefusalText(
        'bound',
        worktree({ boundAgents: [] }),
        "worktree coder-1 is bound to agent 'late'; unbind it first",
      ),
      "Worktree coder-1 is not removed: worktree coder-1 is bound to agent 'late'; unbind it first",
      "rows read before the agent bound: the coordinator's words",
    );
    assert.match(removalRefusalText('locked', worktree(), 'x'), /locked .*git worktree unlock/);
    assert.equal(
      removalRefusalText('other', worktree(), 'git said no'),
      'Worktree coder-1 is not removed: git said no',
    );
    const dirty = forcedRemoveQuestion('dirty', worktree());
    assert.equal(dirty.message, 'Worktree coder-1 has uncommitted files (3). Remove it anyway?');
    assert.match(dirty.detail, /snapshot .* is written first under refs\/sw4rm\/snapshots\/coder-1\//);
    assert.match(dirty.detail, /its branch sw4rm\/coder-1 is kept/);
    assert.equal(
      forcedRemoveQuestion('unmerged', worktree()).message,
      'Worktree coder-1 has commits its base does not have (2). Remove it anyway?',
    );
  });

  it('lists exactly what Prune would forget', () => {
    const question = prunePlanQuestion([
      { repoId: 'app', name: 'gone-1', reason: 'gitdir file points to non-existent location' },
      { repoId: 'web', name: 'x', reason: 'r' },
    ]);
    assert.equal(question.message, 'Prune 2 stale worktrees?');
    assert.match(
      question.detail,
      /no file and no branch is deleted:\napp: gone-1 \(gitdir file points to non-existent location\)\nweb: x \(r\)$/,
    );
  });

  it("shows a predicted conflict: the files in the notice, stages and git's messages in the document", () => {
    const conflicted = preview({
      conflicts: [
        {
          path: 'src/parser.ts',
          stages: [
            { stage: 1, mode: '100644', oid: '1'.repeat(40) },
            { stage: 2, mode: '100644', oid: '2'.repeat(40) },
            { stage: 3, mode: '100644', oid: '3'.repeat(40) },
          ],
        },
      ],
      messages: [
        {
          paths: ['src/parser.ts'],
          type: 'CONFLICT (contents)',
          text: 'CONFLICT (content): Merge conflict in src/parser.ts',
        },
      ],
    });
    assert.equal(
      conflictNotice(conflicted),
      'Merge Back of sw4rm/coder-1 into main would conflict in 1 file: src/parser.ts. Nothing was changed.',
    );
    const text = conflictPredictionText(conflicted);
    assert.match(
      text,
      /Conflicts predicted by git merge-tree --write-tree .*: 1 file\n  src\/parser.ts\n      base: 111111111111 \(mode 100644\)\n      target: 222222222222/,
    );
    assert.match(text, /git's messages \(1\):\n  CONFLICT \(content\): Merge conflict in src\/parser.ts\n/);
    assert.match(text, /The agent's commits \(1\):\n  cccccccccccc Fix the parser/);
  });

  it('offers merge, squash and rebase, saying when a rebase would be refused, and asks before asking for approval', () => {
    assert.deepEqual(
      strategyChoices(preview()).map((c) => c.strategy),
      ['merge', 'squash', 'rebase'],
    );
    assert.match(
      strategyChoices(preview({ sourceDirty: 2 }))[2].detail,
      /refused now: the agent's worktree has 2 uncommitted files/,
    );
    const question = mergeQuestion(preview({ sourceDirty: 1 }), 'squash');
    assert.equal(question.message, 'Squash sw4rm/coder-1 into main?');
    assert.match(question.detail, /^1 commit, 1 file changed \(src\/parser.ts\)\. No conflict is predicted\./);
    assert.match(question.detail, /uncommitted file: they are not part of the merge/);
    assert.match(question.detail, /approval with the diff opens in the Approvals view/);
  });

  it('drops brackets from notifications (no links from agent text) and cuts them at 1,000 characters', () => {
    assert.equal(notificationText('Agent [x](command:sw4rm.stop) failed'), 'Agent x(command:sw4rm.stop) failed');
    assert.equal(notificationText('a'.repeat(2000)).length, 1000);
  });

  it('shortens long file lists', () => {
    assert.equal(fileList(['a', 'b', 'c']), 'a, b, c');
    assert.equal(fileList(['a', 'b', 'c', 'd', 'e']), 'a, b, c and 2 more');
  });
});

describe('the files Show Changes opens', () => {
  it('parses git diff --name-status -z with renames, and adds untracked files', () => {
    const files = parseChangedFiles(
      'M\0src/a.ts\0A\0new file.txt\0R100\0old.ts\0renamed.ts\0D\0gone.md\0',
      'notes/todo.txt\0x\0',
    );
    assert.deepEqual(files, [
      { status: 'M', path: 'src/a.ts' },
      { status: 'A', path: 'new file.txt' },
      { status: 'R', from: 'old.ts', path: 'renamed.ts' },
      { status: 'D', path: 'gone.md' },
      { status: 'U', path: 'notes/todo.txt' },
      { status: 'U', path: 'x' },
    ]);
    assert.deepEqual(parseChangedFiles(''), []);
  });

  it('reads git only at full commit ids: never an option or a range from a crafted document link', () => {
    assert.ok(isCommitId(BASE));
    assert.ok(isCommitId('a'.repeat(64)));
    for (const bad of [
      '--output=/tmp/x',
      'HEAD',
      'main',
      `${BASE}..HEAD`,
      BASE.toUpperCase(),
      BASE.slice(0, 12),
      `${BASE}\n`,
      42,
      undefined,
    ]) {
      assert.equal(isCommitId(bad), false, String(bad));
    }
  });
});

describe('the worktree facts both views share (WorktreeState)', () => {
  /** The part of the CoordinatorApi the state uses, counting how often git would be read. */
  function fakeApi() {
    const listeners = new Set<(change: unknown) => void>();
    const calls = { worktrees: 0 };
    let listed: WorktreeInfo[] = [worktree()];
    const api = {
      worktreeRepositories: async () => REPOS,
      worktrees: async () => {
        calls.worktrees++;
        return listed;
      },
      worktreeBindings: async () => [binding()],
      onDidChangeWorktrees: (listener: (change: unknown) => void) => {
        listeners.add(listener);
        return { dispose: () => listeners.delete(listener) };
      },
    };
    return {
      api: api as unknown as CoordinatorApi,
      calls,
      listeners,
      fire: () => {
        for (const l of listeners) l({ kind: 'created', repoId: 'app', worktreeId: 'x' });
      },
      list: (next: WorktreeInfo[]) => {
        listed = next;
      },
    };
  }

  it('reads git once per refresh however many views ask, and a burst of changes is one refresh after the throttle', async () => {
    const clock = new ManualClock();
    const state = new WorktreeState(clock, WORKTREES_REFRESH_MS);
    const fake = fakeApi();
    let told = 0;
    state.onDidChange(() => told++);
    state.bind(fake.api);
    assert.equal(told, 1, 'binding tells the views');
    const [a, b] = await Promise.all([state.current(), state.current()]);
    assert.equal(a, b);
    assert.equal(fake.calls.worktrees, 1);
    assert.deepEqual(
      a.worktrees.map((w) => w.worktreeId),
      ['coder-1'],
    );

    fake.list([worktree(), worktree({ worktreeId: 'helper' })]);
    for (let i = 0; i < 50; i++) fake.fire();
    assert.equal(told, 1, 'nothing before the throttle');
    clock.advance(WORKTREES_REFRESH_MS - 1);
    assert.equal(told, 1);
    clock.advance(1);
    assert.equal(told, 2, 'one refresh for the burst');
    assert.equal(fake.calls.worktrees, 1, 'git is read when a view asks, not by the event');
    assert.deepEqual(
      (await state.current()).worktrees.map((w) => w.worktreeId),
      ['coder-1', 'helper'],
    );
    assert.equal(fake.calls.worktrees, 2);
    clock.advance(60_000);
    assert.equal(told, 2, 'no change, no refresh: nothing polls');
    assert.equal(fake.calls.worktrees, 2);
  });

  it('does not keep a failed read: the next view that asks reads again', async () => {
    const state = new WorktreeState(new ManualClock());
    const fake = fakeApi();
    let fail = true;
    const api = {
      ...(fake.api as unknown as Record<string, unknown>),
      worktrees: async () => {
        if (fail) throw new Error('git timed out');
        return [worktree()];
      },
    };
    state.bind(api as unknown as CoordinatorApi);
    assert.deepEqual((await state.current()).worktrees, [], 'empty for the failed read');
    fail = false;
    assert.deepEqual(
      (await state.current()).worktrees.map((w) => w.worktreeId),
      ['coder-1'],
      'read again, without waiting for a change',
    );
    state.dispose();
  });

  it("is empty while no coordinator runs and lets go of the old coordinator's events", async () => {
    const clock = new ManualClock();
    const state = new WorktreeState(clock);
    const fake = fakeApi();
    state.bind(fake.api);
    state.bind(undefined);
    assert.equal(fake.listeners.size, 0);
    assert.deepEqual(await state.current(), { repositories: [], worktrees: [], bindings: [] });
    state.dispose();
  });
});
