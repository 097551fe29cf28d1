// The confinement attack corpus (issue 15, parts 5 and 11), shared by the confinement tests of the module
// (test/integration/confinement.integration.test.ts) and the same attacks sent as real gRPC tool calls
// (test/integration/workspaceTools.integration.test.ts): a real worktree with canary files outside, links, special
// files and nested .git folders planted in it, and the attacks, each with the confinement reason it must be refused for.
import { strict as assert } from 'node:assert';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import type { ConfinementReason } from '../../src/core/worktree/confinement';
import { makeTempDir, removeTempDir } from './tempDir';

export const SECRET = 'SECRET-CANARY-7f3a';

/** The operations an attack goes through (the unit test runs each on the Confinement; the gRPC test as a tool). */
export type Op = 'resolve' | 'read' | 'write' | 'writeParents' | 'list' | 'stat' | 'delete' | 'mkdir';
export const ALL_OPS: readonly Op[] = ['resolve', 'read', 'write', 'writeParents', 'list', 'stat', 'delete', 'mkdir'];

function git(cwd: string, ...args: string[]): string {
  return execFileSync(
    'git',
    ['-c', 'user.name=Test', '-c', 'user.email=test@example.com', '-c', 'init.defaultBranch=main', ...args],
    { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] },
  );
}

/** Every name under `dir` (not following links) with its type, link target or content digest and inode. */
export function snapshot(dir: string, into = new Map<string, string>(), prefix = ''): Map<string, string> {
  for (const name of fs.readdirSync(dir).sort()) {
    const full = path.join(dir, name);
    const stats = fs.lstatSync(full);
    const key = prefix + name;
    if (stats.isSymbolicLink()) into.set(key, `link:${fs.readlinkSync(full)}`);
    else if (stats.isDirectory()) {
      into.set(key, `dir:${stats.mode}`);
      snapshot(full, into, key + '/');
    } else if (stats.isFile())
      into.set(
        key,
        `file:${stats.ino}:${stats.mode}:${stats.nlink}:${createHash('sha256').update(fs.readFileSync(full)).digest('hex')}`,
      );
    else into.set(key, `other:${stats.ino}`);
  }
  return into;
}

export interface Fixture {
  base: string;
  outside: string;
  repo: string;
  worktree: string;
  server?: net.Server;
  deviceNode: boolean;
  /** What must never change: everything outside the worktree, and the worktree's own `.git` file. */
  guarded(): Map<string, string>;
}

/** A temporary folder with a repository `repo` and its linked worktree `repo.sw4rm-worktrees/wt1`, attack files planted. */
export async function makeFixture(): Promise<Fixture> {
  const base = fs.realpathSync(makeTempDir('sw4rm-confine-'));
  const repo = path.join(base, 'repo');
  fs.mkdirSync(repo);
  git(repo, 'init', '-q');
  fs.writeFileSync(path.join(repo, 'README.md'), '# repo\n');
  git(repo, 'add', 'README.md');
  git(repo, 'commit', '-q', '-m', 'initial');
  const worktree = path.join(base, 'repo.sw4rm-worktrees', 'wt1');
  git(repo, 'worktree', 'add', '-q', '-b', 'sw4rm/wt1', worktree);
  return plantAttackFixture(base, repo, worktree);
}

/**
 * Plants the corpus's files: canaries in `<base>/outside` (the worktree must sit two folders below `base`, as
 * `<base>/<repo>.sw4rm-worktrees/<id>` does, for the relative link), and in the worktree links pointing out, a
 * symlinked parent folder, a nested `.git`, a hard link, a FIFO, a socket and (as root) a device node.
 */
export async function plantAttackFixture(base: string, repo: string, worktree: string): Promise<Fixture> {
  const outside = path.join(base, 'outside');
  fs.mkdirSync(path.join(outside, 'dir'), { recursive: true });
  fs.writeFileSync(path.join(outside, 'secret.txt'), SECRET);
  fs.writeFileSync(path.join(outside, 'dir', 'secret.txt'), SECRET);
  assert.ok(fs.lstatSync(path.join(worktree, '.git')).isFile(), 'a linked worktree has a .git file');

  const w = (p: string) => path.join(worktree, p);
  fs.mkdirSync(w('src'), { recursive: true });
  fs.writeFileSync(w('src/app.ts'), 'export const app = 1;\n');
  fs.mkdirSync(w('real'));
  fs.mkdirSync(w('sub/.git/hooks'), { recursive: true });
  fs.writeFileSync(w('sub/.git/hooks/pre-commit'), '#!/bin/sh\n');
  fs.symlinkSync(path.join(outside, 'secret.txt'), w('link-file'));
  fs.symlinkSync('../../outside/secret.txt', w('link-rel'));
  fs.symlinkSync(path.join(outside, 'dir'), w('link-dir'));
  fs.symlinkSync(path.join(outside, 'dir'), w('real/linked'));
  fs.symlinkSync('src/app.ts', w('link-inside'));
  fs.symlinkSync(path.join(outside, 'created-by-attack.txt'), w('dangling'));
  fs.symlinkSync(path.join(repo, '.git'), w('link-git'));
  fs.symlinkSync('/dev/null', w('link-dev'));
  fs.symlinkSync('..', w('link-dotdot'));
  fs.linkSync(path.join(outside, 'secret.txt'), w('hard.txt'));
  execFileSync('mkfifo', [w('fifo')]);
  let deviceNode = false;
  try {
    execFileSync('mknod', [w('devnull'), 'c', '1', '3'], { stdio: 'ignore' });
    deviceNode = true;
  } catch {
    fs.symlinkSync('/dev/zero', w('devnull'));
  }
  const server = net.createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(w('sock'), resolve);
  });
  assert.ok(fs.lstatSync(w('sock')).isSocket());

  const guarded = () => {
    const map = snapshot(outside, new Map(), 'outside/');
    snapshot(repo, map, 'repo/');
    map.set('base', fs.readdirSync(base).sort().join(','));
    map.set('worktrees', fs.readdirSync(path.dirname(worktree)).sort().join(','));
    map.set('wt/.git', fs.readFileSync(w('.git'), 'utf8'));
    return map;
  };
  return { base, outside, repo, worktree, server, deviceNode, guarded };
}

export async function disposeFixture(f: Fixture | undefined): Promise<void> {
  if (!f) return;
  await new Promise<void>((resolve) => (f.server ? f.server.close(() => resolve()) : resolve()));
  removeTempDir(f.base);
}

export interface Attack {
  name: string;
  /** The requested path (a function when it depends on the fixture's real paths). */
  path: string | ((f: Fixture) => string);
  reason: ConfinementReason | readonly ConfinementReason[];
  ops?: readonly Op[];
}

export const TRAVERSAL: Attack[] = [
  { name: 'plain .. to a file outside', path: '../../outside/secret.txt', reason: 'parent_traversal' },
  { name: 'plain .. to the worktrees folder', path: '../', reason: 'parent_traversal' },
  { name: 'bare ..', path: '..', reason: 'parent_traversal' },
  { name: '.. after a real folder', path: 'src/../../..', reason: 'parent_traversal' },
  { name: '.. behind ./', path: './../x', reason: 'parent_traversal' },
  { name: '.. with doubled slashes', path: '..//..//etc/passwd', reason: 'parent_traversal' },
  { name: '.. that would stay inside (refused all the same)', path: 'src/..', reason: 'parent_traversal' },
  {
    name: '.. deep after many folders',
    path: 'a/b/c/d/../../../../../../outside/secret.txt',
    reason: 'parent_traversal',
  },
  { name: 'URL-encoded ../', path: '%2e%2e/%2e%2e/outside/secret.txt', reason: 'encoded_traversal' },
  { name: 'URL-encoded upper case with encoded slash', path: '%2E%2E%2F%2E%2E%2Foutside', reason: 'encoded_traversal' },
  { name: 'plain dots, encoded slashes', path: '..%2f..%2foutside%2fsecret.txt', reason: 'encoded_traversal' },
  { name: 'double URL encoding', path: '%252e%252e%252fsecret', reason: 'encoded_traversal' },
  { name: 'triple URL encoding', path: '%25252e%25252e/outside', reason: 'encoded_traversal' },
  { name: 'encoded backslashes', path: '..%5c..%5coutside', reason: 'encoded_traversal' },
  { name: 'encoded dots and backslash', path: '%2e%2e%5csecret', reason: 'encoded_traversal' },
  { name: 'encoded NUL', path: 'src/app.ts%00.png', reason: 'encoded_traversal' },
  { name: 'encoded .git', path: '%2egit/config', reason: 'encoded_traversal' },
  { name: 'overlong 2-byte dots', path: '%c0%ae%c0%ae/%c0%ae%c0%ae/outside/secret.txt', reason: 'encoded_traversal' },
  { name: 'overlong 3-byte dots', path: '%e0%80%ae%e0%80%ae/outside', reason: 'encoded_traversal' },
  { name: 'overlong 4-byte dots', path: '%f0%80%80%ae%f0%80%80%ae/outside', reason: 'encoded_traversal' },
  { name: 'overlong slash', path: '..%c0%af..%c0%afoutside', reason: 'encoded_traversal' },
  { name: 'overlong backslash', path: '..%c1%9c..%c1%9coutside', reason: 'encoded_traversal' },
  { name: 'overlong NUL', path: 'src/app.ts%c0%80', reason: 'encoded_traversal' },
  { name: 'fullwidth dots', path: '\uff0e\uff0e/outside/secret.txt', reason: 'lookalike_traversal' },
  { name: 'two dot leader', path: '\u2025/outside/secret.txt', reason: 'lookalike_traversal' },
  { name: 'fullwidth dots and solidus', path: '\uff0e\uff0e\uff0foutside', reason: 'lookalike_traversal' },
  { name: 'dots split by a zero-width space', path: '.\u200b./outside', reason: 'lookalike_traversal' },
  { name: 'backslash traversal', path: '..\\..\\outside\\secret.txt', reason: 'backslash' },
  { name: 'backslash after a real folder', path: 'src\\..\\..\\x', reason: 'backslash' },
  { name: 'UNC path', path: '\\\\server\\share\\x', reason: 'backslash' },
  { name: 'backslash absolute', path: '\\etc\\passwd', reason: 'backslash' },
];

export const ABSOLUTE: Attack[] = [
  { name: 'absolute /etc/passwd', path: '/etc/passwd', reason: 'absolute_path' },
  { name: 'absolute path of the canary', path: (f) => path.join(f.outside, 'secret.txt'), reason: 'absolute_path' },
  {
    name: 'absolute path of a file inside the worktree',
    path: (f) => path.join(f.worktree, 'src/app.ts'),
    reason: 'absolute_path',
  },
  {
    name: "absolute path of the repository's git directory",
    path: (f) => path.join(f.repo, '.git/config'),
    reason: 'absolute_path',
  },
  { name: 'double-slash absolute', path: '//etc/passwd', reason: 'absolute_path' },
  { name: 'drive letter', path: 'C:/Windows/win.ini', reason: 'absolute_path' },
  { name: 'drive-relative', path: 'c:secret.txt', reason: 'absolute_path' },
  { name: 'home-relative', path: '~/.ssh/id_rsa', reason: 'absolute_path' },
];

export const MALFORMED: Attack[] = [
  { name: 'NUL truncation', path: 'src/app.ts\0.png', reason: 'nul_byte' },
  { name: 'NUL alone', path: '\0', reason: 'nul_byte' },
  { name: 'NUL before ..', path: 'secret\0/../..', reason: 'nul_byte' },
  { name: 'newline in a name', path: 'src/a\nb', reason: 'control_character' },
  { name: 'a 256-byte component', path: 'a'.repeat(256), reason: 'component_too_long' },
  { name: 'a 256-byte component of 2-byte characters', path: '\u00e9'.repeat(128), reason: 'component_too_long' },
  { name: 'a path longer than 4096 bytes', path: 'a/'.repeat(2100), reason: 'path_too_long' },
  {
    name: 'a path that is too long once joined to the root',
    path: ('b'.repeat(250) + '/').repeat(16) + 'c'.repeat(60),
    reason: 'path_too_long',
  },
];

export const GIT: Attack[] = [
  { name: "the worktree's .git file", path: '.git', reason: 'git_metadata' },
  { name: 'inside .git', path: '.git/config', reason: 'git_metadata' },
  { name: '.GIT', path: '.GIT', reason: 'git_metadata' },
  { name: '.Git/HEAD', path: '.Git/HEAD', reason: 'git_metadata' },
  { name: '.git. (trailing dot)', path: '.git.', reason: 'git_metadata' },
  { name: '.git  (trailing space)', path: '.git ', reason: 'git_metadata' },
  { name: '.git. . . (dots and spaces)', path: '.git. . .', reason: 'git_metadata' },
  { name: "a nested repository's .git", path: 'sub/.git/hooks/pre-commit', reason: 'git_metadata' },
  { name: '.git in a subfolder', path: 'src/.git', reason: 'git_metadata' },
  { name: 'dotless i', path: '.g\u0131t', reason: 'git_metadata' },
  { name: 'capital I with dot above', path: '.G\u0130T/config', reason: 'git_metadata' },
  { name: 'zero-width non-joiner (ignored by HFS+)', path: '.g\u200cit', reason: 'git_metadata' },
  { name: 'byte order mark at the end', path: '.git\ufeff', reason: 'git_metadata' },
  { name: 'fullwidth full stop', path: '\uff0egit', reason: 'git_metadata' },
  { name: 'decomposed (NFD) form with a combining mark', path: '.gi\u0074\u0301', reason: 'git_metadata' },
  { name: 'composed (NFC) form of the same', path: '.gi\u0165', reason: 'git_metadata' },
  { name: '8.3 short name', path: 'GIT~1', reason: 'git_metadata' },
  { name: 'NTFS stream', path: '.git::$INDEX_ALLOCATION', reason: 'git_metadata' },
  { name: 'NTFS stream after a trailing dot', path: '.git.::$INDEX_ALLOCATION/config', reason: 'git_metadata' },
  { name: 'NTFS stream after trailing spaces and dots', path: '.git . ::$INDEX_ALLOCATION', reason: 'git_metadata' },
  { name: '8.3 short name with trailing dots', path: 'GIT~1../HEAD', reason: 'git_metadata' },
  { name: 'a later 8.3 short name (.github took GIT~1)', path: 'git~2/config', reason: 'git_metadata' },
];

export const LINKS_AND_SPECIAL_FILES: Attack[] = [
  { name: 'a symlink to a file outside (absolute target)', path: 'link-file', reason: 'symlink' },
  { name: 'a symlink to a file outside (relative target)', path: 'link-rel', reason: 'symlink' },
  { name: 'a symlink to a folder outside', path: 'link-dir', reason: 'symlink' },
  { name: 'a file through a symlinked folder', path: 'link-dir/secret.txt', reason: 'symlink' },
  { name: 'a symlinked parent folder deeper in the tree', path: 'real/linked/secret.txt', reason: 'symlink' },
  { name: 'a new file through a symlinked parent folder', path: 'real/linked/new.txt', reason: 'symlink' },
  { name: 'new folders through a symlinked parent folder', path: 'real/linked/x/y/z.txt', reason: 'symlink' },
  { name: 'a dangling symlink pointing outside (write would create there)', path: 'dangling', reason: 'symlink' },
  { name: 'a symlink to a file inside (any link is refused)', path: 'link-inside', reason: 'symlink' },
  { name: "a symlink to the repository's git directory", path: 'link-git/config', reason: 'symlink' },
  { name: 'a symlink to /dev/null', path: 'link-dev', reason: 'symlink' },
  { name: 'a symlink to ..', path: 'link-dotdot/outside/secret.txt', reason: 'symlink' },
  { name: 'a FIFO', path: 'fifo', reason: 'fifo' },
  { name: 'a socket', path: 'sock', reason: 'socket' },
  {
    name: 'a device node (mknod as root; else a link to /dev/zero)',
    path: 'devnull',
    reason: ['device_node', 'symlink'],
  },
  { name: 'a hard link to a file outside (every operation, issue 30)', path: 'hard.txt', reason: 'hard_link' },
];

export const CORPUS: Array<[string, Attack[]]> = [
  ['traversal (plain, URL-encoded, overlong, look-alike, backslash)', TRAVERSAL],
  ['absolute paths', ABSOLUTE],
  ['NUL bytes, control characters, lengths', MALFORMED],
  ['.git and its case and Unicode variants', GIT],
  ['symlinks, FIFOs, sockets, device nodes, hard links', LINKS_AND_SPECIAL_FILES],
];

export const ATTACK_COUNT = CORPUS.reduce((sum, [, attacks]) => sum + attacks.length, 0);
