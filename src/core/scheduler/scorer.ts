// CONTRACT SKELETON (s6-api): helper B replaces every body; nothing here is called done.
import type { ParallelismScorer, ParallelismVerdict, TaskScope } from './model';

/**
 * The built-in, deterministic Inference Engine stand-in for RFC §9.3 parallelism checks: a confidence in [0, 1] from
 * how two scopes overlap (same repository and worktree, overlapping path globs, a shared resource). An external
 * engine replaces it with the tools issue.
 */
export class BuiltInScopeScorer implements ParallelismScorer {
  check(_a: TaskScope, _b: TaskScope): ParallelismVerdict {
    throw new Error('BuiltInScopeScorer.check: not built yet (s6 helper B)');
  }
}
