import type {
  BindingStatus,
  MergePreview,
  Snapshot,
  WorktreeInfo,
  WorktreeMergeInfo,
  WorktreePruneCandidate,
  WorktreeRepositoryInfo,
} from '../core/api';

/** Moved to ./notificationText (the Tasks commands use it too); kept here for the worktree commands. */
export { notificationText } from './notificationText';

/**
 * The Worktrees view's rows, the Agents view's worktree rows and the texts of the worktree commands, as plain data
 * (no `vscode`): every string here may carry text from git or an agent, so the views show them as plain text.
 */

export type FormatTime = (ms: number) => string;

/** What one row shows; turned into a TreeItem by the view. */
export interface WorktreeRow {
  /** The worktree id: what must survive a narrow side bar. */
  readonly label: string;
  /** Branch, base, ahead/behind, dirty count, who is bound: cut off first when the side bar is narrow. */
  readonly description: string;
  /** Everything, one fact a line. */
  readonly tooltip: string;
  /** `worktree` plus `+bound`, `+dirty`, `+ahead`, `+stale`, `+locked` markers (package.json menus match them). */
  readonly contextValue: string;
  readonly icon: 'stale' | 'locked' | 'bound' | 'free';
}

/** One repository with its agent worktrees, in the order the view lists them. */
export interface RepositoryGroup {
  readonly repository: WorktreeRepositoryInfo;
  readonly worktrees: readonly WorktreeInfo[];
}

/**
 * Groups worktrees under their repositories (ordered by repo_id; worktrees by id). A worktree of a repo_id that is not
 * among the repositories (the workspace changed) still gets a group, with its own path unknown.
 */
export function groupByRepository(
  repositories: readonly WorktreeRepositoryInfo[],
  worktrees: readonly WorktreeInfo[],
): RepositoryGroup[] {
  const groups = new Map<string, { repository: WorktreeRepositoryInfo; worktrees: WorktreeInfo[] }>();
  for (const repository of repositories) groups.set(repository.repoId, { repository, worktrees: [] });
  for (const worktree of worktrees) {
    let group = groups.get(worktree.repoId);
    if (!group)
      groups.set(
        worktree.repoId,
        (group = { repository: { repoId: worktree.repoId, path: '', worktreesRoot: '' }, worktrees: [] }),
      );
    group.worktrees.push(worktree);
  }
  return [...groups.values()]
    .sort((a, b) => compare(a.repository.repoId, b.repository.repoId))
    .map((g) => ({
      repository: g.repository,
      worktrees: [...g.worktrees].sort((a, b) => compare(a.worktreeId, b.worktreeId)),
    }));
}

/** A repository row: its id, with its path and how many agent worktrees (and how many stale) it has. */
export function repositoryRow(group: RepositoryGroup): { label: string; description: string; tooltip: string } {
  const stale = group.worktrees.filter((w) => w.prunable).length;
  const count = `${group.worktrees.length} worktree${group.worktrees.length === 1 ? '' : 's'}${stale ? `, ${stale} stale` : ''}`;
  const tooltip = [
    `repository: ${group.repository.repoId}`,
    ...(group.repository.path ? [`path: ${group.repository.path}`] : []),
    ...(group.repository.worktreesRoot ? [`agent worktrees in: ${group.repository.worktreesRoot}`] : []),
    count,
  ].join('\n');
  return { label: group.repository.repoId, description: count, tooltip };
}

/** `↑2 ↓1`; `up to date` when neither. */
export function aheadBehind(w: Pick<WorktreeInfo, 'ahead' | 'behind'>): string {
  return w.ahead === 0 && w.behind === 0 ? 'up to date' : `↑${w.ahead} ↓${w.behind}`;
}

/** The base as a person reads it: `main @ 1a2b3c4d5e6f`, `1a2b3c4d5e6f`, or `unknown`. */
export function baseText(w: Pick<WorktreeInfo, 'baseRef' | 'baseCommit'>): string {
  const ref = w.baseRef?.replace(/^refs\/heads\//, '');
  const commit = w.baseCommit?.slice(0, 12);
  if (ref && commit) return `${ref} @ ${commit}`;
  return ref ?? commit ?? 'unknown';
}

export function dirtyText(dirty: number | undefined): string {
  if (dirty === undefined) return 'folder missing';
  return dirty === 0 ? 'clean' : `${dirty} changed file${dirty === 1 ? '' : 's'}`;
}

/** Who works in it: `coder-1 (home, BOUND_HOME)`, `helper (switched in, BOUND_NON_HOME)`, … or `not bound`. */
export function boundText(w: Pick<WorktreeInfo, 'boundAgents'>): string {
  if (!w.boundAgents.length) return 'not bound';
  return w.boundAgents.map((a) => `${a.agentId} (${a.home ? 'home' : 'switched in'}, ${a.state})`).join(', ');
}

export function snapshotText(snapshot: Snapshot | undefined, formatTime: FormatTime): string {
  return snapshot ? `${formatTime(snapshot.takenAt)} (${snapshot.ref})` : 'none';
}

/**
 * A worktree's row: `coder-1` as the label; `sw4rm/coder-1 ← main · ↑2 ↓0 · 3 changed files · coder-1 (home)` as the
 * description (a stale one starts with `stale:`), and every fact in the tooltip.
 */
export function worktreeRow(w: WorktreeInfo, formatTime: FormatTime): WorktreeRow {
  const binding = w.boundAgents.length
    ? w.boundAgents.map((a) => `${a.agentId} (${a.home ? 'home' : 'switched in'})`).join(', ')
    : 'not bound';
  const base = w.baseRef?.replace(/^refs\/heads\//, '') ?? w.baseCommit?.slice(0, 12);
  const description = [
    ...(w.prunable ? ['stale: folder gone'] : []),
    ...(w.locked ? ['locked'] : []),
    base ? `${w.branch} ← ${base}` : w.branch,
    aheadBehind(w),
    ...(w.dirty === undefined ? [] : [dirtyText(w.dirty)]),
    binding,
  ].join(' · ');
  const tooltip = [
    `worktree: ${w.worktreeId} (repository ${w.repoId})`,
    `path: ${w.path}`,
    `branch: ${w.branch}`,
    `base: ${baseText(w)}`,
    `ahead/behind its base: ${w.ahead} ahead, ${w.behind} behind`,
    `uncommitted: ${dirtyText(w.dirty)}`,
    `bound: ${boundText(w)}`,
    `last snapshot: ${snapshotText(w.lastSnapshot, formatTime)}`,
    ...(w.locked ? ['locked: git will not remove it until it is unlocked (git worktree unlock)'] : []),
    ...(w.prunable
      ? ['stale: its folder is gone; Prune Stale Worktrees forgets it (no file or branch is deleted)']
      : []),
  ].join('\n');
  const markers = [
    ...(w.boundAgents.length ? ['bound'] : []),
    ...(w.dirty ? ['dirty'] : []),
    ...(w.ahead > 0 ? ['ahead'] : []),
    ...(w.prunable ? ['stale'] : []),
    ...(w.locked ? ['locked'] : []),
  ];
  const icon = w.prunable ? 'stale' : w.locked ? 'locked' : w.boundAgents.length ? 'bound' : 'free';
  return { label: w.worktreeId, description, tooltip, contextValue: ['worktree', ...markers].join('+'), icon };
}

/** The worktree row under an agent in the Agents view. */
export interface AgentWorktreeRow {
  readonly label: string;
  readonly description: string;
  readonly tooltip: string;
  /** `agentWorktree+<state>` (`+nonHome` when switched into another worktree). */
  readonly contextValue: string;
  /** The worktree it names (absent for a failed bind). */
  readonly worktreeId: string | undefined;
}

/**
 * What the Agents view shows under a bound agent: its worktree id, branch and binding state, and in the tooltip the
 * path, base, ahead/behind and dirty count (from `info`, the worktree as git last listed it); undefined while UNBOUND.
 */
export function agentWorktreeRow(
  binding: BindingStatus,
  info: WorktreeInfo | undefined,
  formatTime: FormatTime,
): AgentWorktreeRow | undefined {
  switch (binding.state) {
    case 'UNBOUND':
      return undefined;
    case 'BIND_FAILED': {
      const failure = binding.failure;
      const retry = failure?.nextRetryAt ? `next retry ${formatTime(failure.nextRetryAt)}` : 'no retry left';
      return {
        label: `Worktree ${binding.homeWorktreeId || '(none)'}`,
        description: `BIND_FAILED · ${failure?.reason ?? 'unknown reason'}`,
        tooltip: [
          `worktree: ${binding.homeWorktreeId} (repository ${binding.repoId})`,
          `state: BIND_FAILED`,
          ...(failure
            ? [
                `reason: ${failure.reason}: ${failure.detail}`,
                `since: ${formatTime(failure.since)}`,
                `retries: ${failure.retries} (${retry})`,
              ]
            : []),
          'Bind again once the cause is fixed (SW4RM: Bind Agent to Worktree…).',
        ].join('\n'),
        contextValue: 'agentWorktree+BIND_FAILED',
        worktreeId: undefined,
      };
    }
    default: {
      const nonHome = binding.state === 'BOUND_NON_HOME';
      const branch = info?.branch ?? `sw4rm/${binding.worktreeId}`;
      const description = [branch, binding.state, ...(info && info.dirty ? [dirtyText(info.dirty)] : [])].join(' · ');
      const tooltip = [
        `worktree: ${binding.worktreeId} (repository ${binding.repoId})`,
        `state: ${binding.state}`,
        `path: ${binding.worktreePath}`,
        `branch: ${branch}`,
        ...(info
          ? [
              `base: ${baseText(info)}`,
              `ahead/behind its base: ${info.ahead} ahead, ${info.behind} behind`,
              `uncommitted: ${dirtyText(info.dirty)}`,
            ]
          : []),
        ...(nonHome
          ? [
              `home: ${binding.homeWorktreeId}`,
              ...(binding.nonHomeUntil ? [`returns home: ${formatTime(binding.nonHomeUntil)}`] : []),
            ]
          : []),
        ...(binding.state === 'SWITCH_PENDING' && binding.switch
          ? [`switch to ${binding.switch.targetWorktreeId} waits for approval ${binding.switch.invocationId}`]
          : []),
      ].join('\n');
      return {
        label: `Worktree ${binding.worktreeId}`,
        description,
        tooltip,
        contextValue: `agentWorktree+${binding.state}${nonHome ? '+nonHome' : ''}`,
        worktreeId: binding.worktreeId,
      };
    }
  }
}

/** The worktree a binding works in now, among those git listed. */
export function worktreeOf(binding: BindingStatus, worktrees: readonly WorktreeInfo[]): WorktreeInfo | undefined {
  return worktrees.find((w) => w.repoId === binding.repoId && w.worktreeId === binding.worktreeId);
}

/** What a bind answered, for a notification. */
export function bindResultText(status: BindingStatus): { ok: boolean; text: string } {
  if (status.state === 'BIND_FAILED') {
    const failure = status.failure;
    return {
      ok: false,
      text:
        `Agent ${status.agentId} could not be bound to worktree ${status.homeWorktreeId}: ${failure ? `${failure.reason}: ${failure.detail}` : 'unknown reason'}. ` +
        'The coordinator retries after 1, 2 and 4 s.',
    };
  }
  return {
    ok: true,
    text: `Agent ${status.agentId} is bound to worktree ${status.worktreeId} (${status.state}) at ${status.worktreePath}.`,
  };
}

/** The 60 s notice of a binding still failing (RFC §16.3 bind recovery timeout), for a warning notification. */
export function bindFailedNoticeText(status: BindingStatus): string {
  const failure = status.failure;
  return (
    `Agent ${status.agentId} has not been bound to worktree ${status.homeWorktreeId} of ${status.repoId} for 60 s: ` +
    `${failure ? `${failure.reason}: ${failure.detail}` : 'unknown reason'}. ` +
    `${failure && failure.nextRetryAt === null ? 'No automatic retry is left. ' : ''}Fix the cause and bind again, or look at the log.`
  );
}

/** The removal question (first, modal). */
export function removeQuestion(w: WorktreeInfo): { message: string; detail: string } {
  return {
    message: `Remove worktree ${w.worktreeId}?`,
    detail:
      `git removes the folder ${w.path}. ${w.dirty || w.ahead ? '' : 'It has no uncommitted files and nothing its base does not have; '}` +
      `its branch ${w.branch} is deleted only if its work is already merged.`,
  };
}

/** Why a removal was refused, by the refusal's reason (CoordinatorApiError `refused`, `sw4rmCode`). */
export function removalRefusalText(
  reason: string | undefined,
  w: Pick<WorktreeInfo, 'worktreeId' | 'boundAgents'>,
  message: string,
): string {
  switch (reason) {
    // The coordinator knows who is bound even when the rows were read before that agent bound: then its message says.
    case 'bound':
      return w.boundAgents.length === 0
        ? `Worktree ${w.worktreeId} is not removed: ${message}`
        : `Worktree ${w.worktreeId} is not removed: ${boundText(w)} ${w.boundAgents.length === 1 ? 'is' : 'are'} bound to it. Unbind first.`;
    case 'locked':
      return `Worktree ${w.worktreeId} is locked and is not removed: unlock it with git worktree unlock first.`;
    default:
      return `Worktree ${w.worktreeId} is not removed: ${message}`;
  }
}

/** The second, explicit question for a dirty or unmerged worktree. */
export function forcedRemoveQuestion(reason: string | undefined, w: WorktreeInfo): { message: string; detail: string } {
  const what =
    reason === 'dirty'
      ? `has uncommitted files${w.dirty ? ` (${w.dirty})` : ''}`
      : `has commits its base does not have${w.ahead ? ` (${w.ahead})` : ''}`;
  return {
    message: `Worktree ${w.worktreeId} ${what}. Remove it anyway?`,
    detail:
      `A snapshot of all its files (untracked ones too, not ignored ones) is written first under refs/sw4rm/snapshots/${w.worktreeId}/, ` +
      `and its branch ${w.branch} is kept: Restore Snapshot brings the files back. Ignored files (dependencies, build output, a copied .env) are deleted.`,
  };
}

/** What Prune would forget, one line each. */
export function pruneCandidateText(c: WorktreePruneCandidate): string {
  return `${c.repoId}: ${c.name} (${c.reason})`;
}

export function prunePlanQuestion(candidates: readonly WorktreePruneCandidate[]): { message: string; detail: string } {
  return {
    message: `Prune ${candidates.length} stale worktree${candidates.length === 1 ? '' : 's'}?`,
    detail: `git forgets exactly these (their folders are gone); no file and no branch is deleted:\n${candidates.map(pruneCandidateText).join('\n')}`,
  };
}

/** `a.txt, b.txt and 3 more`. */
export function fileList(paths: readonly string[], max = 3): string {
  if (paths.length <= max) return paths.join(', ');
  return `${paths.slice(0, max).join(', ')} and ${paths.length - max} more`;
}

/** The notification of a predicted conflict: the files named, nothing changed. */
export function conflictNotice(preview: MergePreview): string {
  const paths = preview.conflicts.map((c) => c.path);
  return (
    `Merge Back of ${short(preview.sourceBranch)} into ${short(preview.targetBranch)} would conflict in ${paths.length} file${paths.length === 1 ? '' : 's'}: ` +
    `${fileList(paths)}. Nothing was changed.`
  );
}

const STAGE_NAMES: Record<1 | 2 | 3, string> = { 1: 'base', 2: 'target', 3: 'agent' };

/** The conflict prediction as a read-only document: the conflicted files with their stages, then git's messages. */
export function conflictPredictionText(preview: MergePreview): string {
  const lines = [
    `Merge Back: ${short(preview.sourceBranch)} (${preview.sourceCommit.slice(0, 12)}) into ${short(preview.targetBranch)} (${preview.targetCommit.slice(0, 12)})`,
    `in ${preview.targetPath}`,
    '',
    `Conflicts predicted by git merge-tree --write-tree (nothing was changed, nothing was asked): ${preview.conflicts.length} file${preview.conflicts.length === 1 ? '' : 's'}`,
  ];
  for (const conflict of preview.conflicts) {
    lines.push(`  ${conflict.path}`);
    for (const stage of conflict.stages)
      lines.push(`      ${STAGE_NAMES[stage.stage]}: ${stage.oid.slice(0, 12)} (mode ${stage.mode})`);
  }
  lines.push('', `git's messages (${preview.messages.length}):`);
  for (const message of preview.messages) lines.push(`  ${message.text.replace(/\n/g, '\n    ')}`);
  lines.push('', `The agent's commits (${preview.commits.length}):`);
  for (const commit of preview.commits) lines.push(`  ${commit.commit.slice(0, 12)} ${commit.subject}`);
  lines.push(
    '',
    "To merge, resolve the conflicts first: in the agent's worktree (merge or rebase its branch onto the target there), " +
      'or in the main checkout; then run Merge Back again.',
    '',
  );
  return lines.join('\n');
}

/** The strategies offered, with what each does to this preview's commits. */
export function strategyChoices(
  preview: MergePreview,
): Array<{ strategy: 'merge' | 'squash' | 'rebase'; label: string; detail: string }> {
  const n = preview.commits.length;
  const commits = `${n} commit${n === 1 ? '' : 's'}`;
  return [
    {
      strategy: 'merge',
      label: 'Merge',
      detail: `a merge commit on ${short(preview.targetBranch)} that keeps the agent's ${commits}`,
    },
    {
      strategy: 'squash',
      label: 'Squash',
      detail: `one commit on ${short(preview.targetBranch)}, its message built from the ${commits}' subjects`,
    },
    {
      strategy: 'rebase',
      label: 'Rebase',
      detail: preview.sourceDirty
        ? `refused now: the agent's worktree has ${preview.sourceDirty} uncommitted file${preview.sourceDirty === 1 ? '' : 's'}`
        : `the ${commits} replayed onto ${short(preview.targetBranch)}, then a fast-forward`,
    },
  ];
}

/** The confirmation before Merge Back asks for approval. */
export function mergeQuestion(preview: MergePreview, strategy: string): { message: string; detail: string } {
  return {
    message: `${capitalise(strategy)} ${short(preview.sourceBranch)} into ${short(preview.targetBranch)}?`,
    detail: [
      `${preview.commits.length} commit${preview.commits.length === 1 ? '' : 's'}, ${preview.files.length} file${preview.files.length === 1 ? '' : 's'} changed ` +
        `(${fileList(preview.files.map((f) => f.path))}). No conflict is predicted.`,
      ...(preview.sourceDirty
        ? [
            `The agent's worktree has ${preview.sourceDirty} uncommitted file${preview.sourceDirty === 1 ? '' : 's'}: they are not part of the merge.`,
          ]
        : []),
      'An approval with the diff opens in the Approvals view; the merge happens only when it is approved, after a snapshot of your checkout (Undo Merge puts it back).',
    ].join('\n'),
  };
}

/** A merge that can be undone, as a quick pick item. */
export function mergeItem(
  merge: WorktreeMergeInfo,
  formatTime: FormatTime,
): { label: string; description: string; detail: string } {
  return {
    label: `${merge.strategy} sw4rm/${merge.worktreeId} → ${short(merge.targetBranch)}`,
    description: `${merge.repoId} · ${formatTime(merge.mergedAt)}`,
    detail: `${merge.previousHead.slice(0, 12)} → ${merge.resultHead.slice(0, 12)} by ${merge.by}`,
  };
}

/** A snapshot as a quick pick item. */
export function snapshotItem(
  snapshot: Snapshot,
  formatTime: FormatTime,
): { label: string; description: string; detail: string } {
  return { label: formatTime(snapshot.takenAt), description: snapshot.commit.slice(0, 12), detail: snapshot.ref };
}

/** A full commit id (SHA-1 or SHA-256), the only revision the editor's own git reads take: never an option, never a range. */
export function isCommitId(value: unknown): value is string {
  return typeof value === 'string' && /^[0-9a-f]{40}(?:[0-9a-f]{24})?$/.test(value);
}

/** One file changed in a worktree against its base. */
export interface ChangedFile {
  /** A (added), M (modified), D (deleted), T (type changed), R/C (renamed/copied: `from` is the old path), U (untracked). */
  readonly status: string;
  readonly path: string;
  readonly from?: string;
}

/**
 * Parses `git diff --name-status -z <base>` (status NUL path NUL, or for renames and copies status NUL old NUL new NUL)
 * and appends `git ls-files --others --exclude-standard -z` (untracked files) as status U.
 */
export function parseChangedFiles(nameStatus: string, untracked = ''): ChangedFile[] {
  const files: ChangedFile[] = [];
  const fields = nameStatus.split('\0');
  for (let i = 0; i < fields.length;) {
    const status = fields[i];
    if (!status) {
      i++;
      continue;
    }
    const letter = status[0];
    if (letter === 'R' || letter === 'C') {
      if (fields[i + 2] === undefined) break;
      files.push({ status: letter, from: fields[i + 1], path: fields[i + 2] });
      i += 3;
    } else {
      if (fields[i + 1] === undefined) break;
      files.push({ status: letter, path: fields[i + 1] });
      i += 2;
    }
  }
  for (const file of untracked.split('\0')) if (file) files.push({ status: 'U', path: file });
  return files;
}

/** A branch as a person reads it: `main` for `refs/heads/main`. */
export function shortBranch(branch: string): string {
  return short(branch);
}

function short(branch: string): string {
  return branch.replace(/^refs\/heads\//, '');
}

function capitalise(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
