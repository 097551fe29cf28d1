import { randomBytes } from 'node:crypto';
import { constants as C, promises as fsp, type Stats } from 'node:fs';
import * as path from 'node:path';
import { yieldTurn } from '../inTurns';
import { namedGitDirs } from './gitDirs';

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
 */

export type ConfinementErrorCode = 'permission_denied' | 'worktree_not_bound' | 'not_found' | 'filesystem_error';

/** Why a path was refused; the message names the reason and never a real path. */
export type ConfinementReason =
  | 'not_a_string' | 'absolute_path' | 'parent_traversal' | 'encoded_traversal' | 'lookalike_traversal'
  | 'backslash' | 'nul_byte' | 'control_character' | 'path_too_long' | 'component_too_long' | 'git_metadata'
  | 'device_name' | 'windows_name' | 'symlink' | 'device_node' | 'fifo' | 'socket' | 'not_regular_file' | 'hard_link'
  | 'outside_worktree' | 'mount_point' | 'changed_during_open' | 'root' | 'too_large'
  | 'worktree_missing' | 'not_found' | 'not_a_directory' | 'is_a_directory' | 'already_exists' | 'io_error';

const REASON_TEXT: Record<ConfinementReason, string> = {
  not_a_string: 'the path is not a string',
  absolute_path: 'absolute paths are refused; give a path relative to the worktree',
  parent_traversal: '".." is refused in worktree paths',
  encoded_traversal: 'the path hides a separator, "..", NUL or ".git" in a percent or overlong encoding',
  lookalike_traversal: 'the path uses a Unicode look-alike of ".", ".." or a separator',
  backslash: 'backslashes are refused in worktree paths; use "/"',
  nul_byte: 'NUL bytes are refused in worktree paths',
  control_character: 'control characters are refused in worktree paths',
  path_too_long: 'the path is too long',
  component_too_long: 'a path component is longer than 255 bytes',
  git_metadata: 'the git metadata (.git and the repository\'s git directory) is not accessible to agents',
  device_name: 'the name is reserved for a device on Windows',
  windows_name: 'the name is not valid on Windows (a trailing dot or space, or one of < > : " | ? *)',
  symlink: 'the path goes through a symbolic link',
  device_node: 'device nodes are refused',
  fifo: 'FIFOs are refused',
  socket: 'sockets are refused',
  not_regular_file: 'only regular files and directories are accessible',
  hard_link: 'the file has more than one hard link, so it may be a file outside the worktree',
  outside_worktree: 'the path is outside the worktree',
  mount_point: 'the path crosses into another file system mounted inside the worktree',
  changed_during_open: 'the path changed between its check and its open',
  root: 'the worktree root itself cannot be written or deleted',
  too_large: 'the file is larger than the limit for this read',
  worktree_missing: 'the worktree folder does not exist or is not a folder',
  not_found: 'no such file or folder in the worktree',
  not_a_directory: 'a component of the path is not a folder',
  is_a_directory: 'the path is a folder',
  already_exists: 'the path already exists',
  io_error: 'the file system refused the operation',
};

const CODE_OF: Partial<Record<ConfinementReason, ConfinementErrorCode>> = {
  worktree_missing: 'worktree_not_bound',
  not_found: 'not_found',
  not_a_directory: 'filesystem_error',
  is_a_directory: 'filesystem_error',
  already_exists: 'filesystem_error',
  io_error: 'filesystem_error',
  too_large: 'filesystem_error',
};

export class ConfinementError extends Error {
  readonly code: ConfinementErrorCode;
  constructor(readonly reason: ConfinementReason, detail?: string) {
    const code = CODE_OF[reason] ?? 'permission_denied';
    super(`${code}: ${REASON_TEXT[reason]}${detail ? ` (${detail})` : ''}`);
    this.name = 'ConfinementError';
    this.code = code;
  }
}

/** Limits of a requested path (bytes of UTF-8), those of Linux's PATH_MAX and NAME_MAX. */
export const MAX_PATH_BYTES = 4096;
export const MAX_COMPONENT_BYTES = 255;
/** readFile refuses larger files unless the caller passes its own `maxBytes`. */
export const DEFAULT_MAX_READ_BYTES = 16 * 1024 * 1024;

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
export interface DirEntry { name: string; type: EntryType }
export interface FileStat { type: 'file' | 'directory'; size: number; mtimeMs: number; mode: number }

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

/** The mount id of an open descriptor (Linux: /proc/self/fdinfo), or undefined where it is not known. */
async function mountIdOf(handle: FileHandle): Promise<number | undefined> {
  try {
    const match = /^mnt_id:\s*(\d+)/m.exec(await fsp.readFile(`/proc/self/fdinfo/${handle.fd}`, 'utf8'));
    return match ? Number(match[1]) : undefined;
  } catch {
    return undefined;
  }
}

/** A mountinfo field with its octal escapes (\040 for a space…) decoded. */
function unescapeMountField(field: string): string {
  return Buffer.from(field.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8))), 'latin1').toString('utf8');
}

/** Every mount point of this process's mount namespace (Linux: /proc/self/mountinfo); empty where there is none. */
export async function mountPoints(): Promise<string[]> {
  let text: string;
  try { text = await fsp.readFile('/proc/self/mountinfo', 'utf8'); } catch { return []; }
  const points: string[] = [];
  for (const line of text.split('\n')) {
    const fields = line.split(' ');
    if (fields.length > 4) points.push(unescapeMountField(fields[4]));
  }
  return points;
}

// ---------------------------------------------------------------------------------------------------------------
// The text of a requested path (pure).

/** A name as a case-insensitive or normalising file system may see it: NFKD, without marks and ignorables, lower case. */
function foldName(name: string): string {
  return name.normalize('NFKD').replace(/\p{M}/gu, '').replace(/\p{Default_Ignorable_Code_Point}/gu, '')
    .toLowerCase().replace(/\u0131/g, 'i');
}

/**
 * `.git` as git itself fears it on NTFS and HFS+: any case, ignorables, trailing dots or spaces, then the end or a
 * stream (`.git. ::$INDEX_ALLOCATION`), and its 8.3 short names (`GIT~1`, or `GIT~2` when `.github` took the first).
 */
export function isGitName(name: string): boolean {
  return /^(\.git|git~[0-9]+)[. ]*(:|$)/.test(foldName(name));
}

/** What Win32 would trim from a component (trailing dots and spaces) or read as a stream or a wildcard. */
const WINDOWS_INVALID = /[. ]$|[<>:"|?*]/;

const WINDOWS_DEVICE = /^(con|prn|aux|nul|com[0-9\u00b9\u00b2\u00b3]|lpt[0-9\u00b9\u00b2\u00b3]|conin\$|conout\$)(\..*)?$/;

/** Percent-decodes to bytes and reads them as UTF-8 leniently, overlong forms included (%c0%ae is "."). */
function decodeLeniently(text: string): string {
  const bytes: number[] = [];
  for (let i = 0; i < text.length; i++) {
    if (text[i] === '%' && /^[0-9a-fA-F]{2}$/.test(text.slice(i + 1, i + 3))) {
      bytes.push(parseInt(text.slice(i + 1, i + 3), 16));
      i += 2;
    } else {
      bytes.push(...Buffer.from(text[i], 'utf8'));
    }
  }
  let out = '';
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i];
    const extra = b >= 0xf0 && b <= 0xf7 ? 3 : b >= 0xe0 ? (b <= 0xef ? 2 : -1) : b >= 0xc0 ? 1 : b >= 0x80 ? -1 : 0;
    if (extra < 0) { out += '\ufffd'; continue; }
    let cp = extra === 0 ? b : b & (0x3f >> extra);
    let ok = true;
    for (let k = 1; k <= extra; k++) {
      const c = bytes[i + k];
      if (c === undefined || (c & 0xc0) !== 0x80) { ok = false; break; }
      cp = (cp << 6) | (c & 0x3f);
    }
    if (!ok || cp > 0x10ffff) { out += '\ufffd'; continue; }
    out += String.fromCodePoint(cp);
    i += extra;
  }
  return out;
}

function checkName(name: string, decoded: boolean): ConfinementReason | undefined {
  if (name.includes('\0')) return decoded ? 'encoded_traversal' : 'nul_byte';
  if (name.includes('\\')) return decoded ? 'encoded_traversal' : 'backslash';
  if (name.includes('/')) return 'encoded_traversal';
  if (name === '..') return decoded ? 'encoded_traversal' : 'parent_traversal';
  if (decoded && name === '.') return 'encoded_traversal';
  if (isGitName(name)) return decoded ? 'encoded_traversal' : 'git_metadata';
  return undefined;
}

/**
 * The components of a requested path, or why it is refused. Empty and "." components are dropped; everything
 * else is taken literally (a name with "%" in it is that name: it is decoded only to look for hidden traversal).
 */
export function parseRequestedPath(requested: unknown, options: { windowsNames?: boolean } = {}): { components: string[] } | { refused: ConfinementReason } {
  const windowsNames = options.windowsNames ?? process.platform === 'win32';
  if (typeof requested !== 'string') return { refused: 'not_a_string' };
  if (requested.includes('\0')) return { refused: 'nul_byte' };
  if (Buffer.byteLength(requested, 'utf8') > MAX_PATH_BYTES) return { refused: 'path_too_long' };
  if (requested.includes('\\')) return { refused: 'backslash' };
  if (requested.startsWith('/') || /^[A-Za-z]:/.test(requested) || /^~(\/|$)/.test(requested)) return { refused: 'absolute_path' };
  const components: string[] = [];
  for (const raw of requested.split('/')) {
    if (raw === '' || raw === '.') continue;
    if (/[\u0000-\u001f\u007f]/.test(raw)) return { refused: 'control_character' };
    if (Buffer.byteLength(raw, 'utf8') > MAX_COMPONENT_BYTES) return { refused: 'component_too_long' };
    const plain = checkName(raw, false);
    if (plain) return { refused: plain };
    let text = raw;
    for (let round = 0; round < 4 && text.includes('%'); round++) {
      const next = decodeLeniently(text);
      if (next === text) break;
      const hidden = checkName(next, true);
      if (hidden) return { refused: hidden };
      text = next;
    }
    const folded = foldName(raw);
    if (folded === '.' || folded === '..' || folded.includes('/') || folded.includes('\\')) return { refused: 'lookalike_traversal' };
    if (windowsNames && WINDOWS_DEVICE.test(folded.replace(/[. ]+$/, ''))) return { refused: 'device_name' };
    if (windowsNames && WINDOWS_INVALID.test(raw)) return { refused: 'windows_name' };
    components.push(raw);
  }
  return { components };
}

// ---------------------------------------------------------------------------------------------------------------
// The file system side.

const O_NOFOLLOW = C.O_NOFOLLOW ?? 0;
const O_DIRECTORY = C.O_DIRECTORY ?? 0;
const O_NONBLOCK = C.O_NONBLOCK ?? 0;
const O_NOCTTY = C.O_NOCTTY ?? 0;
const DIR_FLAGS = C.O_RDONLY | O_DIRECTORY | O_NOFOLLOW;
const READ_FLAGS = C.O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY;
const CREATE_FLAGS = C.O_WRONLY | C.O_CREAT | C.O_EXCL | O_NOFOLLOW | O_NOCTTY;

type FileHandle = fsp.FileHandle;

/** A directory the walk has reached: its canonical path and, with 'proc-fd', an open descriptor of it. */
interface Dir { path: string; handle?: FileHandle }

function typeRefusal(stats: Stats): ConfinementReason | undefined {
  if (stats.isFile() || stats.isDirectory()) return undefined;
  if (stats.isSymbolicLink()) return 'symlink';
  if (stats.isBlockDevice() || stats.isCharacterDevice()) return 'device_node';
  if (stats.isFIFO()) return 'fifo';
  if (stats.isSocket()) return 'socket';
  return 'not_regular_file';
}

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
async function readInSlices(handle: FileHandle, expectedSize: number, limit: number, sink: (slice: Buffer) => void | Promise<void>): Promise<number> {
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

function errno(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException | undefined)?.code;
}

/** An error of the file system as a ConfinementError, without the paths Node puts in its messages. */
function fsError(error: unknown): ConfinementError {
  if (error instanceof ConfinementError) return error;
  switch (errno(error)) {
    case 'ENOENT': return new ConfinementError('not_found');
    case 'ENOTDIR': return new ConfinementError('not_a_directory');
    case 'EISDIR': return new ConfinementError('is_a_directory');
    case 'EEXIST': case 'ENOTEMPTY': return new ConfinementError('already_exists');
    case 'ELOOP': return new ConfinementError('symlink');
    case 'ENXIO': case 'ENODEV': return new ConfinementError('not_regular_file');
    case 'ENAMETOOLONG': return new ConfinementError('path_too_long');
    case 'EACCES': case 'EPERM': case 'EROFS': return new ConfinementError('io_error', 'access denied by the file system');
    default: return new ConfinementError('io_error', errno(error));
  }
}

function isInside(root: string, candidate: string): boolean {
  return candidate === root || candidate.startsWith(root.endsWith(path.sep) ? root : root + path.sep);
}

export class Confinement {
  private constructor(
    /** The worktree's canonical (realpath) root. */
    readonly root: string,
    private readonly rootDev: number,
    private readonly gitDirs: readonly string[],
    private readonly strategy: 'proc-fd' | 'path',
    private readonly beforeOpen: ConfinementOptions['beforeOpen'],
    private readonly windowsNames: boolean,
    /** The root's mount id (Linux), which every descriptor the walk opens must share. */
    private readonly rootMountId: number | undefined,
  ) {}

  /** Mount points strictly inside the root, read once per Confinement (one per tool call). */
  private mountsInside: Promise<string[]> | undefined;

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
        try { await fsp.access('/proc/self/fd', C.R_OK); strategy = 'proc-fd'; } catch { /* no /proc: the path walk */ }
      }
    }
    let rootMountId: number | undefined;
    if (strategy === 'proc-fd') {
      try {
        const handle = await fsp.open(canonical, DIR_FLAGS);
        try { rootMountId = await mountIdOf(handle); } finally { await handle.close(); }
      } catch {
        throw new ConfinementError('worktree_missing');
      }
    }
    return new Confinement(canonical, stats.dev, gitDirs, strategy, options.beforeOpen, options.windowsNames ?? process.platform === 'win32', rootMountId);
  }

  /** The mount points inside the worktree (bind mounts included), relative to its root, "/" separated. */
  async mountPointsInside(): Promise<string[]> {
    this.mountsInside ??= mountPoints().then((points) => points.filter((p) => p !== this.root && isInside(this.root, p)));
    return (await this.mountsInside).map((p) => p.slice(this.root.length + 1).split(path.sep).join('/'));
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
  async streamEntry(requested: string, options: { maxBytes: number; start?: (size: number) => void; sink: (slice: Buffer) => void | Promise<void> }): Promise<StreamedEntry> {
    return this.entry(requested, options.maxBytes, (handle, size, limit) => {
      options.start?.(size);
      return readInSlices(handle, size, limit, options.sink);
    });
  }

  private async entry<T>(requested: string, limit: number, read: (handle: FileHandle, size: number, limit: number) => Promise<T>):
  Promise<{ kind: 'missing' } | { kind: 'file'; data: T; executable: boolean } | { kind: 'symlink'; target: Buffer } | { kind: 'directory' }> {
    const { canonical, components } = await this.checkText(requested, { allowRoot: false });
    await this.checkMounts(canonical);
    let parent: Dir;
    try {
      parent = await this.walk(components.slice(0, -1), { create: false });
    } catch (error) {
      if (error instanceof ConfinementError && ['symlink', 'not_found', 'not_a_directory'].includes(error.reason)) return { kind: 'missing' };
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
  async writeFile(requested: string, data: string | Uint8Array, options: { createParents?: boolean; mode?: number } = {}): Promise<void> {
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
      const entries = await fsp.readdir(dir.handle ? `/proc/self/fd/${dir.handle.fd}` : dir.path, { withFileTypes: true });
      if (!dir.handle) await this.verifyPath(dir.path);
      return entries
        .filter((entry) => !isGitName(entry.name))
        .map((entry) => ({
          name: entry.name,
          type: entry.isFile() ? 'file' : entry.isDirectory() ? 'directory' : entry.isSymbolicLink() ? 'symlink' : 'other',
        } satisfies DirEntry))
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
    const handle = components.length === 0
      ? await this.openRoot()
      : await this.openConfined(components, canonical, READ_FLAGS);
    try {
      const stats = await handle.stat();
      if (stats.isFile() && stats.nlink > 1) throw new ConfinementError('hard_link');
      return { type: stats.isDirectory() ? 'directory' : 'file', size: stats.size, mtimeMs: stats.mtimeMs, mode: stats.mode & 0o7777 };
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
    const { canonical, components } = await this.check(requested, { allowRoot: false, createParents: options.recursive });
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

  // -------------------------------------------------------------------------------------------------------------

  /**
   * The check before any open: the text of the path, then every existing component with lstat (no links, no
   * special files, no other file system, nothing inside a git directory). Missing components are fine only
   * where the operation creates them.
   */
  private async check(requested: string, options: { allowRoot: boolean; createParents?: boolean }): Promise<{ canonical: string; components: string[] }> {
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
  private async checkMounts(canonical: string): Promise<void> {
    this.mountsInside ??= mountPoints().then((points) => points.filter((p) => p !== this.root && isInside(this.root, p)));
    if ((await this.mountsInside).some((point) => isInside(point, canonical))) throw new ConfinementError('mount_point');
  }

  /** The text of the path, its place (inside the root, outside every git directory), and the root still a folder. */
  private async checkText(requested: string, options: { allowRoot: boolean }): Promise<{ canonical: string; components: string[] }> {
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
  private child(dir: Dir, name: string): string {
    return dir.handle ? `/proc/self/fd/${dir.handle.fd}/${name}` : path.join(dir.path, name);
  }

  private async openRoot(): Promise<FileHandle> {
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
  private async walk(components: readonly string[], options: { create: boolean }): Promise<Dir> {
    if (this.strategy === 'path') {
      let current = this.root;
      for (const name of components) {
        current = path.join(current, name);
        await this.beforeOpen?.(current);
        if (options.create) await fsp.mkdir(current).catch((error) => { if (errno(error) !== 'EEXIST') throw fsError(error); });
        const stats = await fsp.lstat(current).catch((error) => { throw fsError(error); });
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
        if (options.create) await fsp.mkdir(this.child(dir, name)).catch((error) => { if (errno(error) !== 'EEXIST') throw error; });
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
  private async openConfined(components: readonly string[], canonical: string, flags: number): Promise<FileHandle> {
    const parent = await this.walk(components.slice(0, -1), { create: false });
    try {
      return await this.openIn(parent, components[components.length - 1], canonical, flags);
    } finally {
      await parent.handle?.close();
    }
  }

  /** Opens `name` in the folder the walk reached and verifies what was opened (type, file system, mount, real path). */
  private async openIn(parent: Dir, name: string, canonical: string, flags: number): Promise<FileHandle> {
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
  private async checkMountId(handle: FileHandle): Promise<void> {
    if (this.rootMountId === undefined) return;
    const id = await mountIdOf(handle);
    if (id !== undefined && id !== this.rootMountId) throw new ConfinementError('mount_point');
  }

  /** Why opening `name` in `dir` failed: a link (ELOOP, or ENOTDIR for a link where a folder was expected) or else. */
  private async classifyOpenFailure(dir: Dir, name: string, error: unknown): Promise<ConfinementError> {
    if (errno(error) === 'ELOOP' || errno(error) === 'ENOTDIR') {
      try {
        const stats = await fsp.lstat(this.child(dir, name));
        const refusal = typeRefusal(stats);
        if (refusal) return new ConfinementError(refusal);
      } catch { /* gone again: report the open's own failure */ }
    }
    return fsError(error);
  }

  /**
   * What was opened is what was checked: on Linux the descriptor's real path (readlink of /proc/self/fd/N) is
   * exactly the expected canonical path; elsewhere the path still names the same inode and resolves to itself.
   */
  private async verifyOpened(handle: FileHandle, expected: string): Promise<void> {
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
  private async verifyDir(dir: Dir): Promise<void> {
    if (dir.handle) await this.verifyOpened(dir.handle, dir.path);
    else await this.verifyPath(dir.path);
  }

  /** The path resolves (following everything) to itself, inside the root. */
  private async verifyPath(expected: string): Promise<void> {
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
