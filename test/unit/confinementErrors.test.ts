import { strict as assert } from 'node:assert';
import { SwarmError, classify } from '../../src/core/kernel/errors';
import { ConfinementError, type ConfinementReason } from '../../src/core/worktree/confinement';

/** ConfinementError is a SwarmError whose kind and code are those the workspace tools answer it with (workspaceProvider). */
describe('ConfinementError as a SwarmError', () => {
  const cases: Array<[ConfinementReason, string, string]> = [
    ['symlink', 'permission', 'permission_denied'],
    ['git_metadata', 'permission', 'permission_denied'],
    ['worktree_missing', 'precondition', 'worktree_not_bound'],
    ['not_found', 'not_found', 'not_found'],
    ['is_a_directory', 'precondition', 'filesystem_error'],
    ['io_error', 'precondition', 'filesystem_error'],
    ['too_large', 'exhausted', 'filesystem_error'],
  ];
  for (const [reason, kind, code] of cases) {
    it(`${reason}: ${kind}, ${code}`, () => {
      const err = new ConfinementError(reason);
      assert.ok(err instanceof SwarmError);
      assert.equal(err.code, code);
      assert.deepEqual(classify(err), { kind, code, message: err.message });
      assert.ok(err.message.startsWith(`${code}: `));
    });
  }
});
