import * as assert from 'node:assert/strict';
import {
  dirtyCount,
  parsePruneDryRun,
  parseRefList,
  parseStatusV2,
  parseWorktreeList,
} from '../../src/core/worktree/porcelain';

const A = 'a'.repeat(40);
const B = 'b'.repeat(40);
const Z = '0'.repeat(40);

describe('worktree porcelain parsers', () => {
  describe('git worktree list --porcelain -z', () => {
    it('reads the main tree, a branch, a detached HEAD, a locked and a prunable worktree', () => {
      const out = [
        `worktree /home/u/repo`,
        `HEAD ${A}`,
        `branch refs/heads/main`,
        '',
        `worktree /home/u/repo.sw4rm-worktrees/agent-1`,
        `HEAD ${B}`,
        `branch refs/heads/sw4rm/agent-1`,
        '',
        `worktree /home/u/detached`,
        `HEAD ${A}`,
        'detached',
        '',
        `worktree /home/u/locked one`,
        `HEAD ${B}`,
        `branch refs/heads/sw4rm/locked`,
        'locked',
        '',
        `worktree /home/u/locked-why`,
        `HEAD ${B}`,
        'detached',
        'locked on a USB disk\nthat is unplugged',
        '',
        `worktree /gone`,
        `HEAD ${A}`,
        `branch refs/heads/sw4rm/gone`,
        'prunable gitdir file points to non-existent location',
        '',
        '',
      ].join('\0');
      const entries = parseWorktreeList(out);
      assert.equal(entries.length, 6);
      assert.deepEqual(entries[0], {
        path: '/home/u/repo',
        head: A,
        branch: 'refs/heads/main',
        bare: false,
        detached: false,
        locked: false,
        lockReason: undefined,
        prunable: false,
        prunableReason: undefined,
      });
      assert.equal(entries[1].branch, 'refs/heads/sw4rm/agent-1');
      assert.equal(entries[2].detached, true);
      assert.equal(entries[2].branch, undefined);
      assert.equal(entries[3].path, '/home/u/locked one');
      assert.equal(entries[3].locked, true);
      assert.equal(entries[3].lockReason, '');
      assert.equal(entries[4].lockReason, 'on a USB disk\nthat is unplugged');
      assert.equal(entries[5].prunable, true);
      assert.equal(entries[5].prunableReason, 'gitdir file points to non-existent location');
    });

    it('keeps paths with spaces, newlines and Unicode as they are', () => {
      const odd = '/tmp/my repo\nsecond line/ünïcødé 日本';
      const entries = parseWorktreeList(
        [`worktree ${odd}`, `HEAD ${A}`, 'branch refs/heads/sw4rm/x', '', ''].join('\0'),
      );
      assert.equal(entries.length, 1);
      assert.equal(entries[0].path, odd);
    });

    it('reads a bare repository and a worktree on an unborn branch', () => {
      const entries = parseWorktreeList(
        ['worktree /srv/proj.git', 'bare', '', 'worktree /srv/wt', `HEAD ${Z}`, 'branch refs/heads/new', '', ''].join(
          '\0',
        ),
      );
      assert.equal(entries[0].bare, true);
      assert.equal(entries[0].head, undefined);
      assert.equal(entries[1].head, Z);
    });

    it('ignores a field a newer git may add, and refuses a field before any worktree', () => {
      assert.equal(parseWorktreeList(['worktree /r', `HEAD ${A}`, 'frobnicated yes', '', ''].join('\0')).length, 1);
      assert.throws(() => parseWorktreeList(`HEAD ${A}\0\0`), /before any 'worktree'/);
      assert.deepEqual(parseWorktreeList(''), []);
    });
  });

  describe('git status --porcelain=v2 -z', () => {
    it('reads changed, renamed, unmerged, untracked and ignored entries with odd paths', () => {
      const out = [
        `# branch.oid ${A}`,
        '# branch.head sw4rm/agent 1',
        `1 .M N... 100644 100644 100644 ${A} ${A} file with spaces.txt`,
        `1 A. N... 000000 100644 100644 ${Z} ${B} new\nline.txt`,
        `2 R. N... 100644 100644 100644 ${A} ${A} R100 renamed to.txt`,
        'renamed from.txt',
        `u UU N... 100644 100644 100644 100644 ${A} ${B} ${A} conflict 日本.txt`,
        '? untracked ünïcødé.txt',
        '! ignored.log',
        '',
      ].join('\0');
      const status = parseStatusV2(out);
      assert.equal(status.branchOid, A);
      assert.equal(status.branchHead, 'sw4rm/agent 1');
      assert.deepEqual(
        status.entries.map((e) => [e.kind, e.xy, e.path, e.origPath]),
        [
          ['changed', '.M', 'file with spaces.txt', undefined],
          ['changed', 'A.', 'new\nline.txt', undefined],
          ['renamed', 'R.', 'renamed to.txt', 'renamed from.txt'],
          ['unmerged', 'UU', 'conflict 日本.txt', undefined],
          ['untracked', '??', 'untracked ünïcødé.txt', undefined],
          ['ignored', '!!', 'ignored.log', undefined],
        ],
      );
      assert.equal(dirtyCount(status), 5, 'ignored files are not uncommitted work');
    });

    it('reads a detached HEAD and a clean tree', () => {
      const status = parseStatusV2([`# branch.oid ${A}`, '# branch.head (detached)', ''].join('\0'));
      assert.equal(status.branchHead, '(detached)');
      assert.equal(dirtyCount(status), 0);
    });

    it('refuses a truncated record', () => {
      assert.throws(() => parseStatusV2('1 .M N...\0'), /fewer than 8 fields/);
      assert.throws(() => parseStatusV2(`2 R. N... 100644 100644 100644 ${A} ${A} R100 to`), /original path/);
      assert.throws(() => parseStatusV2('X what\0'), /unknown record/);
    });
  });

  it('reads git worktree prune --dry-run --verbose', () => {
    const out =
      'Removing worktrees/agent-1: gitdir file points to non-existent location\nRemoving worktrees/with space: not a valid directory\nsomething else\n';
    assert.deepEqual(parsePruneDryRun(out), [
      { name: 'agent-1', reason: 'gitdir file points to non-existent location' },
      { name: 'with space', reason: 'not a valid directory' },
    ]);
  });

  it('reads for-each-ref output with NUL-separated fields', () => {
    assert.deepEqual(parseRefList(`refs/sw4rm/snapshots/a/20260101T000000000Z\0${A}\nrefs/sw4rm/bases/a\0${B}\n`), [
      { ref: 'refs/sw4rm/snapshots/a/20260101T000000000Z', oid: A },
      { ref: 'refs/sw4rm/bases/a', oid: B },
    ]);
  });
});
