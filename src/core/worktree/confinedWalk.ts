import { constants as C, promises as fsp, type Stats } from 'node:fs';
import * as path from 'node:path';
import {
  ConfinementError,
  MAX_PATH_BYTES,
  errno,
  fsError,
  parseRequestedPath,
  typeRefusal,
} from './confinementRefusals';

/**
 * The walk of the confinement (confinement.ts): a requested path checked (its text, then every existing component with
 * lstat), walked component by component without following a link, opened with O_NOFOLLOW and verified after the open;
 * and the mount points it must not cross. The operations (Confinement) are built on it.
 */

const O_NOFOLLOW = C.O_NOFOLLOW ?? 0;
const O_DIRECTORY = C.O_DIRECTORY ?? 0;
const O_NONBLOCK = C.O_NONBLOCK ?? 0;
const O_NOCTTY = C.O_NOCTTY ?? 0;
export const DIR_FLAGS = C.O_RDONLY | O_DIRECTORY | O_NOFOLLOW;
export const READ_FLAGS = C.O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY;
export const CREATE_FLAGS = C.O_WRONLY | C.O_CREAT | C.O_EXCL | O_NOFOLLOW | O_NOCTTY;

export type FileHandle = fsp.FileHandle;

/** A directory the walk has reached: its canonical path and, with 'proc-fd', an open descriptor of it. */
export interface Dir {
  path: string;
  handle?: FileHandle;
}

/** The mount id of an open descriptor (Linux: /proc/self/fdinfo), or undefined where it is not known. */
export async function mountIdOf(handle: FileHandle): Promise<number | undefined> {
  try {
    const match = /^mnt_id:\s*(\d+)/m.exec(await fsp.readFile(`/proc/self/fdinfo/${handle.fd}`, 'utf8'));
    return match ? Number(match[1]) : undefined;
  } catch {
    return undefined;
  }
}

/** A mountinfo field with its octal escapes (\040 for a space…) decoded. */
function unescapeMountField(field: string): string {
  return Buffer.from(
    field.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8))),
    'latin1',
  ).toString('utf8');
}

/** Every mount point of this process's mount namespace (Linux: /proc/self/mountinfo); empty where there is none. */
export async function mountPoints(): Promise<string[]> {
  let text: string;
  try {
    text = await fsp.readFile('/proc/self/mountinfo', 'utf8');
  } catch {
    return [];
  }
  const points: string[] = [];
  for (const line of text.split('\n')) {
    const fields = line.split(' ');
    if (fields.length > 4) points.push(unescapeMountField(fields[4]));
  }
  return points;
}

export function isInside(root: string, candidate: string): boolean {
  return candidate === root || candidate.startsWith(root.endsWith(path.sep) ? root : root + path.sep);
}

/**
 * A worktree root and how to walk it: checks, the component-by-component walk, the opens and their verification. The
 * operations (Confinement) extend it; nothing here reads or writes a file's content.
 */
export abstract class ConfinedWalk {
  protected constructor(
    /** The worktree's canonical (realpath) root. */
    readonly root: string,
    protected readonly rootDev: number,
    protected readonly gitDirs: readonly string[],
    protected readonly strategy: 'proc-fd' | 'path',
    protected readonly beforeOpen: ((canonicalPath: string) => void | Promise<void>) | undefined,
    protected readonly windowsNames: boolean,
    /** The root's mount id (Linux), which every descriptor the walk opens must share. */
    protected readonly rootMountId: number | undefined,
  ) {}

  /** Mount points strictly inside the root, read once per Confinement (one per tool call). */
  protected mountsInside: Promise<string[]> | undefined;

  /**
   * The check before any open: the text of the path, then every existing component with lstat (no links, no
   * special files, no other file system, nothing inside a git directory). Missing components are fine only
   * where the operation creates them.
   */
  protected async check(
    requested: string,
    options: { allowRoot: boolean; createParents?: boolean },
  ): Promise<{ canonical: string; components: string[] }> {
    const { canonical, components } = await this.checkText(requested, options);
    await this.checkMounts(canonical);
    let current = this.root;
    for (let i = 0; i < components.length; i++) {
      current = path.join(current, components[i]);
      let stats: Stats;
      try {
        stats = await fsp.lstat(current);
      } catch (error) {
        if (errno(error) === 'ENOENT') {
          if (i < components.length - 1 && !options.createParents) throw new ConfinementError('not_found');
          break;
        }
        throw fsError(error);
      }
      const refusal = typeRefusal(stats);
      if (refusal) throw new ConfinementError(refusal);
      if (stats.dev !== this.rootDev) throw new ConfinementError('mount_point');
      if (i < components.length - 1 && !stats.isDirectory()) throw new ConfinementError('not_a_directory');
      if (stats.isFile() && stats.nlink > 1) throw new ConfinementError('hard_link');
    }
    return { canonical, components };
  }

  /** A mount point at or above `canonical` inside the worktree (a bind mount shares st_dev, so mountinfo says). */
  protected async checkMounts(canonical: string): Promise<void> {
    this.mountsInside ??= mountPoints().then((points) =>
      points.filter((p) => p !== this.root && isInside(this.root, p)),
    );
    if ((await this.mountsInside).some((point) => isInside(point, canonical)))
      throw new ConfinementError('mount_point');
  }

  /** The text of the path, its place (inside the root, outside every git directory), and the root still a folder. */
  protected async checkText(
    requested: string,
    options: { allowRoot: boolean },
  ): Promise<{ canonical: string; components: string[] }> {
    const parsed = parseRequestedPath(requested, { windowsNames: this.windowsNames });
    if ('refused' in parsed) throw new ConfinementError(parsed.refused);
    const { components } = parsed;
    if (components.length === 0 && !options.allowRoot) throw new ConfinementError('root');
    const canonical = path.join(this.root, ...components);
    if (Buffer.byteLength(canonical, 'utf8') >= MAX_PATH_BYTES) throw new ConfinementError('path_too_long');
    if (!isInside(this.root, canonical)) throw new ConfinementError('outside_worktree');
    if (this.gitDirs.some((dir) => isInside(dir, canonical))) throw new ConfinementError('git_metadata');
    try {
      const rootStats = await fsp.stat(this.root);
      if (!rootStats.isDirectory()) throw new ConfinementError('worktree_missing');
    } catch (error) {
      if (error instanceof ConfinementError) throw error;
      throw new ConfinementError('worktree_missing');
    }
    return { canonical, components };
  }

  /** `name` inside `dir`, as a path the kernel resolves through the held descriptor when there is one. */
  protected child(dir: Dir, name: string): string {
    return dir.handle ? `/proc/self/fd/${dir.handle.fd}/${name}` : path.join(dir.path, name);
  }

  protected async openRoot(): Promise<FileHandle> {
    let handle: FileHandle;
    try {
      await this.beforeOpen?.(this.root);
      handle = await fsp.open(this.root, DIR_FLAGS);
    } catch {
      throw new ConfinementError('worktree_missing');
    }
    try {
      await this.verifyOpened(handle, this.root);
      return handle;
    } catch (error) {
      await handle.close();
      throw error;
    }
  }

  /**
   * Walks from the root to the folder `components` name, component by component, never following a link:
   * with 'proc-fd' each folder is opened (O_DIRECTORY | O_NOFOLLOW) relative to the descriptor of its parent.
   */
  protected async walk(components: readonly string[], options: { create: boolean }): Promise<Dir> {
    if (this.strategy === 'path') {
      let current = this.root;
      for (const name of components) {
        current = path.join(current, name);
        await this.beforeOpen?.(current);
        if (options.create)
          await fsp.mkdir(current).catch((error) => {
            if (errno(error) !== 'EEXIST') throw fsError(error);
          });
        const stats = await fsp.lstat(current).catch((error) => {
          throw fsError(error);
        });
        const refusal = typeRefusal(stats);
        if (refusal) throw new ConfinementError(refusal);
        if (!stats.isDirectory()) throw new ConfinementError('not_a_directory');
        if (stats.dev !== this.rootDev) throw new ConfinementError('mount_point');
      }
      await this.verifyPath(current);
      return { path: current };
    }
    let dir: Dir = { path: this.root, handle: await this.openRoot() };
    try {
      for (const name of components) {
        const next = path.join(dir.path, name);
        await this.beforeOpen?.(next);
        if (options.create)
          await fsp.mkdir(this.child(dir, name)).catch((error) => {
            if (errno(error) !== 'EEXIST') throw error;
          });
        let handle: FileHandle;
        try {
          handle = await fsp.open(this.child(dir, name), DIR_FLAGS);
        } catch (error) {
          throw await this.classifyOpenFailure(dir, name, error);
        }
        await dir.handle?.close();
        dir = { path: next, handle };
        const stats = await handle.stat();
        if (stats.dev !== this.rootDev) throw new ConfinementError('mount_point');
        await this.checkMountId(handle);
      }
      await this.verifyOpened(dir.handle!, dir.path);
      return dir;
    } catch (error) {
      await dir.handle?.close();
      throw fsError(error);
    }
  }

  /** Opens the file `components` name (the last one with O_NOFOLLOW and O_NONBLOCK) and verifies what was opened. */
  protected async openConfined(components: readonly string[], canonical: string, flags: number): Promise<FileHandle> {
    const parent = await this.walk(components.slice(0, -1), { create: false });
    try {
      return await this.openIn(parent, components[components.length - 1], canonical, flags);
    } finally {
      await parent.handle?.close();
    }
  }

  /** Opens `name` in the folder the walk reached and verifies what was opened (type, file system, mount, real path). */
  protected async openIn(parent: Dir, name: string, canonical: string, flags: number): Promise<FileHandle> {
    let handle: FileHandle;
    try {
      await this.beforeOpen?.(canonical);
      handle = await fsp.open(this.child(parent, name), flags);
    } catch (error) {
      throw await this.classifyOpenFailure(parent, name, error);
    }
    try {
      const stats = await handle.stat();
      const refusal = typeRefusal(stats);
      if (refusal) throw new ConfinementError(refusal);
      if (stats.dev !== this.rootDev) throw new ConfinementError('mount_point');
      await this.checkMountId(handle);
      await this.verifyOpened(handle, canonical);
      return handle;
    } catch (error) {
      await handle.close();
      throw fsError(error);
    }
  }

  /** The descriptor is on the root's mount (a bind mount of the same file system has the same st_dev, not the same mount). */
  protected async checkMountId(handle: FileHandle): Promise<void> {
    if (this.rootMountId === undefined) return;
    const id = await mountIdOf(handle);
    if (id !== undefined && id !== this.rootMountId) throw new ConfinementError('mount_point');
  }

  /** Why opening `name` in `dir` failed: a link (ELOOP, or ENOTDIR for a link where a folder was expected) or else. */
  protected async classifyOpenFailure(dir: Dir, name: string, error: unknown): Promise<ConfinementError> {
    if (errno(error) === 'ELOOP' || errno(error) === 'ENOTDIR') {
      try {
        const stats = await fsp.lstat(this.child(dir, name));
        const refusal = typeRefusal(stats);
        if (refusal) return new ConfinementError(refusal);
      } catch {
        /* gone again: report the open's own failure */
      }
    }
    return fsError(error);
  }

  /**
   * What was opened is what was checked: on Linux the descriptor's real path (readlink of /proc/self/fd/N) is
   * exactly the expected canonical path; elsewhere the path still names the same inode and resolves to itself.
   */
  protected async verifyOpened(handle: FileHandle, expected: string): Promise<void> {
    if (this.strategy === 'proc-fd') {
      let actual: string;
      try {
        actual = await fsp.readlink(`/proc/self/fd/${handle.fd}`);
      } catch {
        throw new ConfinementError('changed_during_open');
      }
      if (!isInside(this.root, actual)) throw new ConfinementError('outside_worktree');
      if (actual !== expected) throw new ConfinementError('changed_during_open');
      return;
    }
    const opened = await handle.stat();
    let named: Stats;
    try {
      named = await fsp.stat(expected);
    } catch {
      throw new ConfinementError('changed_during_open');
    }
    await this.verifyPath(expected);
    if (opened.ino !== named.ino || opened.dev !== named.dev) throw new ConfinementError('changed_during_open');
  }

  /** The folder the walk reached is still where it was: its descriptor's real path, or its path's. */
  protected async verifyDir(dir: Dir): Promise<void> {
    if (dir.handle) await this.verifyOpened(dir.handle, dir.path);
    else await this.verifyPath(dir.path);
  }

  /** The path resolves (following everything) to itself, inside the root. */
  protected async verifyPath(expected: string): Promise<void> {
    let real: string;
    try {
      real = await fsp.realpath(expected);
    } catch {
      throw new ConfinementError('changed_during_open');
    }
    if (!isInside(this.root, real)) throw new ConfinementError('outside_worktree');
    if (real !== expected) throw new ConfinementError('changed_during_open');
  }
}
