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
  WorktreesApi,
  WorktreesChange,
  WorktreeSetupEvent,
} from '../sections/worktrees';
import type { InProcessHost } from './host';

/** CoordinatorApi's worktree section over a coordinator in this thread. */
export function worktreesSection(host: InProcessHost): WorktreesApi {
  const worktreesChanged = host.emitter<WorktreesChange>();
  const worktreeOperatorNeeded = host.emitter<BindingStatus>();
  const worktreeSetupRan = host.emitter<WorktreeSetupEvent>();
  const { worktreeOperations } = host.coordinator;
  host.subscribe(
    worktreeOperations.onDidChange((change) => worktreesChanged.fire(change)),
    worktreeOperations.onDidNeedOperator((binding) => worktreeOperatorNeeded.fire(binding)),
    worktreeOperations.onDidRunSetup((event) => worktreeSetupRan.fire(event)),
  );
  return {
    onDidChangeWorktrees: worktreesChanged.event,
    onDidNeedWorktreeOperator: worktreeOperatorNeeded.event,
    onDidRunWorktreeSetup: worktreeSetupRan.event,

    worktreeRepositories(): Promise<WorktreeRepositoryInfo[]> {
      return host.run((c) => c.worktreeOperations.repositories());
    },

    worktrees(): Promise<WorktreeInfo[]> {
      return host.runAsync((c) => c.worktreeOperations.list());
    },

    worktreeBindings(): Promise<BindingStatus[]> {
      return host.run((c) => c.worktreeOperations.bindingList());
    },

    bindAgentToWorktree(request: BindWorktreeRequest, by: string): Promise<BindingStatus> {
      return host.runAsync((c) => c.worktreeOperations.bind(request, by));
    },

    worktreeSnapshots(repoId: string, worktreeId: string): Promise<Snapshot[]> {
      return host.runAsync((c) => c.worktreeOperations.snapshotsOf(repoId, worktreeId));
    },

    restoreWorktreeSnapshot(
      repoId: string,
      worktreeId: string,
      snapshotRef: string,
      by: string,
    ): Promise<{ readonly before: Snapshot }> {
      return host.runAsync((c) => c.worktreeOperations.restore(repoId, worktreeId, snapshotRef, by));
    },

    removeWorktree(
      repoId: string,
      worktreeId: string,
      options: { readonly confirmed: boolean },
      by: string,
    ): Promise<WorktreeRemoval> {
      return host.runAsync((c) =>
        c.worktreeOperations.remove(repoId, worktreeId, { confirmed: options.confirmed === true }, by),
      );
    },

    pruneWorktreesPlan(repoId?: string): Promise<WorktreePruneCandidate[]> {
      return host.runAsync((c) => c.worktreeOperations.prunePlan(repoId));
    },

    pruneWorktrees(candidates: readonly WorktreePruneCandidate[], by: string): Promise<WorktreePruneCandidate[]> {
      return host.runAsync((c) => c.worktreeOperations.prune(candidates, by));
    },

    previewMerge(repoId: string, worktreeId: string, options: WorktreeMergeOptions): Promise<MergePreview> {
      return host.runAsync((c) => c.worktreeOperations.previewMerge(repoId, worktreeId, options));
    },

    mergeBack(
      repoId: string,
      worktreeId: string,
      options: WorktreeMergeOptions,
      by: string,
    ): Promise<WorktreeMergeResult> {
      return host.runAsync((c) => c.worktreeOperations.mergeBack(repoId, worktreeId, options, by));
    },

    worktreeMerges(repoId?: string): Promise<WorktreeMergeInfo[]> {
      return host.run((c) => c.worktreeOperations.merges(repoId));
    },

    undoMerge(mergeId: string, by: string): Promise<UndoResult> {
      return host.runAsync((c) => c.worktreeOperations.undoMerge(mergeId, by));
    },
  };
}
