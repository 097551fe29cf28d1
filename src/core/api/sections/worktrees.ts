import type { Event } from '../../events';
import type { BindingStatus } from '../../worktree/bindings';
import type { MergePreview, UndoResult } from '../../worktree/mergeBack';
import type { Snapshot } from '../../worktree/snapshots';
import type {
  BindWorktreeRequest,
  WorktreeInfo,
  WorktreeMergeInfo,
  WorktreeMergeOptions,
  WorktreeMergeResult,
  WorktreePruneCandidate,
  WorktreeRemoval,
  WorktreeRepositoryInfo,
  WorktreesChange,
  WorktreeSetupEvent,
} from '../../worktree/model';

/** The records of the worktree section are the worktree area's (src/core/worktree/model.ts). */
export type {
  BindWorktreeRequest,
  WorktreeInfo,
  WorktreeMergeInfo,
  WorktreeMergeOptions,
  WorktreeMergeResult,
  WorktreePruneCandidate,
  WorktreeRemoval,
  WorktreeRepositoryInfo,
  WorktreesChange,
  WorktreeSetupEvent,
};

/**
 * Worktrees (RFC §16; README, "Worktrees"): bindings, snapshots, removal, pruning, merge back. Part of
 * CoordinatorApi (coordinatorApi.ts).
 */
export interface WorktreesApi {
  /** The workspace's git repositories as repo_ids, ordered by id. */
  worktreeRepositories(): Promise<WorktreeRepositoryInfo[]>;
  /**
   * Every agent worktree (branch `sw4rm/<id>`) of every repository, ordered by repo_id then worktree id, with the
   * agents bound to it (home or switched in) and its newest snapshot. Reads git: call it on changes, not in a loop.
   */
  worktrees(): Promise<WorktreeInfo[]>;
  /** Every agent's binding that is not UNBOUND, ordered by agent id. */
  worktreeBindings(): Promise<BindingStatus[]>;
  /**
   * Binds an agent to a worktree as its home (as WorktreeService.Bind does): an existing worktree, or a new one on
   * `sw4rm/<worktreeId>` from `base` (a branch or commit; default the repository's HEAD), set up after it is created
   * (copy globs, setup command; `onDidRunWorktreeSetup`). A failed bind is an answer (state BIND_FAILED, its
   * reason), not an error; a refused one (a bad id, a state that does not allow BIND) rejects `invalid`.
   */
  bindAgentToWorktree(request: BindWorktreeRequest, by: string): Promise<BindingStatus>;
  /** A worktree's snapshots, newest first (also those of a worktree already removed). Rejects `not_found` for an unknown repo_id. */
  worktreeSnapshots(repoId: string, worktreeId: string): Promise<Snapshot[]>;
  /**
   * Writes a snapshot's files back into its worktree, after snapshotting the current state (answered as `before`, so
   * the restore can be undone). Rejects `not_found` (no such worktree or snapshot).
   */
  restoreWorktreeSnapshot(
    repoId: string,
    worktreeId: string,
    snapshotRef: string,
    by: string,
  ): Promise<{ readonly before: Snapshot }>;
  /**
   * Removes a worktree through git. Without `confirmed`, one with uncommitted files or unmerged commits is refused
   * (`refused`, reason `dirty` / `unmerged`); with it, a snapshot is written first and the branch is kept. Never one an
   * agent is bound to (`refused`, reason `bound`) nor a locked one (`locked`).
   */
  removeWorktree(
    repoId: string,
    worktreeId: string,
    options: { readonly confirmed: boolean },
    by: string,
  ): Promise<WorktreeRemoval>;
  /** What `pruneWorktrees` would forget: worktrees whose folder is gone, in every repository (or one). Deletes nothing. */
  pruneWorktreesPlan(repoId?: string): Promise<WorktreePruneCandidate[]>;
  /** Prunes exactly the candidates listed (those no longer stale are skipped); answers the ones pruned. */
  pruneWorktrees(candidates: readonly WorktreePruneCandidate[], by: string): Promise<WorktreePruneCandidate[]>;
  /**
   * Merge back, first step: what merging `sw4rm/<worktreeId>` into the target would do, computed without touching
   * anything (the predicted conflicts, the agent's commits, the changed files, the diff). Rejects `refused` with the
   * reason (the main checkout has uncommitted changes, the target is checked out in another worktree, …).
   */
  previewMerge(repoId: string, worktreeId: string, options: WorktreeMergeOptions): Promise<MergePreview>;
  /**
   * Merge back: previews, and unless conflicts are predicted asks for approval through a HITL invocation carrying the
   * diff (the Approvals view and panel; the approval policy applies), then merges, squashes or rebases. Answers how it
   * ended; a merged one can be undone with `undoMerge` (also after a restart).
   */
  mergeBack(
    repoId: string,
    worktreeId: string,
    options: WorktreeMergeOptions,
    by: string,
  ): Promise<WorktreeMergeResult>;
  /** Merges that can still be undone, newest first. */
  worktreeMerges(repoId?: string): Promise<WorktreeMergeInfo[]>;
  /** Undoes a merge: the target goes back to its pre-merge state from the snapshot. Rejects `not_found`, or `refused` if the target moved since. */
  undoMerge(mergeId: string, by: string): Promise<UndoResult>;
  /** A binding changed, a worktree was created, removed, pruned, restored or merged. Refresh throttled. */
  readonly onDidChangeWorktrees: Event<WorktreesChange>;
  /** A binding has been BIND_FAILED for the bind recovery timeout (60 s, RFC §16.3): tell the operator. */
  readonly onDidNeedWorktreeOperator: Event<BindingStatus>;
  /** Output of a worktree's setup (copied files, the setup command's output, how it ended), as it happens. */
  readonly onDidRunWorktreeSetup: Event<WorktreeSetupEvent>;
}
