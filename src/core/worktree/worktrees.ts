import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Git } from './git';
import {
  dirtyCount,
  parsePruneDryRun,
  parseStatusV2,
  parseWorktreeList,
  type PruneCandidate,
  type WorktreeEntry,
} from './porcelain';
import type { Repository } from './repositories';
import { checkWorktreeId, type Snapshot, type Snapshots } from './snapshots';
import { SwarmError, type ErrorKind, type Sw4rmCode } from '../kernel/errors';

/** Every agent worktree is on its own branch `sw4rm/<worktree_id>`. */
export const BRANCH_PREFIX = 'sw4rm/';
/** The commit a worktree was created from: `refs/sw4rm/bases/<worktree_id>` (a ref, so it survives restarts and gc). */
export const BASE_REF_PREFIX = 'refs/sw4rm/bases/';

export interface AgentWorktree {
  readonly id: string;
  readonly path: string;
  /** `sw4rm/<id>`. */
  readonly branch: string;
  readonly head: string | undefined;
  /** The commit it was created from (recorded at creation). */
  readonly baseCommit: string | undefined;
  /** The branch it was created from (`refs/heads/main`), when it was created from a branch. */
  readonly baseRef: string | undefined;
  /** Commits on the worktree's branch that its target (base branch, else base commit) does not have, and back. */
  readonly ahead: number;
  readonly behind: number;
  /** Uncommitted files (changed, staged, untracked; not ignored); undefined when its folder is gone. */
  readonly dirty: number | undefined;
  readonly locked: boolean;
  readonly prunable: boolean;
}

export interface WorktreesOptions {
  /** The folder holding this repository's worktrees; default the sibling `<repo>.sw4rm-worktrees`. */
  readonly root?: string;
  /** Called once git has made a worktree (before `create` answers): its setup starts here. */
  readonly onCreated?: (worktree: AgentWorktree, details: { readonly reusedBranch: boolean }) => void;
}

export interface RemoveOptions {
  /** Whether an agent is bound to the worktree: a bound worktree is never removed, forced or not. */
  readonly isBound: (worktreeId: string) => boolean;
  /** The operator confirmed removing uncommitted files or unmerged commits (kept in a snapshot and the branch). */
  readonly force?: boolean;
}

export interface RemoveResult {
  /** The snapshot written before anything was removed. */
  readonly snapshot: Snapshot;
  /** Whether `sw4rm/<id>` stays (it goes only when its work is in the target and nothing was uncommitted). */
  readonly branchKept: boolean;
}

export type WorktreeRefusal =
  | 'bound'
  | 'dirty'
  | 'unmerged'
  | 'locked'
  | 'not_found'
  | 'missing_folder'
  | 'exists'
  | 'inside_working_tree'
  | 'bad_base';

/** A worktree operation refused, with a reason a caller can act on. */
export class WorktreeRefusedError extends SwarmError {
  constructor(
    readonly reason: WorktreeRefusal,
    message: string,
  ) {
    super(message);
  }

  /** As the API answers it: `not_found`, `bad_base` invalid, every other reason a refusal of the state it is in. */
  override get errorKind(): ErrorKind {
    return this.reason === 'not_found' ? 'not_found' : this.reason === 'bad_base' ? 'invalid' : 'precondition';
  }

  override get errorCode(): Sw4rmCode {
    return this.errorKind === 'not_found'
      ? 'NOT_FOUND'
      : this.errorKind === 'invalid'
        ? 'VALIDATION_ERROR'
        : 'FAILED_PRECONDITION';
  }
}

function isInside(child: string, parent: string): boolean {
  const rel = path.relative(parent, child);
  return rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel));
}

/** The real path of `p`, or of its nearest existing ancestor with the rest appended (for a folder not made yet). */
function realPathOfFuture(p: string): string {
  const rest: string[] = [];
  let at = path.resolve(p);
  while (!fs.existsSync(at)) {
    rest.unshift(path.basename(at));
    const up = path.dirname(at);
    if (up === at) break;
    at = up;
  }
  return path.join(fs.realpathSync(at), ...rest);
}

/**
 * The worktrees of one repository that the coordinator made for agents: created outside the user's working tree,
 * each on its own branch from a recorded base; listed with their state; removed only through git (never a
 * recursive delete), never while bound, and never with work that is nowhere else unless forced (then after a
 * snapshot, keeping the branch); stale ones pruned after listing them.
 */
export class Worktrees {
  readonly root: string;
  private readonly onCreated: WorktreesOptions['onCreated'];

  constructor(
    private readonly git: Git,
    private readonly snapshots: Snapshots,
    readonly repository: Repository,
    options: WorktreesOptions = {},
  ) {
    this.onCreated = options.onCreated;
    const name = path.basename(
      repository.bare ? repository.gitDir.replace(/\.git$/, '') || repository.gitDir : repository.path,
    );
    this.root = realPathOfFuture(options.root ?? path.join(path.dirname(repository.path), `${name}.sw4rm-worktrees`));
  }

  private get cwd(): string {
    return this.repository.path;
  }

  /**
   * Creates worktree `id` at `<root>/<id>` on a new branch `sw4rm/<id>` from `base` (default: the current HEAD). When
   * `sw4rm/<id>` is still there from an earlier worktree of that id (kept by a confirmed removal), the worktree checks
   * that branch out again, with its recorded base, so the work on it is where the agent left it; `base` is then
   * ignored (named in the error when the branch cannot be reused).
   */
  async create(id: string, options: { base?: string } = {}): Promise<AgentWorktree> {
    checkWorktreeId(id);
    if (!this.repository.bare && isInside(this.root, this.repository.path)) {
      throw new WorktreeRefusedError(
        'inside_working_tree',
        `the worktrees folder ${this.root} is inside the working tree ${this.repository.path}`,
      );
    }
    const target = path.join(this.root, id);
    if (fs.existsSync(target)) throw new WorktreeRefusedError('exists', `${target} already exists`);
    const branch = `${BRANCH_PREFIX}${id}`;
    if (await this.refExists(`refs/heads/${branch}`)) return this.reuseBranch(id, target, branch);
    const base = options.base ?? 'HEAD';
    if (base.startsWith('-') || base.includes('\0'))
      throw new WorktreeRefusedError('bad_base', `'${base.slice(0, 80)}' is not a commit`);
    const resolved = await this.git.run(this.cwd, ['rev-parse', '--verify', '--quiet', `${base}^{commit}`], {
      okExitCodes: [1],
    });
    const baseCommit = resolved.stdout.trim();
    if (!baseCommit)
      throw new WorktreeRefusedError('bad_base', `'${base.slice(0, 80)}' is not a commit of ${this.repository.id}`);
    const symbolic = await this.git.run(this.cwd, ['rev-parse', '--symbolic-full-name', base], { okExitCodes: [128] });
    const baseRef = symbolic.stdout.trim().startsWith('refs/heads/') ? symbolic.stdout.trim() : undefined;

    fs.mkdirSync(this.root, { recursive: true });
    // The base is recorded first (create-only), so a worktree never exists without it.
    await this.git.run(this.cwd, [
      'update-ref',
      '-m',
      `sw4rm: base of worktree ${id}`,
      `${BASE_REF_PREFIX}${id}`,
      baseCommit,
      '',
    ]);
    try {
      await this.git.run(this.cwd, ['worktree', 'add', '-b', branch, '--', target, baseCommit]);
    } catch (err) {
      await this.git.run(this.cwd, ['update-ref', '-d', `${BASE_REF_PREFIX}${id}`, baseCommit]);
      throw err;
    }
    if (baseRef) await this.git.run(this.cwd, ['config', `sw4rm-worktree.${id}.baseref`, baseRef]);
    const made = await this.get(id);
    if (!made) throw new Error(`worktree ${id} was created but git does not list it`);
    this.onCreated?.(made, { reusedBranch: false });
    return made;
  }

  /** A new worktree on the kept branch `sw4rm/<id>` (its base ref kept too; recorded from the merge base if gone). */
  private async reuseBranch(id: string, target: string, branch: string): Promise<AgentWorktree> {
    const entries = parseWorktreeList((await this.git.run(this.cwd, ['worktree', 'list', '--porcelain', '-z'])).stdout);
    const holder = entries.find((e) => e.branch === `refs/heads/${branch}`);
    if (holder) {
      throw new WorktreeRefusedError(
        'exists',
        `branch ${branch} (kept from an earlier worktree '${id}') is checked out in ${holder.path}; check another branch out there, or bind to another worktree id`,
      );
    }
    fs.mkdirSync(this.root, { recursive: true });
    if (!(await this.resolve(`${BASE_REF_PREFIX}${id}`))) {
      const head = await this.resolve('HEAD');
      const mergeBase = head
        ? (
            await this.git.run(this.cwd, ['merge-base', head, `refs/heads/${branch}`], { okExitCodes: [1] })
          ).stdout.trim()
        : '';
      const tip = mergeBase || (await this.resolve(`refs/heads/${branch}`))!;
      await this.git.run(this.cwd, [
        'update-ref',
        '-m',
        `sw4rm: base of worktree ${id} (reused branch)`,
        `${BASE_REF_PREFIX}${id}`,
        tip,
        '',
      ]);
    }
    await this.git.run(this.cwd, ['worktree', 'add', '--', target, branch]);
    const made = await this.get(id);
    if (!made) throw new Error(`worktree ${id} was created but git does not list it`);
    this.onCreated?.(made, { reusedBranch: true });
    return made;
  }

  /** The agent worktrees of the repository (branch `sw4rm/<id>`), with base, ahead/behind and dirty count. */
  async list(): Promise<AgentWorktree[]> {
    const entries = parseWorktreeList((await this.git.run(this.cwd, ['worktree', 'list', '--porcelain', '-z'])).stdout);
    const result: AgentWorktree[] = [];
    for (const entry of entries) {
      const id = this.idOf(entry);
      if (id !== undefined) result.push(await this.describe(id, entry));
    }
    return result;
  }

  async get(id: string): Promise<AgentWorktree | undefined> {
    checkWorktreeId(id);
    const entry = await this.entryOf(id);
    return entry ? this.describe(id, entry) : undefined;
  }

  /**
   * Whether everything on `sw4rm/<id>` is already in the target (its base branch, else its base commit): its tip
   * is an ancestor of the target, or merging it into the target changes nothing (`git merge-tree --write-tree`
   * yields the target's own tree) — which is what a squash merge, a rebase or a cherry-pick leaves.
   */
  async isMerged(id: string): Promise<boolean> {
    checkWorktreeId(id);
    const tip = await this.resolve(`refs/heads/${BRANCH_PREFIX}${id}`);
    const targetCommit = await this.targetOf(id);
    if (!tip || !targetCommit) return false;
    const ancestor = await this.git.run(this.cwd, ['merge-base', '--is-ancestor', tip, targetCommit], {
      okExitCodes: [1],
    });
    if (ancestor.exitCode === 0) return true;
    const merged = await this.git.run(this.cwd, ['merge-tree', '--write-tree', '--no-messages', targetCommit, tip], {
      okExitCodes: [1],
    });
    if (merged.exitCode !== 0) return false; // conflicts: certainly not in the target
    const targetTree = await this.resolve(`${targetCommit}^{tree}`);
    return merged.stdout.split('\n')[0].trim() === targetTree;
  }

  /**
   * Removes worktree `id` through `git worktree remove` — never a recursive delete. Refused while an agent is
   * bound to it (checked again just before git runs), when it is locked, and when it has uncommitted files or
   * unmerged commits unless `force`. A snapshot is always written first; the branch goes only when its work is
   * in the target and nothing was uncommitted, so nothing that existed is lost.
   */
  async remove(id: string, options: RemoveOptions): Promise<RemoveResult> {
    checkWorktreeId(id);
    const refuseIfBound = () => {
      if (options.isBound(id))
        throw new WorktreeRefusedError('bound', `worktree ${id} is bound to an agent; unbind it first`);
    };
    refuseIfBound();
    const entry = await this.entryOf(id);
    if (!entry) throw new WorktreeRefusedError('not_found', `no worktree ${id} in ${this.repository.id}`);
    if (entry.locked)
      throw new WorktreeRefusedError(
        'locked',
        `worktree ${id} is locked${entry.lockReason ? ` (${entry.lockReason})` : ''}; unlock it with git worktree unlock first`,
      );
    if (!fs.existsSync(entry.path)) {
      throw new WorktreeRefusedError(
        'missing_folder',
        `the folder of worktree ${id} is gone (${entry.path}); prune stale worktrees instead`,
      );
    }
    const dirty = dirtyCount(
      parseStatusV2(
        (await this.git.run(entry.path, ['status', '--porcelain=v2', '-z', '--untracked-files=all'])).stdout,
      ),
    );
    const merged = await this.isMerged(id);
    if (!options.force) {
      if (dirty > 0)
        throw new WorktreeRefusedError(
          'dirty',
          `worktree ${id} has ${dirty} uncommitted file${dirty === 1 ? '' : 's'}; confirm to remove it (a snapshot and the branch are kept)`,
        );
      if (!merged)
        throw new WorktreeRefusedError(
          'unmerged',
          `branch ${BRANCH_PREFIX}${id} has commits that are not in its target; confirm to remove the worktree (the branch is kept)`,
        );
    }
    const snapshot = await this.snapshots.take(entry.path, id, 'before removing the worktree');
    refuseIfBound();
    await this.git.run(this.cwd, ['worktree', 'remove', ...(dirty > 0 ? ['--force'] : []), '--', entry.path]);
    const branchKept = !(merged && dirty === 0);
    if (!branchKept) await this.forgetBranch(id, entry.head);
    return { snapshot, branchKept };
  }

  /** What `prune` would remove: administrative entries of worktrees whose folders are gone (git's own rule). */
  async prunePlan(): Promise<PruneCandidate[]> {
    const out = await this.git.run(this.cwd, ['worktree', 'prune', '--dry-run', '--verbose']);
    return parsePruneDryRun(`${out.stdout}\n${out.stderr}`);
  }

  /**
   * Prunes exactly the plan the caller was shown: refused when `git worktree prune` would now remove anything
   * else. Pruning forgets entries whose folders are already gone; it deletes no file and no branch.
   */
  async prune(confirmed: readonly PruneCandidate[]): Promise<PruneCandidate[]> {
    const plan = await this.prunePlan();
    const key = (c: PruneCandidate) => c.name;
    const shown = new Set(confirmed.map(key));
    const unexpected = plan.filter((c) => !shown.has(key(c)));
    if (unexpected.length > 0)
      throw new WorktreeRefusedError(
        'exists',
        `prune would also remove ${unexpected.map(key).join(', ')}; list again first`,
      );
    if (plan.length > 0) await this.git.run(this.cwd, ['worktree', 'prune']);
    return plan;
  }

  private idOf(entry: WorktreeEntry): string | undefined {
    const prefix = `refs/heads/${BRANCH_PREFIX}`;
    if (!entry.branch?.startsWith(prefix)) return undefined;
    const id = entry.branch.slice(prefix.length);
    try {
      return checkWorktreeId(id);
    } catch {
      return undefined; // a branch under sw4rm/ that this coordinator did not make
    }
  }

  private async entryOf(id: string): Promise<WorktreeEntry | undefined> {
    const entries = parseWorktreeList((await this.git.run(this.cwd, ['worktree', 'list', '--porcelain', '-z'])).stdout);
    return entries.find((e) => this.idOf(e) === id);
  }

  private async describe(id: string, entry: WorktreeEntry): Promise<AgentWorktree> {
    const baseCommit = await this.resolve(`${BASE_REF_PREFIX}${id}`);
    const baseRef = await this.baseRefOf(id);
    const target = await this.targetOf(id);
    let ahead = 0;
    let behind = 0;
    if (target && entry.head) {
      const counts = (
        await this.git.run(this.cwd, ['rev-list', '--left-right', '--count', `${target}...${entry.head}`])
      ).stdout
        .trim()
        .split(/\s+/);
      behind = Number(counts[0]);
      ahead = Number(counts[1]);
    }
    const present = fs.existsSync(entry.path);
    const dirty = present
      ? dirtyCount(
          parseStatusV2(
            (await this.git.run(entry.path, ['status', '--porcelain=v2', '-z', '--untracked-files=all'])).stdout,
          ),
        )
      : undefined;
    return {
      id,
      path: entry.path,
      branch: `${BRANCH_PREFIX}${id}`,
      head: entry.head,
      baseCommit,
      baseRef,
      ahead,
      behind,
      dirty,
      locked: entry.locked,
      prunable: entry.prunable || !present,
    };
  }

  private async baseRefOf(id: string): Promise<string | undefined> {
    const out = await this.git.run(this.cwd, ['config', '--get', `sw4rm-worktree.${id}.baseref`], { okExitCodes: [1] });
    return out.stdout.trim() || undefined;
  }

  /** What the worktree's work is measured against: its base branch while it exists, else its base commit. */
  private async targetOf(id: string): Promise<string | undefined> {
    const baseRef = await this.baseRefOf(id);
    return (baseRef ? await this.resolve(baseRef) : undefined) ?? this.resolve(`${BASE_REF_PREFIX}${id}`);
  }

  private async forgetBranch(id: string, head: string | undefined): Promise<void> {
    const branchRef = `refs/heads/${BRANCH_PREFIX}${id}`;
    // The old value guards against a branch that moved since it was checked.
    if (head) await this.git.run(this.cwd, ['update-ref', '-d', branchRef, head]);
    const base = await this.resolve(`${BASE_REF_PREFIX}${id}`);
    if (base) await this.git.run(this.cwd, ['update-ref', '-d', `${BASE_REF_PREFIX}${id}`, base]);
    await this.git.run(this.cwd, ['config', '--remove-section', `sw4rm-worktree.${id}`], { okExitCodes: [128] });
  }

  private async refExists(ref: string): Promise<boolean> {
    return (
      (await this.git.run(this.cwd, ['show-ref', '--verify', '--quiet', ref], { okExitCodes: [1] })).exitCode === 0
    );
  }

  private async resolve(rev: string): Promise<string | undefined> {
    const out = await this.git.run(this.cwd, ['rev-parse', '--verify', '--quiet', rev], { okExitCodes: [1] });
    return out.stdout.trim() || undefined;
  }
}
