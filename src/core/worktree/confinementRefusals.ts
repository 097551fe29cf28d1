import type { Stats } from 'node:fs';
import { SwarmError, type ErrorKind, type Sw4rmCode } from '../kernel/errors';

/**
 * What the confinement refuses and why (confinement.ts): its error, with the reason named and never a real path, the
 * limits of a requested path, and the check of a requested path's text (pure: no file system).
 */

export type ConfinementErrorCode = 'permission_denied' | 'worktree_not_bound' | 'not_found' | 'filesystem_error';

/** Why a path was refused; the message names the reason and never a real path. */
export type ConfinementReason =
  | 'not_a_string'
  | 'absolute_path'
  | 'parent_traversal'
  | 'encoded_traversal'
  | 'lookalike_traversal'
  | 'backslash'
  | 'nul_byte'
  | 'control_character'
  | 'path_too_long'
  | 'component_too_long'
  | 'git_metadata'
  | 'device_name'
  | 'windows_name'
  | 'symlink'
  | 'device_node'
  | 'fifo'
  | 'socket'
  | 'not_regular_file'
  | 'hard_link'
  | 'outside_worktree'
  | 'mount_point'
  | 'changed_during_open'
  | 'root'
  | 'too_large'
  | 'worktree_missing'
  | 'not_found'
  | 'not_a_directory'
  | 'is_a_directory'
  | 'already_exists'
  | 'io_error';

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
  git_metadata: "the git metadata (.git and the repository's git directory) is not accessible to agents",
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

export class ConfinementError extends SwarmError {
  readonly code: ConfinementErrorCode;
  constructor(
    readonly reason: ConfinementReason,
    detail?: string,
  ) {
    const code = CODE_OF[reason] ?? 'permission_denied';
    super(`${code}: ${REASON_TEXT[reason]}${detail ? ` (${detail})` : ''}`);
    this.name = 'ConfinementError';
    this.code = code;
  }

  /** The status the workspace tools answer it with: permission_denied, worktree_not_bound (a precondition), not_found; else a precondition (too_large: exhausted). */
  get errorKind(): ErrorKind {
    switch (this.code) {
      case 'permission_denied':
        return 'permission';
      case 'worktree_not_bound':
        return 'precondition';
      case 'not_found':
        return 'not_found';
      default:
        return this.reason === 'too_large' ? 'exhausted' : 'precondition';
    }
  }

  /** The code the workspace tools' details start with (README, "Workspace tools"): the confinement's own code. */
  get errorCode(): Sw4rmCode {
    return this.code;
  }
}

/** Limits of a requested path (bytes of UTF-8), those of Linux's PATH_MAX and NAME_MAX. */
export const MAX_PATH_BYTES = 4096;
export const MAX_COMPONENT_BYTES = 255;
/** readFile refuses larger files unless the caller passes its own `maxBytes`. */
export const DEFAULT_MAX_READ_BYTES = 16 * 1024 * 1024;

// ---------------------------------------------------------------------------------------------------------------
// The text of a requested path (pure).

/** A name as a case-insensitive or normalising file system may see it: NFKD, without marks and ignorables, lower case. */
function foldName(name: string): string {
  return name
    .normalize('NFKD')
    .replace(/\p{M}/gu, '')
    .replace(/\p{Default_Ignorable_Code_Point}/gu, '')
    .toLowerCase()
    .replace(/\u0131/g, 'i');
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

const WINDOWS_DEVICE =
  /^(con|prn|aux|nul|com[0-9\u00b9\u00b2\u00b3]|lpt[0-9\u00b9\u00b2\u00b3]|conin\$|conout\$)(\..*)?$/;

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
    if (extra < 0) {
      out += '\ufffd';
      continue;
    }
    let cp = extra === 0 ? b : b & (0x3f >> extra);
    let ok = true;
    for (let k = 1; k <= extra; k++) {
      const c = bytes[i + k];
      if (c === undefined || (c & 0xc0) !== 0x80) {
        ok = false;
        break;
      }
      cp = (cp << 6) | (c & 0x3f);
    }
    if (!ok || cp > 0x10ffff) {
      out += '\ufffd';
      continue;
    }
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
export function parseRequestedPath(
  requested: unknown,
  options: { windowsNames?: boolean } = {},
): { components: string[] } | { refused: ConfinementReason } {
  const windowsNames = options.windowsNames ?? process.platform === 'win32';
  if (typeof requested !== 'string') return { refused: 'not_a_string' };
  if (requested.includes('\0')) return { refused: 'nul_byte' };
  if (Buffer.byteLength(requested, 'utf8') > MAX_PATH_BYTES) return { refused: 'path_too_long' };
  if (requested.includes('\\')) return { refused: 'backslash' };
  if (requested.startsWith('/') || /^[A-Za-z]:/.test(requested) || /^~(\/|$)/.test(requested))
    return { refused: 'absolute_path' };
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
    if (folded === '.' || folded === '..' || folded.includes('/') || folded.includes('\\'))
      return { refused: 'lookalike_traversal' };
    if (windowsNames && WINDOWS_DEVICE.test(folded.replace(/[. ]+$/, ''))) return { refused: 'device_name' };
    if (windowsNames && WINDOWS_INVALID.test(raw)) return { refused: 'windows_name' };
    components.push(raw);
  }
  return { components };
}

// ---------------------------------------------------------------------------------------------------------------
// What the file system answered, as a refusal.

export function typeRefusal(stats: Stats): ConfinementReason | undefined {
  if (stats.isFile() || stats.isDirectory()) return undefined;
  if (stats.isSymbolicLink()) return 'symlink';
  if (stats.isBlockDevice() || stats.isCharacterDevice()) return 'device_node';
  if (stats.isFIFO()) return 'fifo';
  if (stats.isSocket()) return 'socket';
  return 'not_regular_file';
}

export function errno(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException | undefined)?.code;
}

/** An error of the file system as a ConfinementError, without the paths Node puts in its messages. */
export function fsError(error: unknown): ConfinementError {
  if (error instanceof ConfinementError) return error;
  switch (errno(error)) {
    case 'ENOENT':
      return new ConfinementError('not_found');
    case 'ENOTDIR':
      return new ConfinementError('not_a_directory');
    case 'EISDIR':
      return new ConfinementError('is_a_directory');
    case 'EEXIST':
    case 'ENOTEMPTY':
      return new ConfinementError('already_exists');
    case 'ELOOP':
      return new ConfinementError('symlink');
    case 'ENXIO':
    case 'ENODEV':
      return new ConfinementError('not_regular_file');
    case 'ENAMETOOLONG':
      return new ConfinementError('path_too_long');
    case 'EACCES':
    case 'EPERM':
    case 'EROFS':
      return new ConfinementError('io_error', 'access denied by the file system');
    default:
      return new ConfinementError('io_error', errno(error));
  }
}
