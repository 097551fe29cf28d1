import * as vscode from 'vscode';
import {
  CoordinatorApiError,
  homeWorktreeIdOf,
  isWorktreeId,
  type BindingStatus,
  type CoordinatorApi,
  type Disposable,
  type MergePreview,
  type WorktreeInfo,
} from '../core/api';
import { Views } from './contributions';
import { asAgentRow } from './messageCommands';
import { requireRunning } from './notRunning';
import type { ReadOnlyDocuments } from './readOnlyDocuments';
import { asWorktreeNode } from './views/worktreesView';
import { WorktreeBaseDocuments, changedFiles, localBranches } from './worktreeGit';
import {
  baseText,
  bindFailedNoticeText,
  bindResultText,
  boundText,
  conflictNotice,
  conflictPredictionText,
  forcedRemoveQuestion,
  mergeItem,
  mergeQuestion,
  notificationText,
  pruneCandidateText,
  prunePlanQuestion,
  removalRefusalText,
  removeQuestion,
  shortBranch,
  snapshotItem,
  strategyChoices,
  worktreeRow,
} from './worktreesModel';
import type { WorktreeState } from './worktreeState';

/** The Agents view's worktree row under an agent, as its context menu hands it to a command. */
interface AgentWorktreeNode {
  readonly kind: 'agentWorktree';
  readonly agentId: string;
}

function asAgentWorktreeNode(value: unknown): AgentWorktreeNode | undefined {
  const node = value as AgentWorktreeNode | undefined;
  return typeof node === 'object' && node !== null && node.kind === 'agentWorktree' && typeof node.agentId === 'string'
    ? node
    : undefined;
}

/** The read-only document kind of a merge's conflict prediction. */
const PREDICTION_DOCUMENT = 'merge-prediction';
/** Predictions kept for their documents (the newest; a document reopened later says it is gone). */
const KEPT_PREDICTIONS = 20;

/**
 * The worktree commands (Bind Agent to Worktree…, Open Worktree in New Window, Show Changes, Merge Back…, Undo Merge…,
 * Restore Snapshot…, Remove Worktree, Prune Stale Worktrees…), run on a row of the Worktrees or Agents view or from
 * the palette (then a quick pick asks which worktree); and a bind failing for 60 s (a warning with Bind Again).
 */
export class WorktreeCommands implements vscode.Disposable {
  private subscriptions: Disposable[] = [];
  private readonly predictions = new Map<string, string>();
  private predictionCount = 0;
  private readonly baseDocuments = new WorktreeBaseDocuments();

  constructor(
    private readonly operator: string,
    private readonly state: WorktreeState,
    private readonly documents: ReadOnlyDocuments,
    private readonly output: vscode.OutputChannel,
  ) {
    documents.register(
      PREDICTION_DOCUMENT,
      async (key) => this.predictions.get(key) ?? 'This prediction is no longer kept: run Merge Back again.\n',
    );
  }

  bind(api: CoordinatorApi | undefined): void {
    for (const subscription of this.subscriptions) subscription.dispose();
    this.subscriptions = [];
    if (!api) return;
    this.subscriptions.push(
      // Setup output and failures: the controller writes them to the SW4RM Output channel (coordinatorController.ts).
      api.onDidNeedWorktreeOperator((status) => void this.bindFailedNotice(api, status)),
    );
  }

  dispose(): void {
    for (const subscription of this.subscriptions) subscription.dispose();
    this.subscriptions = [];
    this.baseDocuments.dispose();
  }

  /**
   * Binds an agent (the row's, or picked) to a worktree as its home: the row's worktree, an existing one picked, or a
   * new one from a branch picked (its id asked, proposed as the agent's id).
   */
  async bindAgent(node?: unknown): Promise<void> {
    const api = await requireRunning(this.state.coordinator);
    if (!api) return;
    const onWorktree = asWorktreeNode(node);
    const agentId = asAgentRow(node)?.agentId ?? asAgentWorktreeNode(node)?.agentId ?? (await this.pickAgent(api));
    if (!agentId) return;
    let request: { repoId: string; worktreeId: string; base?: string } | undefined;
    if (onWorktree) {
      request = { repoId: onWorktree.repoId, worktreeId: onWorktree.worktreeId };
    } else {
      request = await this.pickBindTarget(api, agentId);
    }
    if (!request || this.state.coordinator !== api) return;
    const status = await vscode.window
      .withProgress(
        {
          location: vscode.ProgressLocation.Notification,
          title: `Binding ${agentId} to worktree ${request.worktreeId}…`,
        },
        () => api.bindAgentToWorktree({ agentId, ...request }, this.operator),
      )
      .then(
        (s) => s,
        (err: unknown) => this.refused(err),
      );
    this.state.refresh();
    if (!status) return;
    const result = bindResultText(status);
    if (result.ok) {
      const choice = await vscode.window.showInformationMessage(
        notificationText(result.text),
        'Open Worktree in New Window',
      );
      if (choice) await openFolder(status.worktreePath);
    } else {
      const choice = await vscode.window.showWarningMessage(notificationText(result.text), 'Show Log');
      if (choice) this.output.show(true);
    }
  }

  async openInNewWindow(node?: unknown): Promise<void> {
    const worktree = await this.target(node, 'Open Worktree in New Window');
    if (!worktree) return;
    if (worktree.prunable) {
      void vscode.window.showWarningMessage(
        notificationText(
          `The folder of worktree ${worktree.worktreeId} is gone (${worktree.path}): Prune Stale Worktrees forgets it.`,
        ),
      );
      return;
    }
    await openFolder(worktree.path);
  }

  /** The editor's multi-file diff of the worktree against its base: one entry per changed, added, deleted or untracked file. */
  async showChanges(node?: unknown): Promise<void> {
    const worktree = await this.target(node, 'Show Worktree Changes');
    if (!worktree) return;
    const base = worktree.baseCommit;
    if (!base || worktree.prunable) {
      void vscode.window.showWarningMessage(
        notificationText(
          worktree.prunable
            ? `The folder of worktree ${worktree.worktreeId} is gone: there is nothing to compare.`
            : `The base of worktree ${worktree.worktreeId} is not known: there is nothing to compare it with.`,
        ),
      );
      return;
    }
    let files;
    try {
      files = await changedFiles(worktree.path, base);
    } catch (err) {
      void vscode.window.showErrorMessage(
        notificationText(`Show Changes: ${err instanceof Error ? err.message : String(err)}`),
      );
      return;
    }
    if (!files.length) {
      void vscode.window.showInformationMessage(
        notificationText(`Worktree ${worktree.worktreeId} has no changes against its base ${baseText(worktree)}.`),
      );
      return;
    }
    const resources = files.map((file) => {
      const uri = vscode.Uri.joinPath(vscode.Uri.file(worktree.path), file.path);
      const empty = WorktreeBaseDocuments.uri(worktree.path, '', file.path);
      switch (file.status) {
        case 'A':
        case 'U':
          return [uri, empty, uri];
        case 'D':
          return [uri, WorktreeBaseDocuments.uri(worktree.path, base, file.path), empty];
        case 'R':
        case 'C':
          return [uri, WorktreeBaseDocuments.uri(worktree.path, base, file.from ?? file.path), uri];
        default:
          return [uri, WorktreeBaseDocuments.uri(worktree.path, base, file.path), uri];
      }
    });
    await vscode.commands.executeCommand('vscode.changes', `${worktree.worktreeId} ↔ ${baseText(worktree)}`, resources);
  }

  /**
   * Merge Back: the preview first (nothing touched); predicted conflicts are shown (a notification naming the files, a
   * document with their stages and git's messages) and nothing else happens; else the strategy is picked and
   * confirmed, the merge asks for approval (the Approvals view and panel, with the diff), and the outcome is shown.
   */
  async mergeBack(node?: unknown): Promise<void> {
    const api = await requireRunning(this.state.coordinator);
    if (!api) return;
    const worktree = await this.target(node, 'Merge Back');
    if (!worktree) return;
    const preview = await vscode.window
      .withProgress(
        { location: vscode.ProgressLocation.Notification, title: `Predicting the merge of ${worktree.branch}…` },
        () => api.previewMerge(worktree.repoId, worktree.worktreeId, { strategy: 'merge' }),
      )
      .then(
        (p) => p,
        (err: unknown) => this.refused(err, `Merge Back of ${worktree.branch} is refused`),
      );
    if (!preview) return;
    if (preview.conflicts.length) return this.showConflicts(preview);
    if (!preview.commits.length) {
      void vscode.window.showInformationMessage(
        notificationText(
          `${shortBranch(preview.sourceBranch)} has no commit that ${shortBranch(preview.targetBranch)} does not have: nothing to merge.`,
        ),
      );
      return;
    }
    const picked = await vscode.window.showQuickPick(
      strategyChoices(preview).map((c) => ({ label: c.label, detail: c.detail, strategy: c.strategy })),
      {
        title: `Merge Back ${shortBranch(preview.sourceBranch)}: How`,
        placeHolder: 'Merge, squash or rebase',
      },
    );
    if (!picked) return;
    const question = mergeQuestion(preview, picked.strategy);
    const confirm = await vscode.window.showWarningMessage(
      question.message,
      { modal: true, detail: question.detail },
      'Ask for Approval',
    );
    if (confirm !== 'Ask for Approval' || this.state.coordinator !== api) return;
    void vscode.window
      .showInformationMessage(
        notificationText(
          `Merge Back of ${shortBranch(preview.sourceBranch)} waits for approval: review the diff in the Approvals view. Nothing changes until it is approved.`,
        ),
        'Open Approvals',
      )
      .then((choice) => choice && vscode.commands.executeCommand(`${Views.approvals}.focus`));
    const result = await api
      .mergeBack(worktree.repoId, worktree.worktreeId, { strategy: picked.strategy }, this.operator)
      .then(
        (r) => r,
        (err: unknown) => this.refused(err, `Merge Back of ${shortBranch(preview.sourceBranch)} is refused`),
      );
    this.state.refresh();
    if (!result) return;
    switch (result.status) {
      case 'conflicts':
        return this.showConflicts(result.preview);
      case 'not_approved':
        void vscode.window.showInformationMessage(
          notificationText(`Merge Back of ${shortBranch(preview.sourceBranch)} was not approved: nothing was changed.`),
        );
        return;
      case 'merged': {
        const merge = result.merge;
        const choice = await vscode.window.showInformationMessage(
          notificationText(
            `Merged ${shortBranch(preview.sourceBranch)} into ${shortBranch(merge.targetBranch)} (${merge.strategy}): ` +
              `${merge.previousHead.slice(0, 12)} → ${merge.resultHead.slice(0, 12)}. Undo Merge puts the previous state back.`,
          ),
          'Undo Merge',
        );
        if (choice) await this.undoMerge(merge.id);
      }
    }
  }

  /** Undo Merge: one of the merges that can still be undone (newest first), confirmed, back to the pre-merge state. */
  async undoMerge(mergeId?: unknown): Promise<void> {
    const api = await requireRunning(this.state.coordinator);
    if (!api) return;
    const merges = await api.worktreeMerges().catch(() => []);
    let merge = typeof mergeId === 'string' ? merges.find((m) => m.id === mergeId) : undefined;
    if (!merge) {
      if (!merges.length) {
        void vscode.window.showInformationMessage('No merge can be undone.');
        return;
      }
      const picked = await vscode.window.showQuickPick(
        merges.map((m) => ({ ...mergeItem(m, formatTime), merge: m })),
        {
          title: 'Undo Merge',
          placeHolder: 'The merge to undo (newest first)',
          matchOnDescription: true,
        },
      );
      merge = picked?.merge;
    }
    if (!merge) return;
    const confirm = await vscode.window.showWarningMessage(
      `Undo the ${merge.strategy} of sw4rm/${merge.worktreeId} into ${shortBranch(merge.targetBranch)}?`,
      {
        modal: true,
        detail:
          `The main checkout goes back to ${merge.previousHead.slice(0, 12)} (HEAD, index and files) from the snapshot taken before the merge. ` +
          'If it moved on since, undo is refused and says so.',
      },
      'Undo Merge',
    );
    if (confirm !== 'Undo Merge' || this.state.coordinator !== api) return;
    const result = await api.undoMerge(merge.id, this.operator).then(
      (r) => r,
      (err: unknown) => this.refused(err, 'Undo Merge is refused'),
    );
    this.state.refresh();
    if (result) {
      void vscode.window.showInformationMessage(
        notificationText(
          `Undone: ${shortBranch(merge.targetBranch)} is back on ${result.head.slice(0, 12)}` +
            `${result.sourceRestored ? '' : `; sw4rm/${merge.worktreeId} was not put back (its worktree changed since)`}.`,
        ),
      );
    }
  }

  /** Restore Snapshot: one of the worktree's snapshots, confirmed; the current state is snapshotted first. */
  async restoreSnapshot(node?: unknown): Promise<void> {
    const api = await requireRunning(this.state.coordinator);
    if (!api) return;
    const worktree = await this.target(node, 'Restore Snapshot');
    if (!worktree) return;
    const snapshots = await api.worktreeSnapshots(worktree.repoId, worktree.worktreeId).then(
      (s) => s,
      (err: unknown) => this.refused(err),
    );
    if (!snapshots) return;
    if (!snapshots.length) {
      void vscode.window.showInformationMessage(notificationText(`Worktree ${worktree.worktreeId} has no snapshot.`));
      return;
    }
    const picked = await vscode.window.showQuickPick(
      snapshots.map((s) => ({ ...snapshotItem(s, formatTime), snapshot: s })),
      {
        title: `Restore Snapshot of ${worktree.worktreeId}`,
        placeHolder: 'The snapshot to restore (newest first)',
      },
    );
    if (!picked) return;
    const confirm = await vscode.window.showWarningMessage(
      `Restore worktree ${worktree.worktreeId} to the snapshot of ${formatTime(picked.snapshot.takenAt)}?`,
      {
        modal: true,
        detail:
          'Every file of the snapshot is written back; its branch and HEAD stay, and the restored state shows as uncommitted changes. ' +
          'The current state is snapshotted first, so this can be undone by restoring that one.',
      },
      'Restore',
    );
    if (confirm !== 'Restore' || this.state.coordinator !== api) return;
    const result = await api
      .restoreWorktreeSnapshot(worktree.repoId, worktree.worktreeId, picked.snapshot.ref, this.operator)
      .then(
        (r) => r,
        (err: unknown) => this.refused(err, 'Restore Snapshot is refused'),
      );
    this.state.refresh();
    if (result) {
      void vscode.window.showInformationMessage(
        notificationText(
          `Restored worktree ${worktree.worktreeId}. The state before is snapshot ${result.before.ref}.`,
        ),
      );
    }
  }

  /**
   * Remove Worktree: never one an agent is bound to (says who); asked first (modal); a dirty or unmerged one is asked
   * again explicitly (a snapshot is written and the branch kept).
   */
  async remove(node?: unknown): Promise<void> {
    const api = await requireRunning(this.state.coordinator);
    if (!api) return;
    const worktree = await this.target(node, 'Remove Worktree');
    if (!worktree) return;
    if (worktree.boundAgents.length) {
      void vscode.window.showWarningMessage(notificationText(removalRefusalText('bound', worktree, '')));
      return;
    }
    const question = removeQuestion(worktree);
    if (
      (await vscode.window.showWarningMessage(question.message, { modal: true, detail: question.detail }, 'Remove')) !==
      'Remove'
    )
      return;
    let removal;
    try {
      removal = await api.removeWorktree(worktree.repoId, worktree.worktreeId, { confirmed: false }, this.operator);
    } catch (err) {
      const reason = err instanceof CoordinatorApiError && err.code === 'refused' ? err.sw4rmCode : undefined;
      if (reason !== 'dirty' && reason !== 'unmerged') {
        this.state.refresh();
        void vscode.window.showWarningMessage(notificationText(removalRefusalText(reason, worktree, errorText(err))));
        return;
      }
      const again = forcedRemoveQuestion(reason, worktree);
      if (
        (await vscode.window.showWarningMessage(
          again.message,
          { modal: true, detail: again.detail },
          'Remove Anyway',
        )) !== 'Remove Anyway'
      )
        return;
      removal = await api.removeWorktree(worktree.repoId, worktree.worktreeId, { confirmed: true }, this.operator).then(
        (r) => r,
        (e: unknown) => {
          const why = e instanceof CoordinatorApiError && e.code === 'refused' ? e.sw4rmCode : undefined;
          void vscode.window.showWarningMessage(notificationText(removalRefusalText(why, worktree, errorText(e))));
          return undefined;
        },
      );
    }
    this.state.refresh();
    if (!removal) return;
    void vscode.window.showInformationMessage(
      notificationText(
        `Removed worktree ${worktree.worktreeId}` +
          `${removal.snapshot ? `; its files are in snapshot ${removal.snapshot.ref}` : ''}` +
          `${removal.branchKept ? `; branch ${worktree.branch} is kept` : ''}.`,
      ),
    );
  }

  /** Prune Stale Worktrees: lists what git would forget, asks, then prunes exactly that. */
  async prune(): Promise<void> {
    const api = await requireRunning(this.state.coordinator);
    if (!api) return;
    const plan = await api.pruneWorktreesPlan().then(
      (p) => p,
      (err: unknown) => this.refused(err),
    );
    if (!plan) return;
    if (!plan.length) {
      void vscode.window.showInformationMessage('No stale worktrees: git would prune nothing.');
      return;
    }
    const question = prunePlanQuestion(plan);
    if (
      (await vscode.window.showWarningMessage(question.message, { modal: true, detail: question.detail }, 'Prune')) !==
      'Prune'
    )
      return;
    const pruned = await api.pruneWorktrees(plan, this.operator).then(
      (p) => p,
      (err: unknown) => this.refused(err),
    );
    this.state.refresh();
    if (!pruned) return;
    const skipped = plan.length - pruned.length;
    void vscode.window.showInformationMessage(
      notificationText(
        `Pruned ${pruned.length} stale worktree${pruned.length === 1 ? '' : 's'}` +
          `${pruned.length ? `: ${pruned.map(pruneCandidateText).join(', ')}` : ''}${skipped ? ` (${skipped} no longer stale, left alone)` : ''}.`,
      ),
    );
  }

  /** The bind recovery timeout passed with the binding still failing (RFC §16.3): a warning with the reason. */
  private async bindFailedNotice(api: CoordinatorApi, status: BindingStatus): Promise<void> {
    this.state.refresh();
    const choice = await vscode.window.showWarningMessage(
      notificationText(bindFailedNoticeText(status)),
      'Bind Again',
      'Show Log',
    );
    if (choice === 'Show Log') this.output.show(true);
    if (choice !== 'Bind Again' || this.state.coordinator !== api) return;
    const again = await api
      .bindAgentToWorktree(
        { agentId: status.agentId, repoId: status.repoId, worktreeId: status.homeWorktreeId },
        this.operator,
      )
      .then(
        (s) => s,
        (err: unknown) => this.refused(err),
      );
    this.state.refresh();
    if (again) {
      const result = bindResultText(again);
      void (result.ok
        ? vscode.window.showInformationMessage(notificationText(result.text))
        : vscode.window.showWarningMessage(notificationText(result.text)));
    }
  }

  private async showConflicts(preview: MergePreview): Promise<void> {
    const key = `prediction-${++this.predictionCount}`;
    this.predictions.set(key, conflictPredictionText(preview));
    for (const old of [...this.predictions.keys()].slice(0, Math.max(0, this.predictions.size - KEPT_PREDICTIONS)))
      this.predictions.delete(old);
    void vscode.window.showWarningMessage(notificationText(conflictNotice(preview)));
    await this.documents.open(PREDICTION_DOCUMENT, key, `Merge Back ${preview.worktreeId} conflicts.txt`);
  }

  /** The worktree of the row the command was run on (a Worktrees row or an agent's worktree row), else picked. */
  private async target(node: unknown, title: string): Promise<WorktreeInfo | undefined> {
    const api = await requireRunning(this.state.coordinator);
    if (!api) return undefined;
    const data = await this.state.current();
    const onRow = asWorktreeNode(node);
    const onAgent = asAgentWorktreeNode(node);
    const binding = onAgent && data.bindings.find((b) => b.agentId === onAgent.agentId);
    const wanted =
      onRow ??
      (binding && binding.state !== 'UNBOUND' && binding.state !== 'BIND_FAILED'
        ? { repoId: binding.repoId, worktreeId: binding.worktreeId }
        : undefined);
    if (onAgent && !wanted) {
      void vscode.window.showInformationMessage(notificationText(`Agent ${onAgent.agentId} works in no worktree now.`));
      return undefined;
    }
    if (wanted) {
      const find = (list: readonly WorktreeInfo[]) =>
        list.find((w) => w.repoId === wanted.repoId && w.worktreeId === wanted.worktreeId);
      const found = find(data.worktrees) ?? find(await api.worktrees().catch(() => []));
      if (!found)
        void vscode.window.showWarningMessage(
          notificationText(`Worktree ${wanted.worktreeId} of ${wanted.repoId} is gone.`),
        );
      return found;
    }
    const worktrees = await api.worktrees().catch(() => [] as WorktreeInfo[]);
    if (!worktrees.length) {
      void vscode.window.showInformationMessage('There is no agent worktree. Bind Agent to Worktree… creates one.');
      return undefined;
    }
    const picked = await vscode.window.showQuickPick(
      worktrees.map((w) => {
        const row = worktreeRow(w, formatTime);
        return { label: w.worktreeId, description: `${w.repoId} · ${row.description}`, detail: w.path, worktree: w };
      }),
      { title, placeHolder: 'Pick a worktree', matchOnDescription: true },
    );
    return picked?.worktree;
  }

  private async pickAgent(api: CoordinatorApi): Promise<string | undefined> {
    const agents = await api.agents().catch(() => []);
    const other = {
      label: '$(edit) Another agent id…',
      description: 'an agent that has not registered (yet)',
      agentId: '',
    };
    const picked = await vscode.window.showQuickPick(
      [
        ...agents.map((a) => ({
          label: a.descriptor.agentId,
          description: `${a.descriptor.name !== a.descriptor.agentId ? `${a.descriptor.name} · ` : ''}${a.state} · ${a.presence}`,
          agentId: a.descriptor.agentId,
        })),
        other,
      ],
      { title: 'Bind Agent to Worktree: Agent', placeHolder: 'The agent to bind' },
    );
    if (!picked) return undefined;
    if (picked !== other) return picked.agentId;
    return vscode.window
      .showInputBox({
        title: 'Bind Agent to Worktree: Agent Id',
        prompt: 'The id the agent registers with',
        ignoreFocusOut: true,
        validateInput: (value) => (value.trim() ? undefined : 'An agent id is needed'),
      })
      .then((v) => v?.trim());
  }

  /** The repository (asked when there are several), then "new from a branch…" (branch, id) or an existing worktree. */
  private async pickBindTarget(
    api: CoordinatorApi,
    agentId: string,
  ): Promise<{ repoId: string; worktreeId: string; base?: string } | undefined> {
    const data = await this.state.current();
    const repositories = data.repositories.length
      ? data.repositories
      : await api.worktreeRepositories().catch(() => []);
    if (!repositories.length) {
      void vscode.window.showWarningMessage(
        'No git repository is open in this window: an agent worktree is made in one. Open a folder that is a git repository.',
      );
      return undefined;
    }
    const repository =
      repositories.length === 1
        ? repositories[0]
        : (
            await vscode.window.showQuickPick(
              repositories.map((r) => ({ label: r.repoId, description: r.path, repository: r })),
              { title: `Bind ${agentId}: Repository`, placeHolder: 'The repository of the worktree' },
            )
          )?.repository;
    if (!repository) return undefined;
    const worktrees = (await api.worktrees().catch(() => [] as WorktreeInfo[])).filter(
      (w) => w.repoId === repository.repoId && !w.prunable,
    );
    const fresh = {
      label: '$(add) New worktree from a branch…',
      description: `in ${repository.worktreesRoot || repository.repoId}`,
      worktree: undefined,
    };
    const picked = await vscode.window.showQuickPick(
      [
        fresh,
        ...worktrees.map((w) => ({
          label: w.worktreeId,
          description: `${w.branch} · ${boundText(w)}`,
          worktree: w as WorktreeInfo | undefined,
        })),
      ],
      { title: `Bind ${agentId}: Worktree`, placeHolder: 'A new worktree, or an existing one' },
    );
    if (!picked) return undefined;
    if (picked.worktree) return { repoId: repository.repoId, worktreeId: picked.worktree.worktreeId };
    const branches = await localBranches(repository.path).catch(() => [] as string[]);
    const branch = branches.length
      ? (
          await vscode.window.showQuickPick(
            branches.map((b, i) => ({ label: b, description: i === 0 ? 'checked out' : undefined })),
            { title: `Bind ${agentId}: Base Branch`, placeHolder: 'The new worktree starts from this branch' },
          )
        )?.label
      : 'HEAD';
    if (!branch) return undefined;
    const taken = new Set(worktrees.map((w) => w.worktreeId));
    // The id a Bind without worktree_id would give this agent, so that the agent binding itself later finds this one.
    const proposed = homeWorktreeIdOf(agentId);
    const worktreeId = await vscode.window.showInputBox({
      title: `Bind ${agentId}: Worktree Id`,
      value: proposed,
      ignoreFocusOut: true,
      prompt: `The new worktree is on branch sw4rm/<id>, from ${branch}`,
      validateInput: (value) => {
        if (!isWorktreeId(value)) {
          return 'Letters, digits, ".", "_" and "-", at most 64, not starting with "." or "-", no ".."';
        }
        return taken.has(value) ? `${value} exists: pick it in the list instead` : undefined;
      },
    });
    if (!worktreeId) return undefined;
    return { repoId: repository.repoId, worktreeId, base: branch };
  }

  /** Shows why a call was refused (the API's message says what to do) and answers undefined. */
  private refused(err: unknown, what?: string): undefined {
    void vscode.window.showWarningMessage(notificationText(`${what ? `${what}: ` : ''}${errorText(err)}`));
    return undefined;
  }
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

async function openFolder(folder: string): Promise<void> {
  await vscode.commands.executeCommand('vscode.openFolder', vscode.Uri.file(folder), { forceNewWindow: true });
}

function formatTime(ms: number): string {
  return new Date(ms).toLocaleString();
}
