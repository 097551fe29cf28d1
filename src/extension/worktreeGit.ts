import * as path from 'node:path';
import * as vscode from 'vscode';
import { createGit, GitCommandError } from '../core/api';
import { isCommitId, parseChangedFiles, type ChangedFile } from './worktreesModel';

/**
 * The few git reads the editor makes itself for its worktree commands (the CoordinatorApi has no call for them): a
 * repository's branches for Bind's "new from a branch", and a worktree's changes against its base for Show Changes.
 * Always an argument vector (never a shell), read-only, run when the user asks.
 */
export async function gitRead(cwd: string, args: readonly string[]): Promise<string> {
  // Through the core's one git spawner: its hardening (no repository-configured program ever runs) and clean environment.
  try {
    return (await editorGit.run(cwd, ['-c', 'core.quotepath=off', ...args], { env: { GIT_OPTIONAL_LOCKS: '0' } }))
      .stdout;
  } catch (err) {
    throw new Error(
      `git ${args[0]}: ${err instanceof GitCommandError ? err.stderr.trim() || err.message : (err as Error).message}`,
    );
  }
}

const editorGit = createGit();

/** The local branches of a repository (the one checked out first), other than the agents' `sw4rm/…` branches. */
export async function localBranches(repoPath: string): Promise<string[]> {
  const [list, head] = await Promise.all([
    gitRead(repoPath, ['for-each-ref', '--format=%(refname:short)', 'refs/heads']),
    gitRead(repoPath, ['symbolic-ref', '--quiet', '--short', 'HEAD']).catch(() => ''),
  ]);
  const branches = list.split('\n').filter((b) => b && !b.startsWith('sw4rm/'));
  const current = head.trim();
  return current && branches.includes(current) ? [current, ...branches.filter((b) => b !== current)] : branches;
}

/** Every file of a worktree that differs from `base`: committed and uncommitted changes, and untracked files. */
export async function changedFiles(worktreePath: string, base: string): Promise<ChangedFile[]> {
  if (!isCommitId(base)) throw new Error(`'${base}' is not a commit id`);
  const [nameStatus, untracked] = await Promise.all([
    gitRead(worktreePath, ['diff', '--name-status', '-z', '-M', base, '--']),
    gitRead(worktreePath, ['ls-files', '--others', '--exclude-standard', '-z']),
  ]);
  return parseChangedFiles(nameStatus, untracked);
}

/** The scheme of a file's content at a worktree's base commit (the left side of Show Changes). */
export const WORKTREE_BASE_SCHEME = 'sw4rm-worktree-base';

/**
 * Read-only documents of a file at a commit: `sw4rm-worktree-base:/<path>?<{"cwd","commit"}>`; no commit (an added
 * file) is an empty document. Opened only by Show Changes, with uris it made.
 */
export class WorktreeBaseDocuments implements vscode.TextDocumentContentProvider, vscode.Disposable {
  private readonly registration = vscode.workspace.registerTextDocumentContentProvider(WORKTREE_BASE_SCHEME, this);

  static uri(worktreePath: string, commit: string, file: string): vscode.Uri {
    return vscode.Uri.from({
      scheme: WORKTREE_BASE_SCHEME,
      path: `/${file}`,
      query: JSON.stringify({ cwd: worktreePath, commit }),
    });
  }

  async provideTextDocumentContent(uri: vscode.Uri): Promise<string> {
    // Any document link can name this scheme: only a full commit id and a relative path reach git, as one argument.
    let query: { cwd?: unknown; commit?: unknown } = {};
    try {
      query = JSON.parse(uri.query) as typeof query;
    } catch {
      // Not a link Show Worktree Changes made: answered below.
    }
    const { cwd, commit } = query;
    if (commit === '') return '';
    const file = uri.path.slice(1);
    if (
      typeof cwd !== 'string' ||
      !path.isAbsolute(cwd) ||
      !isCommitId(commit) ||
      file.includes('\0') ||
      file.startsWith('/')
    ) {
      return 'Not a base version Show Worktree Changes opened.\n';
    }
    return gitRead(cwd, ['show', `${commit}:${file}`]);
  }

  dispose(): void {
    this.registration.dispose();
  }
}
