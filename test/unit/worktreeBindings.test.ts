import * as assert from 'node:assert/strict';
import { homeWorktreeIdOf, TRANSITIONS } from '../../src/core/worktree/bindings';

// The pure part: the bindings driven through real repositories are in test/integration/worktreeBindings.integration.test.ts.
describe('worktree bindings (RFC §16, §16.1–§16.3): the table and the ids', () => {
  it('has exactly the ten transitions of the RFC §16.2 table (plus the two the coordinator triggers itself)', () => {
    const rows = new Set(
      Object.entries(TRANSITIONS)
        .filter(([op]) => op !== 'BIND_RETRY' && op !== 'TTL_EXPIRED')
        .flatMap(([, pairs]) => pairs.map(([from, to]) => `${from}->${to}`)),
    );
    assert.deepEqual([...rows].sort(), [
      'BIND_FAILED->BOUND_HOME',
      'BIND_FAILED->UNBOUND',
      'BOUND_HOME->SWITCH_PENDING',
      'BOUND_HOME->UNBOUND',
      'BOUND_NON_HOME->BOUND_HOME',
      'BOUND_NON_HOME->UNBOUND',
      'SWITCH_PENDING->BOUND_HOME',
      'SWITCH_PENDING->BOUND_NON_HOME',
      'UNBOUND->BIND_FAILED',
      'UNBOUND->BOUND_HOME',
    ]);
    assert.deepEqual(TRANSITIONS.BIND_RETRY, [['BIND_FAILED', 'BOUND_HOME']]);
    assert.deepEqual(TRANSITIONS.TTL_EXPIRED, [['BOUND_NON_HOME', 'BOUND_HOME']]);
  });

  it('derives a valid, distinct home worktree id from any agent id', () => {
    assert.equal(homeWorktreeIdOf('coder-1'), 'coder-1');
    const odd = homeWorktreeIdOf('team/coder 1');
    assert.match(odd, /^team-coder-1-[0-9a-f]{8}$/);
    assert.notEqual(homeWorktreeIdOf('team/coder 1'), homeWorktreeIdOf('team:coder 1'));
    assert.match(homeWorktreeIdOf('../..'), /^agent-[0-9a-f]{8}$/);
  });
});
