import * as assert from 'node:assert/strict';
import { parseMergeTree } from '../../src/core/worktree/mergeBack';

// The pure part: merge-back on real repositories is in test/integration/worktreeMerge.integration.test.ts.
describe('worktree merge-back: git merge-tree output', () => {
  it('parses merge-tree -z output: the tree, conflicted stages per path and the messages', () => {
    const tree = 'a'.repeat(40);
    const out =
      `${tree}\x00100644 ${'1'.repeat(40)} 1\tdir/a b.txt\x00100644 ${'2'.repeat(40)} 2\tdir/a b.txt\x00100644 ${'3'.repeat(40)} 3\tdir/a b.txt\0\0` +
      '1\0dir/a b.txt\0Auto-merging\0Auto-merging dir/a b.txt\n\0' +
      '1\0dir/a b.txt\0CONFLICT (contents)\0CONFLICT (content): Merge conflict in dir/a b.txt\n\0';
    const parsed = parseMergeTree(out);
    assert.equal(parsed.tree, tree);
    assert.deepEqual(
      parsed.conflicts.map((c) => [c.path, c.stages.map((s) => s.stage)]),
      [['dir/a b.txt', [1, 2, 3]]],
    );
    assert.deepEqual(
      parsed.messages.map((m) => [m.paths, m.type]),
      [
        [['dir/a b.txt'], 'Auto-merging'],
        [['dir/a b.txt'], 'CONFLICT (contents)'],
      ],
    );
    assert.deepEqual(parseMergeTree(`${tree}\0`), { tree, conflicts: [], messages: [] });
    assert.throws(() => parseMergeTree('not a tree\0'));
  });
});
