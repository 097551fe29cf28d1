import type { ParallelismScorer, ParallelismVerdict, TaskScope } from './model';
import { scopesOverlap, type PathOverlap } from './overlap';

/**
 * The confidences of the built-in scorer (README, "Concurrency and conflicts"): the lowest that applies wins.
 * No overlap 1.0; a shared declared resource 0.1; the same files (identical globs) 0.2; the same worktree without
 * paths 0.3; overlapping globs 0.4 (a certain overlap, or a possible one from the repository root) up to 0.6 (a possible
 * overlap deep in the tree: 0.05 more per shared static directory, at most 4).
 */
export const SCORES = {
  noOverlap: 1,
  sharedResource: 0.1,
  sameFiles: 0.2,
  wholeTree: 0.3,
  overlappingGlobs: 0.4,
  perSharedDirectory: 0.05,
  maxSharedDirectories: 4,
} as const;

/** The confidence of one overlapping path pair: 0.2 identical, 0.4 certain, 0.4–0.6 possible by depth. */
export function pathScore(overlap: PathOverlap): number {
  if (overlap.kind === 'identical') return SCORES.sameFiles;
  if (overlap.kind === 'certain') return SCORES.overlappingGlobs;
  return round(
    SCORES.overlappingGlobs + SCORES.perSharedDirectory * Math.min(overlap.depth, SCORES.maxSharedDirectories),
  );
}

/**
 * The built-in, deterministic Inference Engine stand-in for RFC §9.3 parallelism checks: a confidence in [0, 1] from
 * how two scopes overlap (same repository and worktree, overlapping path globs, a shared resource). An external
 * engine replaces it with the tools issue. Same inputs, same answer; symmetric.
 */
export class BuiltInScopeScorer implements ParallelismScorer {
  check(a: TaskScope, b: TaskScope): ParallelismVerdict {
    const overlap = scopesOverlap(a, b);
    if (!overlap.overlap)
      return {
        confidence: SCORES.noOverlap,
        notes: 'no overlap: different repositories, worktrees, paths and resources',
      };
    let confidence: number = SCORES.noOverlap;
    if (overlap.sharedResources.length > 0) confidence = Math.min(confidence, SCORES.sharedResource);
    if (overlap.wholeTree) confidence = Math.min(confidence, SCORES.wholeTree);
    for (const p of overlap.paths) confidence = Math.min(confidence, pathScore(p));
    return { confidence, notes: overlap.reasons.join('; ') };
  }
}

function round(n: number): number {
  return Math.round(n * 1000) / 1000;
}
