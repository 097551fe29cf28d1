import { randomBytes } from 'node:crypto';
import { constants as C, promises as fsp, type Stats } from 'node:fs';
import * as path from 'node:path';
import { yieldTurn } from '../inTurns';
import {
  ConfinedWalk,
  CREATE_FLAGS,
  DIR_FLAGS,
  READ_FLAGS,
  isInside,
  mountIdOf,
  mountPoints,
  type Dir,
  type FileHandle,
} from './confinedWalk';
import {
  ConfinementError,
  DEFAULT_MAX_READ_BYTES,
  errno,
  fsError,
  isGitName,
  typeRefusal,
} from './confinementRefusals';
import { namedGitDirs } from './gitDirs';

export {
  ConfinementError,
  DEFAULT_MAX_READ_BYTES,
  MAX_COMPONENT_BYTES,
  MAX_PATH_BYTES,
  isGitName,
  parseRequestedPath,
  type ConfinementErrorCode,
  type ConfinementReason,
} from './confinementRefusals';
export { mountPoints } from './confinedWalk';

/**
 * Confinement (RFC §6.4, §16, §23): the one module through which the coordinator touches files for an agent.
 *
 * A requested path is first checked as text (no absolute paths, no `..`, no backslashes, no NUL, no encoded or
 * look-alike traversal, no `.git` in any case or Unicode form, bounded length), then walked component by component
 * without following any symbolic link, and finally opened with O_NOFOLLOW and verified after the open (fstat: a
 * regular file or a directory; the opened file's real path is the expected one), so a link swapped in between the
 * check and the open is caught at the open.
 *
 * On Linux the walk holds a descriptor of every directory it passes and opens the next component through
 * `/proc/self/fd/<dir>/<name>`: that is the directory-relative open (openat) with O_NOFOLLOW of RFC §16, so no
 * folder swapped for a link can redirect an open, a create or a rename. Elsewhere (`strategy: 'path'`) the walk
 * checks each component with lstat and verifies every open afterwards (same inode, real path unchanged): a read
 * or a listing that raced a swap is refused before any byte is returned, but a create that raced one may have made
 * an empty temporary file where the link pointed (README, "Confinement").
 *
 * Hard links: a hard link is the same file under a second name, indistinguishable from the original (an agent's
 * program may link a file from outside into its worktree). A regular file with more than one link is refused by
 * every operation that names it (read, stat, write, delete, resolve: `hard_link`), at the check (lstat) and again
 * on the opened descriptor (fstat) for reads.
 *
 * Mount points: another file system, or a bind mount of a folder of the same one (same st_dev), mounted at or above
 * a path inside the worktree is refused (`mount_point`): at the check, every mount point of /proc/self/mountinfo
 * inside the worktree; at each open, the descriptor's st_dev and (Linux) its mount id (/proc/self/fdinfo) must be
 * the root's.
 *
 * Its files: confinementRefusals.ts (the error, the limits, the check of a path's text), confinedWalk.ts (the checks
 * on the file system, the walk, the opens and their verification), this one (the operations and how they read).
 */

export interface ConfinementOptions {
  /** 'proc-fd' (Linux: directory-relative opens through /proc/self/fd) or 'path' (lstat walk + verification). */
  strategy?: 'proc-fd' | 'path';
  /**
   * A test seam: runs right before each system call that opens, creates or removes a component (after every
   * check of that component), with the canonical path it is about to touch. Tests swap files here to prove
   * that the open itself refuses what changed since the check.
   */
  beforeOpen?: (canonicalPath: string) => void | Promise<void>;
  /** Refuse the names Windows reserves for devices (CON, NUL, COM1…, with any extension); default: on Windows. */
  windowsNames?: boolean;
}

export type EntryType = 'file' | 'directory' | 'symlink' | 'other';
export interface DirEntry {
  name: string;
  type: EntryType;
}
export interface FileStat {
  type: 'file' | 'directory';
  size: number;
  mtimeMs: number;
  mode: number;
}

/**
 * A worktree entry as git would record it, read by the confinement (readEntry): what the workspace tools hand to
 * git instead of letting git open the path. `missing`: no such name, or a parent is not a folder or is a link (git
 * itself then counts the path as deleted).
 */
export type TreeEntry =
  | { kind: 'missing' }
  | { kind: 'file'; data: Buffer; executable: boolean }
  | { kind: 'symlink'; target: Buffer }
  | { kind: 'directory' };

/** streamEntry's answer: a file's size instead of its bytes. */
export type StreamedEntry = Exclude<TreeEntry, { kind: 'file' }> | { kind: 'file'; data: number; executable: boolean };

/** The slice streamEntry reads and hands on at a time. */
const STREAM_SLICE = 4 * 1024 * 1024;

/**
 * Reads from the start to the end of the file, but never more than `limit + 1` bytes: the file may have grown since
 * its size was checked (a log being written), and a read must not take the memory the limit is there to protect.
 */
async function readAtMost(handle: FileHandle, expectedSize: number, limit: number): Promise<Buffer> {
  let buffer = Buffer.allocUnsafeSlow(Math.min(limit + 1, Math.max(expectedSize + 1, 8192)));
  let total = 0;
  for (;;) {
    if (total === buffer.length) {
      if (total > limit) throw new ConfinementError('too_large');
      const grown = Buffer.allocUnsafeSlow(Math.min(limit + 1, buffer.length * 2));
      buffer.copy(grown, 0, 0, total);
      buffer = grown;
    }
    const { bytesRead } = await handle.read(buffer, total, buffer.length - total, total);
    if (bytesRead === 0) return buffer.subarray(0, total);
    total += bytesRead;
  }
}

/** What readAtMost reads, handed to `sink` a slice of 4 MiB at a time, a turn of the event loop between; its size. */
async function readInSlices(
  handle: FileHandle,
  expectedSize: number,
  limit: number,
  sink: (slice: Buffer) => void | Promise<void>,
): Promise<number> {
  const slice = Buffer.allocUnsafeSlow(Math.min(STREAM_SLICE, Math.max(expectedSize + 1, 8192)));
  let total = 0;
  for (;;) {
    const { bytesRead } = await handle.read(slice, 0, slice.length, total);
    if (bytesRead === 0) break;
    total += bytesRead;
    if (total > limit) throw new ConfinementError('too_large');
    if (total > expectedSize) throw new ConfinementError('changed_during_open');
    await sink(slice.subarray(0, bytesRead));
    await yieldTurn();
  }
  if (total !== expectedSize) throw new ConfinementError('changed_during_open');
  return total;
}

export class Confinement extends ConfinedWalk {
  private constructor(
    root: string,
    rootDev: number,
    gitDirs: readonly string[],
    strategy: 'proc-fd' | 'path',
    beforeOpen: ConfinementOptions['beforeOpen'],
    windowsNames: boolean,
    rootMountId: number | undefined,
  ) {
    super(root, rootDev, gitDirs, strategy, beforeOpen, windowsNames, rootMountId);
  }

  /** Confinement to the worktree at `root`; `worktree_not_bound` when it does not exist or is not a folder. */
  static async forWorktree(root: string, options: ConfinementOptions = {}): Promise<Confinement> {
    let canonical: string;
    let stats: Stats;
    try {
      canonical = await fsp.realpath(path.resolve(root));
      stats = await fsp.stat(canonical);
    } catch {
      throw new ConfinementError('worktree_missing');
    }
    if (!stats.isDirectory()) throw new ConfinementError('worktree_missing');
    const gitDirs = await namedGitDirs(canonical);
    if (gitDirs.some((dir) => isInside(dir, canonical)) || canonical.split(path.sep).some(isGitName)) {
      throw new ConfinementError('git_metadata');
    }
    let strategy = options.strategy;
    if (!strategy) {
      strategy = 'path';
      if (process.platform === 'linux') {
        try {
          await fsp.access('/proc/self/fd', C.R_OK);
          strategy = 'proc-fd';
        } catch {
          /* no /proc: the path walk */
        }
      }
    }
    let rootMountId: number | undefined;
    if (strategy === 'proc-fd') {
      try {
        const handle = await fsp.open(canonical, DIR_FLAGS);
        try {
          rootMountId = await mountIdOf(handle);
        } finally {
          await handle.close();
        }
      } catch {
        throw new ConfinementError('worktree_missing');
      }
    }
    return new Confinement(
      canonical,
      stats.dev,
      gitDirs,
      strategy,
      options.beforeOpen,
      options.windowsNames ?? process.platform === 'win32',
      rootMountId,
    );
  }

  /** The mount points inside the worktree (bind mounts included), relative to its root, "/" separated. */
  async mountPointsInside(): Promise<string[]> {
    this.mountsInside ??= mountPoints().then((points) =>
      points.filter((p) => p !== this.root && isInside(this.root, p)),
    );
    return (await this.mountsInside).map((p) =>
      p
        .slice(this.root.length + 1)
        .split(path.sep)
        .join('/'),
    );
  }

  /**
   * A tracked path's content as git would record it, read through the confinement and never by git: a regular file
   * (its bytes, at most `maxBytes`, and its owner-execute bit), a link (its target, never followed), a folder, or
   * missing (also when a parent is not a folder or is a link, as git counts it). Refused like readFile: a hard link,
   * a mount point, a FIFO, a socket or a device, or a swap caught at the open.
   */
  async readEntry(requested: string, options: { maxBytes?: number } = {}): Promise<TreeEntry> {
    return this.entry(requested, options.maxBytes ?? DEFAULT_MAX_READ_BYTES, readAtMost);
  }

  /**
   * readEntry for a large file: its size handed to `start` (the size at the open: a file whose bytes then differ in
   * length is refused changed_during_open), then its bytes to `sink` a slice at a time (the slice is reused: copy
   * what you keep), the event loop turned between slices; the file's answer is its size instead of its bytes.
   */
  async streamEntry(
    requested: string,
    options: { maxBytes: number; start?: (size: number) => void; sink: (slice: Buffer) => void | Promise<void> },
  ): Promise<StreamedEntry> {
    return this.entry(requested, options.maxBytes, (handle, size, limit) => {
      options.start?.(size);
      return readInSlices(handle, size, limit, options.sink);
    });
  }

  private async entry<T>(
    requested: string,
    limit: number,
    read: (handle: FileHandle, size: number, limit: number) => Promise<T>,
  ): Promise<
    | { kind: 'missing' }
    | { kind: 'file'; data: T; executable: boolean }
    | { kind: 'symlink'; target: Buffer }
    | { kind: 'directory' }
  > {
    const { canonical, components } = await this.checkText(requested, { allowRoot: false });
    await this.checkMounts(canonical);
    let parent: Dir;
    try {
      parent = await this.walk(components.slice(0, -1), { create: false });
    } catch (error) {
      if (error instanceof ConfinementError && ['symlink', 'not_found', 'not_a_directory'].includes(error.reason))
        return { kind: 'missing' };
      throw error;
    }
    const name = components[components.length - 1];
    try {
      const child = this.child(parent, name);
      await this.beforeOpen?.(canonical);
      await this.verifyDir(parent);
      let stats: Stats;
      try {
        stats = await fsp.lstat(child);
      } catch (error) {
        if (errno(error) === 'ENOENT' || errno(error) === 'ENOTDIR') return { kind: 'missing' };
        throw error;
      }
      if (stats.isSymbolicLink()) {
        const target = await fsp.readlink(child, { encoding: 'buffer' });
        await this.verifyDir(parent);
        return { kind: 'symlink', target };
      }
      if (stats.dev !== this.rootDev) throw new ConfinementError('mount_point');
      if (stats.isDirectory()) return { kind: 'directory' };
      const refusal = typeRefusal(stats);
      if (refusal) throw new ConfinementError(refusal);
      if (stats.nlink > 1) throw new ConfinementError('hard_link');
      const handle = await this.openIn(parent, name, canonical, READ_FLAGS);
      try {
        const opened = await handle.stat();
        if (!opened.isFile()) throw new ConfinementError('changed_during_open');
        if (opened.nlink > 1) throw new ConfinementError('hard_link');
        if (opened.size > limit) throw new ConfinementError('too_large');
        return { kind: 'file', data: await read(handle, opened.size, limit), executable: (opened.mode & 0o100) !== 0 };
      } finally {
        await handle.close();
      }
    } catch (error) {
      throw fsError(error);
    } finally {
      await parent.handle?.close();
    }
  }

  /**
   * The canonical absolute path inside the worktree that `requested` names (it need not exist: the components
   * that exist are checked, none may be a link, a device, a FIFO or a socket). The path is for display and for
   * git; to touch the file use this class's operations, which check again at the open.
   */
  async resolve(requested: string): Promise<string> {
    return (await this.check(requested, { allowRoot: true })).canonical;
  }

  /** The contents of a regular file (refused beyond `maxBytes`, 16 MiB by default). */
  async readFile(requested: string, options: { maxBytes?: number } = {}): Promise<Buffer> {
    const { canonical, components } = await this.check(requested, { allowRoot: false });
    const handle = await this.openConfined(components, canonical, READ_FLAGS);
    try {
      const stats = await handle.stat();
      if (stats.isDirectory()) throw new ConfinementError('is_a_directory');
      if (stats.nlink > 1) throw new ConfinementError('hard_link');
      const limit = options.maxBytes ?? DEFAULT_MAX_READ_BYTES;
      if (stats.size > limit) throw new ConfinementError('too_large');
      return await readAtMost(handle, stats.size, limit);
    } catch (error) {
      throw fsError(error);
    } finally {
      await handle.close();
    }
  }

  /**
   * Writes a file atomically: a temporary file created (O_EXCL, O_NOFOLLOW) in the same folder, then renamed over
   * the name. An existing name must be a regular file (its permission bits are kept; set-user-ID, set-group-ID and
   * sticky are not, as a write by its owner would clear them). `createParents` makes missing folders; `mode` is a new
   * file's permission bits (default 0o666; the umask applies; nothing beyond 0o777).
   */
  async writeFile(
    requested: string,
    data: string | Uint8Array,
    options: { createParents?: boolean; mode?: number } = {},
  ): Promise<void> {
    const { components } = await this.check(requested, { allowRoot: false, createParents: options.createParents });
    const name = components[components.length - 1];
    const parent = await this.walk(components.slice(0, -1), { create: options.createParents === true });
    try {
      let mode = (options.mode ?? 0o666) & 0o777;
      const target = path.join(parent.path, name);
      try {
        const existing = await fsp.lstat(this.child(parent, name));
        const refusal = typeRefusal(existing);
        if (refusal) throw new ConfinementError(refusal);
        if (existing.isDirectory()) throw new ConfinementError('is_a_directory');
        if (existing.nlink > 1) throw new ConfinementError('hard_link');
        mode = existing.mode & 0o777;
      } catch (error) {
        if (errno(error) !== 'ENOENT') throw error;
      }
      const temp = `.sw4rm-write-${randomBytes(8).toString('hex')}.tmp`;
      await this.beforeOpen?.(target);
      await this.verifyDir(parent);
      const handle = await fsp.open(this.child(parent, temp), CREATE_FLAGS, mode);
      let renamed = false;
      try {
        try {
          await this.verifyOpened(handle, path.join(parent.path, temp));
          await handle.writeFile(data);
          await handle.sync();
        } finally {
          await handle.close();
        }
        await fsp.rename(this.child(parent, temp), this.child(parent, name));
        renamed = true;
      } finally {
        if (!renamed) await fsp.unlink(this.child(parent, temp)).catch(() => undefined);
      }
    } catch (error) {
      throw fsError(error);
    } finally {
      await parent.handle?.close();
    }
  }

  /** The entries of a folder, without following links (a link is listed as 'symlink'); `.git` names are left out. */
  async listDir(requested: string): Promise<DirEntry[]> {
    const { components } = await this.check(requested, { allowRoot: true });
    const dir = await this.walk(components, { create: false });
    try {
      if (!dir.handle) await this.beforeOpen?.(dir.path);
      await this.verifyDir(dir);
      const entries = await fsp.readdir(dir.handle ? `/proc/self/fd/${dir.handle.fd}` : dir.path, {
        withFileTypes: true,
      });
      if (!dir.handle) await this.verifyPath(dir.path);
      return entries
        .filter((entry) => !isGitName(entry.name))
        .map(
          (entry) =>
            ({
              name: entry.name,
              type: entry.isFile()
                ? 'file'
                : entry.isDirectory()
                  ? 'directory'
                  : entry.isSymbolicLink()
                    ? 'symlink'
                    : 'other',
            }) satisfies DirEntry,
        )
        .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    } catch (error) {
      throw fsError(error);
    } finally {
      await dir.handle?.close();
    }
  }

  /** Type, size, modification time and mode of a regular file or folder. */
  async stat(requested: string): Promise<FileStat> {
    const { canonical, components } = await this.check(requested, { allowRoot: true });
    const handle =
      components.length === 0 ? await this.openRoot() : await this.openConfined(components, canonical, READ_FLAGS);
    try {
      const stats = await handle.stat();
      if (stats.isFile() && stats.nlink > 1) throw new ConfinementError('hard_link');
      return {
        type: stats.isDirectory() ? 'directory' : 'file',
        size: stats.size,
        mtimeMs: stats.mtimeMs,
        mode: stats.mode & 0o7777,
      };
    } catch (error) {
      throw fsError(error);
    } finally {
      await handle.close();
    }
  }

  /** Removes a regular file's name (never a folder, never a link, never what a link points to). */
  async deleteFile(requested: string): Promise<void> {
    const { canonical, components } = await this.check(requested, { allowRoot: false });
    const parent = await this.walk(components.slice(0, -1), { create: false });
    try {
      const target = this.child(parent, components[components.length - 1]);
      await this.beforeOpen?.(canonical);
      await this.verifyDir(parent);
      const stats = await fsp.lstat(target);
      const refusal = typeRefusal(stats);
      if (refusal) throw new ConfinementError(refusal);
      if (stats.isDirectory()) throw new ConfinementError('is_a_directory');
      if (stats.nlink > 1) throw new ConfinementError('hard_link');
      await fsp.unlink(target);
    } catch (error) {
      throw fsError(error);
    } finally {
      await parent.handle?.close();
    }
  }

  /** Makes a folder (and, with `recursive`, its missing parents); an existing folder is fine with `recursive`. */
  async mkdir(requested: string, options: { recursive?: boolean } = {}): Promise<void> {
    const { canonical, components } = await this.check(requested, {
      allowRoot: false,
      createParents: options.recursive,
    });
    const parent = await this.walk(components.slice(0, -1), { create: options.recursive === true });
    try {
      const target = this.child(parent, components[components.length - 1]);
      await this.beforeOpen?.(canonical);
      await this.verifyDir(parent);
      try {
        await fsp.mkdir(target, 0o777);
      } catch (error) {
        if (errno(error) !== 'EEXIST' || !options.recursive) throw error;
        const stats = await fsp.lstat(target);
        const refusal = typeRefusal(stats);
        if (refusal) throw new ConfinementError(refusal);
        if (!stats.isDirectory()) throw new ConfinementError('already_exists');
      }
    } catch (error) {
      throw fsError(error);
    } finally {
      await parent.handle?.close();
    }
  }
}
