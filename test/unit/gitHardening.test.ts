import { strict as assert } from 'node:assert';
import { driverOverrides, GitCommandError } from '../../src/core/worktree/git';

describe("driverOverrides (issue 30, item 2): the repository's own drivers are disabled, a name -c cannot carry refused", () => {
  it("overrides local, worktree and included drivers (dotted names too), keeps the user's global ones", () => {
    const listing = [
      'local',
      'filter.a.b.clean\nevil',
      'worktree',
      'merge.m.driver\nx',
      'local',
      'diff.d.textconv\ny',
      'global',
      'filter.lfs.process\ngit-lfs filter-process',
      'local',
      'diff.d.wordregex\nz',
      '',
    ].join('\0');
    assert.deepEqual(driverOverrides(listing), [
      'filter.a.b.clean=',
      'filter.a.b.smudge=',
      'filter.a.b.process=',
      'filter.a.b.required=false',
      'merge.m.driver=false',
      'diff.d.command=false',
      'diff.d.textconv=false',
      'diff.d.cachetextconv=false',
    ]);
  });
  it('refuses a driver whose name holds "="', () => {
    assert.throws(() => driverOverrides('local\0filter.a=b.clean\nevil\0'), GitCommandError);
  });
});
