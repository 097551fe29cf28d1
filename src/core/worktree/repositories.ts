import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Git } from './git';

/** A git repository of the workspace, as agents and the editor name it. */
export interface Repository {
  /** The repo_id: the repository folder's name (without `.git` for a bare one), made unique. */
  readonly id: string;
  /** The main working tree (its top level), or the repository folder itself when bare. Real path. */
  readonly path: string;
  /** The repository's common git directory (shared by all its worktrees). Real path. */
  readonly gitDir: string;
  readonly bare: boolean;
}

export interface DiscoverOptions {
  /** How many folder levels below each workspace folder are searched for nested repositories (default 3). */
  readonly nestedDepth?: number;
}

/** Folders never searched for nested repositories. */
const SKIPPED_FOLDERS = new Set(['.git', 'node_modules', '.sw4rm']);

interface Found {
  readonly path: string;
  readonly gitDir: string;
  readonly bare: boolean;
}

/** What git says about `dir`: the repository it belongs to, or undefined when it belongs to none. */
async function repositoryAt(git: Git, dir: string): Promise<Found | undefined> {
  const probe = await git.run(
    dir,
    ['rev-parse', '--is-bare-repository', '--is-inside-work-tree', '--path-format=absolute', '--git-common-dir'],
    { okExitCodes: [128] },
  );
  if (probe.exitCode !== 0) return undefined;
  const [bareText, insideText, commonDir] = probe.stdout.split('\n');
  const gitDir = fs.realpathSync(commonDir);
  if (bareText === 'true') return { path: gitDir, gitDir, bare: true };
  if (insideText !== 'true') return undefined; // inside a .git folder: not a working tree of its own
  // The main working tree, also when `dir` is in a linked worktree of it (the repository is one, whichever tree
  // was opened). A repository whose git directory is not `<tree>/.git` (core.worktree, separate git dir) keeps
  // the top level git reports.
  if (path.basename(gitDir) === '.git') return { path: path.dirname(gitDir), gitDir, bare: false };
  const top = (await git.run(dir, ['rev-parse', '--show-toplevel'])).stdout.trim();
  return { path: fs.realpathSync(top), gitDir, bare: false };
}

function looksLikeRepository(dir: string): boolean {
  if (fs.existsSync(path.join(dir, '.git'))) return true;
  // A bare repository: HEAD, objects/ and refs/ side by side.
  return (
    fs.existsSync(path.join(dir, 'HEAD')) &&
    fs.existsSync(path.join(dir, 'objects')) &&
    fs.existsSync(path.join(dir, 'refs'))
  );
}

function nestedCandidates(root: string, depth: number): string[] {
  const found: string[] = [];
  const walk = (dir: string, level: number) => {
    if (level > depth) return;
    let entries: fs.Dirent[];
    try {
      entries = fs.readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const entry of entries) {
      // Symbolic links are not followed: a link could lead anywhere, including back up the tree.
      if (!entry.isDirectory() || SKIPPED_FOLDERS.has(entry.name) || entry.name.endsWith('.sw4rm-worktrees')) continue;
      const child = path.join(dir, entry.name);
      if (looksLikeRepository(child)) found.push(child);
      walk(child, level + 1);
    }
  };
  walk(root, 1);
  return found;
}

/** A repo_id from a folder name: the name itself when it is a plain id, else its characters outside [A-Za-z0-9._-] as '-'. */
export function repoIdBase(folder: string, bare: boolean): string {
  let name = path.basename(folder);
  if (bare && name.endsWith('.git') && name.length > 4) name = name.slice(0, -4);
  let id = name
    .normalize('NFC')
    .replace(/[^A-Za-z0-9._-]/g, '-')
    .replace(/^[.-]+/, '')
    .slice(0, 64);
  if (id === '') id = 'repo';
  return id;
}

/**
 * Every git repository among the workspace folders (multi-root): the repository each folder is in, a bare
 * repository opened as a folder, and repositories nested inside the folders (each its own repo_id; symbolic
 * links are not followed, node_modules and worktree folders are skipped). One repository opened through two
 * folders, or through one of its linked worktrees, is one repo_id. Ids are the folders' names, made unique
 * deterministically: repositories sorted by path, a repeated name gets `-2`, `-3`… in that order. The editor
 * (its workspace folders) and the headless coordinator (`--workspace DIR`, repeatable) both call this.
 */
export async function discoverRepositories(
  git: Git,
  folders: readonly string[],
  options: DiscoverOptions = {},
): Promise<Repository[]> {
  const depth = options.nestedDepth ?? 3;
  const byGitDir = new Map<string, Found>();
  for (const folder of folders) {
    let real: string;
    try {
      real = fs.realpathSync(folder);
    } catch {
      continue; // a workspace folder that does not exist holds no repository
    }
    if (!fs.statSync(real).isDirectory()) continue;
    const candidates = [real, ...nestedCandidates(real, depth)];
    for (const dir of candidates) {
      const found = await repositoryAt(git, dir);
      if (found && !byGitDir.has(found.gitDir)) byGitDir.set(found.gitDir, found);
    }
  }
  const sorted = [...byGitDir.values()].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  const used = new Set<string>();
  return sorted.map((found) => {
    const base = repoIdBase(found.path, found.bare);
    let id = base;
    for (let n = 2; used.has(id.toLowerCase()); n++) id = `${base}-${n}`;
    used.add(id.toLowerCase());
    return { id, ...found };
  });
}
