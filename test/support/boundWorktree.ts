import { strict as assert } from 'node:assert';
import * as path from 'node:path';
import type { CallContext } from '../../src/core/context';
import { createGit } from '../../src/core/worktree/git';
import { discoverRepositories } from '../../src/core/worktree/repositories';
import { CoordinatorFixture } from './coordinatorFixture';

/**
 * A CoordinatorFixture (its store in `<dir>/data`) that knows the repository at `repoPath` (named `app` by makeRepo),
 * with `agentId` bound to its home worktree there: the fixture and that worktree's path.
 */
export async function boundAtHome(
  dir: string,
  repoPath: string,
  ctx: CallContext,
  agentId = 'coder',
): Promise<{ fixture: CoordinatorFixture; home: string }> {
  const repositories = await discoverRepositories(createGit(), [repoPath]);
  const fixture = new CoordinatorFixture({ dataDir: path.join(dir, 'data'), coordinator: { repositories } });
  const bound = await fixture.coordinator.worktrees.bind(agentId, path.basename(repoPath), '', ctx);
  assert.equal(bound.state, 'BOUND_HOME', JSON.stringify(bound.failure));
  return { fixture, home: bound.worktreePath };
}
