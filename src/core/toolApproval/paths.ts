import { promises as fsp } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { isGitName } from '../worktree/confinement';
import type { PathPlace } from './model';

/**
 * Where a path a CLI names lies relative to the agent's worktree (README, "Approvals for CLI agents"). Relative paths
 * are resolved against the worktree's root, `~` against the home folder; `.` and `..` are normalised; the longest
 * part of the path that exists is resolved with realpath (so a symbolic link inside the worktree pointing out of it
 * is outside) and the rest appended. Git metadata (`.git` in any form, as the worktree area's Confinement sees it) is
 * never the agent's: outside. Without a worktree (`root` undefined) every place is `unknown`.
 *
 * This is classification for the approval rules, not confinement: the CLI touches the file itself, later, so a link
 * swapped in afterwards is not caught here (the worktree's isolation and the CLI's own sandbox are what remains).
 */
export async function placeOf(root: string | undefined, requested: string): Promise<PathPlace> {
  if (root === undefined) return 'unknown';
  if (requested.includes('\0')) return 'outside';
  let realRoot: string;
  try {
    realRoot = await fsp.realpath(root);
  } catch {
    return 'unknown';
  }
  const expanded =
    requested === '~' || requested.startsWith('~/') ? path.join(os.homedir(), requested.slice(1)) : requested;
  const absolute = path.resolve(realRoot, expanded);
  const real = await realpathOfExisting(absolute);
  if (!isInside(realRoot, real)) return 'outside';
  const relative = path.relative(realRoot, real);
  if (relative !== '' && relative.split(path.sep).some(isGitName)) return 'outside';
  return 'inside';
}

export async function placesOf(root: string | undefined, paths: readonly string[]): Promise<PathPlace[]> {
  return Promise.all(paths.map((p) => placeOf(root, p)));
}

/** realpath of the longest existing prefix, with the rest of the path appended as given (already normalised). */
async function realpathOfExisting(absolute: string): Promise<string> {
  const rest: string[] = [];
  let current = absolute;
  for (;;) {
    try {
      const real = await fsp.realpath(current);
      return rest.length === 0 ? real : path.join(real, ...rest.reverse());
    } catch {
      const parent = path.dirname(current);
      if (parent === current) return absolute;
      rest.push(path.basename(current));
      current = parent;
    }
  }
}

function isInside(root: string, candidate: string): boolean {
  return candidate === root || candidate.startsWith(root.endsWith(path.sep) ? root : root + path.sep);
}

/** The path relative to the worktree root for Confinement (undefined when it is not inside). */
export async function relativeInside(root: string, requested: string): Promise<string | undefined> {
  let realRoot: string;
  try {
    realRoot = await fsp.realpath(root);
  } catch {
    return undefined;
  }
  const real = await realpathOfExisting(path.resolve(realRoot, requested));
  if (!isInside(realRoot, real) || real === realRoot) return undefined;
  return path.relative(realRoot, real).split(path.sep).join('/');
}
