import { promises as fsp, type Stats } from 'node:fs';
import * as path from 'node:path';
import { SwarmError, type ErrorKind, type Sw4rmCode } from '../kernel/errors';

/**
 * A worktree's git directories, as the coordinator may trust them. A linked worktree's `.git` is a file in the
 * worktree (`gitdir: <common>/worktrees/<name>`), and the agent's own programs can write the worktree: a `.git` that
 * names another folder would have the coordinator's git read or commit another repository, and the sandbox bind that
 * folder read-write (HOME, say). So what the `.git` file names is believed only when git's own layout confirms it:
 * the folder is `<common>/worktrees/<name>`, and its `gitdir` file names this worktree's `.git` back. A `.git`
 * folder (a main checkout) is the worktree's own.
 */
export interface WorktreeGitDirs {
  /** The worktree's own git directory (index, HEAD): `<common>/worktrees/<name>`, or `<root>/.git` for a main checkout. */
  readonly gitDir: string;
  /** The repository's shared git directory (objects, refs, config). */
  readonly commonDir: string;
  /** Whether the worktree is a linked one (`.git` is a file). */
  readonly linked: boolean;
}

/** What is wrong with a worktree's `.git` when it is not believed. */
export class UntrustedGitDirError extends SwarmError {
  constructor(readonly reason: string) {
    super(`the worktree's .git is not believed: ${reason}`);
    this.name = 'UntrustedGitDirError';
  }

  /** Denied, as the tools answer it (processProvider: PERMISSION_DENIED `DENY_ALL: …`). */
  override get errorKind(): ErrorKind {
    return 'permission';
  }

  override get errorCode(): Sw4rmCode {
    return 'PERMISSION_DENIED';
  }
}

const MAX_GIT_FILE = 4096;

async function realOrResolved(file: string): Promise<string> {
  try {
    return await fsp.realpath(file);
  } catch {
    return path.resolve(file);
  }
}

async function smallRegularFile(file: string): Promise<string> {
  const stats = await fsp.lstat(file);
  if (!stats.isFile()) throw new UntrustedGitDirError(`${path.basename(file)} is not a regular file`);
  if (stats.nlink > 1) throw new UntrustedGitDirError(`${path.basename(file)} has more than one link`);
  if (stats.size > MAX_GIT_FILE) throw new UntrustedGitDirError(`${path.basename(file)} is over ${MAX_GIT_FILE} bytes`);
  return fsp.readFile(file, 'utf8');
}

/**
 * The git directories of the worktree at `root` (a real path), checked as the class comment says; undefined when
 * `root` has no `.git`; UntrustedGitDirError when its `.git` names a folder git's layout does not confirm.
 */
export async function worktreeGitDirs(root: string): Promise<WorktreeGitDirs | undefined> {
  const dotGit = path.join(root, '.git');
  let stats;
  try {
    stats = await fsp.lstat(dotGit);
  } catch {
    return undefined;
  }
  if (stats.isDirectory()) {
    const own = await fsp.realpath(dotGit);
    return { gitDir: own, commonDir: own, linked: false };
  }
  const text = await smallRegularFile(dotGit);
  const match = /^gitdir: (.+?)\r?\n?$/.exec(text);
  if (!match) throw new UntrustedGitDirError('.git is neither a folder nor one "gitdir:" line');
  let gitDir: string;
  try {
    gitDir = await fsp.realpath(path.resolve(root, match[1]));
  } catch {
    throw new UntrustedGitDirError('the folder .git names does not exist');
  }
  let commonDir: string;
  try {
    const common = (await smallRegularFile(path.join(gitDir, 'commondir'))).trim();
    commonDir = await fsp.realpath(path.resolve(gitDir, common));
  } catch (error) {
    if (error instanceof UntrustedGitDirError) throw error;
    throw new UntrustedGitDirError('its git directory has no commondir');
  }
  if (path.dirname(gitDir) !== path.join(commonDir, 'worktrees')) {
    throw new UntrustedGitDirError('its git directory is not <common>/worktrees/<name>');
  }
  let back: string;
  try {
    back = (await smallRegularFile(path.join(gitDir, 'gitdir'))).trim();
  } catch (error) {
    if (error instanceof UntrustedGitDirError) throw error;
    throw new UntrustedGitDirError('its git directory has no gitdir file');
  }
  if ((await realOrResolved(path.resolve(gitDir, back))) !== (await realOrResolved(dotGit))) {
    throw new UntrustedGitDirError('its git directory belongs to another worktree');
  }
  return { gitDir, commonDir, linked: true };
}

/**
 * Every folder a worktree's `.git` names, believed or not (a `gitdir:` file and its commondir, or the folder itself),
 * as real paths: what Confinement refuses to agents (git_metadata). Lenient where worktreeGitDirs is strict: a folder
 * named by a bent `.git` is refused too.
 */
export async function namedGitDirs(root: string): Promise<string[]> {
  const dotGit = path.join(root, '.git');
  let stats: Stats;
  try {
    stats = await fsp.lstat(dotGit);
  } catch {
    return [];
  }
  const found: string[] = [];
  if (stats.isDirectory()) found.push(dotGit);
  else if (stats.isFile() && stats.size < 64 * 1024) {
    const match = /^gitdir:\s*(.+?)\s*$/m.exec(await fsp.readFile(dotGit, 'utf8'));
    if (match) {
      const gitDir = path.resolve(root, match[1]);
      found.push(gitDir);
      try {
        const common = (await fsp.readFile(path.join(gitDir, 'commondir'), 'utf8')).trim();
        if (common) found.push(path.resolve(gitDir, common));
      } catch {
        /* a worktree without commondir: its gitdir is the repository's git directory */
      }
    }
  }
  return Promise.all(found.map(realOrResolved));
}
