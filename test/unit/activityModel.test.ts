import { strict as assert } from 'node:assert';
import type { ActivityEntry } from '../../src/core/api';
import {
  activityKey,
  activityOverlaps,
  activityRow,
  activityUsageMessage,
  groupActivity,
} from '../../src/extension/activityModel';

function entry(overrides: Partial<ActivityEntry> = {}): ActivityEntry {
  return {
    agentId: 'echo-1',
    taskId: 't-1',
    repoId: 'myrepo',
    worktreeId: 'echo-1',
    branch: 'sw4rm/echo-1',
    timestamp: 1000,
    description: 'Edits the parser',
    endedAt: null,
    outcome: '',
    ...overrides,
  };
}

describe("the Activity view's text (no vscode)", () => {
  it('groups by agent or by repository, groups sorted, newest first inside', () => {
    const entries = [
      entry({ taskId: 'a', timestamp: 1 }),
      entry({ agentId: 'b-agent', taskId: 'b', repoId: 'other', timestamp: 3 }),
      entry({ taskId: 'c', timestamp: 2 }),
      entry({ agentId: 'z', taskId: 'd', repoId: '', worktreeId: '', branch: '' }),
    ];
    const byAgent = groupActivity(entries, 'agent');
    assert.deepEqual(
      byAgent.map((g) => [g.label, g.entries.map((e) => e.taskId)]),
      [
        ['b-agent', ['b']],
        ['echo-1', ['c', 'a']],
        ['z', ['d']],
      ],
    );
    const byRepo = groupActivity(entries, 'repository');
    assert.deepEqual(
      byRepo.map((g) => g.label),
      ['(no repository)', 'myrepo', 'other'],
    );
  });

  it('finds overlaps: same repository and the same worktree or branch, never an entry with itself', () => {
    const a = entry({ agentId: 'a', taskId: '1', worktreeId: 'w', branch: 'x' });
    const b = entry({ agentId: 'b', taskId: '2', worktreeId: 'w', branch: 'y' });
    const c = entry({ agentId: 'c', taskId: '3', worktreeId: 'v', branch: 'x' });
    const d = entry({ agentId: 'd', taskId: '4', worktreeId: 'w', repoId: 'other' });
    const e = entry({ agentId: 'e', taskId: '5', worktreeId: 'q', branch: 'q' });
    const overlaps = activityOverlaps([a, b, c, d, e]);
    assert.deepEqual(
      overlaps.get(activityKey(a))?.first.map((x) => x.agentId),
      ['b', 'c'],
    );
    assert.equal(overlaps.get(activityKey(a))?.count, 2);
    assert.deepEqual(
      overlaps.get(activityKey(b))?.first.map((x) => x.agentId),
      ['a'],
    );
    assert.deepEqual(
      overlaps.get(activityKey(c))?.first.map((x) => x.agentId),
      ['a'],
    );
    assert.equal(overlaps.has(activityKey(d)), false);
    assert.equal(overlaps.has(activityKey(e)), false);
    // Empty worktree and branch do not count as the same place.
    assert.equal(
      activityOverlaps([
        entry({ agentId: 'a', worktreeId: '', branch: '' }),
        entry({ agentId: 'b', worktreeId: '', branch: '' }),
      ]).size,
      0,
    );
  });

  it('counts overlaps in one pass over many entries in one worktree and names 3 of them, then "and N more"', () => {
    // 20,000 entries in one worktree and branch: pairwise would be 200 million comparisons and lists of 20,000 per row.
    const many = Array.from({ length: 20_000 }, (_, i) =>
      entry({ agentId: `a${i}`, taskId: `t${i}`, worktreeId: 'w', branch: i % 2 ? 'x' : 'y' }),
    );
    const started = process.hrtime.bigint();
    const overlaps = activityOverlaps(many);
    const ms = Number(process.hrtime.bigint() - started) / 1e6;
    assert.ok(ms < 2_000, `took ${ms} ms`);
    const first = overlaps.get(activityKey(many[0]))!;
    assert.equal(first.count, 19_999);
    assert.deepEqual(
      first.first.map((e) => e.agentId),
      ['a1', 'a2', 'a3'],
    );
    const row = activityRow(many[0], first, 'agent', 1000);
    assert.match(row.description, /^overlaps with a1 \(task t1\), a2 \(task t2\), a3 \(task t3\) and 19996 more · /);
    assert.match(row.tooltip, /Overlaps with: a1 on task t1 \(.*\); a2 .*; a3 .* and 19996 more\n/);
    // Same worktree and same branch counted once: a and b share both, c only the branch.
    const a = entry({ agentId: 'a', taskId: '1', worktreeId: 'w', branch: 'x' });
    const b = entry({ agentId: 'b', taskId: '2', worktreeId: 'w', branch: 'x' });
    const c = entry({ agentId: 'c', taskId: '3', worktreeId: 'v', branch: 'x' });
    assert.equal(activityOverlaps([a, b, c]).get(activityKey(a))?.count, 2);
    assert.equal(activityOverlaps([a, b, c]).get(activityKey(c))?.count, 2);
  });

  it('says overlaps first in a row; the tooltip carries the whole description as plain text', () => {
    const other = entry({ agentId: 'writer-1', taskId: 'abcdef0123' });
    const row = activityRow(
      entry({ description: 'Refactors **the** parser\nand its tests' }),
      { count: 1, first: [other] },
      'agent',
      61_000,
    );
    assert.equal(row.overlapping, true);
    assert.equal(row.label, 'Refactors **the** parser and its tests');
    assert.equal(
      row.description,
      'overlaps with writer-1 (task abcdef01) · myrepo · worktree echo-1 · branch sw4rm/echo-1 · task t-1 · 1 min',
    );
    assert.match(row.tooltip, /Overlaps with: writer-1 on task abcdef0123/);
    assert.match(row.tooltip, /Refactors \*\*the\*\* parser\nand its tests$/);
    const byRepo = activityRow(entry(), undefined, 'repository', 1000);
    assert.equal(byRepo.overlapping, false);
    assert.equal(byRepo.description, 'echo-1 · worktree echo-1 · branch sw4rm/echo-1 · task t-1 · 0 s');
  });

  it("warns from 80% usage in the view's message", () => {
    assert.equal(
      activityUsageMessage({ active: 7999, maxEntries: 10_000, maxPerAgent: 100, history: 0, warning: false }),
      undefined,
    );
    assert.equal(
      activityUsageMessage({ active: 8000, maxEntries: 10_000, maxPerAgent: 100, history: 0, warning: true }),
      'The activity buffer is 80% full (8,000 of 10,000 active entries): at the limit new tasks run without an entry and their agents are told activity_buffer_full.',
    );
  });
});
