import * as fs from 'node:fs';
import type { Clock } from '../clock';
import type { Git } from './git';
import { dirtyCount, parseStatusV2, parseWorktreeList } from './porcelain';
import type { Repository } from './repositories';
import { checkWorktreeId, MERGE_TARGET_SNAPSHOT_KEY, type Snapshot, type Snapshots } from './snapshots';
import { BRANCH_PREFIX } from './worktrees';
import { SwarmError, type ErrorKind, type Sw4rmCode } from '../kernel/errors';

/**
 * Merge-back (issue 15, part 8): an agent's branch `sw4rm/<id>` merged into a branch checked out in the main checkout.
 *
 * Nothing is touched before the caller approves a preview that holds the conflict prediction (`git merge-tree
 * --write-tree`, which writes objects only), the agent's commits and the diff. After approval the target is
 * snapshotted (`Snapshots`, key `@merge-target`; the snapshot's parent is the target's previous HEAD), the result
 * commit is made without a working tree (`commit-tree` on the predicted tree) and the main checkout is moved onto
 * it with `git merge --ff-only` (HEAD, index and files in one two-way checkout). A rebase rewrites the agent's
 * branch in its own worktree first, then fast-forwards the target. Undo puts back the previous HEAD, index and
 * files (and, after a rebase, the agent's previous branch tip) in one call.
 */

export type MergeStrategy = 'merge' | 'squash' | 'rebase';

/**
 * The key merge-back snapshots of the main checkout are written under: refs/sw4rm/snapshots/@merge-target/<time>.
 * (It was `_merge-target`, which is also a valid worktree id: an agent's worktree of that name shared its snapshots.)
 */
export const MERGE_SNAPSHOT_KEY = MERGE_TARGET_SNAPSHOT_KEY;

export type MergeRefusal =
  | 'target_dirty'
  | 'checked_out_elsewhere'
  | 'target_not_checked_out'
  | 'not_found'
  | 'source_dirty'
  | 'nothing_to_merge'
  | 'conflicts'
  | 'not_approved'
  | 'changed_since_preview'
  | 'rebase_failed'
  | 'moved_on'
  | 'bad_target';

/** A merge-back (or its undo) refused, with a reason a caller can act on; nothing was changed. */
export class MergeRefusedError extends SwarmError {
  constructor(
    readonly reason: MergeRefusal,
    message: string,
  ) {
    super(message);
    this.name = 'MergeRefusedError';
  }

  override get errorKind(): ErrorKind {
    return this.reason === 'not_found' ? 'not_found' : 'precondition';
  }

  override get errorCode(): Sw4rmCode {
    return this.errorKind === 'not_found'
      ? 'NOT_FOUND'
      : this.errorKind === 'invalid'
        ? 'VALIDATION_ERROR'
        : 'FAILED_PRECONDITION';
  }
}

/** One conflicted path of a predicted merge: the stages git could not combine (1 base, 2 target, 3 agent). */
export interface PredictedConflict {
  readonly path: string;
  readonly stages: readonly { readonly stage: 1 | 2 | 3; readonly mode: string; readonly oid: string }[];
}

/** One of git's messages about the predicted merge (e.g. type `CONFLICT (contents)`, the paths it concerns). */
export interface MergeMessage {
  readonly paths: readonly string[];
  readonly type: string;
  readonly text: string;
}

export interface MergeTreeResult {
  /** The merged tree (with conflict markers in conflicted files). */
  readonly tree: string;
  readonly conflicts: readonly PredictedConflict[];
  readonly messages: readonly MergeMessage[];
}

/**
 * Parses `git merge-tree --write-tree -z` (git ≥ 2.38): the tree, NUL; conflicted entries `<mode> <oid> <stage>TAB
 * <path>` each ended by NUL; then, after an empty field, messages as `<count> NUL <path>… NUL <type> NUL <text> NUL`.
 */
export function parseMergeTree(output: string): MergeTreeResult {
  const fields = output.split('\0');
  const tree = fields[0]?.trim() ?? '';
  if (!/^[0-9a-f]{40,64}$/.test(tree)) throw new Error(`merge-tree: '${tree.slice(0, 80)}' is not a tree id`);
  const byPath = new Map<string, { stage: 1 | 2 | 3; mode: string; oid: string }[]>();
  let i = 1;
  for (; i < fields.length && fields[i] !== ''; i++) {
    const match = /^([0-7]+) ([0-9a-f]+) ([123])\t([\s\S]*)$/.exec(fields[i]);
    if (!match) throw new Error(`merge-tree: unexpected conflict entry '${fields[i].slice(0, 80)}'`);
    const [, mode, oid, stage, file] = match;
    const stages = byPath.get(file) ?? [];
    stages.push({ stage: Number(stage) as 1 | 2 | 3, mode, oid });
    byPath.set(file, stages);
  }
  i++; // the empty field ending the conflicted entries
  const messages: MergeMessage[] = [];
  while (i < fields.length && fields[i] !== '') {
    const count = Number(fields[i]);
    if (!Number.isInteger(count) || count < 0 || i + count + 2 >= fields.length)
      throw new Error(`merge-tree: malformed message at field ${i}`);
    const paths = fields.slice(i + 1, i + 1 + count);
    const type = fields[i + 1 + count];
    const text = fields[i + 2 + count].replace(/\n$/, '');
    messages.push({ paths, type, text });
    i += count + 3;
  }
  return { tree, conflicts: [...byPath].map(([file, stages]) => ({ path: file, stages })), messages };
}

export interface MergeCommitSummary {
  readonly commit: string;
  readonly subject: string;
}

/** What the reviewer approves: everything known before anything is touched. Plain data (JSON-serialisable). */
export interface MergePreview {
  readonly worktreeId: string;
  readonly strategy: MergeStrategy;
  readonly sourceBranch: string;
  readonly sourceCommit: string;
  /** `refs/heads/<target>`. */
  readonly targetBranch: string;
  readonly targetCommit: string;
  /** The main checkout, where the target branch is checked out and the merge happens. */
  readonly targetPath: string;
  /** The agent's commits the target does not have, oldest first. */
  readonly commits: readonly MergeCommitSummary[];
  /** Uncommitted files in the agent's worktree: they are not part of the merge (a rebase refuses them). */
  readonly sourceDirty: number;
  readonly conflicts: readonly PredictedConflict[];
  readonly messages: readonly MergeMessage[];
  /** The files the merge changes in the target (`git diff --name-status` against the predicted tree). */
  readonly files: readonly { readonly status: string; readonly path: string }[];
  /** The unified diff the merge applies to the target, cut at `maxDiffBytes`. */
  readonly diff: string;
  readonly diffTruncated: boolean;
  /** The commit message a squash or merge would use (undefined for a rebase, which keeps the agent's commits). */
  readonly message: string | undefined;
}

/** What was done, enough to undo it (the caller keeps it; it is plain data). */
export interface MergeRecord {
  readonly worktreeId: string;
  readonly strategy: MergeStrategy;
  readonly targetBranch: string;
  readonly targetPath: string;
  readonly previousHead: string;
  readonly resultHead: string;
  /** The snapshot of the main checkout taken just before (its parent is `previousHead`). */
  readonly snapshot: Snapshot;
  readonly sourceBranch: string;
  /** The agent's branch before and after (they differ only after a rebase). */
  readonly sourcePreviousTip: string;
  readonly sourceResultTip: string;
  readonly mergedAt: number;
}

export interface MergeOptions {
  readonly strategy: MergeStrategy;
  /** The target branch (`main` or `refs/heads/main`); default the branch the main checkout has checked out. */
  readonly target?: string;
  /** Replaces the generated commit message of a merge or squash. */
  readonly message?: string;
  /** Cut the preview's diff at this many bytes (default 1 MiB). */
  readonly maxDiffBytes?: number;
}

export type MergeOutcome =
  | { readonly status: 'merged'; readonly preview: MergePreview; readonly record: MergeRecord }
  | { readonly status: 'not_approved'; readonly preview: MergePreview }
  | { readonly status: 'conflicts'; readonly preview: MergePreview };

export interface UndoResult {
  /** The HEAD the target is back on. */
  readonly head: string;
  /** A snapshot of the state undo replaced, written when undo was forced. */
  readonly before: Snapshot | undefined;
  /** Whether the agent's branch went back to its pre-rebase tip (after a rebase; else true). */
  readonly sourceRestored: boolean;
}

/** The readable message of a squash: one commit's subject, or a title and the subjects oldest first. */
export function squashMessage(worktreeId: string, commits: readonly MergeCommitSummary[]): string {
  if (commits.length === 1)
    return `${commits[0].subject}\n\nSquashed from ${BRANCH_PREFIX}${worktreeId} (${commits[0].commit.slice(0, 12)}).\n`;
  const lines = commits.map((c) => `* ${c.subject} (${c.commit.slice(0, 12)})`);
  return `Squash ${BRANCH_PREFIX}${worktreeId}: ${commits.length} commits\n\n${lines.join('\n')}\n`;
}

function mergeMessage(worktreeId: string, targetBranch: string, commits: readonly MergeCommitSummary[]): string {
  const short = targetBranch.replace(/^refs\/heads\//, '');
  const lines = commits.map((c) => `* ${c.subject}`);
  return `Merge ${BRANCH_PREFIX}${worktreeId} into ${short}\n\n${lines.join('\n')}\n`;
}

/**
 * Merge-back for one repository. `repository.path` is the main checkout: the target branch must be checked out
 * there (and in no linked worktree), with no uncommitted change to a tracked file and no untracked file.
 */
export class MergeBack {
  constructor(
    private readonly git: Git,
    private readonly snapshots: Snapshots,
    readonly repository: Repository,
    private readonly clock: Clock,
  ) {}

  private get cwd(): string {
    return this.repository.path;
  }

  /** Everything the reviewer needs, computed without changing a ref, an index or a file. Refusals throw. */
  async preview(worktreeId: string, options: MergeOptions): Promise<MergePreview> {
    checkWorktreeId(worktreeId);
    if (this.repository.bare)
      throw new MergeRefusedError(
        'bad_target',
        `${this.repository.id} is a bare repository: there is no main checkout to merge in`,
      );
    const sourceBranch = `refs/heads/${BRANCH_PREFIX}${worktreeId}`;
    const entries = parseWorktreeList((await this.git.run(this.cwd, ['worktree', 'list', '--porcelain', '-z'])).stdout);
    const main = entries[0];
    const agent = entries.find((e) => e.branch === sourceBranch);
    const sourceCommit = await this.resolve(sourceBranch);
    if (!sourceCommit)
      throw new MergeRefusedError('not_found', `no branch ${BRANCH_PREFIX}${worktreeId} in ${this.repository.id}`);

    const targetBranch = await this.targetBranchOf(options.target, main?.branch);
    const elsewhere = entries.slice(1).find((e) => e.branch === targetBranch);
    if (elsewhere) {
      throw new MergeRefusedError(
        'checked_out_elsewhere',
        `${short(targetBranch)} is checked out in another worktree (${elsewhere.path}); merge there, or check it out in the main checkout first`,
      );
    }
    if (main?.branch !== targetBranch) {
      throw new MergeRefusedError(
        'target_not_checked_out',
        `the main checkout has ${main?.branch ? short(main.branch) : 'a detached HEAD'} checked out, not ${short(targetBranch)}; check out ${short(targetBranch)} there first`,
      );
    }
    const dirty = await this.dirtyFiles(this.cwd);
    if (dirty > 0) {
      throw new MergeRefusedError(
        'target_dirty',
        `the main checkout has ${dirty} uncommitted or untracked file${dirty === 1 ? '' : 's'}; commit or stash them before merging`,
      );
    }
    const targetCommit = await this.resolve(targetBranch);
    if (!targetCommit) throw new MergeRefusedError('bad_target', `${short(targetBranch)} has no commit yet`);

    const sourceDirty = agent && fs.existsSync(agent.path) ? await this.dirtyFiles(agent.path) : 0;
    if (options.strategy === 'rebase') {
      if (!agent || !fs.existsSync(agent.path))
        throw new MergeRefusedError(
          'not_found',
          `a rebase runs in the agent's worktree, and worktree ${worktreeId} is not there`,
        );
      if (sourceDirty > 0)
        throw new MergeRefusedError(
          'source_dirty',
          `worktree ${worktreeId} has ${sourceDirty} uncommitted file${sourceDirty === 1 ? '' : 's'}; a rebase needs it clean`,
        );
    }
    const log = await this.git.run(this.cwd, [
      'log',
      '--reverse',
      '-z',
      '--format=%H%x00%s',
      `${targetCommit}..${sourceCommit}`,
    ]);
    const parts = log.stdout.split('\0');
    if (parts.length % 2 === 1 && parts[parts.length - 1] === '') parts.pop();
    const commits: MergeCommitSummary[] = [];
    for (let n = 0; n + 1 < parts.length; n += 2) commits.push({ commit: parts[n].trim(), subject: parts[n + 1] });
    if (commits.length === 0)
      throw new MergeRefusedError(
        'nothing_to_merge',
        `${short(targetBranch)} already has every commit of ${BRANCH_PREFIX}${worktreeId}`,
      );

    const predicted = await this.git.run(this.cwd, ['merge-tree', '--write-tree', '-z', targetCommit, sourceCommit], {
      okExitCodes: [1],
    });
    const { tree, conflicts, messages } = parseMergeTree(predicted.stdout);
    const nameStatus = (
      await this.git.run(this.cwd, ['diff', '--no-renames', '--name-status', '-z', targetCommit, tree])
    ).stdout.split('\0');
    const files: { status: string; path: string }[] = [];
    for (let n = 0; n + 1 < nameStatus.length; n += 2) files.push({ status: nameStatus[n], path: nameStatus[n + 1] });
    const limit = options.maxDiffBytes ?? 1024 * 1024;
    const fullDiff = (
      await this.git.run(this.cwd, ['diff', '--no-color', '--no-ext-diff', '--no-renames', targetCommit, tree])
    ).stdout;
    const diffTruncated = Buffer.byteLength(fullDiff) > limit;
    const diff = diffTruncated ? Buffer.from(fullDiff).subarray(0, limit).toString('utf8') : fullDiff;
    const message =
      options.strategy === 'rebase'
        ? undefined
        : (options.message ??
          (options.strategy === 'squash'
            ? squashMessage(worktreeId, commits)
            : mergeMessage(worktreeId, targetBranch, commits)));
    return {
      worktreeId,
      strategy: options.strategy,
      sourceBranch,
      sourceCommit,
      targetBranch,
      targetCommit,
      targetPath: this.cwd,
      commits,
      sourceDirty,
      conflicts,
      messages,
      files,
      diff,
      diffTruncated,
      message,
    };
  }

  /**
   * Previews, asks `approve` (the caller routes it through HITL with the diff), and only when approved and the
   * prediction is clean: snapshots the target and merges. Predicted conflicts are returned without asking.
   */
  /**
   * `exclusive` runs what follows the approval (the check that nothing moved, the snapshot, the merge) so that no other
   * git-changing operation of the repository (another merge, an undo) runs between them; the wait for approval is
   * outside it.
   */
  async merge(
    worktreeId: string,
    options: MergeOptions,
    approve: (preview: MergePreview) => Promise<boolean>,
    exclusive: <T>(run: () => Promise<T>) => Promise<T> = (run) => run(),
  ): Promise<MergeOutcome> {
    const preview = await this.preview(worktreeId, options);
    if (preview.conflicts.length > 0) return { status: 'conflicts', preview };
    if (!(await approve(preview))) return { status: 'not_approved', preview };
    return exclusive(() => this.apply(worktreeId, options, preview));
  }

  private async apply(worktreeId: string, options: MergeOptions, preview: MergePreview): Promise<MergeOutcome> {
    // Approval may take minutes: whatever the reviewer saw must still be true.
    const again = await this.preview(worktreeId, { ...options, message: preview.message });
    if (
      again.targetCommit !== preview.targetCommit ||
      again.sourceCommit !== preview.sourceCommit ||
      again.conflicts.length > 0
    ) {
      throw new MergeRefusedError(
        'changed_since_preview',
        `${short(preview.targetBranch)} or ${BRANCH_PREFIX}${worktreeId} changed while the merge waited for approval; preview it again`,
      );
    }
    const snapshot = await this.snapshots.take(
      this.cwd,
      MERGE_SNAPSHOT_KEY,
      `before merging ${BRANCH_PREFIX}${worktreeId} into ${short(preview.targetBranch)} (${preview.strategy})`,
    );
    let sourceResultTip = preview.sourceCommit;
    let resultHead: string;
    if (preview.strategy === 'rebase') {
      const agentPath = await this.agentPath(preview.sourceBranch);
      try {
        await this.git.run(agentPath, ['rebase', '--no-autostash', '--no-update-refs', preview.targetCommit]);
      } catch (err) {
        await this.git.run(agentPath, ['rebase', '--abort'], { okExitCodes: [128] }).catch(() => undefined);
        throw new MergeRefusedError(
          'rebase_failed',
          `rebasing ${BRANCH_PREFIX}${worktreeId} onto ${short(preview.targetBranch)} failed and was undone: ${(err as Error).message}`,
        );
      }
      sourceResultTip = (await this.resolve(preview.sourceBranch))!;
      resultHead = sourceResultTip;
    } else {
      const tree = parseMergeTree(
        (await this.git.run(this.cwd, ['merge-tree', '--write-tree', '-z', preview.targetCommit, preview.sourceCommit]))
          .stdout,
      ).tree;
      const parents =
        preview.strategy === 'merge'
          ? ['-p', preview.targetCommit, '-p', preview.sourceCommit]
          : ['-p', preview.targetCommit];
      resultHead = (
        await this.git.run(this.cwd, ['commit-tree', tree, ...parents, '-m', preview.message ?? ''])
      ).stdout.trim();
    }
    try {
      await this.git.run(this.cwd, ['merge', '--ff-only', '--no-edit', '--quiet', resultHead]);
    } catch (err) {
      if (preview.strategy === 'rebase')
        await this.resetAgent(preview.sourceBranch, sourceResultTip, preview.sourceCommit);
      throw err;
    }
    return {
      status: 'merged',
      preview,
      record: {
        worktreeId,
        strategy: preview.strategy,
        targetBranch: preview.targetBranch,
        targetPath: this.cwd,
        previousHead: preview.targetCommit,
        resultHead,
        snapshot,
        sourceBranch: preview.sourceBranch,
        sourcePreviousTip: preview.sourceCommit,
        sourceResultTip,
        mergedAt: this.clock.now(),
      },
    };
  }

  /**
   * Puts the main checkout back on the pre-merge HEAD, index and files. Refused when the target moved on since
   * (another commit, another branch checked out, or uncommitted changes) unless `force`: then the current state is
   * snapshotted first (returned as `before`). After a rebase the agent's branch goes back to its previous tip when
   * its worktree is clean and the branch has not moved since; otherwise it stays (`sourceRestored: false`).
   */
  async undo(record: MergeRecord, options: { force?: boolean } = {}): Promise<UndoResult> {
    const snapshotCommit = await this.resolve(`${record.snapshot.ref}^{commit}`);
    if (snapshotCommit !== record.snapshot.commit)
      throw new MergeRefusedError('not_found', `the snapshot ${record.snapshot.ref} taken before the merge is gone`);
    const snapshotParent = await this.resolve(`${record.snapshot.commit}^1`);
    if (snapshotParent !== record.previousHead)
      throw new MergeRefusedError('not_found', `the snapshot ${record.snapshot.ref} is not of ${record.previousHead}`);

    const entries = parseWorktreeList((await this.git.run(this.cwd, ['worktree', 'list', '--porcelain', '-z'])).stdout);
    const main = entries[0];
    const current = await this.resolve(record.targetBranch);
    const dirty = await this.dirtyFiles(this.cwd);
    const movedOn =
      main?.branch !== record.targetBranch
        ? `the main checkout is no longer on ${short(record.targetBranch)}`
        : current !== record.resultHead
          ? `${short(record.targetBranch)} moved on since the merge (now ${current?.slice(0, 12) ?? 'gone'})`
          : dirty > 0
            ? `the main checkout has ${dirty} uncommitted or untracked file${dirty === 1 ? '' : 's'} since the merge`
            : undefined;
    let before: Snapshot | undefined;
    if (movedOn) {
      if (!options.force)
        throw new MergeRefusedError(
          'moved_on',
          `${movedOn}; undo would discard that, so it is not done: revert the merge commit with git instead, or commit or stash your changes and undo again`,
        );
      if (main?.branch !== record.targetBranch)
        throw new MergeRefusedError('moved_on', `${movedOn}; check ${short(record.targetBranch)} out again to undo`);
      before = await this.snapshots.take(
        this.cwd,
        MERGE_SNAPSHOT_KEY,
        `before a forced undo of the merge of ${record.sourceBranch}`,
      );
    }
    // The merge started from a clean checkout (no untracked file either), so the previous HEAD's tree is exactly the
    // pre-merge index and files; ignored files were never touched.
    await this.git.run(this.cwd, ['reset', '--hard', '--quiet', record.previousHead]);
    let sourceRestored = true;
    if (record.strategy === 'rebase' && record.sourceResultTip !== record.sourcePreviousTip) {
      sourceRestored = await this.resetAgent(record.sourceBranch, record.sourceResultTip, record.sourcePreviousTip);
    }
    return { head: record.previousHead, before, sourceRestored };
  }

  /** Moves the agent's branch from `expected` back to `to` in its worktree, only when clean and unmoved. */
  private async resetAgent(sourceBranch: string, expected: string, to: string): Promise<boolean> {
    if ((await this.resolve(sourceBranch)) !== expected) return false;
    let agentPath: string;
    try {
      agentPath = await this.agentPath(sourceBranch);
    } catch {
      await this.git.run(this.cwd, ['update-ref', sourceBranch, to, expected]);
      return true;
    }
    if ((await this.dirtyFiles(agentPath)) > 0) return false;
    await this.git.run(agentPath, ['reset', '--hard', '--quiet', to]);
    return true;
  }

  private async agentPath(sourceBranch: string): Promise<string> {
    const entries = parseWorktreeList((await this.git.run(this.cwd, ['worktree', 'list', '--porcelain', '-z'])).stdout);
    const agent = entries.find((e) => e.branch === sourceBranch);
    if (!agent || !fs.existsSync(agent.path))
      throw new MergeRefusedError('not_found', `no worktree has ${short(sourceBranch)} checked out`);
    return agent.path;
  }

  private async targetBranchOf(target: string | undefined, mainBranch: string | undefined): Promise<string> {
    if (target === undefined) {
      if (!mainBranch)
        throw new MergeRefusedError(
          'target_not_checked_out',
          'the main checkout has a detached HEAD; name the target branch and check it out there',
        );
      return mainBranch;
    }
    const full = target.startsWith('refs/heads/') ? target : `refs/heads/${target}`;
    const check = await this.git.run(this.cwd, ['check-ref-format', full], { okExitCodes: [1] });
    if (check.exitCode !== 0 || target.startsWith('-'))
      throw new MergeRefusedError('bad_target', `'${target.slice(0, 80)}' is not a branch name`);
    if (full.startsWith(`refs/heads/${BRANCH_PREFIX}`))
      throw new MergeRefusedError('bad_target', `${short(full)} is an agent's branch, not a target`);
    return full;
  }

  private async dirtyFiles(treePath: string): Promise<number> {
    return dirtyCount(
      parseStatusV2((await this.git.run(treePath, ['status', '--porcelain=v2', '-z', '--untracked-files=all'])).stdout),
    );
  }

  private async resolve(rev: string): Promise<string | undefined> {
    const out = await this.git.run(this.cwd, ['rev-parse', '--verify', '--quiet', rev], { okExitCodes: [1] });
    return out.stdout.trim() || undefined;
  }
}

function short(ref: string): string {
  return ref.replace(/^refs\/heads\//, '');
}
